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

from holdfast.core.drain.constants import (
    ALARM,
    CRITICAL,
    CUT,
    DEFAULTS,
    HOLD,
    INSUFFICIENT_DATA,
    LAMBDA_MAX_CONCURRENCY,
    LAMBDA_MIN_CAP,
    RAISE,
    RESTORE,
    START,
    WARNING,
    Constants,
)
from holdfast.core.drain.evidence import (
    GOOD,
    UNKNOWN,
    Health,
    _ignored,
    consumer_health,
    errors_above,
    lower,
    noise,
    own_speed,
    raise_below,
    slower,
)
from holdfast.core.drain.inputs import Datapoint, Facts, Reading


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



def _remembered(state: CapState, then: int, now: datetime, c: Constants) -> int:
    """The cap raises stop below after a cut or step back from `then` (TCP's ssthresh):
    `then`, or the cap remembered from before when lower and not yet forgotten."""
    return then if state.alarmed_cap is None or _forgotten(state, now, c) else min(then, state.alarmed_cap)


def _forgotten(state: CapState, now: datetime, c: Constants) -> bool:
    return state.alarmed_at is None or (now - state.alarmed_at).total_seconds() >= c.remember_alarm_seconds
