"""The drain's feedback cap controller: one SQS event source mapping's MaximumConcurrency
during the drain, decided from what the mapping's queue, function and downstream show.

Pure: stdlib only, no clock (`now` is an argument), no AWS SDK. The state carried from
tick to tick is a frozen dataclass of plain data with `to_dict` / `from_dict`.

The fixed ladder (floor, 5, 20, 100, 300, the owner's value) raises every mapping one
step per hold whatever the queue and the downstream show; when the owner's value is
"no cap" its last step hands a recovering database a thousand concurrent batches. This
controller closes the loop instead (AIMD, as TCP does):

- **Start** from what the consumer ran at before the event (its ConcurrentExecutions),
  not from the floor: that load the downstream carried before, and at the floor the
  backlog grows while arrivals outrun it.
- **Raise additively** — by `step`, fixed at the start as `raise_fraction` of the start —
  on a fresh OK datapoint with the queue behind: every downstream alarm OK on a datapoint
  whose minute began after the current cap took effect. Each raise waits for evidence
  about the cap before it (CloudWatch publishes 1–3 minutes late).
- **Hold** on a warning (latency approaching the SLO), on function errors above their
  pre-event level, on throttles, on a missing or stale metric: each with its reason.
- **Cut multiplicatively** (× `cut_factor`) on a downstream alarm, from the cap that was
  in force when the alarming datapoint was measured — found in the history of caps — and
  never twice for one datapoint: a datapoint measured before the last cut took effect is
  attributed to the cap then, and cutting that again changes nothing.
- **Ceilings**: never above the function's reserved concurrency (above it Lambda only
  throttles, and a throttled batch burns a receive of every message in it), Lambda's
  1,000, or the owner's own cap (an owner's lower cap is never raised; one below the
  floor stays where it is).
- **Restore** the owner's original (often "no cap") only after the oldest-message age
  has been within `caught_up_slack_seconds` of its pre-event baseline for
  `restore_after_seconds` — never because a ladder ran out.
- **The backlog age is an input, never a gate.** A high or rising age never stops a raise;
  only downstream evidence does. So no configuration deadlocks the drain (a gate on the
  queue's own age would: the cap could not rise until the backlog is gone, and the
  backlog cannot go until the cap rises).

Inputs the shell reads once a tick (GetMetricData, up to 500 queries a call):
ApproximateAgeOfOldestMessage and ApproximateNumberOfMessagesVisible of the queue, Errors
and Throttles of the function, and each downstream alarm's state with the timestamp of
the datapoint it was decided on. CloudWatch's StateReasonData names the datapoints of the
last state *change* only, so the shell takes `measured_at` from the newest datapoint of
the alarm's metric (read in the same GetMetricData call) when the state has not changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping

LAMBDA_MAX_CONCURRENCY = 1000   # an SQS mapping's most concurrent batches
LAMBDA_MIN_CAP = 2              # MaximumConcurrency is 2–1000

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
ALARM_STATES = (OK, ALARM, INSUFFICIENT_DATA)
WARNING, CRITICAL = "warning", "alarm"   # Alarm.severity: a warning holds, an alarm cuts

START, RAISE, HOLD, CUT, RESTORE = "start", "raise", "hold", "cut", "restore"


@dataclass(frozen=True)
class Constants:
    """The controller's few constants, with why each default is what it is."""

    # Additive step = max(raise_min, ceil(raise_fraction × start cap)). A raise must not
    # carry latency from under the warning threshold past the SLO in one step, or the
    # drain spends the CloudWatch lag over the SLO before the alarm can cut it. 1/8 of what
    # the consumer ran at before the event doubles it in 8 raises (about 25 minutes at one
    # raise per fresh datapoint); in the recovery model it never passed the SLO for any knee
    # from 18 to 60 req/s, where 3/16 did for 3 knees in 41. Slower to find a knee far above
    # the pre-event load: the price of never overshooting it.
    raise_fraction: float = 0.125
    raise_min: int = 1
    # ... and at least this share of the cap in force (rounded down), so a drain far above
    # its start is not stuck at a step sized for its start. 0.11: the widest raise that
    # cannot jump from below a warning to past the SLO when the two are as far apart as
    # the recovery model's (150 and 250 ms over 700 ms of work: the SLO's concurrency is
    # 1.118× the warning's); past 1.118× it could.
    raise_share_of_cap: float = 0.11
    # The drain starts this many steps above the pre-event concurrency. One step from a
    # level the downstream carried is the same bound as any raise (it cannot jump a
    # warning band a raise cannot), and it saves a raise interval at the start, where the
    # backlog costs most: in the recovery model 0.04 of the ratio to the lower bound.
    start_steps_above: int = 1
    # Multiplicative decrease on an alarm: 0.7 takes a cap that overshot the knee by 40 %
    # back below it in one cut, and gives back less than halving (TCP's 0.5) would.
    cut_factor: float = 0.7
    # The lowest cap the controller sets: Holdfast's esm_floor default and Lambda's minimum.
    floor: int = 2
    # "Back at baseline" = the oldest-message age within this many seconds of its pre-event
    # value. Small on purpose: a queue whose age stands at half a minute is keeping up with a
    # standing backlog, not caught up, and a mapping without a cap scales up on any message
    # left over (in the recovery model, restoring "no cap" over such a backlog next to a
    # database near its knee collapsed it).
    caught_up_slack_seconds: float = 10.0
    # Caught up this long before the owner's original comes back: the default hold (10 min)
    # plus the longest CloudWatch lag, so a restore never rests on one lagging datapoint.
    restore_after_seconds: float = 900.0
    # The period of the datapoints the shell reads (one minute, as the queue and Lambda publish).
    period_seconds: int = 60
    # A datapoint whose minute ended longer ago than this is stale: treated as missing.
    stale_seconds: float = 600.0
    # How far back the history of caps is kept for attributing late datapoints.
    history_seconds: float = 3600.0
    # After a cut, raises stop one below the cap that alarmed (TCP's ssthresh) for this long,
    # so AIMD does not walk back into the same alarm every few minutes; after it, one probe:
    # the downstream may have scaled.
    remember_alarm_seconds: float = 1800.0
    # Errors count as above their pre-event level when their share of Invocations is more
    # than this above the pre-event share (a percentage point: noise in a small sample of
    # a low error rate does not stop a drain; a failing dependency is far above it).
    error_share_slack: float = 0.01
    # For the forecast only: how often a raise comes — one period for the datapoint to be
    # measured at the new cap, plus CloudWatch's publication lag (1–3 minutes, 2 typical).
    raise_interval_seconds: float = 180.0

    # ---- built-in evidence: what the consumer itself shows, no alarm needed ----
    # Slow start: while every signal is at its baseline the cap is probed this many times
    # higher, for one whole minute, then goes back to the cap judged at baseline until the
    # probe's minute is published and judged (CloudWatch's lag is 2–4 minutes; a cap held
    # through it would spend them all past a knee it crossed). Good: the probe's cap is
    # kept and the next probe goes up from it; a warning or critical: the slow start ends
    # at the knee the probe measured. So a knee crossed costs one datapoint. A closed pool
    # of consumers past its downstream's knee takes concurrency ÷ knee times as long per
    # message, so a probe overshoots by at most this factor: 1.75 keeps the recovery
    # model's 1 s client timeout unreached (0.8 s of work takes 1.4 s, the call 0.7 s);
    # 1.5 found a knee 4× the pre-event load one probe later (0.02 of the ratio to the
    # lower bound), 2.0 reaches 0.9 s.
    slow_start_factor: float = 1.75
    # Time per message (Duration's sum ÷ NumberOfMessagesReceived, so a full batch is not
    # read as a slow one) against its baseline: a warning stops raises (and, persisting,
    # steps back), critical cuts. Past a knee the ratio is concurrency ÷ knee, so 1.08 is
    # 8 % past it and 1.20 is 20 %. Each is raised to 1 + 3 and 1 + 5 times the baseline's
    # own spread (median absolute deviation ÷ median) for a consumer noisier than that.
    duration_warning_ratio: float = 1.08
    duration_critical_ratio: float = 1.20
    # The mean invocation's Duration against the function's timeout: a consumer near its
    # timeout fails whole batches.
    timeout_warning_share: float = 0.5
    timeout_critical_share: float = 0.8
    # Messages received and not deleted (a failed item with ReportBatchItemFailures, a
    # failed batch, a timeout), as a share of those received, this far above the baseline
    # share: critical (a warning above it by `error_share_slack`).
    failure_critical_slack: float = 0.05
    # A warning on two datapoints measured at the same cap steps back by this share of it,
    # or, when the consumer's own evidence warned, to the concurrency that carried that
    # minute's goodput at the baseline time per message (Little's law: past a knee, the
    # knee), if that is lower; never by more than a cut (`cut_factor`).
    warning_step_back: float = 0.05
    # Raises only while the time per message is in this lower share of the band from its
    # baseline to the warning (1.04× with the default 1.08× warning): between it and the
    # warning the drain holds (TCP Vegas's band between alpha and beta). Past a knee the
    # ratio is concurrency ÷ knee, so a raise from just under the warning would carry the
    # drain a whole raise past it; in the recovery model, a knee 10 % above the arrivals
    # was crossed every half hour, 5 datapoints over the SLO each time.
    raise_band_share: float = 0.5
    # The cut on the built-in evidence goes to the concurrency that would carry the
    # measured goodput at the baseline time per message (Little's law: the knee when the
    # downstream is saturated), times this margin; never below half the cap it measured.
    knee_margin: float = 0.95
    # A pre-event concurrency more than this many times what the baseline arrivals need
    # (arrivals × time per message), plus two batches, is implausible (a retry storm in
    # the window): the drain starts from the need instead, and searches.
    plausible_start_factor: float = 2.0

    def __post_init__(self):
        checks = (
            (0 < self.raise_fraction <= 1, "raise_fraction must be in (0, 1]"),
            (isinstance(self.raise_min, int) and self.raise_min >= 1, "raise_min must be an integer ≥ 1"),
            (0 <= self.raise_share_of_cap <= 1, "raise_share_of_cap must be in [0, 1]"),
            (isinstance(self.start_steps_above, int) and 0 <= self.start_steps_above <= 8, "start_steps_above must be an integer from 0 to 8"),
            (0 < self.cut_factor < 1, "cut_factor must be in (0, 1)"),
            (isinstance(self.floor, int) and LAMBDA_MIN_CAP <= self.floor <= LAMBDA_MAX_CONCURRENCY, "floor must be an integer from 2 to 1000"),
            (self.caught_up_slack_seconds >= 0, "caught_up_slack_seconds must be ≥ 0"),
            (self.restore_after_seconds >= 0, "restore_after_seconds must be ≥ 0"),
            (isinstance(self.period_seconds, int) and self.period_seconds > 0, "period_seconds must be a positive integer"),
            (self.stale_seconds > 0, "stale_seconds must be > 0"),
            (self.history_seconds >= self.stale_seconds, "history_seconds must be ≥ stale_seconds"),
            (self.remember_alarm_seconds >= 0, "remember_alarm_seconds must be ≥ 0"),
            (self.raise_interval_seconds > 0, "raise_interval_seconds must be > 0"),
            (0 <= self.error_share_slack <= 1, "error_share_slack must be in [0, 1]"),
            (1 < self.slow_start_factor <= 4, "slow_start_factor must be in (1, 4]"),
            (1 < self.duration_warning_ratio < self.duration_critical_ratio, "duration ratios must be 1 < warning < critical"),
            (0 < self.timeout_warning_share < self.timeout_critical_share <= 1, "timeout shares must be 0 < warning < critical ≤ 1"),
            (0 < self.failure_critical_slack <= 1, "failure_critical_slack must be in (0, 1]"),
            (0 < self.warning_step_back < 1, "warning_step_back must be in (0, 1)"),
            (0 < self.raise_band_share <= 1, "raise_band_share must be in (0, 1]"),
            (0.5 <= self.knee_margin <= 1, "knee_margin must be in [0.5, 1]"),
            (self.plausible_start_factor >= 1, "plausible_start_factor must be ≥ 1"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(f"drain control constants: {message}")


DEFAULTS = Constants()


@dataclass(frozen=True)
class Datapoint:
    """One CloudWatch datapoint: `at` is the start of its period, as GetMetricData gives it."""

    at: datetime
    value: float

    def __post_init__(self):
        if not isinstance(self.value, (int, float)) or isinstance(self.value, bool) or not math.isfinite(self.value):
            raise ValueError(f"datapoint value must be a finite number, got {self.value!r}")


@dataclass(frozen=True)
class Alarm:
    """A downstream alarm's state and the datapoint it was decided on.
    state None: the alarm does not exist (a name that matches nothing)."""

    name: str
    state: str | None
    measured_at: datetime | None = None
    severity: str = CRITICAL

    def __post_init__(self):
        if self.state is not None and self.state not in ALARM_STATES:
            raise ValueError(f"alarm {self.name}: state {self.state!r} is not one of {ALARM_STATES}")
        if self.severity not in (WARNING, CRITICAL):
            raise ValueError(f"alarm {self.name}: severity {self.severity!r} is not {WARNING!r} or {CRITICAL!r}")


@dataclass(frozen=True)
class Facts:
    """What is known of the mapping from before the event and from its configuration."""

    pre_event_concurrency: float | None      # the function's ConcurrentExecutions before the event
    reserved_concurrency: int | None = None  # None: unreserved
    owner_cap: int | None = None             # the owner's original MaximumConcurrency; None: no cap
    baseline_age_seconds: float | None = None  # ApproximateAgeOfOldestMessage before the event
    baseline_errors: float = 0.0             # Errors per period before the event
    # Errors as a share of Invocations before the event (None: no invocations seen). When
    # the reading has Invocations, errors are judged as a share: a drain running three
    # times the pre-event throughput has three times the errors at the same error rate.
    baseline_error_share: float | None = None
    # For the forecast: the queue's NumberOfMessagesSent and NumberOfMessagesDeleted per
    # second before the event (None: unknown).
    arrival_per_second: float | None = None
    deleted_per_second: float | None = None
    # The consumer's own baseline (holdfast.core.drain_control.baseline): seconds per
    # message (Duration's sum ÷ NumberOfMessagesReceived, median of the window's minutes)
    # and its spread (median absolute deviation ÷ median); the high percentile's per
    # message (p90 Duration × Invocations ÷ NumberOfMessagesReceived); the share of
    # received messages not deleted; the queue's visible messages; the function's timeout.
    seconds_per_message: float | None = None
    spread: float = 0.0
    high_seconds_per_message: float | None = None
    baseline_failure_share: float | None = None
    baseline_visible: float | None = None
    timeout_seconds: float | None = None
    baseline_note: str = ""       # the window the baseline is from, and why it ends where it does

    def __post_init__(self):
        def bad(name, value, allowed):
            raise ValueError(f"mapping facts: {name} = {value!r}: {allowed}")

        if self.pre_event_concurrency is not None and not (
            isinstance(self.pre_event_concurrency, (int, float)) and math.isfinite(self.pre_event_concurrency) and self.pre_event_concurrency >= 0
        ):
            bad("pre_event_concurrency", self.pre_event_concurrency, "must be a number ≥ 0 or None")
        if self.reserved_concurrency is not None and not (isinstance(self.reserved_concurrency, int) and self.reserved_concurrency >= 0):
            bad("reserved_concurrency", self.reserved_concurrency, "must be an integer ≥ 0 or None")
        if self.owner_cap is not None and not (isinstance(self.owner_cap, int) and LAMBDA_MIN_CAP <= self.owner_cap <= LAMBDA_MAX_CONCURRENCY):
            bad("owner_cap", self.owner_cap, "must be an integer from 2 to 1000 or None")
        if self.baseline_age_seconds is not None and not (isinstance(self.baseline_age_seconds, (int, float)) and self.baseline_age_seconds >= 0):
            bad("baseline_age_seconds", self.baseline_age_seconds, "must be a number ≥ 0 or None")
        if not (isinstance(self.baseline_errors, (int, float)) and self.baseline_errors >= 0):
            bad("baseline_errors", self.baseline_errors, "must be a number ≥ 0")
        if self.baseline_error_share is not None and not (
            isinstance(self.baseline_error_share, (int, float)) and 0 <= self.baseline_error_share <= 1
        ):
            bad("baseline_error_share", self.baseline_error_share, "must be a number from 0 to 1 or None")
        for name in ("arrival_per_second", "deleted_per_second", "seconds_per_message", "high_seconds_per_message",
                     "baseline_visible", "timeout_seconds"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                bad(name, value, "must be a number ≥ 0 or None")
        if not (isinstance(self.spread, (int, float)) and math.isfinite(self.spread) and self.spread >= 0):
            bad("spread", self.spread, "must be a number ≥ 0")
        if self.baseline_failure_share is not None and not (
            isinstance(self.baseline_failure_share, (int, float)) and 0 <= self.baseline_failure_share <= 1
        ):
            bad("baseline_failure_share", self.baseline_failure_share, "must be a number from 0 to 1 or None")

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _FACT_FIELDS}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Facts":
        try:
            return cls(**{f: raw[f] for f in _FACT_FIELDS if f in raw})
        except TypeError as err:
            raise ValueError(f"mapping facts are malformed: {err}") from err


_FACT_FIELDS = ("pre_event_concurrency", "reserved_concurrency", "owner_cap", "baseline_age_seconds", "baseline_errors",
                "baseline_error_share",
                "arrival_per_second", "deleted_per_second", "seconds_per_message", "spread", "high_seconds_per_message",
                "baseline_failure_share", "baseline_visible", "timeout_seconds", "baseline_note")


@dataclass(frozen=True)
class Reading:
    """One tick's observations of the mapping. None: no datapoint."""

    oldest_age: Datapoint | None
    visible: Datapoint | None
    errors: Datapoint | None
    throttles: Datapoint | None
    downstream: tuple[Alarm, ...] = ()
    # For the forecast on measured throughput: the queue's NumberOfMessagesSent and
    # NumberOfMessagesDeleted in the newest period (sums over the period).
    sent: Datapoint | None = None
    deleted: Datapoint | None = None
    # The queue's ApproximateNumberOfMessages from GetQueueAttributes, read when the age has
    # no fresh datapoint (SQS stops publishing for a queue idle six hours; CloudWatch may lag):
    # an empty queue is caught up, a non-empty one is behind. None: not read.
    visible_now: int | None = None
    # The function's Invocations in the period of `errors` (None: not read): errors are
    # then judged as a share of them.
    invocations: Datapoint | None = None
    # The queue does not exist (deleted): there is nothing to drain.
    queue_missing: bool = False
    # The built-in downstream evidence, one minute each: the function's Duration (Sum and
    # p90, milliseconds) and the queue's NumberOfMessagesReceived (Sum). With `deleted` and
    # `invocations` of the same minute they give the time per message and the failure share.
    duration: Datapoint | None = None
    duration_high: Datapoint | None = None
    received: Datapoint | None = None


@dataclass(frozen=True)
class CapState:
    """Carried between ticks. `history` is (from, cap) for every cap the controller set,
    oldest first; the last is in force. `prior_cap` was in force before the first."""

    cap: int
    step: int
    history: tuple[tuple[datetime, int], ...]
    prior_cap: int
    acted_through: datetime | None = None   # the newest datapoint a cut was made for
    caught_up_since: datetime | None = None  # start of the run of caught-up age datapoints
    restored: bool = False
    alarmed_cap: int | None = None          # the lowest cap an alarm was attributed to ...
    alarmed_at: datetime | None = None      # ... and when that cut was made
    additive: bool = False                  # False: slow start (multiplicative) until the first warning or cut
    warned_at: datetime | None = None       # the datapoint of the first warning measured at the cap in force
    # A slow-start probe: the cap in force since `probe_at` is tried for one whole minute,
    # then the cap goes back to `probe_from` (the highest cap judged at baseline) until the
    # probe's minute is judged. None: no probe.
    probe_at: datetime | None = None
    probe_from: int | None = None
    # When the mapping was first seen not to show `cap` (a write refused, failed, or clamped
    # by the function's reserved concurrency or by the owner); None: it shows it.
    unseen_since: datetime | None = None
    # (datapoint, time per message ÷ its baseline, the cap that measured it) of each minute
    # judged wholly at one cap in the last `history_seconds`: a time that grows with the
    # cap is a knee's, one that does not is the consumer's own (own_speed).
    ratios: tuple[tuple[datetime, float, int], ...] = ()
    # When the raise band first held the cap in force (None: it does not hold it).
    banded_at: datetime | None = None

    def __post_init__(self):
        if not self.history:
            raise ValueError("cap state: history must hold at least the cap in force")
        if self.history[-1][1] != self.cap:
            raise ValueError(f"cap state: cap {self.cap} is not the last in its history ({self.history[-1][1]})")
        if any(b[0] < a[0] for a, b in zip(self.history, self.history[1:])):
            raise ValueError("cap state: history is not in time order")
        if not (isinstance(self.step, int) and self.step >= 1):
            raise ValueError(f"cap state: step {self.step!r} must be an integer ≥ 1")
        if (self.probe_at is None) != (self.probe_from is None):
            raise ValueError("cap state: probe_at and probe_from are set together or not at all")

    def shown(self, current_cap: int | None, now: datetime, period: timedelta) -> tuple["CapState", str | None]:
        """The state given the cap the mapping shows now, and what was said about it.

        Shown as recorded: as it was. Not shown (a write refused under a newer plan, or
        failed): the cap counts as in force only from the write this tick makes, so no
        earlier datapoint is judged as if it measured it; a probe whose own write did not
        land starts with that write, one whose return did not land has had its minute all
        the same. Still not shown a period later (the walk clamps it to the function's
        reserved concurrency, or the owner set the cap): the drain goes on from the cap
        shown, and a probe is given up."""
        since, cap = self.history[-1]
        if current_cap == cap:
            return (self if self.unseen_since is None else replace(self, unseen_since=None)), None
        if self.unseen_since is not None and now - self.unseen_since >= period and isinstance(current_cap, int):
            adopted = max(LAMBDA_MIN_CAP, min(current_cap, LAMBDA_MAX_CONCURRENCY))
            return replace(self, cap=adopted, history=self.history + ((now, adopted),), unseen_since=None,
                           probe_at=None, probe_from=None), (
                f"the mapping has shown {current_cap} since {self.unseen_since.isoformat()} where the drain wrote "
                f"{cap} (clamped by the function's reserved concurrency, or set by its owner): going on from {adopted}")
        if since >= now:
            return self, None
        probe_at = now if self.probe_at is not None and self.probe_at == since else self.probe_at
        return replace(self, history=self.history[:-1] + ((now, cap),), probe_at=probe_at,
                       unseen_since=self.unseen_since or now), None

    @property
    def probe_cap(self) -> int | None:
        """The cap a running probe tries (None: no probe)."""
        if self.probe_at is None:
            return None
        return next((c for t, c in reversed(self.history) if t <= self.probe_at), None)

    @property
    def in_force_since(self) -> datetime:
        return self.history[-1][0]

    def cap_wholly(self, start: datetime, end: datetime) -> int | None:
        """The cap in force for the whole of [start, end), or None when it changed within."""
        for i, (since, cap) in enumerate(self.history):
            until = self.history[i + 1][0] if i + 1 < len(self.history) else None
            if since <= start and (until is None or until >= end):
                return cap
        return None

    def cap_during(self, start: datetime, end: datetime) -> int:
        """The highest cap in force at any time in [start, end)."""
        caps = [self.prior_cap] if start < self.history[0][0] else []
        for i, (since, cap) in enumerate(self.history):
            until = self.history[i + 1][0] if i + 1 < len(self.history) else None
            if since < end and (until is None or until > start):
                caps.append(cap)
        return max(caps) if caps else self.history[0][1]

    def to_dict(self) -> dict[str, Any]:
        iso = lambda t: None if t is None else t.isoformat()
        return {
            "cap": self.cap,
            "step": self.step,
            "history": [[iso(t), c] for t, c in self.history],
            "prior_cap": self.prior_cap,
            "acted_through": iso(self.acted_through),
            "caught_up_since": iso(self.caught_up_since),
            "restored": self.restored,
            "alarmed_cap": self.alarmed_cap,
            "alarmed_at": iso(self.alarmed_at),
            "additive": self.additive,
            "warned_at": iso(self.warned_at),
            "probe_at": iso(self.probe_at),
            "probe_from": self.probe_from,
            "unseen_since": iso(self.unseen_since),
            "ratios": [[iso(t), r, c] for t, r, c in self.ratios],
            "banded_at": iso(self.banded_at),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "CapState":
        try:
            when = lambda v: None if v is None else datetime.fromisoformat(v)
            return cls(
                cap=int(raw["cap"]),
                step=int(raw["step"]),
                history=tuple((datetime.fromisoformat(t), int(c)) for t, c in raw["history"]),
                prior_cap=int(raw["prior_cap"]),
                acted_through=when(raw.get("acted_through")),
                caught_up_since=when(raw.get("caught_up_since")),
                restored=bool(raw.get("restored", False)),
                alarmed_cap=None if raw.get("alarmed_cap") is None else int(raw["alarmed_cap"]),
                alarmed_at=when(raw.get("alarmed_at")),
                additive=bool(raw.get("additive", False)),
                warned_at=when(raw.get("warned_at")),
                probe_at=when(raw.get("probe_at")),
                probe_from=None if raw.get("probe_from") is None else int(raw["probe_from"]),
                unseen_since=when(raw.get("unseen_since")),
                ratios=tuple((datetime.fromisoformat(t), float(r), int(c)) for t, r, c in raw.get("ratios") or ()),
                banded_at=when(raw.get("banded_at")),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"cap state is malformed: {err}") from err


@dataclass(frozen=True)
class CapDecision:
    action: str                 # START, RAISE, HOLD, CUT or RESTORE
    cap: int                    # the MaximumConcurrency to have in force
    restore: bool               # True: put the owner's original back (their cap, or none)
    reasons: tuple[str, ...]
    state: CapState
    ceiling: int
    waiting_on: tuple[str, ...] = field(default=())   # what a hold waits for, for `holdfast stage`


# ---- the one raise rule ------------------------------------------------------------


def raise_to(cap: int, step: int, additive: bool, top: int, constants: Constants = DEFAULTS) -> int:
    """The next cap after a raise: the one rule `decide`, the forecast (`ramp_forecast`) and
    `start`'s description use. Slow start (while every signal is at its baseline):
    × `slow_start_factor`, at least `step` more; after the first warning or cut: + the larger
    of `step` and `raise_share_of_cap` of the cap. Never above `top`."""
    c = constants
    if additive:
        new = cap + max(step, math.floor(c.raise_share_of_cap * cap))
    else:
        new = max(cap + step, math.ceil(cap * c.slow_start_factor))
    return max(cap, min(top, new))


def describe_raises(step: int, top: int, constants: Constants = DEFAULTS) -> str:
    """`raise_to` in words, for start()'s reasons and `holdfast stage`."""
    c = constants
    return (f"raised × {c.slow_start_factor:g} while every signal is at its baseline (slow start: each step a "
            f"one-minute probe, kept once its minute is judged), then by the larger of {step} and "
            f"{c.raise_share_of_cap:.0%} of the cap after the first warning or cut, up to {top}")


# ---- the consumer's own evidence of its downstream ---------------------------------

GOOD, UNKNOWN = "ok", "unknown"          # Health.level, besides WARNING and CRITICAL
_RANK = {GOOD: 0, UNKNOWN: 1, WARNING: 2, CRITICAL: 3}


@dataclass(frozen=True)
class Health:
    """What one minute of the consumer's own metrics says about its downstream.
    `complete`: the time per message was judged (a function without Duration data is
    judged on its failure share alone, and never slow-starts on it)."""

    at: datetime | None
    level: str
    reasons: tuple[str, ...]
    ratio: float | None = None
    failure_share: float | None = None
    knee_estimate: int | None = None
    complete: bool = False


def duration_thresholds(facts: Facts, constants: Constants = DEFAULTS) -> tuple[float, float]:
    """(warning, critical) ratios of the time per message to its baseline, widened for a
    consumer whose baseline is noisier than the settings allow for."""
    c = constants
    warn = max(c.duration_warning_ratio, 1 + 3 * facts.spread)
    crit = max(c.duration_critical_ratio, warn + (c.duration_critical_ratio - c.duration_warning_ratio), 1 + 5 * facts.spread)
    return warn, crit


def noise(facts: Facts) -> float:
    """How far a time per message may be from another and still read as the same: the
    baseline's own spread, and at least 1 %."""
    return max(facts.spread, 0.01)


def slower(ratio: float, facts: Facts) -> bool:
    """Whether a time per message `ratio` times its baseline is measurably slower than it."""
    return ratio > 1 + noise(facts)


def lower(ratios, cap: int, facts: Facts) -> list[float]:
    """The kept ratios measured at a cap lower than `cap` by 3 × the noise or more: far
    enough apart for a knee's growth to show beyond the noise."""
    n = noise(facts)
    return [r for _, r, c in ratios if c * (1 + 3 * n) <= cap]


def own_speed(ratios, cap: int, ratio: float, facts: Facts) -> float | None:
    """The time per message (÷ its baseline) the consumer has now whatever the load, when
    the kept minutes show it: one measured at a cap lower by 3 × the noise or more reads
    the same as `ratio` (within the noise). Past a knee the time grows as the cap; one
    that does not is the consumer's own (a cold cache, larger messages, a slower deploy),
    not the drain's load. None: no such minute."""
    n = noise(facts)
    same = [r for r in lower(ratios, cap, facts) if abs(r - ratio) <= n * min(r, ratio)]
    return min(same + [ratio]) if same else None


def raise_below(facts: Facts, constants: Constants = DEFAULTS) -> float:
    """The ratio of the time per message to its baseline below which a raise may come:
    `raise_band_share` of the way from the baseline to the warning."""
    warn, _ = duration_thresholds(facts, constants)
    return 1 + (warn - 1) * constants.raise_band_share


def consumer_health(facts: Facts, reading: Reading, now: datetime, constants: Constants = DEFAULTS) -> Health:
    """Judge the newest minute with messages received, from the consumer's own metrics:

    - failure share: NumberOfMessagesReceived not deleted ÷ received (a batch item failed
      with ReportBatchItemFailures leaves Errors at 0 and is seen here), and Errors ÷
      Invocations, each against its baseline share;
    - time per message: Duration's sum ÷ NumberOfMessagesReceived (a full batch is not a
      slow one) against the baseline, and p90 Duration × Invocations ÷ received;
    - the mean invocation's Duration against the function's timeout.

    Every figure is of the minute of `received`; a metric without a datapoint for that
    minute is left out and said so. No receives, or none fresh: UNKNOWN (never a raise)."""
    c = constants
    period = timedelta(seconds=c.period_seconds)
    received = reading.received
    if received is None:
        return Health(None, UNKNOWN, ("no NumberOfMessagesReceived datapoint: the consumer's downstream cannot be judged",))
    if received.at + period + timedelta(seconds=c.stale_seconds) < now:
        return Health(None, UNKNOWN, (f"NumberOfMessagesReceived is stale (from {received.at.isoformat()}): "
                                      f"the consumer's downstream cannot be judged",))
    at = received.at
    if received.value <= 0:
        return Health(at, UNKNOWN, (f"no messages received in the minute of {at.isoformat()}: nothing to judge the "
                                    f"downstream by",))

    def same(dp: Datapoint | None) -> Datapoint | None:
        return dp if dp is not None and dp.at == at else None

    deleted, duration, high = same(reading.deleted), same(reading.duration), same(reading.duration_high)
    invocations, errors = same(reading.invocations), same(reading.errors)
    level, reasons = GOOD, []

    def seen(new: str, why: str) -> None:
        nonlocal level
        if _RANK[new] > _RANK[level]:
            level = new
        reasons.append(why)

    share = None
    if deleted is not None:
        share = max(0.0, received.value - deleted.value) / received.value
        base = facts.baseline_failure_share or 0.0
        said = (f"{share:.1%} of {received.value:,.0f} messages received not deleted (baseline {base:.1%})")
        if share > base + c.failure_critical_slack:
            seen(CRITICAL, said + f": more than {c.failure_critical_slack:.0%} above it")
        elif share > base + c.error_share_slack:
            seen(WARNING, said + f": more than {c.error_share_slack:.0%} above it")
    else:
        reasons.append("no NumberOfMessagesDeleted datapoint for the minute: failure share unknown")
    if errors is not None and invocations is not None and invocations.value > 0:
        e_share = errors.value / invocations.value
        base = facts.baseline_error_share or 0.0
        said = f"function Errors {e_share:.1%} of {invocations.value:,.0f} invocations (baseline {base:.1%})"
        if e_share > base + c.failure_critical_slack:
            seen(CRITICAL, said)
        elif e_share > base + c.error_share_slack:
            seen(WARNING, said)
        share = e_share if share is None else max(share, e_share)

    ratio = estimate = None
    complete = False
    if duration is None:
        reasons.append("no Duration datapoint for the minute: judged on the failure share alone")
    elif not facts.seconds_per_message:
        reasons.append("no baseline time per message: Duration cannot be judged")
    else:
        complete = True
        spm = duration.value / 1000.0 / received.value
        ratio = spm / facts.seconds_per_message
        warn, crit = duration_thresholds(facts, c)
        said = (f"{spm * 1000:,.0f} ms per message, {ratio:.2f}× its baseline {facts.seconds_per_message * 1000:,.0f} ms "
                f"(warning {warn:.2f}×, critical {crit:.2f}×)")
        seen(CRITICAL if ratio >= crit else WARNING if ratio >= warn else GOOD, said)
        if deleted is not None:
            estimate = math.floor(deleted.value / c.period_seconds * facts.seconds_per_message)
        if high is not None and invocations is not None and invocations.value > 0 and facts.high_seconds_per_message:
            high_ratio = high.value / 1000.0 * invocations.value / received.value / facts.high_seconds_per_message
            if high_ratio >= warn:
                seen(CRITICAL if high_ratio >= crit else WARNING,
                     f"p90 Duration per message {high_ratio:.2f}× its baseline")
        if invocations is not None and invocations.value > 0 and facts.timeout_seconds:
            used = duration.value / 1000.0 / invocations.value / facts.timeout_seconds
            said = f"mean invocation {used:.0%} of the function's {facts.timeout_seconds:g} s timeout"
            if used >= c.timeout_warning_share and ratio < raise_below(facts, c):
                # Full batches within the band raises are allowed in: how the owner sized
                # the timeout, not the downstream's health; no cap changes a batch's length.
                reasons.append(said + f", the time per message below {raise_below(facts, c):.2f}× its baseline "
                                      f"(full batches): judged by that time")
            elif used >= c.timeout_warning_share:
                # Slower than its baseline and near the timeout: any more and whole batches fail.
                seen(CRITICAL if used >= c.timeout_critical_share else WARNING,
                     said + f", the time per message past {raise_below(facts, c):.2f}× its baseline")
    if share is None and not complete:
        return Health(at, UNKNOWN, tuple(reasons + ["neither the time per message nor the failure share can be judged"]))
    return Health(at, level, tuple(reasons), ratio, share, estimate, complete)


# ---- the baseline: from before the earliest sign of trouble -------------------------


@dataclass(frozen=True)
class Minute:
    """One minute of a consumer's metrics before the event (None: no datapoint)."""

    at: datetime
    concurrency: float | None = None
    age: float | None = None
    visible: float | None = None
    sent: float | None = None
    deleted: float | None = None
    received: float | None = None
    duration: float | None = None         # Sum, ms
    duration_high: float | None = None    # p90, ms
    invocations: float | None = None
    errors: float | None = None

    @property
    def seconds_per_message(self) -> float | None:
        if self.duration is None or not self.received:
            return None
        return self.duration / 1000.0 / self.received

    @property
    def failure_share(self) -> float | None:
        if not self.received or self.deleted is None:
            return None
        return max(0.0, self.received - self.deleted) / self.received


def median(values) -> float | None:
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def _quartile(values) -> float | None:
    v = sorted(x for x in values if x is not None)
    return v[len(v) // 4] if v else None


def first_anomaly(minutes, constants: Constants = DEFAULTS) -> datetime | None:
    """The start of the consumer's own trouble that runs into the newest of `minutes`: the
    oldest minute of the last run of anomalous minutes (time per message at the warning
    ratio of the lower quartile, or a failure share above the lower quartile's by the
    critical slack), a minute without data neither breaking nor starting a run. The lower
    quartile stands for the consumer's usual level however long the storm (up to three
    quarters of the minutes); None: no anomaly at the end."""
    c = constants
    minutes = sorted(minutes, key=lambda x: x.at)
    spm_ref = _quartile(m.seconds_per_message for m in minutes)
    fail_ref = _quartile(m.failure_share for m in minutes)

    def anomalous(m: Minute) -> bool | None:
        spm, fail = m.seconds_per_message, m.failure_share
        if spm is None and fail is None:
            return None
        return bool((spm is not None and spm_ref and spm >= spm_ref * c.duration_warning_ratio)
                    or (fail is not None and fail_ref is not None and fail > fail_ref + c.failure_critical_slack))

    start = None
    for m in reversed(minutes):
        bad = anomalous(m)
        if bad is None:
            continue
        if not bad:
            break
        start = m.at
    return start


def baseline_end(signals) -> tuple[datetime, str]:
    """The earliest of the named times (name -> time or None): where the baseline ends."""
    known = [(t, name) for name, t in signals.items() if t is not None]
    if not known:
        raise ValueError("baseline: no time to end the window at")
    t, name = min(known)
    return t, name


def baseline(minutes, until: datetime, why: str, window_minutes: int, constants: Constants = DEFAULTS) -> dict[str, Any]:
    """The pre-event figures (Facts fields) from the `window_minutes` before the earliest of
    `until` (the earliest impairment signal or the plan's engagement: `why` names it) and
    the consumer's own first anomaly, by medians of the minutes: a retry storm in part of
    the window moves no figure. Rates and shares are per minute, then the median."""
    c = constants
    minutes = [m for m in minutes if m.at < until]
    anomaly = first_anomaly(minutes, c)
    end, what = (anomaly, "the consumer's own first anomaly") if anomaly is not None and anomaly < until else (until, why)
    start = end - timedelta(minutes=window_minutes)
    used = [m for m in minutes if start <= m.at and m.at + timedelta(seconds=c.period_seconds) <= end]
    note = f"baseline from {len(used)} minutes, {start.isoformat()} to {end.isoformat()} (ending at {what})"
    spm = median(m.seconds_per_message for m in used)
    spread = 0.0
    if spm:
        spread = median(abs(m.seconds_per_message - spm) for m in used if m.seconds_per_message is not None) / spm
    per_second = lambda v: None if v is None else v / c.period_seconds
    errors = [m.errors for m in used if m.errors is not None]
    invoked = sum(m.invocations or 0.0 for m in used)
    highs = [m.duration_high / 1000.0 * m.invocations / m.received for m in used
             if m.duration_high is not None and m.invocations and m.received]
    return dict(
        pre_event_concurrency=median(m.concurrency for m in used),
        baseline_age_seconds=median(m.age for m in used),
        baseline_errors=median(errors) or 0.0,
        baseline_error_share=min(1.0, sum(errors) / invoked) if invoked > 0 else None,
        arrival_per_second=per_second(median(m.sent for m in used)),
        deleted_per_second=per_second(median(m.deleted for m in used)),
        seconds_per_message=spm,
        spread=spread,
        high_seconds_per_message=median(highs),
        baseline_failure_share=median(m.failure_share for m in used),
        baseline_visible=median(m.visible for m in used),
        baseline_note=note,
    )


def ceiling(facts: Facts, constants: Constants = DEFAULTS) -> tuple[int, str]:
    """The highest cap the controller may set, and what sets it."""
    limits = [(LAMBDA_MAX_CONCURRENCY, "Lambda's ceiling")]
    if facts.reserved_concurrency is not None:
        limits.append((facts.reserved_concurrency, "function's reserved concurrency"))
    if facts.owner_cap is not None:
        limits.append((facts.owner_cap, "owner's own cap"))
    value, why = min(limits)
    if value < LAMBDA_MIN_CAP:
        return LAMBDA_MIN_CAP, f"Lambda's minimum cap (the {why} is {value})"
    return value, why


def _floor(facts: Facts, constants: Constants) -> int:
    """The lowest cap: the floor, or the owner's own cap where that is lower."""
    low = constants.floor
    if facts.owner_cap is not None:
        low = min(low, facts.owner_cap)
    return low


def baseline_need(facts: Facts) -> float | None:
    """The concurrency the baseline arrivals need (arrivals × time per message, Little's
    law); None when either is unknown."""
    if facts.arrival_per_second is not None and facts.seconds_per_message:
        return facts.arrival_per_second * facts.seconds_per_message
    return None


def implausible(pre: float, need: float | None, constants: Constants = DEFAULTS) -> bool:
    """A pre-event concurrency more than `plausible_start_factor` × the need, plus two
    batches: a retry storm read as the baseline."""
    return need is not None and pre > constants.plausible_start_factor * need + 2


def carried_before(facts: Facts, constants: Constants = DEFAULTS) -> int | None:
    """The concurrency the downstream carried before the event: the pre-event concurrency
    when it is plausible, else what the baseline arrivals need; None when neither is known."""
    need, pre = baseline_need(facts), facts.pre_event_concurrency
    if pre is not None and not implausible(pre, need, constants):
        return math.ceil(pre)
    return None if need is None else math.ceil(need)


def start(facts: Facts, current_cap: int, now: datetime, constants: Constants = DEFAULTS, *,
          arriving_per_second: float | None = None) -> CapDecision:
    """The first decision of a drain: the cap to start from and the state to carry.

    From the pre-event concurrency, checked against what the baseline arrivals need
    (arrivals × time per message, Little's law). Missing, or implausibly far above that
    need (a retry storm read as the baseline), the drain starts from the need — or from
    the cap in force when that is unknown too — and searches; never at the ceiling.
    When messages arrive faster now (`arriving_per_second`, the queue's newest
    NumberOfMessagesSent) than the start would consume, it starts as high as keeps the
    backlog from growing, but never more than one slow-start step above the pre-event
    level: the bound every raise keeps."""
    c = constants
    if not (isinstance(current_cap, int) and current_cap >= 1):
        raise ValueError(f"current cap {current_cap!r} must be a positive integer")
    top, top_why = ceiling(facts, c)
    low = _floor(facts, c)
    reasons = []
    need = baseline_need(facts)
    pre = facts.pre_event_concurrency
    searching = True
    if pre is None and need is None:
        base = current_cap
        reasons.append(f"no pre-event ConcurrentExecutions: starting from the cap in force ({current_cap}) and searching")
    elif pre is None:
        base = max(current_cap, math.ceil(need))
        reasons.append(f"no pre-event ConcurrentExecutions: starting from what the baseline arrivals need "
                       f"({need:.1f} = arrivals × time per message) and searching")
    elif implausible(pre, need, c):
        base = max(current_cap, math.ceil(need))
        reasons.append(f"pre-event concurrency {pre:g} is implausible, more than {c.plausible_start_factor:g}× what the "
                       f"baseline arrivals need ({need:.1f}): starting from the need and searching")
    else:
        searching = False
        base = math.ceil(pre)
        reasons.append(f"starting from the consumer's pre-event concurrency ({pre:g})")
    step = max(c.raise_min, math.ceil(c.raise_fraction * max(base, current_cap)))
    above = 0 if searching and pre is None and need is None else c.start_steps_above * step
    begin = max(current_cap, base + above)
    if above:
        reasons[-1] += f", {c.start_steps_above} step(s) of {step} above it"
    if not searching and arriving_per_second is not None and facts.seconds_per_message:
        need_now = arriving_per_second * facts.seconds_per_message
        higher = min(math.ceil(need_now), math.ceil(base * c.slow_start_factor))
        if higher > begin:
            begin = higher
            reasons.append(f"arrivals now ({arriving_per_second:g}/s) need {need_now:.1f} batches: from {begin}, at most "
                           f"one slow-start step above the pre-event level")
    if begin > top:
        reasons.append(f"held to the {top_why} ({top})")
    begin = min(begin, top)
    if searching and begin >= top and top > low:
        begin = max(low, top // 2)
        reasons.append(f"never at the ceiling on a missing or implausible baseline: from half of it ({begin})")
    begin = max(low, begin)
    if facts.baseline_note:
        reasons.append(facts.baseline_note)
    probe = {}
    if not searching:
        # From a level the downstream carried before the event, the first slow-start probe
        # at once: one minute one step above it, then back until that minute is judged.
        tried = min(top, raise_to(begin, step, False, top, c))
        if tried > begin:
            reasons.append(f"probing {tried} for one minute first, then back to {begin} until it is judged")
            probe = {"probe_at": now, "probe_from": begin}
            begin = tried
    state = CapState(cap=begin, step=step, history=((now, begin),), prior_cap=current_cap, **probe)
    reasons.append(f"cap {begin}, " + describe_raises(step, top, c))
    return CapDecision(START, begin, False, tuple(reasons), state, top)


def cut_target(then: int, low: int, alarmed: bool, health: Health | None, constants: Constants = DEFAULTS) -> tuple[int, str]:
    """The cap after a cut from `then` (the cap the bad datapoint measured): × `cut_factor`
    for an owner's alarm; for the built-in evidence, the concurrency that carried the
    minute's goodput at the baseline time per message (the knee, when the downstream is
    saturated) × `knee_margin`, never below half of `then`. Both: the lower."""
    c = constants
    targets = []
    if alarmed:
        targets.append((int(then * c.cut_factor), f"× {c.cut_factor:g}"))
    if health is not None:
        if health.knee_estimate is not None and health.knee_estimate < then:
            est = max(math.ceil(then * 0.5), math.floor(health.knee_estimate * c.knee_margin))
            targets.append((est, f"the goodput's concurrency at baseline speed ({health.knee_estimate}) × {c.knee_margin:g}, "
                                 f"at least half"))
        else:
            targets.append((int(then * c.cut_factor), f"× {c.cut_factor:g}"))
    value, how = min(targets)
    return max(low, value), how


def probe_minute(probe_at: datetime, constants: Constants = DEFAULTS) -> datetime:
    """The first whole period at or after `probe_at`: the datapoint a probe is judged on."""
    p = constants.period_seconds
    start = math.ceil(probe_at.timestamp() / p) * p
    return datetime.fromtimestamp(start, tz=probe_at.tzinfo)


def decide(state: CapState, facts: Facts, reading: Reading, now: datetime, constants: Constants = DEFAULTS) -> CapDecision:
    """The next cap for one mapping, from its state and this tick's reading."""
    c = constants
    top, top_why = ceiling(facts, c)
    low = _floor(facts, c)
    period = timedelta(seconds=c.period_seconds)
    probing = []
    if state.probe_at is not None and state.cap == state.probe_cap and not state.restored:
        minute = probe_minute(state.probe_at, c)
        if now >= minute + period:
            # The probe has had its whole minute: back to the cap judged at baseline until
            # that minute's datapoints are published and judged.
            probing.append(f"probe at {state.cap} had the minute of {minute.isoformat()}: back to {state.probe_from} "
                           f"until that minute is judged")
            state = replace(state, cap=state.probe_from, history=state.history + ((now, state.probe_from),))

    def out(action, cap, reasons, *, waiting=(), restore=False, **changes) -> CapDecision:
        new = state
        reasons = probing + list(reasons)
        if action in (CUT, RESTORE) and "probe_at" not in changes:
            changes.update(probe_at=None, probe_from=None)
        if cap != state.cap:
            horizon = now - timedelta(seconds=c.history_seconds)
            history = state.history + ((now, cap),)
            prior = state.prior_cap
            while len(history) > 1 and history[1][0] <= horizon:
                prior = history[0][1]
                history = history[1:]
            new = replace(new, cap=cap, history=history, prior_cap=prior, warned_at=None, banded_at=None)
        if changes:
            new = replace(new, **changes)
        return CapDecision(action, cap, restore, tuple(reasons), new, top, tuple(waiting))

    if state.restored:
        return out(RESTORE, state.cap, ["caught up earlier: the owner's original is back"], restore=True)

    cap = state.cap
    clamp = []
    if cap > top:
        clamp = [f"cap {cap} is above the {top_why} ({top}): lowered to it"]
        cap = top

    def fresh(dp: Datapoint | None) -> Datapoint | None:
        if dp is None or dp.at + period + timedelta(seconds=c.stale_seconds) < now:
            return None
        return dp

    health = consumer_health(facts, reading, now, c)
    since = state.in_force_since
    # The raise band: judged against the baseline, or against the consumer's own speed now
    # when a lower cap measured the same (own_speed); only from the concurrency the
    # downstream carried before the event up, and above the floor.
    if health.complete and health.ratio is not None and all(t != health.at for t, _, _ in state.ratios):
        measured = state.cap_wholly(health.at, health.at + period)
        if measured is not None:
            horizon = now - timedelta(seconds=c.history_seconds)
            state = replace(state, ratios=tuple(x for x in state.ratios if x[0] > horizon)
                            + ((health.at, health.ratio, measured),))
    own = own_speed(state.ratios, cap, health.ratio, facts) if health.complete and health.ratio is not None else None
    reference = 1.0 if own is None else own
    speed = None if not health.complete or health.ratio is None else health.ratio / reference
    before = carried_before(facts, c)
    banded = speed is not None and cap > low and (before is None or cap >= before)
    room = not banded or speed < raise_below(facts, c)
    shown = ("" if speed is None else f"{speed:.2f}× its baseline time per message" if own is None else
             f"{speed:.2f}× the {own:.2f}× it took at a lower cap too (its own speed now)")

    def new_datapoint(at: datetime | None) -> bool:
        return at is not None and (state.acted_through is None or at > state.acted_through)

    # 1. A downstream alarm, or the consumer's own evidence, critical on a datapoint not yet
    # acted on: cut, from the cap in force when it was measured.
    critical = [a for a in reading.downstream if a.severity == CRITICAL and a.state == ALARM]
    bad = [(a.measured_at, a.name) for a in critical if new_datapoint(a.measured_at)]
    own = health.level == CRITICAL and new_datapoint(health.at)
    if own:
        bad.append((health.at, "the consumer's own evidence (" + "; ".join(health.reasons) + ")"))
    if bad:
        newest = max(t for t, _ in bad)
        then = max(state.cap_during(t, t + period) for t, _ in bad)
        target, how = cut_target(then, low, any(name == a.name for _, name in bad for a in critical), health if own else None, c)
        names = ", ".join(sorted(name for _, name in bad))
        stamp = newest.isoformat()
        remembered = _remembered(state, then, now, c)
        if target < cap:
            return out(CUT, target, clamp + [
                f"{names} critical on the datapoint of {stamp}, measured at cap {then}: cut to {target} ({how}); "
                f"raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
            ], acted_through=newest, caught_up_since=None, alarmed_cap=remembered, alarmed_at=now, additive=True)
        if state.probe_at is not None and newest >= probe_minute(state.probe_at, c) and then > cap and not clamp:
            # The probe's minute: the knee is between the cap judged at baseline and the
            # probe; the cut's target, when above the cap now in force, is where it was measured.
            new = min(target, then - 1)
            return out(CUT, max(cap, new), [
                f"{names} critical on the datapoint of {stamp}, measured at the probe's cap {then}: the slow start ends "
                f"at {max(cap, new)} ({how}); raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
            ], acted_through=newest, caught_up_since=None, alarmed_cap=remembered, alarmed_at=now, additive=True)
        return out(CUT if clamp else HOLD, cap, clamp + [
            f"{names} critical on the datapoint of {stamp}, measured at cap {then}: the cut from it ({target}) is already "
            f"in force (cap {cap}); no second cut"
        ], waiting=["a datapoint measured at the current cap"], acted_through=newest, caught_up_since=None, additive=True)
    if clamp:
        return out(CUT, cap, clamp, caught_up_since=None)
    if reading.queue_missing:
        return out(RESTORE, cap, ["the queue does not exist (deleted?): nothing to drain; the owner's original comes back"],
                   restore=True, restored=True)

    # 2. Alarms still in ALARM on datapoints already acted on, or with no datapoint time.
    holds, waiting = [], []
    for a in critical:
        if a.measured_at is None:
            holds.append(f"{a.name} in ALARM with no datapoint time: cannot tell which cap it measured; not raising")
        else:
            holds.append(f"{a.name} still in ALARM on the datapoint of {a.measured_at.isoformat()}, already acted on")
        waiting.append(f"a newer datapoint of {a.name}")
    if health.level == CRITICAL:
        holds.append("the consumer's own evidence still critical on the datapoint of "
                     f"{health.at.isoformat()}, already acted on: not raising")
        waiting.append("the consumer's own evidence back at its baseline")

    # 3. Missing or stale inputs: hold, saying which. An alarm that does not exist, or has
    # had no data for longer than a datapoint may be late, can tell nothing: it is
    # ignored (and said so), never waited for — a misnamed alarm must not deadlock the drain.
    ignored = _ignored(reading.downstream, now, c)
    for a in reading.downstream:
        if a.state == INSUFFICIENT_DATA and a.name not in ignored:
            holds.append(f"alarm {a.name} has INSUFFICIENT_DATA: not raising")
            waiting.append(f"data for {a.name}")
    age = fresh(reading.oldest_age)
    unknown_age_behind = False
    if age is None:
        what = "missing" if reading.oldest_age is None else f"stale (from {reading.oldest_age.at.isoformat()})"
        if reading.visible_now == 0:
            # No datapoint, but the queue is empty (read live): caught up for sure.
            age = Datapoint(now - period, 0.0)
            ignored["(age)"] = f"ApproximateAgeOfOldestMessage is {what}; the queue is empty (GetQueueAttributes): caught up"
        elif reading.visible_now is not None and reading.visible_now > 0:
            unknown_age_behind = True
            ignored["(age)"] = (f"ApproximateAgeOfOldestMessage is {what}; {reading.visible_now:,} messages visible "
                                f"(GetQueueAttributes): behind")
        else:
            holds.append(f"ApproximateAgeOfOldestMessage is {what}: not raising, not restoring")
            waiting.append("an ApproximateAgeOfOldestMessage datapoint")
    notes = list(ignored.values())
    if holds and (critical or age is None or health.level == CRITICAL):
        return out(HOLD, cap, holds + notes, waiting=waiting)

    # 4. Warnings, errors, throttles; then the queue: caught up, and for how long.
    limit = (facts.baseline_age_seconds or 0.0) + c.caught_up_slack_seconds
    visible = fresh(reading.visible)
    backlog = f", {visible.value:,.0f} visible" if visible is not None else ""
    warnings = [a for a in reading.downstream if a.severity == WARNING and a.state == ALARM]
    errors = fresh(reading.errors)
    throttles = fresh(reading.throttles)
    errors_high, errors_said = errors_above(facts, errors, reading.invocations, c)
    throttled = throttles is not None and throttles.value > 0
    missing = len(holds)   # holds so far are missing alarms: they stop a raise, not a restore
    if errors_high and health.level not in (WARNING, CRITICAL):
        holds.append(f"{errors_said}: not raising")
        waiting.append("Errors back at the pre-event level")
    if throttled:
        holds.append(f"function throttled ({throttles.value:g}): the cap is above what it can run; not raising")
        waiting.append("no throttles")
    for a in warnings:
        holds.append(f"warning {a.name} in ALARM: not raising")
        waiting.append(f"{a.name} back to OK")
    if health.level == WARNING:
        holds.append("the consumer's own evidence at a warning: " + "; ".join(health.reasons) + ": not raising")
        waiting.append("the consumer's own evidence back at its baseline")
    # A warning measured wholly at the cap in force: the first stops raises (and ends the
    # slow start); one on a later datapoint at the same cap steps back by a small share.
    probe_warned = []
    if state.probe_at is not None:
        minute = probe_minute(state.probe_at, c)
        if health.level == WARNING and health.at == minute:
            probe_warned.append("the consumer's own evidence")
        elif health.level == GOOD and health.at == minute and health.complete and not room:
            probe_warned.append(f"the consumer's own evidence in the upper half of the band below its warning "
                                f"({shown}; raises only below {raise_below(facts, c):.2f}×)")
        probe_warned += [a.name for a in warnings if a.measured_at is not None and a.measured_at >= minute]
    if probe_warned:
        # A warning on the probe's minute (or on a later one, at the cap returned to): the
        # knee is near. The slow start ends at the concurrency that carried the probe
        # minute's goodput at baseline speed, between the cap judged at baseline and the
        # probe; without that minute's own evidence, at the cap returned to.
        tried = state.probe_cap
        new = state.probe_from
        if health.at == probe_minute(state.probe_at, c) and health.knee_estimate is not None:
            new = max(new, min(tried - 1, math.floor(health.knee_estimate * c.knee_margin)))
        new = max(low, min(new, top))
        return out(RAISE if new > cap else HOLD, new, holds + notes + [
            f"a warning ({', '.join(probe_warned)}) measured at or after the probe's minute at cap {tried}: the slow "
            f"start ends at {new}"
        ], waiting=waiting, caught_up_since=None, additive=True, probe_at=None, probe_from=None, warned_at=None)
    warned = [a.measured_at for a in warnings if a.measured_at is not None and a.measured_at >= since]
    if health.level == WARNING and health.at is not None and health.at >= since:
        warned.append(health.at)
    if warned:
        newest_warning = max(warned)
        if state.warned_at is not None and newest_warning > state.warned_at:
            back = cap - max(1, math.ceil(c.warning_step_back * cap))
            how = f"by {c.warning_step_back:.0%}"
            estimate = health.knee_estimate if health.level == WARNING and health.at == newest_warning else None
            if estimate is not None and estimate < back:
                # Past the knee the goodput no longer grows with the cap: back to the
                # concurrency that carried it at the baseline time per message.
                back = max(estimate, math.ceil(cap * c.cut_factor))
                how = (f"to the goodput's concurrency at baseline speed ({estimate}), at most × {c.cut_factor:g}")
            back = max(low, back)
            if before is not None and back < before:
                # A warning at or below what the downstream carried before the event is not
                # the drain's load (a cold cache, larger messages, a slower deploy): it
                # holds there; only a critical datapoint cuts below it.
                back = min(cap, before)
                how = f"no lower than the concurrency the downstream carried before the event ({before})"
            if back < cap:
                remembered = _remembered(state, cap, now, c)
                return out(CUT, back, holds + notes + [
                    f"a warning on a second datapoint measured at cap {cap} (of {newest_warning.isoformat()}): stepped back "
                    f"{how} to {back}; raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
                ], waiting=waiting, caught_up_since=None, additive=True, alarmed_cap=remembered, alarmed_at=now)
            if before is not None and cap <= before:
                notes.append(f"cap {cap} is no more than the downstream carried before the event ({before}): a warning "
                             f"holds it, only a critical datapoint cuts below")
        elif state.warned_at is None:
            # The slow start ends here; a probe still waiting for its minute is given up.
            state = replace(state, warned_at=newest_warning, additive=True, probe_at=None, probe_from=None)

    caught_visible = True
    if visible is not None and facts.baseline_visible is not None:
        room = facts.baseline_visible * 2 + (facts.arrival_per_second or 0.0) * c.caught_up_slack_seconds + 10
        caught_visible = visible.value <= room
    if not unknown_age_behind and age.value <= limit and not caught_visible:
        notes.append(f"oldest message {age.value:g} s old but {visible.value:,.0f} visible, more than the baseline "
                     f"{facts.baseline_visible:,.0f} allows (messages received three times or more leave the age): behind")
    if not unknown_age_behind and age.value <= limit and caught_visible:
        since_caught = state.caught_up_since or age.at
        caught = (age.at + period - since_caught).total_seconds()
        # A missing alarm does not stop the restore: caught up at this cap, the consumer
        # needs no more than it ran at before the event. A warning or errors do.
        if caught >= c.restore_after_seconds and len(holds) == missing:
            return out(RESTORE, cap, holds + notes + [
                f"oldest message {age.value:g} s old, within {c.caught_up_slack_seconds:g} s of its baseline for {caught:g} s: the owner's original comes back"
            ], restore=True, caught_up_since=since_caught, restored=True)
        return out(HOLD, cap, holds + notes + [
            f"caught up: oldest message {age.value:g} s old{backlog}, at baseline for {caught:g} of {c.restore_after_seconds:g} s before the owner's original"
        ], waiting=waiting + ["the age at baseline for the restore period"], caught_up_since=since_caught)
    behind = (f"queue behind: {reading.visible_now:,} messages visible, age unknown" if unknown_age_behind
              else f"queue behind: oldest message {age.value:g} s old{backlog}")
    if holds:
        return out(HOLD, cap, holds + notes + [behind], waiting=waiting, caught_up_since=None)

    # 5. Raise on fresh evidence measured wholly at the current cap: the consumer's own
    # (every minute's signals at baseline) and every downstream alarm's OK. The slowest
    # input sets when: each step is held until it has a datapoint of the cap.
    if health.level == UNKNOWN:
        return out(HOLD, cap, notes + [behind, "; ".join(health.reasons) + ": not raising"],
                   waiting=["NumberOfMessagesReceived and Duration of a minute with messages"], caught_up_since=None)
    counted = [a for a in reading.downstream if a.name not in ignored]
    if state.probe_at is not None:
        minute = probe_minute(state.probe_at, c)
        tried = state.probe_cap
        unmeasured = [a.name for a in counted if a.measured_at is None or a.measured_at < minute]
        if health.at is not None and health.at == minute and health.complete and health.level == GOOD and unmeasured:
            return out(HOLD, cap, notes + [behind, f"the probe at cap {tried} at its baseline on its own evidence; "
                                                   f"waiting for {', '.join(unmeasured)} on a datapoint of its minute "
                                                   f"({minute.isoformat()}) or later"],
                       waiting=[f"a datapoint of {', '.join(unmeasured)} of {minute.isoformat()} or later"],
                       caught_up_since=None)
        if health.at is not None and health.at == minute and health.complete and health.level == GOOD:
            below = None if state.alarmed_cap is None or _forgotten(state, now, c) else state.alarmed_cap - 1
            nxt = min(raise_to(tried, state.step, False, top, c), below if below is not None else top)
            detail = "; ".join(r for r in health.reasons if "ms per message" in r)
            said = f"the probe at cap {tried} at its baseline on the minute of {minute.isoformat()}" + (
                f" ({detail})" if detail else "")
            if nxt > tried and tried < top:
                return out(RAISE, nxt, notes + [behind, said + f": probing {nxt} for one minute, then back to {tried}"],
                           caught_up_since=None, probe_at=now, probe_from=tried)
            return out(RAISE, tried, notes + [behind, said + f": cap {tried}"], caught_up_since=None,
                       probe_at=None, probe_from=None)
        if health.at is None or health.at < minute:
            return out(HOLD, cap, notes + [behind, f"waiting for the probe's minute ({minute.isoformat()}, at cap {tried})"],
                       waiting=[f"the datapoints of {minute.isoformat()}"], caught_up_since=None)
        # The probe's minute was skipped (a later one published first) or could not be judged.
        notes.append(f"the probe at cap {tried} could not be judged on its own minute: probing again")
        state = replace(state, probe_at=None, probe_from=None)
    stale = [a.name for a in counted if a.measured_at is None or a.measured_at < since]
    if health.at is None or health.at < since:
        stale.append("the consumer's own metrics")
    evidence = ("every downstream alarm OK and " if counted else "") + "the consumer's own evidence at its baseline"
    if stale:
        return out(HOLD, cap, notes + [behind, f"waiting for {', '.join(stale)} on a datapoint measured at cap {cap} (in force since {since.isoformat()})"],
                   waiting=[f"a datapoint of {', '.join(stale)} measured at cap {cap}"], caught_up_since=None)
    if cap >= top:
        return out(HOLD, cap, notes + [behind, f"at the {top_why} ({top})"], waiting=["the queue to catch up"], caught_up_since=None)
    below = None if state.alarmed_cap is None or _forgotten(state, now, c) else state.alarmed_cap - 1
    if below is not None and cap >= below:
        left = c.remember_alarm_seconds - (now - state.alarmed_at).total_seconds()
        return out(HOLD, cap, notes + [behind, f"{evidence} at cap {cap}, one below the cap {state.alarmed_cap} that alarmed: "
                               f"not probing it again for {left / 60:.0f} min"], waiting=["the alarm to be forgotten"], caught_up_since=None)
    def banded_hold(why: str) -> CapDecision:
        # Held by the band: one raise of 3 × the noise (the least own_speed can tell by), so
        # that a second cap is measured — at once when no lower cap measured a lower time
        # (nothing says this is a knee), else after `remember_alarm_seconds` (since
        # `banded_at`). A time per message that does not grow with the cap is the
        # consumer's own, and the band lets it go; one that does is a knee's, and it holds.
        n = noise(facts)
        knee = any(r * (1 + n) < health.ratio for r in lower(state.ratios, cap, facts))
        if not knee or (state.banded_at is not None
                        and (now - state.banded_at).total_seconds() >= c.remember_alarm_seconds):
            up = min(top, max(cap + 1, math.ceil(cap * (1 + 3 * n))))
            if up > cap:
                return out(RAISE, up, notes + [behind, why + f"; {'held so since ' + state.banded_at.isoformat() if knee else 'no lower cap measured a lower time'}: one raise "
                                                          f"to {up}, the least a second cap can tell by, to tell a knee "
                                                          f"from a slowdown of the consumer's own"],
                           caught_up_since=None, additive=True)
        return out(HOLD, cap, notes + [behind, why + ": holding"], waiting=["the time per message lower, or the queue "
                                                                           "caught up"],
                   caught_up_since=None, additive=True, banded_at=state.banded_at or now)

    if health.complete and not room:
        # In the upper half of the band below the warning: near a knee. Hold here; the
        # slow start, if on, ends.
        return banded_hold(f"the consumer's own evidence below its warning at cap {cap}, but in the upper half of "
                           f"the band ({shown}; raises only below {raise_below(facts, c):.2f}×)")
    additive = state.additive or not health.complete
    new = min(raise_to(cap, state.step, additive, top, c), below if below is not None else top)
    sized = ""
    if additive and banded and slower(speed, facts):
        # Measurably slower than its baseline (by more than its own spread, and 1 %): past
        # a knee the ratio grows as the cap (concurrency ÷ knee), so the raise goes no
        # further than would carry the time per message to the top of the band raises are
        # allowed in. A consumer whose own work dwarfs its downstream call shows the knee
        # as a few per cent only; an unsized raise of 11 % carried it past the SLO.
        most = math.floor(cap * raise_below(facts, c) / speed)
        if most <= cap:
            return banded_hold(f"{evidence} at cap {cap}, {shown}: if that is a knee, a raise would carry it past "
                               f"{raise_below(facts, c):.2f}×")
        if most < new:
            new, sized = most, f", sized so the time per message stays below {raise_below(facts, c):.2f}× its baseline"
    how = "additive" if additive else f"slow start: a probe for one minute, then back to {cap} until it is judged"
    detail = "; ".join(r for r in health.reasons if "ms per message" in r)
    probe = {} if additive else {"probe_at": now, "probe_from": cap}
    own_said = f"; {shown}" if own is not None else ""
    return out(RAISE, new, notes + [behind, f"{evidence} at cap {cap}" + (f" ({detail}{own_said})" if detail else "")
                                    + f": raise to {new} ({how}{sized})"], caught_up_since=None, **probe)


def _ignored(downstream: tuple[Alarm, ...], now: datetime, c: Constants) -> dict[str, str]:
    """Alarms that can tell nothing, name -> why: one that does not exist, or one in
    INSUFFICIENT_DATA since (`measured_at`: when it entered that state) longer than a
    datapoint may be late. A critical alarm in ALARM is never ignored."""
    out = {}
    limit = timedelta(seconds=c.period_seconds + c.stale_seconds)
    for a in downstream:
        if a.state is None:
            out[a.name] = f"alarm {a.name} does not exist: ignored (it protects nothing until it is named right)"
        elif a.state == INSUFFICIENT_DATA and a.measured_at is not None and now - a.measured_at > limit:
            out[a.name] = (f"alarm {a.name} has had INSUFFICIENT_DATA since {a.measured_at.isoformat()}: its metric is "
                           f"not published; ignored")
    return out


def counts(alarm: Alarm, now: datetime, constants: Constants = DEFAULTS) -> bool:
    """Whether an alarm's state is evidence at all (see `_ignored`)."""
    return alarm.name not in _ignored((alarm,), now, constants)


def errors_above(facts: Facts, errors: Datapoint | None, invocations: Datapoint | None,
                 c: Constants = DEFAULTS) -> tuple[bool, str]:
    """Whether the function's errors are above their pre-event level, and how that reads.
    As a share of Invocations of the same period when both are known (more than
    `error_share_slack` above the pre-event share); otherwise the count per period."""
    if errors is None:
        return False, ""
    if (invocations is not None and invocations.at == errors.at and invocations.value > 0
            and facts.baseline_error_share is not None):
        share = errors.value / invocations.value
        limit = facts.baseline_error_share + c.error_share_slack
        return share > limit, (f"function Errors {share:.1%} of {invocations.value:,.0f} invocations, above the "
                               f"pre-event {facts.baseline_error_share:.1%} by more than {c.error_share_slack:.0%}")
    return errors.value > facts.baseline_errors, (f"function Errors {errors.value:g} above the pre-event "
                                                  f"{facts.baseline_errors:g}")


def _remembered(state: CapState, then: int, now: datetime, c: Constants) -> int:
    """The cap raises stop below after a cut or step back from `then` (TCP's ssthresh):
    `then`, or the cap remembered from before when lower and not yet forgotten."""
    return then if state.alarmed_cap is None or _forgotten(state, now, c) else min(then, state.alarmed_cap)


def _forgotten(state: CapState, now: datetime, c: Constants) -> bool:
    return state.alarmed_at is None or (now - state.alarmed_at).total_seconds() >= c.remember_alarm_seconds


def dependency_back(facts: Facts, reading: Reading, since: datetime, now: datetime, constants: Constants = DEFAULTS,
                    *, fallback: bool = False) -> tuple[bool, tuple[str, ...]]:
    """Whether the consumer's own evidence says its dependency is back: every downstream
    alarm OK on a datapoint measured after `since` (when the hold began), and the function's
    Errors at or below their pre-event level. The drain starts on this, not on the launch verdict.

    An alarm that does not exist is ignored (said so). `fallback` (the plan has reached its
    drain stage: the launch verdict's timing, as the fixed ladder had it) starts a drain
    whose evidence is merely missing — alarms without data, no Errors datapoint — so no
    configuration can keep a mapping at the floor for ever; an alarm in ALARM or Errors
    above their pre-event level still keep it there."""
    period = timedelta(seconds=constants.period_seconds)
    stale_before = now - period - timedelta(seconds=constants.stale_seconds)
    reasons, back, counted, missing = [], True, 0, []
    for a in reading.downstream:
        if a.state is None:
            reasons.append(f"alarm {a.name} does not exist: ignored")
        elif a.state == ALARM:
            back = False
            reasons.append(f"alarm {a.name} is ALARM")
        elif a.state != OK:
            missing.append(f"alarm {a.name} is {a.state}")
        elif a.measured_at is None or a.measured_at < since:
            missing.append(f"alarm {a.name} OK only on a datapoint from before the hold")
        else:
            counted += 1
    health = consumer_health(facts, reading, now, constants)
    own = health.at is not None and health.at >= since and health.level != UNKNOWN
    if own and health.level == CRITICAL:
        back = False
        reasons.append("the consumer's own evidence is critical: " + "; ".join(health.reasons))
    elif own:
        counted += 1
    errors = reading.errors
    if errors is None or errors.at < since or errors.at < stale_before:
        if not counted and not missing:
            missing.append("no downstream alarm to judge by, no NumberOfMessagesReceived with messages and no Errors "
                           "datapoint since the hold: no evidence the dependency is back")
        else:
            reasons.append("no Errors datapoint since the hold (no invocations): judged on "
                           + ("the consumer's own evidence" if own else "the downstream alarms"))
    elif errors_above(facts, errors, reading.invocations, constants)[0]:
        back = False
        reasons.append(errors_above(facts, errors, reading.invocations, constants)[1])
    else:
        counted += 1
    if missing and fallback and back:
        reasons += missing
        reasons.insert(0, "drain started with the plan's drain stage (the launch verdict's timing), without the consumer's "
                          "own evidence: " + "; ".join(missing))
        return True, tuple(reasons)
    if missing:
        return False, tuple(missing + reasons)
    if back:
        reasons.insert(0, "dependency back: " + ", ".join(
            ([] if not any(a.state == OK for a in reading.downstream) else ["downstream alarms OK"])
            + (["the consumer's own evidence at its baseline (" + "; ".join(health.reasons) + ")"] if own else [])
            + ([] if own else ["function Errors at the pre-event level"])))
    return back, tuple(reasons)


# ---- forecast ----------------------------------------------------------------------


@dataclass(frozen=True)
class Forecast:
    seconds: float | None   # None: no forecast (the reason says why)
    reason: str


def per_batch_rate(deleted_per_second: float | None, concurrency: float | None) -> float | None:
    """Messages one concurrent batch consumes a second, from before the event:
    NumberOfMessagesDeleted ÷ ConcurrentExecutions. None when either is unknown or zero."""
    if deleted_per_second is None or concurrency is None or concurrency <= 0 or deleted_per_second <= 0:
        return None
    return deleted_per_second / concurrency


def forecast(backlog: float | None, arrival_per_second: float | None, consumer_per_second: float | None) -> Forecast:
    """Time to drain = backlog ÷ (consumers − arrivals)."""
    for name, value in (("backlog", backlog), ("arrival rate", arrival_per_second), ("consumer throughput", consumer_per_second)):
        if value is None:
            return Forecast(None, f"no forecast: {name} unknown")
        if not math.isfinite(value) or value < 0:
            return Forecast(None, f"no forecast: {name} {value!r} is impossible")
    spare = consumer_per_second - arrival_per_second
    if spare <= 0:
        return Forecast(None, f"never drains: consumers {consumer_per_second:g}/s are no faster than arrivals {arrival_per_second:g}/s")
    seconds = backlog / spare
    return Forecast(seconds, f"{backlog:,.0f} messages at {spare:g}/s spare: {seconds / 60:,.1f} min")



def ramp_forecast(backlog: float | None, arrival_per_second: float | None, per_batch: float | None, start_cap: int,
                  step: int, top: int, constants: Constants = DEFAULTS, horizon_seconds: float = 14 * 86400) -> Forecast:
    """Time to drain if the controller raises as it would with the downstream keeping up:
    from `start_cap`, one raise by `raise_to` (the rule `decide` uses: slow start, every
    signal at its baseline) every `raise_interval_seconds`, up to the ceiling `top`, each
    batch consuming `per_batch` messages a second. An upper bound on the speed: a
    downstream with a knee below the ceiling stops the raises earlier, and the measured
    forecast (`measured_forecast`) then tells the truth."""
    for name, value in (("backlog", backlog), ("arrival rate", arrival_per_second), ("per-batch throughput", per_batch)):
        if value is None:
            return Forecast(None, f"no forecast: {name} unknown")
        if not math.isfinite(value) or value < 0:
            return Forecast(None, f"no forecast: {name} {value!r} is impossible")
    if per_batch * top <= arrival_per_second:
        return Forecast(None, f"never drains: even at the ceiling ({top}) consumers {per_batch * top:g}/s are no faster "
                              f"than arrivals {arrival_per_second:g}/s")
    left, t, cap = float(backlog), 0.0, start_cap
    dt = float(constants.period_seconds)
    next_raise = constants.raise_interval_seconds
    while left > 0 and t < horizon_seconds:
        spare = per_batch * cap - arrival_per_second
        if spare > 0 and left <= spare * dt:
            t += left / spare
            left = 0.0
            break
        left -= spare * dt
        t += dt
        if cap < top and t >= next_raise:
            cap = raise_to(cap, step, False, top, constants)
            next_raise += constants.raise_interval_seconds
    if left > 0:
        return Forecast(None, f"does not drain within {horizon_seconds / 86400:g} days at up to {top} batches")
    return Forecast(t, f"{backlog:,.0f} messages from cap {start_cap}, one raise every "
                       f"{constants.raise_interval_seconds / 60:g} min ({describe_raises(step, top, constants)}) "
                       f"at {per_batch:.3g}/s a batch, "
                       f"arrivals {arrival_per_second:g}/s: {t / 60:,.1f} min if the downstream keeps up")


def measured_forecast(reading: Reading, constants: Constants = DEFAULTS) -> Forecast:
    """Time to drain at the newest period's throughput: visible ÷ (deleted − sent)."""
    period = constants.period_seconds
    visible = reading.visible.value if reading.visible is not None else None
    sent = reading.sent.value / period if reading.sent is not None else None
    deleted = reading.deleted.value / period if reading.deleted is not None else None
    if deleted is None and visible is not None and sent is not None:
        deleted = 0.0 if visible > 0 else None
    return forecast(visible, sent, deleted)


# ---- one mapping's drain, from the hold to the owner's original ------------------------

WAIT = "wait"   # the dependency is not back yet: the cap stays where engaging put it


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _when(v: str | None) -> datetime | None:
    return None if v is None else datetime.fromisoformat(v)


def _forecast_dict(f: Forecast | None) -> dict | None:
    return None if f is None else {"seconds": f.seconds, "reason": f.reason}


def _forecast_from(raw: Mapping[str, Any] | None) -> Forecast | None:
    return None if raw is None else Forecast(None if raw.get("seconds") is None else float(raw["seconds"]), str(raw["reason"]))


@dataclass(frozen=True)
class Last:
    """The newest decision, for `holdfast stage`."""

    action: str
    cap: int | None
    reasons: tuple[str, ...]
    waiting_on: tuple[str, ...]
    at: datetime


@dataclass(frozen=True)
class Drain:
    """One mapping's drain, carried between ticks (the shell keeps it in the ledger).

    `since` is the start of the hold it belongs to: evidence from before it says nothing
    about whether the dependency is back. `state` is None until the drain starts."""

    since: datetime
    facts: Facts
    state: CapState | None = None
    started_at: datetime | None = None
    ceiling: int | None = None
    forecast: Forecast | None = None    # made when the drain started
    measured: Forecast | None = None    # the newest, on measured throughput
    last: Last | None = None

    @property
    def restored(self) -> bool:
        return self.state is not None and self.state.restored

    def wanted_minute(self, constants: Constants = DEFAULTS) -> datetime | None:
        """The minute the consumer's evidence should be read for, when it is not the newest:
        a running probe's (a later minute may be published first). None: the newest."""
        if self.state is None or self.state.probe_at is None:
            return None
        return probe_minute(self.state.probe_at, constants)

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "since": self.since.isoformat(),
            "facts": self.facts.to_dict(),
            "state": None if self.state is None else self.state.to_dict(),
            "started_at": _iso(self.started_at),
            "ceiling": self.ceiling,
            "forecast": _forecast_dict(self.forecast),
            "measured": _forecast_dict(self.measured),
            "last": None if last is None else {
                "action": last.action, "cap": last.cap, "reasons": list(last.reasons),
                "waiting_on": list(last.waiting_on), "at": last.at.isoformat(),
            },
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Drain":
        try:
            last = raw.get("last")
            return cls(
                since=datetime.fromisoformat(raw["since"]),
                facts=Facts.from_dict(raw["facts"]),
                state=None if raw.get("state") is None else CapState.from_dict(raw["state"]),
                started_at=_when(raw.get("started_at")),
                ceiling=None if raw.get("ceiling") is None else int(raw["ceiling"]),
                forecast=_forecast_from(raw.get("forecast")),
                measured=_forecast_from(raw.get("measured")),
                last=None if last is None else Last(
                    str(last["action"]), None if last.get("cap") is None else int(last["cap"]),
                    tuple(last.get("reasons", ())), tuple(last.get("waiting_on", ())), datetime.fromisoformat(last["at"]),
                ),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"drain record is malformed: {err}") from err


@dataclass(frozen=True)
class Step:
    """What one tick does to one mapping. `cap` is the MaximumConcurrency to have in
    force; None with WAIT (leave the mapping as it is) and with RESTORE (the owner's
    original comes back, cap or none)."""

    action: str
    cap: int | None
    reasons: tuple[str, ...]
    waiting_on: tuple[str, ...]
    drain: Drain

    @property
    def restore(self) -> bool:
        return self.action == RESTORE


def advance(drain: Drain, reading: Reading, current_cap: int | None, now: datetime,
            constants: Constants = DEFAULTS, *, fallback: bool = False) -> Step:
    """One tick of one mapping's drain: wait for its dependency, start, then decide.

    `current_cap` is the MaximumConcurrency in force now (what engaging left: the floor,
    or the owner's lower cap); the drain starts from the higher of it and the pre-event
    concurrency. `fallback`: see `dependency_back`."""
    measured = measured_forecast(reading, constants)

    def step(action, cap, reasons, waiting, new: Drain) -> Step:
        last = Last(action, cap, tuple(reasons), tuple(waiting), now)
        return Step(action, cap, tuple(reasons), tuple(waiting), replace(new, measured=measured, last=last))

    if drain.state is None:
        back, why = dependency_back(drain.facts, reading, drain.since, now, constants, fallback=fallback)
        if not back:
            return step(WAIT, None, ("drain not started: " + "; ".join(why),), ("evidence that the dependency is back",), drain)
        begin = current_cap if isinstance(current_cap, int) and current_cap >= 1 else constants.floor
        sent = reading.sent
        arriving = None if sent is None or sent.at < drain.since else sent.value / constants.period_seconds
        d = start(drain.facts, begin, now, constants, arriving_per_second=arriving)
        judged = consumer_health(drain.facts, reading, now, constants)
        if judged.complete and judged.ratio is not None and judged.at is not None:
            # The minute that said the dependency is back, measured at the cap engaging left
            # (the floor): the consumer's own speed with the least load, for the raise band.
            d = replace(d, state=replace(d.state, ratios=((judged.at, judged.ratio, begin),)))
        per_batch = per_batch_rate(drain.facts.deleted_per_second, drain.facts.pre_event_concurrency)
        visible = None if reading.visible is None else reading.visible.value
        f = ramp_forecast(visible, drain.facts.arrival_per_second, per_batch, d.cap, d.state.step, d.ceiling, constants)
        new = replace(drain, state=d.state, started_at=now, ceiling=d.ceiling, forecast=f)
        return step(START, d.cap, why + d.reasons + (f"forecast: {f.reason}",), d.waiting_on, new)
    state, said = drain.state, None
    if not state.restored:
        state, said = state.shown(current_cap, now, timedelta(seconds=constants.period_seconds))
    d = decide(state, drain.facts, reading, now, constants)
    new = replace(drain, state=d.state, ceiling=d.ceiling)
    reasons = d.reasons if said is None else (said,) + d.reasons
    return step(d.action, None if d.restore else d.cap, reasons, d.waiting_on, new)


def constants_from(settings) -> Constants:
    """The controller's constants from Holdfast's settings (holdfast.settings.Settings: the
    drain_* keys and esm_floor); the defaults of both are the same numbers."""
    return Constants(
        raise_fraction=float(settings.drain_raise_fraction),
        raise_share_of_cap=float(settings.drain_raise_share_of_cap),
        start_steps_above=settings.drain_start_steps_above,
        cut_factor=float(settings.drain_cut_factor),
        floor=settings.esm_floor,
        caught_up_slack_seconds=float(settings.drain_caught_up_slack_seconds),
        restore_after_seconds=60.0 * settings.drain_restore_after_minutes,
        remember_alarm_seconds=60.0 * settings.drain_remember_alarm_minutes,
        stale_seconds=60.0 * settings.drain_stale_minutes,
        slow_start_factor=float(settings.drain_slow_start_factor),
        duration_warning_ratio=float(settings.drain_duration_warning_ratio),
        duration_critical_ratio=float(settings.drain_duration_critical_ratio),
        timeout_warning_share=float(settings.drain_timeout_warning_share),
        timeout_critical_share=float(settings.drain_timeout_critical_share),
        failure_critical_slack=float(settings.drain_failure_critical_share),
        warning_step_back=float(settings.drain_warning_step_back),
    )
