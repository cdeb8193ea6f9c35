"""A deterministic recovery model: an SQS backlog drained by Lambda into a database with a knee.

Test-support code (never shipped). It exists so that drain strategies — Holdfast's
fixed ladder, the feedback cap controller, a fixed cap — can be compared on the same
recovery, second by second, with nothing random in it. It reproduces two published
anchors (tests/drain/test_recovery_model.py):

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

The steps of the model are fluid (fractions of messages), so every figure is exact
arithmetic of the rules above, not a sample.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterable, Protocol

# 2025-10-19 23:48 PDT, the start of the October 2025 us-east-1 event (the README's demo replays it).
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

    def work(self, t: int) -> float:
        """The function's own work per message at second `t`."""
        if self.slower_from is not None and t >= self.slower_from[0]:
            return self.slower_from[1]
        return self.compute_seconds


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

    def full_rate(self, t: int | None = None) -> float:
        """The most the drain can do at second `t` (None: after the outage, before any
        drop): the consumers' rate, or the database's knee (0 while it is down)."""
        rate = self.consumer_limit() / self.message_seconds
        db = self.downstream
        cap = db.capacity if t is None else db.capacity_at(t)
        if cap is not None:
            rate = min(rate, cap)
        if t is not None and db.down(t):
            return 0.0
        return rate

    def lower_bound_seconds(self, start_delay: int = 0) -> float:
        """From the end of the outage, the backlog (and the arrivals since) at the full
        rate of each second — the consumers' or the knee's, none while the database is
        down, the knee after a drop, the arrivals after a change: no drain can be faster.
        Constant rates: backlog ÷ spare capacity. `start_delay`: nothing is drained for
        that many seconds after the outage (a drain that waits for evidence)."""
        left, t = self.backlog, self.outage_end
        limit = t + 40 * 86400
        while left > 0 and t < limit:
            left -= (self.full_rate(t) if t >= self.outage_end + start_delay else 0.0) - self.arrival_at(t)
            t += 1
        if left > 0:
            return math.inf
        over = -left / max(1e-9, self.full_rate(t - 1) - self.arrival_at(t - 1))
        return t - self.outage_end - over

    def published_at(self, minute: int) -> int:
        """The second minute `minute`'s datapoints are published (CloudWatch's lag)."""
        return (minute + 1 + LAGS[minute % len(LAGS)] + self.extra_lag_minutes) * 60

    def knee_concurrency(self, t: int | None = None) -> float:
        """Concurrency at which the consumers reach the full rate without queueing."""
        return self.full_rate(t) * self.message_seconds


class _Minute:
    __slots__ = ("age", "visible", "sent", "deleted", "errors", "throttles", "concurrency", "latency_sum", "requests",
                 "invocations", "received", "duration", "running")

    def __init__(self):
        self.age = 0.0
        self.visible = 0.0
        self.sent = 0.0
        self.deleted = 0.0
        self.errors = 0.0
        self.throttles = 0.0
        self.concurrency = 0.0
        self.latency_sum = 0.0
        self.requests = 0.0
        self.invocations = 0.0
        self.received = 0.0
        self.duration = 0.0   # ms, the sum over the minute's invocations
        self.running = 0.0    # batch-seconds


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
    def __init__(self, scenario: Scenario, cap: int | None = None):
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
        self.pollers = float(min(math.ceil(steady), self.cap or LAMBDA_MAX_BATCHES, scenario.consumer_limit()))
        self.db_queue = 0.0
        self._minutes: dict[int, _Minute] = {}
        self.series = Series(t0=self.t)
        self.events: list[tuple[int, str]] = []   # (second, what a strategy did)

    # ---- the simulation ------------------------------------------------------------

    def step(self) -> None:
        sc, con, db = self.scenario, self.scenario.consumer, self.scenario.downstream
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
        ran = self.pollers
        reserved = con.reserved_concurrency
        running = self.pollers if reserved is None else min(self.pollers, float(reserved))
        excess = self.pollers - running

        # The function and the database. A batch holds what is there, up to batch_size:
        # at the baseline batches are partial, during a drain full.
        fill = con.batch_size if running <= 0 else min(float(con.batch_size), max(1.0, self.visible / running))
        ok, failed, requests, latency = self._serve(running, t)
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
        busy = ok * (con.work(t) + (latency if latency == latency else 0.0))
        busy += failed * (con.work(t) + (1 + db.retries) * db.timeout)
        minute.duration += 1000.0 * busy
        minute.running += running
        minute.concurrency = max(minute.concurrency, min(running, busy))
        if requests > 0 and latency == latency:
            minute.latency_sum += latency * requests
            minute.requests += requests

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

    def _serve(self, c: float, t: int) -> tuple[float, float, float, float]:
        """(messages ok, messages failed, requests sent, latency of a request sent now)."""
        sc, con, db = self.scenario, self.scenario.consumer, self.scenario.downstream
        k = con.work(t) + db.base_latency
        avail = self.visible
        if db.capacity is None:
            n = min(avail, c / k) if c > 0 else 0.0
            return n, 0.0, n, db.base_latency
        cap = db.capacity_at(t)
        blip = db.down(t)
        mu = 0.0 if blip else cap
        q = self.db_queue
        latency = db.base_latency + q / cap
        if c <= 0 or avail <= 0:
            self.db_queue = max(0.0, q - mu)
            return 0.0, 0.0, 0.0, math.nan
        if blip or latency > db.timeout:
            per = con.work(t) + (1 + db.retries) * db.timeout
            n = min(avail, c / per)
            requests = n * (1 + db.retries)
            self.db_queue = min(cap * db.max_wait, max(0.0, q + requests - mu))
            return 0.0, n, requests, latency
        # Closed loop, implicit in the new queue x: x = q + c / (k + x / mu) − mu.
        a = q - mu
        b = k * mu - a
        x = (-b + math.sqrt(b * b + 4 * mu * (a * k + c))) / 2
        x = max(0.0, x)
        rate = c / (k + x / mu)
        if rate <= avail:
            self.db_queue = min(cap * db.max_wait, x)
            return rate, 0.0, rate, latency
        self.db_queue = max(0.0, q + avail - mu)
        return avail, 0.0, avail, latency

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
            if stats.requests <= 0:
                return None
            value = stats.latency_sum / stats.requests
        elif metric in ("errors", "throttles", "concurrency", "duration", "invocations") and stats.invocations <= 0:
            return None   # Lambda publishes nothing for a minute without invocations
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
        stats = self._minutes.get(m)
        defined = [("db-latency-warning", sc.latency_warning, "warning")] if sc.latency_warning is not None else []
        defined.append(("db-latency-slo", sc.latency_slo, "alarm"))
        for name, threshold, severity in defined:
            if stats is None or stats.requests <= 0:
                out.append(AlarmState(name, INSUFFICIENT, at(m * 60), severity))
            else:
                mean = stats.latency_sum / stats.requests
                out.append(AlarmState(name, ALARM if mean > threshold else OK, at(m * 60), severity))
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
    s = model.series
    start = s.index(sc.outage_end)
    caught = caught_up_at(model)
    db = sc.downstream
    knee = db.capacity
    t0 = sc.outage_end
    peak = max((load / db.capacity_at(t0 + i) for i, load in enumerate(s.load[start:])), default=0.0) if knee else None
    # Over the SLO while the database is up and answering its own backlog no longer (while it
    # is down, and for max_wait after, no cap helps).
    over = sum(1 for i, v in enumerate(s.latency[start:]) if v == v and v > sc.latency_slo and not db.recovering(t0 + i))
    # Collapsed: a minute or more, the database up, in which the consumers were busy and
    # nothing succeeded (while it is down nothing can: that is the dependency's outage).
    collapsed, run = False, 0
    for i, (ok, failed) in enumerate(zip(s.goodput[start:], s.failed[start:])):
        run = 0 if db.down(t0 + i) else run + 1 if failed > 0 and ok <= 1e-9 else 0
        if run >= collapse_seconds:
            collapsed = True
            break
    minutes_over = 0
    for m in range(t0 // 60, model.t // 60):
        stats = model._minutes.get(m)
        if (stats is not None and stats.requests > 0 and not any(db.recovering(m * 60 + k) for k in range(60))
                and stats.latency_sum / stats.requests > sc.latency_slo):
            minutes_over += 1
    return Outcome(
        scenario=sc.name,
        strategy=strategy,
        bound_seconds=sc.lower_bound_seconds(),
        caught_up_after=None if caught is None else caught - sc.outage_end,
        peak_load_over_knee=peak,
        seconds_over_slo=over,
        dead_lettered=model.dead_lettered_in_drain,
        collapsed=collapsed,
        datapoints_over_slo=minutes_over,
    )


def simulate(scenario: Scenario, strategy: Strategy | None, *, cap: int | None = None, horizon_bounds: float = 4.0, settle: int = 3600) -> RecoveryModel:
    """Run from the warm-up until the age has been back at baseline for `settle` seconds,
    or `horizon_bounds` lower bounds after the outage, whichever is first."""
    model = RecoveryModel(scenario, cap=cap)
    bound = scenario.lower_bound_seconds()
    until = scenario.outage_end + int(horizon_bounds * bound) if math.isfinite(bound) else scenario.outage_end + 86400
    limit_age = None

    def stop(m: RecoveryModel) -> bool:
        nonlocal limit_age
        if m.t < scenario.outage_end + 600:
            return False
        if limit_age is None:
            limit_age = m.baseline_age() + scenario.caught_up_slack
        ages = m.series.age
        window = ages[-settle:]
        return len(window) == settle and max(window) <= limit_age

    return model.run(strategy, until, stop=stop)


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
