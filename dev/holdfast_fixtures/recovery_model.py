"""A deterministic recovery model: an SQS backlog drained by Lambda into a database with a knee.

Test-support code (never shipped). It exists so that drain strategies — Holdfast's
fixed ladder, the feedback cap controller, a fixed cap — can be compared on the same
recovery, second by second, with nothing random in it. It reproduces two published
anchors (tests/fixtures/test_recovery_model.py):

- the seeds' arithmetic: 172 min of outage × 1,200 msg/min = 206,400 messages, which
  consumers at 1,800 msg/min drain in 206,400 / (1,800 − 1,200) = 344 min;
- Bronson et al., "Metastable Failures in Distributed Systems" (HotOS '21): a database
  that answers in 100 ms below 300 qps, clients that time out after 1 s and retry once,
  280 qps of load. A 10 s outage tips it into a sustained state at 560 qps (every
  request and its retry) with no goodput, and it recovers only when load falls below
  about 150 qps (2 × load < capacity). `bronson()` is that open-loop example.

What is modelled (time in whole seconds; t = 0 is the start of the outage):

- **Queue.** Arrivals at a constant rate, as cohorts (sent second, count, receive
  count), consumed oldest first. `ApproximateAgeOfOldestMessage` is now − the oldest
  sent second among visible and in-flight messages. A message that fails becomes
  visible again after the visibility timeout with its receive count + 1; one that has
  been received `maxReceiveCount` times goes to the DLQ when it would next be received.
- **Outage.** For `outage_seconds` the consumers receive nothing (as in October 2025,
  when Lambda's SQS pollers were impaired with the dependency); arrivals continue.
- **Lambda's SQS scaling** (docs: "Configuring scaling behavior for SQS event source
  mappings"): when messages are available Lambda starts at 5 concurrent batches and adds
  up to 300 a minute (5 a second here) while messages are left over, to 1,000; with
  MaximumConcurrency never above it, and a lowered cap takes effect at once. Concurrency
  above the function's reserved concurrency is throttled: each throttled batch holds
  `batch_size` messages until the visibility timeout (receive count + 1), Lambda stops
  adding concurrency while throttled and backs off by 1 % of the excess a second (the
  documented "gradually backs off"; AWS publishes no rate, this one is ours).
- **The function** handles each message serially: `compute_seconds` of its own work and
  one database call. It reports failed items (ReportBatchItemFailures), so a database
  failure fails that message only, the invocation succeeds (Errors stays 0) and Lambda
  does not back off: the worst case for overload, and a common configuration.
- **The database.** Serves up to `capacity` requests a second, FIFO, with a queue of at
  most `max_wait` seconds of work (beyond it requests are refused at once). A request
  entering with queue Q has latency `base_latency + Q / capacity`. The client gives up
  after `timeout` and retries once, 1 s after the first send; work for a client that
  gave up is still done (wasted). Workers are a closed loop: c concurrent invocations
  keep c requests outstanding, so below the knee (c / (compute + base) < capacity)
  latency is the base, above it the queue grows until throughput equals capacity, and
  when latency passes the timeout every attempt fails, each message costs
  compute + 2 × timeout and sends 2 requests: the sustained failure of Bronson's example
  for a pool of consumers. `capacity=None` is a database without a knee.
- **CloudWatch.** One-minute datapoints, each published 1–3 minutes after its minute
  ends (a fixed, repeating pattern of lags, so runs are deterministic): queue age and
  visible messages, NumberOfMessagesSent/Deleted, Lambda ConcurrentExecutions, Errors
  and Throttles, the database's mean latency. Two alarms on latency, 1 of 1 datapoint:
  a warning and the SLO; a minute without requests is INSUFFICIENT_DATA.

- **Smooth physics** (`Downstream.physics`): a real database queues, so its latency
  rises with utilisation long before its capacity. `M/M/1`: a request's latency is the
  service time ÷ (1 − ρ), ρ = throughput ÷ capacity; `M/M/c` (`servers`): the service
  time × (1 + C(c, cρ) ÷ (c(1 − ρ))), Erlang C's probability of waiting, flatter for
  longer and steeper near the capacity. Below the client timeout every call succeeds,
  however slow; past it the client gives up and retries, the database still does the work,
  and the attempts it cannot serve queue (at most `max_wait` seconds of them): the same
  sustained failure as the wall's, left only when the queue is empty and the failing load
  alone would be answered within the timeout. `smooth(scenario)` is a scenario's twin with
  that physics, its capacity set so that the SLO-bounded throughput is the wall's knee.
  `SLOW_DB`: the database 2× slower after recovery (a cold cache), no error below the
  client timeout.
- **Several consumers on one database** (`Shared`, `simulate_shared`): each its own queue,
  function and mapping (its own `RecoveryModel`, its own controller); the database (a
  `Database` they share) sees the sum of their load and answers each with one latency.
- **Noise** (`Consumer.noise`): the time per message × a factor in [1 − noise, 1 + noise],
  one per minute, drawn from a generator seeded by `Consumer.noise_seed` and the minute.
- **Duration is stamped at the invocation's start** (Lambda's metric): an invocation's
  Duration counts in the minute it started and is visible only once it has ended, so a
  minute of long invocations read soon after it is partial, and reads fast.

The steps of the model are fluid (fractions of messages), so every figure is exact
arithmetic of the rules above, not a sample.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Callable, Iterable, Protocol

# 2025-10-19 23:48 PDT, the start of the October 2025 us-east-1 event (the demo replays it: docs/demo.md).
EPOCH = datetime(2025, 10, 20, 6, 48, tzinfo=timezone.utc)

LAMBDA_START_BATCHES = 5      # "starts processing five batches at a time"
LAMBDA_RAMP_PER_SECOND = 5.0  # "up to 300 more instances per minute"
LAMBDA_MAX_BATCHES = 1000     # "the maximum number of batches ... is 1,000"
THROTTLE_BACKOFF = 0.99       # excess concurrency kept per second while throttled (our figure)

# Publication lag of each minute's datapoint, in minutes, repeating. Mean 2.
LAGS = (2, 1, 3, 2, 2, 1, 3, 1, 2, 3)

OK, ALARM, INSUFFICIENT = "OK", "ALARM", "INSUFFICIENT_DATA"


def at(t: float) -> datetime:
    """Model seconds -> wall-clock time."""
    return EPOCH + timedelta(seconds=t)


def seconds(when: datetime) -> float:
    """Wall-clock time -> model seconds."""
    return (when - EPOCH).total_seconds()


WALL, MM1, MMC = "wall", "M/M/1", "M/M/c"
PHYSICS = (WALL, MM1, MMC)


@lru_cache(maxsize=65536)
def response_factor(physics: str, servers: int, rho: float) -> float:
    """A request's latency ÷ the service time at utilisation `rho` (inf at or past 1): 1
    for the wall (flat to its capacity), 1 ÷ (1 − ρ) for M/M/1, 1 + C(c, cρ) ÷ (c(1 − ρ))
    for M/M/c, C being Erlang C's probability of waiting (from Erlang B's recursion)."""
    if physics == WALL:
        return 1.0
    if rho >= 1.0:
        return math.inf
    if rho <= 0.0:
        return 1.0
    if physics == MM1:
        return 1.0 / (1.0 - rho)
    a, b = servers * rho, 1.0
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
    wait = b / (1.0 - rho * (1.0 - b))
    return 1.0 + wait / (servers * (1.0 - rho))


@lru_cache(maxsize=4096)
def utilisation_at(physics: str, servers: int, factor: float) -> float:
    """The utilisation at which the latency is `factor` × the service time (the inverse of
    response_factor; 0 at or below 1, 1 for the wall, which is flat up to its capacity)."""
    if factor <= 1.0:
        return 0.0
    if physics == WALL:
        return 1.0
    if physics == MM1:
        return 1.0 - 1.0 / factor
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if response_factor(physics, servers, mid) <= factor:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Downstream:
    capacity: float | None = None      # requests/s at the knee; None: no knee
    base_latency: float = 0.1
    timeout: float = 1.0
    retries: int = 1
    max_wait: float = 5.0
    blips: tuple[tuple[int, int], ...] = ()  # (start second, length): serves nothing
    # (from second, capacity): the knee moves (a failover to a smaller replica, a noisy
    # neighbour); in time order.
    drops: tuple[tuple[int, float], ...] = ()
    physics: str = WALL       # WALL: flat, then a wall at the capacity; MM1, MMC: latency rises with utilisation
    servers: int = 1          # MMC's servers
    # (from second, base_latency): the database's own service time changes (a cold cache
    # after a failover): slower at every load.
    slower_from: tuple[int, float] | None = None

    def __post_init__(self):
        if self.physics not in PHYSICS:
            raise ValueError(f"physics {self.physics!r}: one of {PHYSICS}")
        if not (isinstance(self.servers, int) and self.servers >= 1):
            raise ValueError(f"servers {self.servers!r}: an integer ≥ 1")
        if self.physics != WALL and self.capacity is None:
            raise ValueError(f"physics {self.physics!r} needs a capacity")

    @property
    def smooth(self) -> bool:
        return self.physics != WALL

    def base_at(self, t: int) -> float:
        """The service time (a request's latency at no load) at second `t`."""
        if self.slower_from is not None and t >= self.slower_from[0]:
            return self.slower_from[1]
        return self.base_latency

    def latency(self, rho: float, t: int) -> float:
        """A request's latency at utilisation `rho` (below the capacity, without a queue)."""
        return self.base_at(t) * response_factor(self.physics, self.servers, rho)

    def utilisation_for(self, latency: float, t: int) -> float:
        """The most utilisation at which a request's latency stays at or under `latency`
        (1: the wall, at or under it up to its capacity; 0: not even at no load)."""
        base = self.base_at(t)
        if latency < base:
            return 0.0
        return utilisation_at(self.physics, self.servers, latency / base)

    def down(self, t: int) -> bool:
        return any(start <= t < start + length for start, length in self.blips)

    def recovering(self, t: int) -> bool:
        """Down, or back less than `max_wait` ago: the requests queued while it was down
        (at most `max_wait` seconds of work) are still being answered late, at any cap."""
        return any(start <= t < start + length + self.max_wait for start, length in self.blips)

    def capacity_at(self, t: int) -> float | None:
        cap = self.capacity
        for since, value in self.drops:
            if t >= since:
                cap = value
        return cap


@dataclass(frozen=True)
class Consumer:
    compute_seconds: float = 0.7
    batch_size: int = 10
    reserved_concurrency: int | None = None
    owner_cap: int | None = None       # the mapping's own MaximumConcurrency; None: none
    visibility_timeout: int = 60
    max_receive_count: int | None = 5  # None: no redrive policy
    timeout_seconds: float = 30.0      # the function's timeout
    # (from second, compute_seconds): the function's own work changes (a cold cache after
    # the outage, larger messages in the backlog, a slower deploy): not the drain's load.
    slower_from: tuple[int, float] | None = None
    # The time per message × a factor in [1 − noise, 1 + noise], one per minute, drawn
    # from a generator seeded by `noise_seed` and the minute: deterministic.
    noise: float = 0.0
    noise_seed: int = 0

    def __post_init__(self):
        if not (0.0 <= self.noise < 1.0):
            raise ValueError(f"noise {self.noise!r}: a share in [0, 1)")

    def work(self, t: int) -> float:
        """The function's own work per message at second `t` (before the noise)."""
        if self.slower_from is not None and t >= self.slower_from[0]:
            return self.slower_from[1]
        return self.compute_seconds

    def noise_factor(self, t: int) -> float:
        """The factor on the time per message in second `t`'s minute (1 without noise)."""
        return 1.0 if self.noise == 0.0 else noise_factor(self.noise_seed, t // 60, self.noise)


@lru_cache(maxsize=None)
def noise_factor(seed: int, minute: int, amplitude: float) -> float:
    """A minute's factor in [1 − amplitude, 1 + amplitude], from a generator seeded by the
    seed and the minute alone (the same on every run and in any order of calls)."""
    return 1.0 + amplitude * random.Random(f"{seed}:{minute}").uniform(-1.0, 1.0)


@dataclass(frozen=True)
class Scenario:
    name: str
    consumer: Consumer
    downstream: Downstream
    arrival_per_second: float = 20.0
    outage_seconds: int = 172 * 60
    warmup_seconds: int = 600
    latency_slo: float = 0.25
    latency_warning: float | None = 0.15   # None: no warning alarm, only the SLO's
    caught_up_slack: float = 10.0   # "back at baseline": the age within this of its pre-event value
    arrival_after_factor: float = 1.0   # arrivals × this from the end of the outage (users retrying, a catch-up)
    extra_lag_minutes: int = 0          # every datapoint this much later than LAGS
    # When the impairment is detected, after the consumer's own dependency failed: the hold
    # (and the plan's engagement) begins at t = 0 all the same; this only says so.
    detect_window_minutes: int = 10

    def arrival_at(self, t: int) -> float:
        return self.arrival_per_second * (self.arrival_after_factor if t >= self.outage_seconds else 1.0)

    @property
    def outage_end(self) -> int:
        return self.outage_seconds

    @property
    def backlog(self) -> float:
        return self.arrival_per_second * self.outage_seconds

    @property
    def message_seconds(self) -> float:
        """Time one message takes below the knee: the function's work and one call."""
        return self.consumer.compute_seconds + self.downstream.base_latency

    def consumer_limit(self) -> int:
        """Concurrency the consumers can reach: reserved, the owner's cap, Lambda's ceiling."""
        limits = [LAMBDA_MAX_BATCHES]
        if self.consumer.reserved_concurrency is not None:
            limits.append(self.consumer.reserved_concurrency)
        if self.consumer.owner_cap is not None:
            limits.append(self.consumer.owner_cap)
        return min(limits)

    def work_at(self, t: int) -> float:
        """The function's own work per message at second `t`, the minute's noise included
        (the noise is on the whole time per message: the work and one call at no load)."""
        work = self.consumer.work(t)
        f = self.consumer.noise_factor(t)
        return work if f == 1.0 else (work + self.downstream.base_at(t)) * f - self.downstream.base_at(t)

    def message_seconds_at(self, t: int) -> float:
        """Time one message takes at second `t` at no load: the work and one call."""
        return self.work_at(t) + self.downstream.base_at(t)

    def full_rate(self, t: int | None = None, *, slo: bool = False) -> float:
        """The most the drain can do at second `t` (None: after the outage, before any
        drop): the consumers' rate, or the database's knee (0 while it is down). With the
        smooth physics the database's most is the throughput at which its latency reaches
        the client timeout (past it every call fails); `slo`: the latency SLO instead (for
        the wall the same, its latency flat up to the knee)."""
        db = self.downstream
        tt = self.outage_end if t is None else t
        if t is not None and db.down(t):
            return 0.0
        cap = db.capacity if t is None else db.capacity_at(t)
        limit = self.consumer_limit()
        if not db.smooth:
            rate = limit / self.message_seconds_at(tt)
            if cap is not None:
                rate = min(rate, cap)
            if slo and db.base_at(tt) > self.latency_slo:
                return 0.0
            return rate
        top = db.utilisation_for(self.latency_slo if slo else db.timeout, tt)
        consumers = closed_loop_rate(db.physics, db.servers, db.base_at(tt), cap, ((float(limit), self.work_at(tt)),))
        return min(consumers, top * cap)

    def knee_rate(self, t: int | None = None) -> float | None:
        """The database's own most within the SLO (None: no knee): the wall's capacity, or
        the smooth physics' throughput at which its latency reaches the SLO."""
        db = self.downstream
        tt = self.outage_end if t is None else t
        cap = db.capacity if t is None else db.capacity_at(t)
        if cap is None or not db.smooth:
            return cap
        return cap * db.utilisation_for(self.latency_slo, tt)

    def _events_end(self) -> int:
        """The last second at which a rate of the scenario changes (noise aside)."""
        db = self.downstream
        ends = [self.outage_end] + [start + length for start, length in db.blips] + [since for since, _ in db.drops]
        ends += [x[0] for x in (db.slower_from, self.consumer.slower_from) if x is not None]
        return max(ends)

    def lower_bound_seconds(self, start_delay: int = 0, *, slo: bool = False) -> float:
        """From the end of the outage, the backlog (and the arrivals since) at the full
        rate of each second — the consumers' or the knee's, none while the database is
        down, the knee after a drop, the arrivals after a change: no drain can be faster.
        Constant rates: backlog ÷ spare capacity. `start_delay`: nothing is drained for
        that many seconds after the outage (a drain that waits for evidence). `slo`: at
        the most throughput that keeps the database's latency at or under the SLO."""
        return _lower_bound(self, start_delay, slo)

    def published_at(self, minute: int) -> int:
        """The second minute `minute`'s datapoints are published (CloudWatch's lag)."""
        return (minute + 1 + LAGS[minute % len(LAGS)] + self.extra_lag_minutes) * 60

    def knee_concurrency(self, t: int | None = None) -> float:
        """Concurrency at which the consumers reach the full rate without queueing (smooth
        physics: the SLO-bounded rate, at the latency it has there: Little's law)."""
        db = self.downstream
        if not db.smooth:
            return self.full_rate(t) * self.message_seconds
        tt = self.outage_end if t is None else t
        rate = self.full_rate(t, slo=True)
        cap = db.capacity if t is None else db.capacity_at(t)
        return rate * (self.work_at(tt) + db.latency(rate / cap, tt))

    @property
    def physics(self) -> str:
        return self.downstream.physics


@lru_cache(maxsize=1024)
def _lower_bound(sc: Scenario, start_delay: int, slo: bool) -> float:
    left, t = sc.backlog, sc.outage_end
    limit = t + 40 * 86400
    settled = sc._events_end() + start_delay + 3600
    hour_ago = left
    if left > 0 and _down_through(sc.downstream, t, limit):
        # Nothing drains while the database is down, and arrivals only add to the backlog:
        # the second-by-second walk below (up to 40 days) would end with left > 0, i.e. inf.
        return math.inf
    while left > 0 and t < limit:
        left -= (sc.full_rate(t, slo=slo) if t >= sc.outage_end + start_delay else 0.0) - sc.arrival_at(t)
        t += 1
        if t > settled and (t - settled) % 3600 == 0:
            if left >= hour_ago:
                return math.inf   # every rate constant since, and the backlog not falling
            hour_ago = left
    if left > 0:
        return math.inf
    over = -left / max(1e-9, sc.full_rate(t - 1, slo=slo) - sc.arrival_at(t - 1))
    return t - sc.outage_end - over


def _down_through(db: Downstream, t: int, limit: int) -> bool:
    """Whether `db` is down at every second from `t` up to `limit` (its blips, chained)."""
    while t < limit:
        ends = [start + length for start, length in db.blips if start <= t < start + length]
        if not ends:
            return False
        t = max(ends)
    return True


@lru_cache(maxsize=65536)
def closed_loop_rate(physics: str, servers: int, base: float, capacity: float, demands: tuple[tuple[float, float], ...],
                     top: float = 1.0) -> float:
    """The throughput X of closed-loop consumers (concurrency c, own work w per message,
    one call each) on a smooth database: X = Σ c ÷ (w + latency(X ÷ capacity)), searched
    in [0, top × capacity] (top × capacity if the consumers would go beyond it).
    M/M/1 with one consumer is a quadratic in u = X ÷ capacity:
    capacity·w·u² − (capacity·w + capacity·base + c)·u + c = 0."""
    if sum(c for c, _ in demands) <= 0:
        return 0.0
    if physics == MM1 and len(demands) == 1:
        c, w = demands[0]
        big = capacity * w + capacity * base + c
        u = 2 * c / (big + math.sqrt(max(0.0, big * big - 4 * capacity * w * c)))
        return min(u, top) * capacity

    def h(u: float) -> float:
        lat = base * response_factor(physics, servers, u)
        return sum(c / (w + lat) for c, w in demands) - u * capacity

    lo, hi = 0.0, min(top, 1.0 - 1e-12)
    if h(hi) >= 0:
        return hi * capacity
    for _ in range(50):
        mid = (lo + hi) / 2
        if h(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo * capacity


class _Minute:
    __slots__ = ("age", "visible", "sent", "deleted", "errors", "throttles", "concurrency", "invocations", "received",
                 "duration", "running", "late_duration")

    def __init__(self):
        self.age = 0.0
        self.visible = 0.0
        self.sent = 0.0
        self.deleted = 0.0
        self.errors = 0.0
        self.throttles = 0.0
        self.concurrency = 0.0
        self.invocations = 0.0
        self.received = 0.0
        self.duration = 0.0   # ms, the sum over the minute's invocations (stamped at their start)
        self.running = 0.0    # batch-seconds
        # (second it becomes visible, ms) of invocations that end after any read of the
        # minute can be made (published a minute after it at the soonest); the rest is visible.
        self.late_duration: list[tuple[float, float]] | None = None

    def duration_at(self, now: int) -> float:
        """The minute's Duration as read at second `now`: the invocations that ended by then."""
        if self.late_duration is None:
            return self.duration
        return self.duration - sum(ms for end, ms in self.late_duration if end > now)


class _DbMinute:
    __slots__ = ("latency_sum", "requests")

    def __init__(self):
        self.latency_sum = 0.0
        self.requests = 0.0


class Database:
    """The database's state, shared by every consumer that calls it: the queue of requests
    it has not answered yet, whether its clients are failing (past the timeout), and the
    latency each minute (its alarms' metric), over all its clients' requests."""

    def __init__(self, downstream: Downstream, t0: int):
        self.downstream = downstream
        self.queue = 0.0
        self.failing = False
        self.minutes: dict[int, _DbMinute] = {}
        self.t0 = t0
        self.load: list[float] = []      # requests/s, every client
        self.latency: list[float] = []   # nan when no request

    def serve(self, demands: list[tuple[float, float, float]], t: int) -> tuple[list[tuple[float, float]], float, float]:
        """`demands`: per client (concurrency, own work per message, messages available).
        Returns per client (messages ok, messages failed), the requests sent, and the
        latency of a request sent now."""
        if self.downstream.capacity is None:
            out = [(min(a, c / (w + self.downstream.base_at(t))) if c > 0 else 0.0, 0.0) for c, w, a in demands]
            return out, sum(ok for ok, _ in out), self.downstream.base_at(t)
        if self.downstream.smooth:
            return self._serve_smooth(demands, t)
        return self._serve_wall(demands, t)

    def record(self, t: int, requests: float, latency: float) -> None:
        if requests > 0 and latency == latency:
            m = self.minutes.get(t // 60)
            if m is None:
                m = self.minutes[t // 60] = _DbMinute()
            m.latency_sum += latency * requests
            m.requests += requests
        self.load.append(requests)
        self.latency.append(latency if requests > 0 else math.nan)

    def mean_latency(self, m: int) -> float | None:
        stats = self.minutes.get(m)
        return None if stats is None or stats.requests <= 0 else stats.latency_sum / stats.requests

    def _fail_all(self, demands, t: int, cap: float, mu: float, latency: float):
        db = self.downstream
        out = []
        for c, w, a in demands:
            out.append((0.0, min(a, c / (w + (1 + db.retries) * db.timeout)) if c > 0 and a > 0 else 0.0))
        requests = sum(n for _, n in out) * (1 + db.retries)
        self.queue = min(cap * db.max_wait, max(0.0, self.queue + requests - mu))
        return out, requests, latency

    def _serve_wall(self, demands, t: int):
        db = self.downstream
        cap = db.capacity_at(t)
        blip = db.down(t)
        mu = 0.0 if blip else cap
        q = self.queue
        latency = db.base_at(t) + q / cap
        if not any(c > 0 and a > 0 for c, _, a in demands):
            self.queue = max(0.0, q - mu)
            return [(0.0, 0.0) for _ in demands], 0.0, math.nan
        if blip or latency > db.timeout:
            return self._fail_all(demands, t, cap, mu, latency)
        # Closed loop, implicit in the new queue x: x = q + Σ c / (k + x / mu) − mu, the
        # clients that take all there is to take fixed at what they take.
        base = db.base_at(t)
        fixed = 0.0
        free = [i for i, (c, w, a) in enumerate(demands) if c > 0 and a > 0]
        rates = [0.0] * len(demands)
        while True:
            x = self._wall_queue(q + fixed, mu, [(demands[i][0], demands[i][1] + base) for i in free])
            clipped = [i for i in free if demands[i][0] / (demands[i][1] + base + x / mu) > demands[i][2]]
            for i in free:
                c, w, _ = demands[i]
                rates[i] = c / (w + base + x / mu)
            if not clipped:
                break
            for i in clipped:
                rates[i] = demands[i][2]
                fixed += demands[i][2]
            free = [i for i in free if i not in clipped]
            if not free:
                x = max(0.0, q + fixed - mu)
                break
        self.queue = min(cap * db.max_wait, x) if free else x
        return [(r, 0.0) for r in rates], sum(rates), latency

    @staticmethod
    def _wall_queue(a0: float, mu: float, loops: list[tuple[float, float]]) -> float:
        """The x ≥ 0 with x = a0 + Σ c / (k + x / mu) − mu (one loop: a quadratic)."""
        if not loops:
            return max(0.0, a0 - mu)
        if len(loops) == 1:
            c, k = loops[0]
            a = a0 - mu
            b = k * mu - a
            return max(0.0, (-b + math.sqrt(b * b + 4 * mu * (a * k + c))) / 2)

        def f(x: float) -> float:
            return a0 + sum(c / (k + x / mu) for c, k in loops) - mu - x

        if f(0.0) <= 0:
            return 0.0
        lo, hi = 0.0, a0 + sum(c / k for c, k in loops)
        for _ in range(60):
            mid = (lo + hi) / 2
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
        return lo

    def _serve_smooth(self, demands, t: int):
        db = self.downstream
        cap = db.capacity_at(t)
        blip = db.down(t)
        mu = 0.0 if blip else cap
        q = self.queue
        base = db.base_at(t)
        active = [(c, w, a) for c, w, a in demands if c > 0 and a > 0]
        if not active:
            self.queue = max(0.0, q - mu)
            if self.queue == 0.0:
                self.failing = False
            return [(0.0, 0.0) for _ in demands], 0.0, math.nan
        top = db.utilisation_for(db.timeout, t)
        if not blip and not self.failing and q <= 0.0:
            rates = self._smooth_rates(demands, t, cap, base, top)
            if rates is not None:
                total = sum(rates)
                return [(r, 0.0) for r in rates], total, db.latency(total / cap, t)
        # Failing: every call times out and is retried; the database still does the work.
        offered = sum(min(a, c / (w + (1 + db.retries) * db.timeout)) for c, w, a in active) * (1 + db.retries)
        latency = base * response_factor(db.physics, db.servers, min(0.999, offered / cap)) + q / cap
        out = self._fail_all(demands, t, cap, mu, latency)
        self.failing = not (self.queue <= 0.0 and not blip and offered < mu and db.latency(offered / mu, t) <= db.timeout)
        return out

    def _smooth_rates(self, demands, t: int, cap: float, base: float, top: float) -> list[float] | None:
        """Each client's rate at the closed loop's fixed point within the timeout, or None
        (none: the consumers would push the latency past it)."""
        db = self.downstream
        avail = sum(a for c, w, a in demands if c > 0)
        # Every client takes all there is: the latency at that load must allow it.
        if avail <= top * cap:
            lat = db.latency(avail / cap, t)
            if all(c <= 0 or a <= 0 or c / (w + lat) >= a for c, w, a in demands):
                return [a if c > 0 else 0.0 for c, w, a in demands]
        loops = tuple((c, w) for c, w, a in demands if c > 0 and a > 0)
        x = closed_loop_rate(db.physics, db.servers, base, cap, loops)
        if x > top * cap * (1 + 1e-9):
            return None
        lat = db.latency(x / cap, t)
        rates = [0.0 if c <= 0 or a <= 0 else c / (w + lat) for c, w, a in demands]
        if all(r <= a for r, (_, _, a) in zip(rates, demands)):
            return rates
        # Some take all there is: the rest share what is left, found by bisection.
        def excess(u: float) -> float:
            lat = base * response_factor(db.physics, db.servers, u)
            return sum(0.0 if c <= 0 or a <= 0 else min(a, c / (w + lat)) for c, w, a in demands) - u * cap

        lo, hi = 0.0, top
        if excess(hi) > 0:
            return None
        for _ in range(50):
            mid = (lo + hi) / 2
            if excess(mid) > 0:
                lo = mid
            else:
                hi = mid
        lat = base * response_factor(db.physics, db.servers, lo)
        return [0.0 if c <= 0 or a <= 0 else min(a, c / (w + lat)) for c, w, a in demands]


@dataclass(frozen=True)
class Datapoint:
    """A published one-minute datapoint: `at` is its minute's start, as in CloudWatch."""

    at: datetime
    value: float


@dataclass(frozen=True)
class AlarmState:
    name: str
    state: str
    measured_at: datetime | None   # the datapoint the state was decided on
    severity: str                  # "warning" or "alarm"
    # The published minutes of the last ten whose mean latency was beyond the threshold, as
    # the shell reads them from the alarm's own metric (GetMetricData).
    breached: tuple[datetime, ...] = ()
    # The same minutes' mean latency ÷ the threshold, as the shell reads them.
    levels: tuple[Datapoint, ...] = ()


METRICS = ("age", "visible", "sent", "deleted", "errors", "throttles", "concurrency", "latency", "received", "duration",
           "invocations")


class Strategy(Protocol):
    name: str

    def tick(self, model: "RecoveryModel") -> None:
        """Called once a minute of model time, before that second is stepped; sets model.cap."""


@dataclass
class Series:
    """Per-second record of a run, from the start of the warm-up."""

    t0: int
    age: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)   # nan when no request
    load: list[float] = field(default_factory=list)      # requests/s reaching the database
    goodput: list[float] = field(default_factory=list)   # messages/s processed
    failed: list[float] = field(default_factory=list)    # messages/s failed
    visible: list[float] = field(default_factory=list)
    cap: list[float] = field(default_factory=list)       # nan: no cap
    pollers: list[float] = field(default_factory=list)   # Lambda's concurrent batches for the mapping

    def index(self, t: int) -> int:
        return t - self.t0


class RecoveryModel:
    def __init__(self, scenario: Scenario, cap: int | None = None, database: Database | None = None):
        self.scenario = scenario
        self.cap = cap if cap is not None else scenario.consumer.owner_cap
        self.t = -scenario.warmup_seconds
        self._queue: deque[list] = deque()      # [sent, count, receives]
        self._inflight: deque[list] = deque()   # [visible_at, sent, count, receives]
        self.visible = 0.0
        self.in_flight = 0.0
        self.dead_lettered = 0.0
        # From the end of the outage, the database up: what the drain's pacing did (while it
        # is down, messages fail at any cap, the floor included).
        self.dead_lettered_in_drain = 0.0
        self.sent = 0.0
        self.deleted = 0.0
        # The warm-up starts in the steady state: as many batches as the arrivals need.
        steady = scenario.arrival_per_second * scenario.message_seconds
        db = scenario.downstream
        if db.smooth:
            steady = scenario.arrival_per_second * (scenario.work_at(self.t) + db.latency(scenario.arrival_per_second / db.capacity, self.t))
        self.pollers = float(min(math.ceil(steady), self.cap or LAMBDA_MAX_BATCHES, scenario.consumer_limit()))
        # The database: this model's own, or one several consumers share (simulate_shared).
        self.db = database if database is not None else Database(db, self.t)
        self._own_db = database is None
        self._minutes: dict[int, _Minute] = {}
        self.series = Series(t0=self.t)
        self.events: list[tuple[int, str]] = []   # (second, what a strategy did)
        self._pending = None

    @property
    def db_queue(self) -> float:
        return self.db.queue

    # ---- the simulation ------------------------------------------------------------

    def step(self) -> None:
        """One second, this model alone on its database."""
        demand = self.begin()
        out, requests, latency = self.db.serve([demand], self.t)
        self.db.record(self.t, requests, latency)
        self.finish(*out[0], requests, latency)

    def begin(self) -> tuple[float, float, float]:
        """The first half of a second: visibility timeouts that end, Lambda's pollers.
        Returns what the function asks of the database: (concurrency, own work per
        message, messages available)."""
        sc, con = self.scenario, self.scenario.consumer
        t = self.t
        minute = self._minutes.setdefault(t // 60, _Minute())

        # Visibility timeouts that end now: back to the queue, or to the DLQ.
        returned = []
        while self._inflight and self._inflight[0][0] <= t:
            _, sent, n, receives = self._inflight.popleft()
            self.in_flight -= n
            if con.max_receive_count is not None and receives >= con.max_receive_count:
                self.dead_lettered += n
                # Its last receive failed a visibility timeout ago.
                if t >= self.scenario.outage_end and not self.scenario.downstream.down(t - con.visibility_timeout):
                    self.dead_lettered_in_drain += n
            else:
                returned.append([sent, n, receives])
                self.visible += n
        if returned:
            self._queue.extendleft(reversed(returned))

        # Lambda's pollers.
        down = 0 <= t < sc.outage_seconds
        limit = LAMBDA_MAX_BATCHES if self.cap is None else min(self.cap, LAMBDA_MAX_BATCHES)
        if down:
            self.pollers = 0.0
        else:
            if self.pollers == 0.0 and self.visible > 0:
                self.pollers = float(min(LAMBDA_START_BATCHES, limit))
            self.pollers = min(self.pollers, float(limit))
        reserved = con.reserved_concurrency
        running = self.pollers if reserved is None else min(self.pollers, float(reserved))
        work = sc.work_at(t)
        self._pending = (minute, down, limit, running, work)
        return running, work, self.visible

    def finish(self, ok: float, failed: float, requests: float, latency: float) -> None:
        """The second half: what the database answered, throttles, arrivals, scaling."""
        sc, con, db = self.scenario, self.scenario.consumer, self.scenario.downstream
        t = self.t
        minute, down, limit, running, work = self._pending
        ran = self.pollers
        reserved = con.reserved_concurrency
        excess = self.pollers - running

        # A batch holds what is there, up to batch_size: at the baseline batches are
        # partial, during a drain full.
        fill = con.batch_size if running <= 0 else min(float(con.batch_size), max(1.0, self.visible / running))
        if ok:
            self._take(ok)
            self.deleted += ok
            minute.deleted += ok
        if failed:
            self._fail(failed, t)
        # Throttled batches: received, held until the visibility timeout, back with one
        # more receive. Taken after the invocations that ran, so that a message returned
        # to the head of the queue is processed before it can be throttled again (SQS
        # hands out messages in no fixed order; a queue consumed strictly from the head
        # would otherwise throttle the same few messages into the DLQ).
        if excess > 0 and self.visible > 0:
            throttled = min(self.visible, excess * con.batch_size / con.visibility_timeout)
            self._fail(throttled, t)
            minute.throttles += excess
            minute.invocations += excess
            minute.received += throttled
        invocations = (ok + failed) / fill
        minute.invocations += invocations
        minute.received += ok + failed
        busy = ok * (work + (latency if latency == latency else 0.0))
        busy += failed * (work + (1 + db.retries) * db.timeout)
        # Duration is stamped at the invocation's start and published when it ends: the
        # invocations started now run a batch's time (fill × the time per message).
        minute.duration += 1000.0 * busy
        if ok + failed > 0:
            ends = t + fill * busy / (ok + failed)
            if ends > (t // 60 + 2) * 60:   # later than the soonest read of this minute
                if minute.late_duration is None:
                    minute.late_duration = []
                minute.late_duration.append((ends, 1000.0 * busy))
        minute.running += running
        minute.concurrency = max(minute.concurrency, min(running, busy))

        # Arrivals at the end of the second.
        a = sc.arrival_at(t)
        if a > 0:
            self._queue.append([t, a, 0])
            self.visible += a
            self.sent += a
            minute.sent += a

        # Scaling for the next second.
        if not down:
            if excess > 0:
                self.pollers = reserved + excess * THROTTLE_BACKOFF
                if self.pollers - reserved < 0.5:
                    self.pollers = float(reserved)
            elif self.visible > a + 1e-9:
                self.pollers = min(float(limit), self.pollers + LAMBDA_RAMP_PER_SECOND)

        age = self.age()
        minute.age = max(minute.age, age)
        minute.visible = self.visible
        s = self.series
        s.age.append(age)
        s.latency.append(latency if requests > 0 else math.nan)
        s.load.append(requests)
        s.goodput.append(ok)
        s.failed.append(failed)
        s.visible.append(self.visible)
        s.cap.append(math.nan if self.cap is None else float(self.cap))
        s.pollers.append(ran)
        self.t = t + 1

    def _take(self, n: float) -> list[list]:
        taken = []
        q = self._queue
        while n > 1e-12 and q:
            head = q[0]
            if head[1] <= n:
                q.popleft()
                taken.append(head)
                n -= head[1]
                self.visible -= head[1]
            else:
                head[1] -= n
                taken.append([head[0], n, head[2]])
                self.visible -= n
                n = 0.0
        if self.visible < 1e-9:
            self.visible = max(0.0, self.visible)
        return taken

    def _fail(self, n: float, t: int) -> None:
        back = t + self.scenario.consumer.visibility_timeout
        for sent, count, receives in self._take(n):
            self._inflight.append([back, sent, count, receives + 1])
            self.in_flight += count

    def age(self) -> float:
        oldest = []
        if self._queue:
            oldest.append(self._queue[0][0])
        if self._inflight:
            oldest.append(self._inflight[0][1])  # the first to return was taken first: the oldest
        return float(self.t - min(oldest)) if oldest else 0.0

    # ---- running -------------------------------------------------------------------

    def run(self, strategy: Strategy | None, until: int, *, stop: Callable[["RecoveryModel"], bool] | None = None) -> "RecoveryModel":
        while self.t < until:
            if strategy is not None and self.t % 60 == 0:
                strategy.tick(self)
            self.step()
            if stop is not None and self.t % 60 == 0 and stop(self):
                break
        return self

    # ---- CloudWatch, as a strategy sees it -----------------------------------------

    def _published(self, m: int) -> bool:
        return (m + 1 + LAGS[m % len(LAGS)] + self.scenario.extra_lag_minutes) * 60 <= self.t

    def datapoint(self, metric: str, *, newest_minute: int | None = None) -> Datapoint | None:
        """The newest published datapoint of `metric`, or None (none published, no data).
        `newest_minute`: the reader asks for no later minute (its window's end)."""
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; one of {METRICS}")
        top = self.t // 60 - 1 if newest_minute is None else min(self.t // 60 - 1, newest_minute)
        for m in range(top, self.t // 60 - 1 - 2 * len(LAGS) - self.scenario.extra_lag_minutes, -1):
            if not self._published(m):
                continue
            return self.minute_value(m, metric)
        return None

    def minute_value(self, m: int, metric: str) -> Datapoint | None:
        """Minute `m`'s datapoint of `metric` as CloudWatch has it once published."""
        stats = self._minutes.get(m)
        if stats is None:
            return None
        if metric == "latency":
            value = self.db.mean_latency(m)   # the database's, over every client's requests
            if value is None:
                return None
        elif metric in ("errors", "throttles", "concurrency", "duration", "invocations") and stats.invocations <= 0:
            return None   # Lambda publishes nothing for a minute without invocations
        elif metric == "duration":
            value = stats.duration_at(self.t)
            if value <= 0 < stats.duration:
                return None   # no invocation of the minute has ended yet: no datapoint
        else:
            value = getattr(stats, metric)
        return Datapoint(at(m * 60), value)

    def published_minutes(self, first: int, last: int) -> list[int]:
        """The minutes in [first, last] whose datapoints are published by now."""
        return [m for m in range(first, last + 1) if self._published(m) and m in self._minutes]

    def alarms(self) -> tuple[AlarmState, ...]:
        """The warning and SLO alarms on the database's latency, as of now."""
        sc = self.scenario
        out = []
        m = self.t // 60 - 1
        while m > self.t // 60 - 1 - 2 * len(LAGS) - self.scenario.extra_lag_minutes and not self._published(m):
            m -= 1
        mean = self.db.mean_latency(m)
        defined = [("db-latency-warning", sc.latency_warning, "warning")] if sc.latency_warning is not None else []
        defined.append(("db-latency-slo", sc.latency_slo, "alarm"))
        recent = [(k, self.db.mean_latency(k)) for k in range(m - 9, m + 1) if self._published(k)]
        for name, threshold, severity in defined:
            breached = tuple(at(k * 60) for k, v in recent if v is not None and v > threshold)
            levels = tuple(Datapoint(at(k * 60), v / threshold) for k, v in recent if v is not None)
            if mean is None:
                out.append(AlarmState(name, INSUFFICIENT, at(m * 60), severity, breached, levels))
            else:
                out.append(AlarmState(name, ALARM if mean > threshold else OK, at(m * 60), severity, breached, levels))
        return tuple(out)

    def now(self) -> datetime:
        return at(self.t)

    # ---- what happened -------------------------------------------------------------

    def baseline_age(self) -> float:
        """The most the oldest message aged in the warm-up before the dependency failed."""
        s = self.series
        end = min([0] + [start for start, _ in self.scenario.downstream.blips if start < 0])
        warm = s.age[: s.index(end)]
        return max(warm) if warm else 0.0

    def backlog_at(self, t: int) -> float:
        return self.series.visible[self.series.index(t) - 1]


@dataclass(frozen=True)
class Outcome:
    scenario: str
    strategy: str
    bound_seconds: float
    caught_up_after: float | None   # seconds after the outage until the age is back at baseline
    peak_load_over_knee: float | None
    seconds_over_slo: int
    dead_lettered: float
    collapsed: bool
    datapoints_over_slo: int = 0    # one-minute mean-latency datapoints above the SLO, the database up and past its own recovery
    # The bound at the most throughput that keeps the database's latency at or under the SLO
    # (the wall: the same as bound_seconds).
    slo_bound_seconds: float = math.nan

    @property
    def ratio(self) -> float | None:
        return None if self.caught_up_after is None else self.caught_up_after / self.bound_seconds


def caught_up_at(model: RecoveryModel, *, stay: int = 900) -> int | None:
    """The first second after the outage at which the age is back within the slack of its
    baseline and stays there for `stay` seconds (or to the end of the run)."""
    sc = model.scenario
    s = model.series
    limit = model.baseline_age() + sc.caught_up_slack
    start = s.index(sc.outage_end)
    run_from = None
    for i in range(start, len(s.age)):
        if s.age[i] <= limit:
            if run_from is None:
                run_from = i
            if i - run_from >= stay:
                break
        else:
            run_from = None
    return None if run_from is None else run_from + s.t0


def outcome(model: RecoveryModel, strategy: str, *, collapse_seconds: int = 60) -> Outcome:
    sc = model.scenario
    return _judge(sc.name, strategy, [model], model.db, sc, sc.lower_bound_seconds(), sc.lower_bound_seconds(slo=True),
                  collapse_seconds)


def _judge(name: str, strategy: str, models: list[RecoveryModel], database: Database, sc: Scenario, bound: float,
           slo_bound: float, collapse_seconds: int) -> Outcome:
    """The outcome of one run: every consumer caught up (the last of them), the database's
    peak load, latency and datapoints over the SLO, every consumer's dead letters."""
    db = sc.downstream
    t0 = sc.outage_end
    start = t0 - database.t0
    catches = [caught_up_at(m) for m in models]
    caught = None if any(c is None for c in catches) else max(catches)
    knee = db.capacity
    peak = max((load / sc.knee_rate(t0 + i) for i, load in enumerate(database.load[start:])), default=0.0) if knee else None
    # Over the SLO while the database is up and answering its own backlog no longer (while it
    # is down, and for max_wait after, no cap helps).
    over = sum(1 for i, v in enumerate(database.latency[start:]) if v == v and v > sc.latency_slo and not db.recovering(t0 + i))
    # Collapsed: a minute or more, the database up, in which the consumers were busy and
    # nothing succeeded (while it is down nothing can: that is the dependency's outage).
    collapsed = False
    for model in models:
        s, run = model.series, 0
        for i, (ok, failed) in enumerate(zip(s.goodput[start:], s.failed[start:])):
            run = 0 if db.down(t0 + i) else run + 1 if failed > 0 and ok <= 1e-9 else 0
            if run >= collapse_seconds:
                collapsed = True
                break
    minutes_over = 0
    for m in range(t0 // 60, models[0].t // 60):
        mean = database.mean_latency(m)
        if mean is not None and mean > sc.latency_slo and not any(db.recovering(m * 60 + k) for k in range(60)):
            minutes_over += 1
    return Outcome(
        scenario=name,
        strategy=strategy,
        bound_seconds=bound,
        caught_up_after=None if caught is None else caught - t0,
        peak_load_over_knee=peak,
        seconds_over_slo=over,
        dead_lettered=sum(m.dead_lettered_in_drain for m in models),
        collapsed=collapsed,
        datapoints_over_slo=minutes_over,
        slo_bound_seconds=slo_bound,
    )


def _stop_when_caught_up(models: list[RecoveryModel], settle: int) -> Callable[[], bool]:
    """Every model's age back at baseline for `settle` seconds."""
    limits: list[float] = []

    def stop() -> bool:
        sc = models[0].scenario
        if models[0].t < sc.outage_end + 600:
            return False
        if not limits:
            limits.extend(m.baseline_age() + m.scenario.caught_up_slack for m in models)
        for m, limit in zip(models, limits):
            window = m.series.age[-settle:]
            if len(window) < settle or max(window) > limit:
                return False
        return True

    return stop


def _until(bounds: tuple[float, float], outage_end: int, horizon_bounds: float, horizon_seconds: int | None) -> int:
    """The run's last second: `horizon_bounds` × the longer of the two lower bounds (at the
    downstream's most, and at its most within the SLO), so that a drain that keeps to the
    SLO is not cut off before even the SLO's own bound has passed ("never" would then say
    nothing of the drain)."""
    if horizon_seconds is not None:
        return outage_end + horizon_seconds
    finite = [b for b in bounds if math.isfinite(b)]
    return outage_end + int(horizon_bounds * max(finite)) if finite else outage_end + 86400


def simulate(scenario: Scenario, strategy: Strategy | None, *, cap: int | None = None, horizon_bounds: float = 4.0,
             settle: int = 3600, horizon_seconds: int | None = None) -> RecoveryModel:
    """Run from the warm-up until the age has been back at baseline for `settle` seconds,
    or `horizon_bounds` lower bounds after the outage (the longer of the two bounds, `_until`;
    `horizon_seconds` after it when given: a downstream that never recovers has no bound),
    whichever is first."""
    model = RecoveryModel(scenario, cap=cap)
    until = _until((scenario.lower_bound_seconds(), scenario.lower_bound_seconds(slo=True)), scenario.outage_end,
                   horizon_bounds, horizon_seconds)
    done = _stop_when_caught_up([model], settle)
    return model.run(strategy, until, stop=lambda m: done())


# ---- several consumers on one database ---------------------------------------------


@dataclass(frozen=True)
class Shared:
    """Consumers, each its own queue, function and mapping (a Scenario each), calling one
    database: `downstream`, which every part names."""

    name: str
    parts: tuple[Scenario, ...]

    def __post_init__(self):
        if len(self.parts) < 2:
            raise ValueError("a shared database needs two consumers or more")
        first = self.parts[0]
        for p in self.parts[1:]:
            for f in ("downstream", "outage_seconds", "warmup_seconds", "latency_slo", "extra_lag_minutes"):
                if getattr(p, f) != getattr(first, f):
                    raise ValueError(f"consumers of one database must agree on {f}: {getattr(p, f)!r} ≠ {getattr(first, f)!r}")

    @property
    def downstream(self) -> Downstream:
        return self.parts[0].downstream

    @property
    def physics(self) -> str:
        return self.downstream.physics

    @property
    def outage_end(self) -> int:
        return self.parts[0].outage_end

    def lower_bound_seconds(self, start_delay: int = 0, *, slo: bool = False) -> float:
        """The later of: every part's own bound (the database to itself), and the whole
        backlog at the database's most (its knee, or its throughput at the timeout or the
        SLO) or every consumer's own most, whichever is less, less every arrival."""
        return _shared_bound(self, start_delay, slo)


@lru_cache(maxsize=256)
def _shared_bound(sh: Shared, start_delay: int, slo: bool) -> float:
    parts = sh.parts
    own = max(p.lower_bound_seconds(start_delay, slo=slo) for p in parts)
    db, first = sh.downstream, parts[0]
    end = sh.outage_end

    def database_rate(t: int) -> float:
        if db.down(t):
            return 0.0
        cap = db.capacity_at(t)
        if cap is None:
            return math.inf
        if not db.smooth:
            return 0.0 if slo and db.base_at(t) > first.latency_slo else cap
        return cap * db.utilisation_for(first.latency_slo if slo else db.timeout, t)

    left, t = sum(p.backlog for p in parts), end
    limit = t + 3 * 86400
    settled = max(p._events_end() for p in parts) + start_delay + 3600
    hour_ago = left
    rate = 0.0
    while left > 0 and t < limit:
        rate = min(database_rate(t), sum(p.consumer_limit() / p.message_seconds_at(t) for p in parts))
        arrivals = sum(p.arrival_at(t) for p in parts)
        left -= (rate if t >= end + start_delay else 0.0) - arrivals
        t += 1
        if t > settled and (t - settled) % 3600 == 0:
            if left >= hour_ago:
                return math.inf
            hour_ago = left
    if left > 0:
        return math.inf
    arrivals = sum(p.arrival_at(t - 1) for p in parts)
    together = t - end - (-left / max(1e-9, rate - arrivals))
    return max(own, together)


class SharedRun:
    """Consumers stepped together, second by second, on their one database: each asks of
    it, the database answers all of them at once, each goes on."""

    def __init__(self, shared: Shared):
        self.shared = shared
        self.db = Database(shared.downstream, -shared.parts[0].warmup_seconds)
        self.models = [RecoveryModel(p, database=self.db) for p in shared.parts]

    @property
    def t(self) -> int:
        return self.models[0].t

    def step(self) -> None:
        t = self.t
        demands = [m.begin() for m in self.models]
        out, requests, latency = self.db.serve(demands, t)
        self.db.record(t, requests, latency)
        retries = self.shared.downstream.retries
        for m, (ok, failed) in zip(self.models, out):
            m.finish(ok, failed, ok + failed * (1 + retries), latency)

    def run(self, strategies: list[Strategy | None], until: int, *, stop: Callable[[], bool] | None = None) -> "SharedRun":
        if len(strategies) != len(self.models):
            raise ValueError(f"{len(self.models)} consumers, {len(strategies)} strategies")
        while self.t < until:
            if self.t % 60 == 0:
                for strategy, model in zip(strategies, self.models):
                    if strategy is not None:
                        strategy.tick(model)
            self.step()
            if stop is not None and self.t % 60 == 0 and stop():
                break
        return self


def simulate_shared(shared: Shared, strategies: list[Strategy | None], *, horizon_bounds: float = 4.0,
                    settle: int = 3600) -> SharedRun:
    """simulate() for consumers sharing a database: until every one is back at baseline."""
    run = SharedRun(shared)
    until = _until((shared.lower_bound_seconds(), shared.lower_bound_seconds(slo=True)), shared.outage_end,
                   horizon_bounds, None)
    return run.run(strategies, until, stop=_stop_when_caught_up(run.models, settle))


def shared_outcome(run: SharedRun, strategy: str, *, collapse_seconds: int = 60) -> Outcome:
    """The outcome of every consumer together: caught up when the last one is."""
    sh = run.shared
    return _judge(sh.name, strategy, run.models, run.db, sh.parts[0], sh.lower_bound_seconds(),
                  sh.lower_bound_seconds(slo=True), collapse_seconds)


# ---- the benchmark's scenarios -----------------------------------------------------

# The seeds' arithmetic: consumers at 1,800 msg/min (24 concurrent batches of 1.25 msg/s,
# held there by the function's reserved concurrency), a database without a knee.
WARM = 75 * 60   # room for a 30-minute baseline that must end before a failure 20 minutes before the hold
ARITHMETIC = Scenario("arithmetic, no knee", Consumer(reserved_concurrency=24), Downstream(), warmup_seconds=WARM)
# The same arrivals and backlog; the function is unreserved (Lambda may scale to 1,000) and
# the database's knee, 30 req/s = 1,800 msg/min, is what limits the drain. Timeouts and one
# retry: above about 51 concurrent batches latency passes the 1 s timeout and stays there.
KNEE = Scenario("knee 30/s, retries", Consumer(), Downstream(capacity=30.0), warmup_seconds=WARM)
# A knee at a different, higher hidden capacity: 40 req/s = 2,400 msg/min.
KNEE_HIGH = Scenario("knee 40/s, retries", Consumer(), Downstream(capacity=40.0), warmup_seconds=WARM)
SCENARIOS = (ARITHMETIC, KNEE, KNEE_HIGH)

# The scenario classes the controller must handle with no alarm named. Each states its own
# lower bound (Scenario.lower_bound_seconds: the backlog at the full rate of every second).
# ReportBatchItemFailures: every message fails while the database is down, Errors stay at 0,
# and the database is back only 20 minutes after Lambda's pollers are (lower bound: nothing
# drains for those 20 minutes).
RBIF = Scenario("batch item failures, db back 20 min late", Consumer(), Downstream(capacity=30.0, blips=((172 * 60, 1200),)),
                warmup_seconds=WARM)
# The consumer's database failed 20 minutes before the impairment was detected (the hold, at
# t = 0) and stays down until 5 minutes after the pollers return, while Lambda scales the
# failing consumers up to retry: the 30 minutes before the hold are the retry storm.
STORM = Scenario("baseline window in a retry storm", Consumer(),
                 Downstream(capacity=30.0, blips=((-20 * 60, 20 * 60 + 172 * 60 + 300),)), warmup_seconds=WARM)
# A knee four times the pre-event load: 80 req/s against 20 arriving (64 concurrent batches
# against 16).
FAR_KNEE = Scenario("knee 4x the pre-event load", Consumer(), Downstream(capacity=80.0), warmup_seconds=WARM)
# The knee drops 40 % (40 -> 24 req/s) an hour into the drain: a failover to a smaller replica.
KNEE_DROP = Scenario("knee drops 40% mid-drain", Consumer(), Downstream(capacity=40.0, drops=((172 * 60 + 3600, 24.0),)),
                     warmup_seconds=WARM)
# Arrivals double when the region recovers (users retrying, upstream catching up): 40/s on a
# 60 req/s database.
ARRIVALS_DOUBLE = Scenario("arrivals double at recovery", Consumer(), Downstream(capacity=60.0), arrival_after_factor=2.0,
                           warmup_seconds=WARM)
# Every datapoint 2 minutes later than usual: 3-5 minutes after its minute.
LATE = Scenario("metrics 3-5 min late", Consumer(), Downstream(capacity=30.0), extra_lag_minutes=2, warmup_seconds=WARM)
LATE_DROP = Scenario("knee drops 40%, metrics late", Consumer(), Downstream(capacity=40.0, drops=((172 * 60 + 3600, 24.0),)),
                     extra_lag_minutes=2, warmup_seconds=WARM)
CLASSES = (RBIF, STORM, FAR_KNEE, KNEE_DROP, ARRIVALS_DOUBLE, LATE, LATE_DROP)

# Consumers and downstreams the controller's constants were not tuned on, each a case a
# real account has: its own work dwarfing its database call (the knee shows as a few per
# cent of the time per message), full batches taking 70 % of the function's timeout at
# the baseline speed, a call that is most of the work, a knee only 10 % above the
# arrivals, a knee eight times the pre-event load, a knee that rises when a replica is
# added, arrivals tripling at recovery, the database failing for 5 minutes mid-drain, a
# redrive policy of 2 receives with the database back 15 minutes late, and the function's
# own work 5 % slower from 10 minutes after the outage (at every cap: not a knee).
E = 172 * 60
SLOW_WORK = Scenario("own work 2 s a message, knee 30/s", Consumer(compute_seconds=2.0), Downstream(capacity=30.0),
                     warmup_seconds=WARM)
FAST_WORK = Scenario("own work 0.2 s a message, knee 30/s", Consumer(compute_seconds=0.2), Downstream(capacity=30.0),
                     warmup_seconds=WARM)
NEAR_ARRIVALS = Scenario("knee 22/s, 10 % above the arrivals", Consumer(), Downstream(capacity=22.0), warmup_seconds=WARM)
VERY_FAR_KNEE = Scenario("knee 8x the pre-event load", Consumer(), Downstream(capacity=160.0), warmup_seconds=WARM)
KNEE_RISES = Scenario("knee rises 30 -> 60/s 20 min in", Consumer(), Downstream(capacity=30.0, drops=((E + 1200, 60.0),)),
                      warmup_seconds=WARM)
ARRIVALS_TRIPLE = Scenario("arrivals triple at recovery", Consumer(), Downstream(capacity=90.0), arrival_after_factor=3.0,
                           warmup_seconds=WARM)
BLIP = Scenario("database down 5 min, 40 min in", Consumer(), Downstream(capacity=40.0, blips=((E + 2400, 300),)),
                warmup_seconds=WARM)
SHORT_REDRIVE = Scenario("maxReceiveCount 2, database back 15 min late", Consumer(max_receive_count=2),
                         Downstream(capacity=30.0, blips=((E, 900),)), warmup_seconds=WARM)
OWN_SLOWDOWN = Scenario("own work 5 % slower 10 min in, knee 40/s", Consumer(slower_from=(E + 600, 0.74)),
                        Downstream(capacity=40.0), warmup_seconds=WARM)
UNTUNED = (SLOW_WORK, FAST_WORK, NEAR_ARRIVALS, VERY_FAR_KNEE, KNEE_RISES, ARRIVALS_TRIPLE, BLIP, SHORT_REDRIVE,
           OWN_SLOWDOWN)


# ---- the smooth physics ------------------------------------------------------------


def smooth(scenario: Scenario, physics: str = MM1, servers: int = 1, *, suffix: str | None = None, **downstream) -> Scenario:
    """The scenario's twin on a database whose latency rises with utilisation (`physics`):
    its capacity (and every drop's) set so that the throughput at which the latency reaches
    the SLO is the wall's knee — the same SLO-bounded drain, reached up a curve, not along
    a flat line to a wall. Without a knee, a capacity twice the consumers' full rate. The
    warning alarm is set above the latency at the pre-event load (an owner sets it so),
    half-way to the SLO where the wall's was below it. `downstream`: other changes."""
    db = scenario.downstream
    probe = Downstream(capacity=1.0, base_latency=db.base_latency, physics=physics, servers=servers)
    rho = probe.utilisation_for(scenario.latency_slo, 0)
    if rho <= 0:
        raise ValueError(f"{scenario.name}: the SLO {scenario.latency_slo} s is below the service time {db.base_latency} s")
    if db.capacity is None:
        capacity = 2 * scenario.consumer_limit() / scenario.message_seconds
    else:
        capacity = db.capacity / rho
    drops = tuple((since, value / rho) for since, value in db.drops)
    twin_db = replace(db, capacity=capacity, drops=drops, physics=physics, servers=servers, **downstream)
    pre = twin_db.latency(scenario.arrival_per_second / capacity, -scenario.warmup_seconds)
    warning = scenario.latency_warning
    if warning is not None and warning <= pre:
        warning = (pre + scenario.latency_slo) / 2
    label = suffix if suffix is not None else physics + (f", {servers} servers" if physics == MMC else "")
    return replace(scenario, name=f"{scenario.name} [{label}]", downstream=twin_db, latency_warning=warning)


# Every scenario above again on an M/M/1 database.
SMOOTH = tuple(smooth(sc) for sc in SCENARIOS + CLASSES + UNTUNED)
# Other shapes and clients: M/M/c with 8 servers (flat for longer, steeper near the
# capacity), and the client's timeout and retries varied.
SHAPES = (
    smooth(KNEE, MMC, 8),
    smooth(FAR_KNEE, MMC, 8),
    smooth(NEAR_ARRIVALS, MMC, 8),
    smooth(KNEE, MM1, suffix="M/M/1, client timeout 0.5 s, 2 retries", timeout=0.5, retries=2),
    smooth(KNEE, MMC, 8, suffix="M/M/c, 8 servers, client timeout 2 s, no retry", timeout=2.0, retries=0),
)

# The database 2× slower after recovery (a cold cache after its failover), on M/M/1: every
# call still succeeds, slower at every load, until the latency reaches the client's 1 s
# timeout (at 80 % utilisation). The owner's SLO is 0.5 s (60 % of 60/s: 36/s).
SLOW_DB = Scenario("database 2x slower after recovery, no error below the client timeout [M/M/1]", Consumer(),
                   Downstream(capacity=60.0, physics=MM1, slower_from=(E, 0.2)), latency_slo=0.5, latency_warning=0.4,
                   warmup_seconds=WARM)
# Time per message noisy ±20 % minute to minute (a fixed-seed draw per minute).
NOISY = Scenario("time per message ±20 % minute to minute, knee 30/s", Consumer(noise=0.2, noise_seed=7),
                 Downstream(capacity=30.0), warmup_seconds=WARM)
# Invocations longer than the minutes they are judged in: 10 messages of 30 s each (5 min a
# full batch), a 15-minute function timeout, a knee at 3 req/s against 2 arriving. Duration
# is stamped at an invocation's start and published when it ends: a minute read 2–4 minutes
# after it misses the invocations still running, and reads fast.
LONG = Scenario("invocations 5 min long, knee 3/s", Consumer(compute_seconds=30.0, timeout_seconds=900.0,
                                                            visibility_timeout=5400),
                Downstream(capacity=3.0), arrival_per_second=2.0, warmup_seconds=WARM)
# The database never comes back after the outage; no redrive policy: nothing can drain, and
# the drain must say so (a stalled report) rather than wait.
NEVER = Scenario("database never recovers, no DLQ", Consumer(max_receive_count=None),
                 Downstream(capacity=30.0, blips=((E, 40 * 86400),)), warmup_seconds=WARM)
NEW = (SLOW_DB, NOISY, smooth(NOISY), LONG, smooth(LONG), NEVER, smooth(NEVER))

# Two consumers with different pre-event concurrency on one database: 20 msg/s at 0.8 s
# (16 batches) and 5 msg/s at 1.6 s (8 batches), a knee at 40 req/s against 25 arriving.
_PAIR_DB = Downstream(capacity=40.0)
PAIR = Shared("two consumers, one database, knee 40/s", (
    Scenario("consumer A (16 batches before)", Consumer(), _PAIR_DB, warmup_seconds=WARM),
    Scenario("consumer B (8 batches before)", Consumer(compute_seconds=1.5), _PAIR_DB, arrival_per_second=5.0,
             warmup_seconds=WARM),
))


def smooth_shared(shared: Shared, physics: str = MM1, servers: int = 1) -> Shared:
    """A shared database's twin on the smooth physics: its capacity set so that the
    throughput at the SLO is the wall's knee (as `smooth`), the warning above the latency
    at the pre-event load of every consumer together."""
    first = shared.parts[0]
    arrivals = sum(p.arrival_per_second for p in shared.parts)
    twin = smooth(replace(first, arrival_per_second=arrivals), physics, servers)
    return Shared(f"{shared.name} [{twin.name.rsplit('[', 1)[1]}",
                  tuple(replace(p, downstream=twin.downstream, latency_warning=twin.latency_warning) for p in shared.parts))


PAIRS = (PAIR, smooth_shared(PAIR))


# ---- Bronson et al.'s open-loop example --------------------------------------------


@dataclass(frozen=True)
class BronsonRun:
    load: list[float]       # requests/s offered, retries included
    goodput: list[float]    # requests/s answered within the client's timeout
    latency: list[float]


def bronson(
    demand: Callable[[int], float],
    *,
    seconds: int,
    outage: tuple[int, int] | None = None,
    capacity: float = 300.0,
    base_latency: float = 0.1,
    timeout: float = 1.0,
    max_wait: float = 5.0,
) -> BronsonRun:
    """Open-loop clients: demand(t) new requests a second, each retried once 1 s after it
    was sent when it fails (timed out or refused). The database is the one above.
    `outage` = (start, length): it serves nothing then."""
    q = 0.0
    retry_due = 0.0
    load, good, lat = [], [], []
    qmax = capacity * max_wait
    for t in range(seconds):
        down = outage is not None and outage[0] <= t < outage[0] + outage[1]
        mu = 0.0 if down else capacity
        fresh = demand(t)
        offered = fresh + retry_due
        latency = base_latency + q / capacity
        accepted = min(offered, max(0.0, qmax - q + mu))
        fails = down or latency > timeout
        ok = 0.0 if fails else accepted
        failed_share = 1.0 if fails else (offered - accepted) / offered if offered else 0.0
        retry_due = fresh * failed_share   # only a first attempt is retried
        q = min(qmax, max(0.0, q + accepted - mu))
        load.append(offered)
        good.append(ok)
        lat.append(latency)
    return BronsonRun(load, good, lat)


def recovers_below(threshold_search: Iterable[float], *, tip_at: int = 60, lower_at: int = 600, seconds: int = 2400, base: float = 280.0) -> float | None:
    """The highest load, among `threshold_search`, to which lowering the demand after a
    10 s outage brings goodput back to that load by the end of the run."""
    best = None
    for x in threshold_search:
        run = bronson(lambda t: base if t < lower_at else x, seconds=seconds, outage=(tip_at, 10))
        if run.goodput[-1] >= 0.99 * x:
            best = x if best is None else max(best, x)
    return best
