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

    def __post_init__(self):
        checks = (
            (0 < self.raise_fraction <= 1, "raise_fraction must be in (0, 1]"),
            (isinstance(self.raise_min, int) and self.raise_min >= 1, "raise_min must be an integer ≥ 1"),
            (0 < self.cut_factor < 1, "cut_factor must be in (0, 1)"),
            (isinstance(self.floor, int) and LAMBDA_MIN_CAP <= self.floor <= LAMBDA_MAX_CONCURRENCY, "floor must be an integer from 2 to 1000"),
            (self.caught_up_slack_seconds >= 0, "caught_up_slack_seconds must be ≥ 0"),
            (self.restore_after_seconds >= 0, "restore_after_seconds must be ≥ 0"),
            (isinstance(self.period_seconds, int) and self.period_seconds > 0, "period_seconds must be a positive integer"),
            (self.stale_seconds > 0, "stale_seconds must be > 0"),
            (self.history_seconds >= self.stale_seconds, "history_seconds must be ≥ stale_seconds"),
            (self.remember_alarm_seconds >= 0, "remember_alarm_seconds must be ≥ 0"),
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


@dataclass(frozen=True)
class Reading:
    """One tick's observations of the mapping. None: no datapoint."""

    oldest_age: Datapoint | None
    visible: Datapoint | None
    errors: Datapoint | None
    throttles: Datapoint | None
    downstream: tuple[Alarm, ...] = ()


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

    def __post_init__(self):
        if not self.history:
            raise ValueError("cap state: history must hold at least the cap in force")
        if self.history[-1][1] != self.cap:
            raise ValueError(f"cap state: cap {self.cap} is not the last in its history ({self.history[-1][1]})")
        if any(b[0] < a[0] for a, b in zip(self.history, self.history[1:])):
            raise ValueError("cap state: history is not in time order")
        if not (isinstance(self.step, int) and self.step >= 1):
            raise ValueError(f"cap state: step {self.step!r} must be an integer ≥ 1")

    @property
    def in_force_since(self) -> datetime:
        return self.history[-1][0]

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


def start(facts: Facts, current_cap: int, now: datetime, constants: Constants = DEFAULTS) -> CapDecision:
    """The first decision of a drain: the cap to start from and the state to carry."""
    if not (isinstance(current_cap, int) and current_cap >= 1):
        raise ValueError(f"current cap {current_cap!r} must be a positive integer")
    top, top_why = ceiling(facts, constants)
    reasons = []
    if facts.pre_event_concurrency is None:
        begin = current_cap
        reasons.append(f"no pre-event ConcurrentExecutions: starting from the cap in force ({current_cap})")
    else:
        begin = max(current_cap, math.ceil(facts.pre_event_concurrency))
        reasons.append(f"starting from the consumer's pre-event concurrency ({facts.pre_event_concurrency:g})")
    low = _floor(facts, constants)
    if begin > top:
        reasons.append(f"held to the {top_why} ({top})")
    begin = max(low, min(begin, top))
    step = max(constants.raise_min, math.ceil(constants.raise_fraction * begin))
    state = CapState(cap=begin, step=step, history=((now, begin),), prior_cap=current_cap)
    reasons.append(f"cap {begin}, raised by {step} per fresh OK datapoint up to {top}")
    return CapDecision(START, begin, False, tuple(reasons), state, top)


def decide(state: CapState, facts: Facts, reading: Reading, now: datetime, constants: Constants = DEFAULTS) -> CapDecision:
    """The next cap for one mapping, from its state and this tick's reading."""
    c = constants
    top, top_why = ceiling(facts, c)
    low = _floor(facts, c)
    period = timedelta(seconds=c.period_seconds)

    def out(action, cap, reasons, *, waiting=(), restore=False, **changes) -> CapDecision:
        new = state
        if cap != state.cap:
            horizon = now - timedelta(seconds=c.history_seconds)
            history = state.history + ((now, cap),)
            prior = state.prior_cap
            while len(history) > 1 and history[1][0] <= horizon:
                prior = history[0][1]
                history = history[1:]
            new = replace(new, cap=cap, history=history, prior_cap=prior)
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

    # 1. A downstream alarm on a datapoint not yet acted on: cut, from the cap of then.
    critical = [a for a in reading.downstream if a.severity == CRITICAL and a.state == ALARM]
    new_alarms = [a for a in critical if a.measured_at is not None and (state.acted_through is None or a.measured_at > state.acted_through)]
    if new_alarms:
        newest = max(a.measured_at for a in new_alarms)
        then = max(state.cap_during(a.measured_at, a.measured_at + period) for a in new_alarms)
        target = max(low, int(then * c.cut_factor))
        names = ", ".join(sorted(a.name for a in new_alarms))
        stamp = newest.isoformat()
        remembered = then if state.alarmed_cap is None or _forgotten(state, now, c) else min(then, state.alarmed_cap)
        if target < cap:
            return out(CUT, target, clamp + [
                f"{names} in ALARM on the datapoint of {stamp}, measured at cap {then}: cut to {target} (× {c.cut_factor:g}); "
                f"raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
            ], acted_through=newest, caught_up_since=None, alarmed_cap=remembered, alarmed_at=now)
        return out(CUT if clamp else HOLD, cap, clamp + [
            f"{names} in ALARM on the datapoint of {stamp}, measured at cap {then}: the cut from it ({target}) is already in force (cap {cap}); no second cut"
        ], waiting=["a datapoint measured at the current cap"], acted_through=newest, caught_up_since=None)
    if clamp:
        return out(CUT, cap, clamp, caught_up_since=None)

    # 2. Alarms still in ALARM on datapoints already acted on, or with no datapoint time.
    holds, waiting = [], []
    for a in critical:
        if a.measured_at is None:
            holds.append(f"{a.name} in ALARM with no datapoint time: cannot tell which cap it measured; not raising")
        else:
            holds.append(f"{a.name} still in ALARM on the datapoint of {a.measured_at.isoformat()}, already acted on")
        waiting.append(f"a newer datapoint of {a.name}")

    # 3. Missing or stale inputs: hold, saying which.
    for a in reading.downstream:
        if a.state is None:
            holds.append(f"alarm {a.name} does not exist: not raising")
            waiting.append(f"alarm {a.name}")
        elif a.state == INSUFFICIENT_DATA:
            holds.append(f"alarm {a.name} has INSUFFICIENT_DATA: not raising")
            waiting.append(f"data for {a.name}")
    age = fresh(reading.oldest_age)
    if age is None:
        what = "missing" if reading.oldest_age is None else f"stale (from {reading.oldest_age.at.isoformat()})"
        holds.append(f"ApproximateAgeOfOldestMessage is {what}: not raising, not restoring")
        waiting.append("an ApproximateAgeOfOldestMessage datapoint")
    if holds and (critical or age is None):
        return out(HOLD, cap, holds, waiting=waiting)

    # 4. The queue: caught up, and for how long.
    limit = (facts.baseline_age_seconds or 0.0) + c.caught_up_slack_seconds
    visible = fresh(reading.visible)
    backlog = f", {visible.value:,.0f} visible" if visible is not None else ""
    warnings = [a for a in reading.downstream if a.severity == WARNING and a.state == ALARM]
    errors = fresh(reading.errors)
    throttles = fresh(reading.throttles)
    errors_high = errors is not None and errors.value > facts.baseline_errors
    throttled = throttles is not None and throttles.value > 0
    missing = len(holds)   # holds so far are missing alarms: they stop a raise, not a restore
    if errors_high:
        holds.append(f"function Errors {errors.value:g} above the pre-event {facts.baseline_errors:g}: not raising")
        waiting.append("Errors back at the pre-event level")
    if throttled:
        holds.append(f"function throttled ({throttles.value:g}): the cap is above what it can run; not raising")
        waiting.append("no throttles")
    for a in warnings:
        holds.append(f"warning {a.name} in ALARM: not raising")
        waiting.append(f"{a.name} back to OK")

    if age.value <= limit:
        since = state.caught_up_since or age.at
        caught = (age.at + period - since).total_seconds()
        # A missing alarm does not stop the restore: caught up at this cap, the consumer
        # needs no more than it ran at before the event. A warning or errors do.
        if caught >= c.restore_after_seconds and len(holds) == missing:
            return out(RESTORE, cap, holds + [
                f"oldest message {age.value:g} s old, within {c.caught_up_slack_seconds:g} s of its baseline for {caught:g} s: the owner's original comes back"
            ], restore=True, caught_up_since=since, restored=True)
        return out(HOLD, cap, holds + [
            f"caught up: oldest message {age.value:g} s old{backlog}, at baseline for {caught:g} of {c.restore_after_seconds:g} s before the owner's original"
        ], waiting=waiting + ["the age at baseline for the restore period"], caught_up_since=since)
    behind = f"queue behind: oldest message {age.value:g} s old{backlog}"
    if holds:
        return out(HOLD, cap, holds + [behind], waiting=waiting, caught_up_since=None)

    # 5. Raise on fresh OK evidence measured at the current cap.
    since = state.in_force_since
    if reading.downstream:
        stale = [a.name for a in reading.downstream if a.measured_at is None or a.measured_at < since]
        evidence = "every downstream alarm OK"
    else:
        stale = [] if errors is not None and errors.at >= since else ["Errors"]
        evidence = "no downstream alarm named: the function's Errors at the pre-event level"
    if stale:
        return out(HOLD, cap, [behind, f"waiting for {', '.join(stale)} on a datapoint measured at cap {cap} (in force since {since.isoformat()})"],
                   waiting=[f"a datapoint of {', '.join(stale)} measured at cap {cap}"], caught_up_since=None)
    if cap >= top:
        return out(HOLD, cap, [behind, f"at the {top_why} ({top})"], waiting=["the queue to catch up"], caught_up_since=None)
    below = None if state.alarmed_cap is None or _forgotten(state, now, c) else state.alarmed_cap - 1
    if below is not None and cap >= below:
        left = c.remember_alarm_seconds - (now - state.alarmed_at).total_seconds()
        return out(HOLD, cap, [behind, f"{evidence} at cap {cap}, one below the cap {state.alarmed_cap} that alarmed: "
                               f"not probing it again for {left / 60:.0f} min"], waiting=["the alarm to be forgotten"], caught_up_since=None)
    new = min(top, cap + state.step, below if below is not None else top)
    return out(RAISE, new, [behind, f"{evidence} at cap {cap}: raise to {new}"], caught_up_since=None)


def _forgotten(state: CapState, now: datetime, c: Constants) -> bool:
    return state.alarmed_at is None or (now - state.alarmed_at).total_seconds() >= c.remember_alarm_seconds


def dependency_back(facts: Facts, reading: Reading, since: datetime, now: datetime, constants: Constants = DEFAULTS) -> tuple[bool, tuple[str, ...]]:
    """Whether the consumer's own evidence says its dependency is back: every downstream
    alarm OK on a datapoint measured after `since` (when the hold began), and the function's
    Errors at or below their pre-event level. The drain starts on this, not on the launch verdict."""
    period = timedelta(seconds=constants.period_seconds)
    stale_before = now - period - timedelta(seconds=constants.stale_seconds)
    reasons, back = [], True
    for a in reading.downstream:
        if a.state != OK:
            back = False
            reasons.append(f"alarm {a.name} is {a.state or 'missing'}")
        elif a.measured_at is None or a.measured_at < since:
            back = False
            reasons.append(f"alarm {a.name} OK only on a datapoint from before the hold")
    errors = reading.errors
    if errors is None or errors.at < since or errors.at < stale_before:
        if not reading.downstream:
            back = False
            reasons.append("no downstream alarm named and no Errors datapoint since the hold: no evidence the dependency is back")
        else:
            reasons.append("no Errors datapoint since the hold (no invocations): judged on the downstream alarms")
    elif errors.value > facts.baseline_errors:
        back = False
        reasons.append(f"function Errors {errors.value:g} above the pre-event {facts.baseline_errors:g}")
    if back:
        reasons.insert(0, "dependency back: " + ("downstream alarms OK" if reading.downstream else "function Errors at the pre-event level"))
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
