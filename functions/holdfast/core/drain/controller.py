"""The drain's cap controller: one SQS event source mapping's MaximumConcurrency during
the drain, decided from what the downstream delivers. Pure: stdlib only, no clock (`now`
is an argument), no AWS SDK; the state carried between ticks is plain data (`CapState`).

The rule, written once here and explained in docs/drain.md:

- **Judge by goodput, not by the distance from a baseline.** A raise is judged by how the
  messages deleted per whole minute answered it (`paid`): in proportion, the search goes
  on whatever the time per message did; flat while the time per message or the failures
  rose, it is past the downstream's useful capacity and steps back (Little's law: to the
  concurrency that carries that goodput at the lower cap's speed).
- **Latency limits are absolute**: the owner's alarms when named (a critical one cuts and
  is remembered, a warning ends the slow start), else a share of the function's timeout
  and of the client's (evidence).
- **Never stall below the arrivals**: no hold or cut goes below what the arrivals need at
  today's speed, nor below what the downstream carried before the event, unless failures
  are critical.
- **Start** one step above the pre-event concurrency and **slow-start** by one-minute
  probes until the downstream queues (HyStart), then additive steps; **restore** the
  owner's original once the oldest message has been back at its baseline for the restore
  period.
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
    OK,
    RAISE,
    RESTORE,
    START,
    WARNING,
    Constants,
)
from holdfast.core.drain.evidence import (
    UNKNOWN,
    Health,
    _ignored,
    consumer_health,
    errors_above,
    noise,
)
from holdfast.core.drain.inputs import Datapoint, Facts, Reading


@dataclass(frozen=True)
class Measure:
    """One whole minute measured wholly at one cap: what the downstream delivered."""

    at: datetime
    cap: int
    deleted: float            # NumberOfMessagesDeleted in the minute
    seconds_per_message: float
    failure_share: float
    # The owner's critical alarm's metric in the minute, as a share of its threshold (None:
    # not reported, or not read yet): kept with the minute, since the shell reads the
    # alarm's own datapoints for the last few minutes only.
    level: float | None = None

    def to_list(self) -> list:
        out = [self.at.isoformat(), self.cap, self.deleted, self.seconds_per_message, self.failure_share]
        return out if self.level is None else out + [self.level]

    @classmethod
    def from_list(cls, raw) -> "Measure":
        at, cap, deleted, spm, share, *level = raw   # five fields in a record written before `level`
        if len(level) > 1:
            raise ValueError(f"a measure has 5 or 6 fields, got {len(raw)}")
        return cls(datetime.fromisoformat(at), int(cap), float(deleted), float(spm), float(share),
                   float(level[0]) if level else None)


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
    # Every whole minute measured wholly at one cap in the last `history_seconds`, oldest
    # first: how goodput answered each cap (`paid`).
    measures: tuple["Measure", ...] = ()
    # Limits found again at the remembered cap: each doubles how long it is remembered
    # (`remembered_for`), so a knee that stays put is not crossed every half hour.
    plateaus: int = 0

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
            "measures": [m.to_list() for m in self.measures],
            "plateaus": self.plateaus,
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
                measures=tuple(Measure.from_list(m) for m in raw.get("measures") or ()),
                plateaus=int(raw.get("plateaus") or 0),
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
    # No probe yet: a probe is judged against the cap it starts from, so that cap is
    # measured first (judged against the floor, a probe past the knee reads as paid).
    state = CapState(cap=begin, step=step, history=((now, begin),), prior_cap=current_cap)
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


# ---- the goodput rule --------------------------------------------------------------

PAID, PLATEAU, UNSURE = "paid", "plateau", "unsure"


@dataclass(frozen=True)
class Verdict:
    """How goodput answered a raise, and why; `knee`: the concurrency that carries the
    higher cap's goodput at the lower cap's time per message (Little's law)."""

    outcome: str
    reason: str
    knee: int | None = None


def at_cap(measures, cap: int, newest: int = 3) -> list[Measure]:
    """The newest `newest` measures taken at `cap`."""
    return [m for m in measures if m.cap == cap][-newest:]


def reference(measures, cap: int, facts: Facts) -> list[Measure]:
    """What a raise to `cap` is judged against: the measures of the highest cap below it by
    more than the noise ([] when none was measured)."""
    below = [m.cap for m in measures if m.cap * (1 + noise(facts)) < cap]
    return at_cap(measures, max(below)) if below else []


def _mean(measures, attribute: str) -> float:
    return sum(getattr(m, attribute) for m in measures) / len(measures)


def paid(lower: list[Measure], higher: list[Measure], facts: Facts, constants: Constants = DEFAULTS) -> Verdict:
    """The drain's one rule: did the raise from `lower`'s cap to `higher`'s pay?

    Paid: deletions rose by at least `pay_share` of the raise's proportion — whatever the
    time per message did (more load, more latency, more throughput is a healthy downstream;
    Kleinrock's power, goodput ÷ delay, is greatest where a raise's goodput grows by half
    its proportion). A plateau: deletions rose less, and the time per message or the
    failure share rose beyond the noise — past the downstream's useful capacity. Neither
    (deletions flat at the same speed: a queue too short to fill the cap, or noise): unsure."""
    c = constants
    c_lo, c_hi = lower[0].cap, higher[0].cap
    d_lo, d_hi = _mean(lower, "deleted"), _mean(higher, "deleted")
    s_lo, s_hi = _mean(lower, "seconds_per_message"), _mean(higher, "seconds_per_message")
    f_lo, f_hi = _mean(lower, "failure_share"), _mean(higher, "failure_share")
    gain = (d_hi / d_lo - 1) / (c_hi / c_lo - 1) if d_lo > 0 else (1.0 if d_hi > 0 else 0.0)
    knee = math.floor(d_hi / c.period_seconds * s_lo) if s_lo > 0 else None
    said = (f"cap {c_lo} -> {c_hi}: deletions {d_lo:,.0f} -> {d_hi:,.0f} a minute ({gain:.0%} of the raise's "
            f"proportion), {s_lo * 1000:,.0f} -> {s_hi * 1000:,.0f} ms per message")
    if gain >= c.pay_share:
        return Verdict(PAID, f"{said}: the raise paid", knee)
    # The bar for "slower": the noise of the difference of two means of one-minute figures
    # (each spreads `noise` ÷ √minutes), so a noisy consumer's single minute at the higher
    # cap is not read as a knee; a quiet one's (noise 1 %) is judged as before.
    bar = noise(facts) * max(1.0, math.sqrt(1 / len(lower) + 1 / len(higher)) * 1.5)
    if s_hi > s_lo * (1 + bar) or f_hi > f_lo + c.error_share_slack:
        return Verdict(PLATEAU, f"{said}: the raise did not pay, the time per message or the failures rose (past the "
                                f"downstream's useful capacity)", knee)
    return Verdict(UNSURE, f"{said}: unsure (the same speed: a queue too short to fill the cap, or noise)", knee)


def slow_start_exit(facts: Facts, constants: Constants = DEFAULTS) -> float:
    """How far above the drain's fastest minute a paid probe's time per message ends the slow
    start: `slow_start_exit_rise`, and 3 × the noise for a noisy consumer."""
    return max(constants.slow_start_exit_rise, 3 * noise(facts))


def step_share(facts: Facts, constants: Constants = DEFAULTS) -> float:
    """An additive raise's least share of the cap: `raise_share_of_cap`, and wide enough
    (3 × the noise) that the goodput's answer shows beyond a noisy consumer's spread."""
    return max(constants.raise_share_of_cap, 3 * noise(facts))


def shrank(measures, cap: int, minute: datetime, facts: Facts, constants: Constants = DEFAULTS) -> bool:
    """Whether the downstream itself shrank under `cap`: its newest minute there, up to the
    one that crossed the limit, ran each message more than `slow_start_exit` slower than
    the same cap did in an earlier minute (the consumer's minute may be read before the
    alarm's, or after it). A cut then is multiplicative (TCP's decrease on loss), not back to the
    cap measured below, which was measured in the old downstream: a walk down that ladder
    costs a datapoint over the limit a step. A noisy minute, or a neighbour's burst, that
    crosses at the same speed still steps back to the cap below."""
    here = [m for m in measures if m.cap == cap and m.at <= minute]
    if len(here) < 2:
        return False
    newest = max(here, key=lambda m: m.at)
    before = min(m.seconds_per_message for m in here if m.at < newest.at)
    return newest.seconds_per_message > before * (1 + slow_start_exit(facts, constants))


def known_good(measures, facts: Facts, constants: Constants = DEFAULTS) -> int | None:
    """The highest cap whose newest minute, in the history kept, ran at the drain's best:
    each message within `slow_start_exit` of the fastest minute and each batch deleting
    within it of the most any cap did. Below it, raises climb back by slow-start probes
    (TCP's slow start up to ssthresh): after the downstream failed and came back, the caps
    it carried before are found again in a few probes, not one additive step at a time.
    None: no such cap."""
    if not measures:
        return None
    rise = slow_start_exit(facts, constants)
    fastest = min(m.seconds_per_message for m in measures)
    best = max(m.deleted / m.cap for m in measures)
    newest = {m.cap: m for m in measures}
    good = [c for c, m in newest.items()
            if m.seconds_per_message <= fastest * (1 + rise) and m.deleted / c >= best / (1 + rise)]
    return max(good, default=None)


def climb(cap: int, step: int, additive: bool, top: int, good: int | None, constants: Constants = DEFAULTS) -> int:
    """`raise_to`, with slow-start steps wherever the cap is below `known_good`, up to it."""
    if additive and good is not None and cap < good:
        return min(good, raise_to(cap, step, False, top, constants))
    return raise_to(cap, step, additive, top, constants)


def critical_levels(reading: Reading) -> dict[datetime, float]:
    """Each minute's highest level among the owner's critical alarms (`Alarm.levels`)."""
    levels: dict[datetime, float] = {}
    for a in reading.downstream:
        if a.severity == CRITICAL:
            for p in a.levels:
                levels[p.at] = max(levels.get(p.at, 0.0), p.value)
    return levels


def owners_limit(measures, constants: Constants = DEFAULTS) -> tuple[int, str] | None:
    """The cap at which the owner's critical alarm's metric is expected to reach
    `owner_level_target` of its threshold, from how it rose with the goodput over the caps
    measured within it (None: no levels reported, or no rise to extrapolate — a downstream
    flat up to a wall warns of nothing).

    A queueing downstream's latency is its service time ÷ (1 − utilisation): its inverse
    falls in a straight line with the throughput, so the line through the caps' minutes
    (least squares) says at which throughput the latency reaches the target (exact for one
    server, late for many near their knee). The cap is that throughput × the time per
    message there, from its own line (Little's law)."""
    newest = {m.cap: m for m in measures if m.deleted > 0 and m.level is not None and 0 < m.level < 1}
    within = sorted(newest.values(), key=lambda m: m.cap)
    xs = [m.deleted for m in within]
    inverse = _line(xs, [1 / m.level for m in within])
    if inverse is None or inverse(1.0) >= inverse(0.0):
        return None     # one cap, or no fall to extrapolate (a wall)
    target = constants.owner_level_target
    # The throughput where the line reaches 1 ÷ target.
    x = (1 / target - inverse(0.0)) / (inverse(1.0) - inverse(0.0))
    seconds = max(within[-1].seconds_per_message, _line(xs, [m.seconds_per_message for m in within])(x))
    cap = max(1, math.floor(x / constants.period_seconds * seconds))
    return cap, (f"the owner's critical alarm's metric at {within[-1].level:.0%} of its threshold at cap {within[-1].cap}, "
                 f"rising with the goodput over {len(within)} caps: {target:.0%} of it near cap {cap}")


def _line(xs: list[float], ys: list[float]):
    """The least-squares line through the points, as a function of x (None: fewer than two
    distinct x)."""
    if len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return lambda x: my + slope * (x - mx)


def arrivals_need(reading: Reading, measures, recent: int = 10) -> int | None:
    """The cap the arrivals need: sends per minute ÷ the most deletions per cap-minute among
    the `recent` newest measures (Little's law at the best speed measured lately; a cap past
    the knee delivers less per batch and would overstate the need). Below it the backlog
    grows without end. None: unknown."""
    sent = reading.sent
    rates = [m.deleted / m.cap for m in list(measures)[-recent:] if m.deleted > 0]
    if sent is None or sent.value <= 0 or not rates:
        return None
    return math.ceil(sent.value / max(rates))


# ---- one decision, as rungs --------------------------------------------------------


@dataclass
class Tick:
    """What one decision is made from: the state (as this tick amends it), the facts and
    the reading, and what is derived from them once. Each rung reads it and returns a
    decision or None; `out` makes one."""

    state: CapState
    facts: Facts
    reading: Reading
    now: datetime
    c: Constants
    top: int
    top_why: str
    low: int
    health: Health
    cap: int
    clamp: list[str]
    probing: list[str]
    notes: list[str] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    missing: int = 0                 # holds for missing alarms: they stop a raise, not a restore
    age: Datapoint | None = None
    age_behind: bool = False         # no fresh age, but messages visible: behind
    behind: str = ""
    counted: list = field(default_factory=list)   # the downstream alarms that count as evidence
    verdict: "Verdict | None" = None              # the goodput's answer at the cap in force

    @property
    def late(self) -> bool:
        """The judged minute is older than `stale_seconds`: whole only once a long function's
        invocations ended (`inputs.whole_minute`). It still starts, holds and cuts; a raise
        waits for fresher evidence, since what a raise does is seen that much later."""
        at = self.health.at
        return at is not None and at + self.period + timedelta(seconds=self.c.stale_seconds) < self.now

    @property
    def period(self) -> timedelta:
        return timedelta(seconds=self.c.period_seconds)

    @property
    def since(self) -> datetime:
        return self.state.in_force_since

    @property
    def need(self) -> int | None:
        return arrivals_need(self.reading, self.state.measures)

    def protected(self, failures: bool = False) -> int:
        """The lowest cap a cut or step-back may go to: the floor when failures are critical;
        else what the arrivals need now and what the downstream carried before the event."""
        if failures:
            return self.low
        return min(self.top, max([self.low] + [v for v in (self.need, carried_before(self.facts, self.c)) if v]))

    def fresh(self, dp: Datapoint | None) -> Datapoint | None:
        if dp is None or dp.at + self.period + timedelta(seconds=self.c.stale_seconds) < self.now:
            return None
        return dp

    def new_datapoint(self, at: datetime | None) -> bool:
        return at is not None and (self.state.acted_through is None or at > self.state.acted_through)

    def remembered_below(self) -> int | None:
        """The highest cap a raise may set while a cap that alarmed or did not pay is
        remembered (None: nothing is). Past its time it is still remembered while the
        owner's warning alarm is in ALARM on a datapoint measured at the cap in force: the
        downstream is still near the owner's limit there, so it has not grown."""
        s = self.state
        if s.alarmed_cap is None:
            return None
        if not _forgotten(s, self.now, self.c) or self.warned_here():
            return s.alarmed_cap - 1
        return None

    def owners_end(self, nxt: int) -> int:
        """A slow-start probe to `nxt`, unless it would pass the owner's limit as the rise of
        their critical alarm's metric puts it (`owners_limit`): then the slow start ends, at
        that limit, and the search goes on in additive steps."""
        owner = owners_limit(self.state.measures, self.c)
        if owner is None or owner[0] >= nxt:
            return nxt
        self.state = replace(self.state, additive=True)
        self.notes.append(f"{owner[1]}: the slow start ends")
        return owner[0]

    def warned_here(self) -> bool:
        """The owner's warning alarm in ALARM on a datapoint measured wholly at the cap in force."""
        return any(a.severity == WARNING and a.state == ALARM and a.measured_at is not None
                   and a.measured_at >= self.since for a in self.reading.downstream)

    def out(self, action, cap, reasons, *, waiting=(), restore=False, **changes) -> CapDecision:
        state, now, c = self.state, self.now, self.c
        new = state
        reasons = self.probing + list(reasons)
        if action in (CUT, RESTORE) and "probe_at" not in changes:
            changes.update(probe_at=None, probe_from=None)
        if cap != state.cap:
            horizon = now - timedelta(seconds=c.history_seconds)
            history = state.history + ((now, cap),)
            prior = state.prior_cap
            while len(history) > 1 and history[1][0] <= horizon:
                prior = history[0][1]
                history = history[1:]
            new = replace(new, cap=cap, history=history, prior_cap=prior, warned_at=None)
        if changes:
            new = replace(new, **changes)
        return CapDecision(action, cap, restore, tuple(reasons), new, self.top, tuple(waiting))

    def keep_up(self, cap: int, reasons: list[str], **changes) -> CapDecision | None:
        """A hold below what the arrivals need is a backlog that grows without end: raise
        towards the need instead, a step at a time (None: `cap` carries the arrivals)."""
        need = self.need
        if need is None or cap >= need or cap >= self.top:
            return None
        up = min(self.top, need, cap + max(self.state.step, math.floor(step_share(self.facts, self.c) * cap)))
        return self.out(RAISE, up, reasons + [f"cap {cap} is below what the arrivals need at today's speed ({need}): "
                                              f"raised to {up}"], caught_up_since=None, **changes)


def _tick(state: CapState, facts: Facts, reading: Reading, now: datetime, c: Constants) -> Tick:
    top, top_why = ceiling(facts, c)
    period = timedelta(seconds=c.period_seconds)
    probing = []
    if state.probe_at is not None and state.cap == state.probe_cap and not state.restored:
        minute = probe_minute(state.probe_at, c)
        if now >= minute + period:
            # The probe has had its whole minute: back to the cap it started from until
            # that minute's datapoints are published and judged.
            probing.append(f"probe at {state.cap} had the minute of {minute.isoformat()}: back to {state.probe_from} "
                           f"until that minute is judged")
            state = replace(state, cap=state.probe_from, history=state.history + ((now, state.probe_from),))
    health = consumer_health(facts, reading, now, c)
    if health.complete and health.at is not None and all(m.at != health.at for m in state.measures):
        measured = state.cap_wholly(health.at, health.at + period)
        if measured is not None:
            horizon = now - timedelta(seconds=c.history_seconds)
            kept = tuple(m for m in state.measures if m.at > horizon)
            state = replace(state, measures=kept + (Measure(health.at, measured, health.deleted,
                                                            health.seconds_per_message, health.failure_share or 0.0),))
    levels = critical_levels(reading)
    if any(m.level is None and m.at in levels for m in state.measures):
        state = replace(state, measures=tuple(replace(m, level=levels[m.at]) if m.level is None and m.at in levels else m
                                              for m in state.measures))
    notes = []
    invocation = mean_invocation(reading, health.at)
    if not state.additive and invocation is not None and invocation > c.period_seconds:
        # A probe's batches run as long as an invocation, not one minute: × slow_start_factor
        # would hold the downstream past its knee for minutes before its minute is judged.
        state = replace(state, additive=True)
        notes.append(f"invocations last {invocation / 60:.1f} min, longer than the minute a probe is judged on: "
                     f"raises in additive steps, no slow start")
    cap, clamp = state.cap, []
    if cap > top:
        clamp, cap = [f"cap {cap} is above the {top_why} ({top}): lowered to it"], top
    return Tick(state, facts, reading, now, c, top, top_why, _floor(facts, c), health, cap, clamp, probing, notes)


def mean_invocation(reading: Reading, at: datetime | None) -> float | None:
    """The mean invocation's seconds in the judged minute (Duration's sum ÷ Invocations), or
    None when that minute has either missing."""
    duration, invocations = reading.duration, reading.invocations
    if at is None or duration is None or invocations is None or duration.at != at or invocations.at != at:
        return None
    return duration.value / 1000.0 / invocations.value if invocations.value > 0 else None


def _restored(k: Tick) -> CapDecision | None:
    if k.state.restored:
        return k.out(RESTORE, k.state.cap, ["caught up earlier: the owner's original is back"], restore=True)
    return None


def _critical(k: Tick) -> CapDecision | None:
    """An owner's critical alarm, or the consumer's own evidence, critical on a datapoint not
    yet acted on: cut, from the cap in force when it was measured — never below what the
    arrivals need unless failures are critical."""
    c, state, health = k.c, k.state, k.health
    critical = [a for a in k.reading.downstream if a.severity == CRITICAL and a.state == ALARM]
    bad = [(a.measured_at, a.name) for a in critical if k.new_datapoint(a.measured_at)]
    # A datapoint of a critical alarm's metric beyond its threshold is the owner's limit
    # crossed on that minute, though the alarm (M out of N, or back to OK since) does not say.
    # Only minutes the drain's own caps measured: one from before its start is the
    # dependency's recovery at the floor, which the start already waited out.
    mine = lambda t: k.new_datapoint(t) and t >= state.history[0][0]
    crossed = [a for a in k.reading.downstream if a.severity == CRITICAL and a.state is not None
               and any(mine(t) for t in a.breached)]
    for a in crossed:
        newest = max(t for t in a.breached if mine(t))
        if all(name != a.name for _, name in bad):
            bad.append((newest, a.name))
            critical.append(a)
    own = health.level == CRITICAL and k.new_datapoint(health.at)
    if own:
        bad.append((health.at, "the consumer's own evidence (" + "; ".join(health.reasons) + ")"))
    if not bad:
        return None
    newest = max(t for t, _ in bad)
    then = max(state.cap_during(t, t + k.period) for t, _ in bad)
    failures = own and health.failures_critical
    floor = k.protected(failures)
    target, how = cut_target(then, k.low, any(name == a.name for _, name in bad for a in critical),
                             health if own else None, c)
    paid_below = reference(state.measures, then, k.facts)
    moved = shrank(state.measures, then, newest, k.facts, c)
    if not failures and paid_below and target < paid_below[0].cap < then and not moved:
        # Past the limit at `then`: back to the last cap measured below it, the one that
        # paid, rather than × cut_factor; if that one alarms too, its own cut goes further.
        # Not where the downstream itself shrank (`shrank`): the caps measured below in the
        # old one say nothing of the new one.
        target, how = paid_below[0].cap, "to the last cap measured below it"
    if target < floor:
        target, how = floor, how + (f", no lower than what the arrivals need and the downstream carried before the "
                                    f"event ({floor}): only critical failures cut below it")
    names = ", ".join(sorted(name for _, name in bad))
    stamp = newest.isoformat()
    remembered = _remembered(state, then, k.now, c)
    if own and not critical and health.knee_estimate == 0 and state.alarmed_cap is not None \
            and not _forgotten(state, k.now, c):
        # Nothing delivered at all, again, below a limit already remembered: the downstream
        # is down, which says nothing of where its knee is. The cut protects it; the limit
        # found before stays the one raises stop below.
        remembered = state.alarmed_cap
    said = f"{names} critical on the datapoint of {stamp}, measured at cap {then}"
    after = f"raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
    common = dict(acted_through=newest, caught_up_since=None, alarmed_cap=remembered, alarmed_at=k.now, additive=True,
                  plateaus=_found(state, k.now, c))
    if target < k.cap:
        return k.out(CUT, target, k.clamp + [f"{said}: cut to {target} ({how}); {after}"], **common)
    if state.probe_at is not None and newest >= probe_minute(state.probe_at, c) and then > k.cap and not k.clamp:
        # The probe's minute: the knee is between the cap it started from and the probe. Past
        # the owner's limit, nothing above the cap it started from (measured within it) is
        # kept: the additive search finds the limit in steps a tenth wide, not a guess.
        owner = any(name == a.name for _, name in bad for a in critical)
        new = k.cap if owner else max(k.cap, min(target, then - 1))
        how = "the cap the probe started from, measured within the owner's limit" if owner else how
        return k.out(CUT, new, [f"{said}, the probe's cap: the slow start ends at {new} ({how}); {after}"], **common)
    return k.out(CUT if k.clamp else HOLD, k.cap, k.clamp + [
        f"{said}: the cut from it ({target}) is already in force (cap {k.cap}); no second cut"
    ], waiting=["a datapoint measured at the current cap"], acted_through=newest, caught_up_since=None, additive=True)


def _clamped(k: Tick) -> CapDecision | None:
    return k.out(CUT, k.cap, k.clamp, caught_up_since=None) if k.clamp else None


def _gone(k: Tick) -> CapDecision | None:
    if k.reading.queue_missing:
        return k.out(RESTORE, k.cap, ["the queue does not exist (deleted?): nothing to drain; the owner's original "
                                      "comes back"], restore=True, restored=True)
    return None


def _blind(k: Tick) -> CapDecision | None:
    """Alarms still in ALARM on datapoints already acted on, alarms without data, an age
    without a datapoint: hold, saying which. An alarm that does not exist, or has had no
    data for longer than a datapoint may be late, is ignored (and said so), never waited
    for — a misnamed alarm must not deadlock the drain."""
    c, reading = k.c, k.reading
    critical = [a for a in reading.downstream if a.severity == CRITICAL and a.state == ALARM]
    for a in critical:
        if a.measured_at is None:
            k.holds.append(f"{a.name} in ALARM with no datapoint time: cannot tell which cap it measured; not raising")
        else:
            k.holds.append(f"{a.name} still in ALARM on the datapoint of {a.measured_at.isoformat()}, already acted on")
        k.waiting.append(f"a newer datapoint of {a.name}")
    if k.health.level == CRITICAL:
        k.holds.append(f"the consumer's own evidence still critical on the datapoint of {k.health.at.isoformat()}, "
                       f"already acted on: not raising")
        k.waiting.append("the consumer's own evidence no longer critical")
    ignored = _ignored(reading.downstream, k.now, c)
    for a in reading.downstream:
        if a.state == INSUFFICIENT_DATA and a.name not in ignored:
            k.holds.append(f"alarm {a.name} has INSUFFICIENT_DATA: not raising")
            k.waiting.append(f"data for {a.name}")
    age = k.fresh(reading.oldest_age)
    if age is None:
        what = "missing" if reading.oldest_age is None else f"stale (from {reading.oldest_age.at.isoformat()})"
        if reading.visible_now == 0:
            age = Datapoint(k.now - k.period, 0.0)
            ignored["(age)"] = f"ApproximateAgeOfOldestMessage is {what}; the queue is empty (GetQueueAttributes): caught up"
        elif reading.visible_now is not None and reading.visible_now > 0:
            k.age_behind = True
            ignored["(age)"] = (f"ApproximateAgeOfOldestMessage is {what}; {reading.visible_now:,} messages visible "
                                f"(GetQueueAttributes): behind")
        else:
            k.holds.append(f"ApproximateAgeOfOldestMessage is {what}: not raising, not restoring")
            k.waiting.append("an ApproximateAgeOfOldestMessage datapoint")
    k.age = age
    k.notes.extend(ignored.values())
    k.counted = [a for a in reading.downstream if a.name not in ignored]
    k.missing = len(k.holds)
    if k.holds and (critical or (age is None and not k.age_behind) or k.health.level == CRITICAL):
        return k.out(HOLD, k.cap, k.holds + k.notes, waiting=k.waiting)
    return None


def _warned(k: Tick) -> CapDecision | None:
    """Warnings (an owner's warning alarm, failures a point above their baseline, a time near
    a timeout), errors and throttles stop raises; a warning on a second datapoint at the
    same cap steps back by a small share — never below what the arrivals need. A warning on
    a probe's minute ends the slow start."""
    c, state, health, reading, cap = k.c, k.state, k.health, k.reading, k.cap
    warnings = [a for a in reading.downstream if a.severity == WARNING and a.state == ALARM]
    errors_high, errors_said = errors_above(k.facts, k.fresh(reading.errors), reading.invocations, c)
    throttles = k.fresh(reading.throttles)
    if errors_high and health.level not in (WARNING, CRITICAL):
        k.holds.append(f"{errors_said}: not raising")
        k.waiting.append("Errors back at the pre-event level")
    if throttles is not None and throttles.value > 0:
        k.holds.append(f"function throttled ({throttles.value:g}): the cap is above what it can run; not raising")
        k.waiting.append("no throttles")
    for a in warnings:
        # The owner's warning is not their limit: a database's latency passes a warning set
        # below the SLO long before the drain reaches the SLO's throughput. It ends the slow
        # start (below); the critical alarm is the limit that cuts.
        k.notes.append(f"warning {a.name} in ALARM: raises go on in additive steps, each a one-minute probe; the "
                       f"critical alarm is the limit")
    if health.level == WARNING:
        k.holds.append("the consumer's own evidence at a warning: " + "; ".join(health.reasons) + ": not raising")
        k.waiting.append("the consumer's own evidence back at its baseline")
    if state.probe_at is not None:
        minute = probe_minute(state.probe_at, c)
        on_probe = ([] if not (health.level == WARNING and health.at == minute) else ["the consumer's own evidence"])
        # The owner's warning on the probe's minute counts only where their critical alarm
        # has not judged that minute OK: once it has, the probe is within the owner's limit
        # and the goodput judges it (`_probe`).
        judged_ok = [a for a in k.counted if a.severity == CRITICAL and a.state == OK
                     and a.measured_at is not None and a.measured_at >= minute and minute not in a.breached]
        if not judged_ok:
            on_probe += [a.name for a in warnings if a.measured_at is not None and a.measured_at >= minute]
        if on_probe:
            # The knee is between the cap the probe started from and the probe: the slow
            # start ends at the concurrency that carried the probe's goodput at the lower
            # cap's speed, when its minute was measured.
            new = state.probe_from
            measured = [m for m in state.measures if m.at == minute and m.cap == state.probe_cap]
            lower = reference(state.measures, state.probe_cap, k.facts)
            knee = paid(lower, measured, k.facts, c).knee if measured and lower else None
            # The owner's critical alarm, named and not yet measured on the probe's minute,
            # judges the probe: until then nothing above the cap it started from is kept.
            unjudged = [a.name for a in k.counted if a.severity == CRITICAL
                        and (a.measured_at is None or a.measured_at < minute)]
            if knee is not None and not unjudged:
                new = max(new, min(state.probe_cap - 1, knee))
            if state.alarmed_cap is not None and state.alarmed_cap <= state.probe_cap:
                # A cap that alarmed before, memory spent or not, lies within the probe: the
                # slow start ends below it.
                new = max(state.probe_from, min(new, state.alarmed_cap - 1))
            new = max(k.low, min(new, k.top))
            return k.out(HOLD if new == cap else RAISE if new > cap else CUT, new, k.holds + k.notes + [
                f"a warning ({', '.join(on_probe)}) measured at or after the probe's minute at cap {state.probe_cap}: "
                f"the slow start ends at {new}"
            ], waiting=k.waiting, caught_up_since=None, additive=True, probe_at=None, probe_from=None, warned_at=None)
    if warnings and not state.additive and not any(a.severity == CRITICAL for a in k.counted):
        # The owner's warning, where it is their only limit named, ends the slow start. Where
        # their critical alarm is named it is the limit: the slow start ends on a probe the
        # warning caught before the critical judged it (above), on the HyStart rise, or at
        # the critical itself.
        k.state = state = replace(state, additive=True)
    warned = []
    if health.level == WARNING and health.at is not None and health.at >= k.since:
        warned.append(health.at)
    if not warned:
        return None
    newest = max(warned)
    if state.warned_at is None:
        k.state = replace(state, warned_at=newest, additive=True, probe_at=None, probe_from=None)
        return None
    if newest <= state.warned_at:
        return None
    back = max(k.protected(), cap - max(1, math.ceil(c.warning_step_back * cap)))
    if back >= cap:
        k.notes.append(f"a warning persists at cap {cap}, no more than what the arrivals need and the downstream "
                       f"carried before the event ({k.protected()}): held there")
        return None
    remembered = _remembered(state, cap, k.now, c)
    return k.out(CUT, back, k.holds + k.notes + [
        f"a warning on a second datapoint measured at cap {cap} (of {newest.isoformat()}): stepped back by "
        f"{c.warning_step_back:.0%} to {back}; raises stop below {remembered} for {c.remember_alarm_seconds / 60:g} min"
    ], waiting=k.waiting, caught_up_since=None, additive=True, alarmed_cap=remembered, alarmed_at=k.now)


def _caught_up(k: Tick) -> CapDecision | None:
    """The queue back at its baseline: held until it has stayed so for the restore period,
    then the owner's original. Behind: the holds so far decide."""
    c, facts, reading = k.c, k.facts, k.reading
    limit = (facts.baseline_age_seconds or 0.0) + c.caught_up_slack_seconds
    visible = k.fresh(reading.visible)
    backlog = f", {visible.value:,.0f} visible" if visible is not None else ""
    age = k.age
    caught_visible = True
    if visible is not None and facts.baseline_visible is not None:
        room = facts.baseline_visible * 2 + (facts.arrival_per_second or 0.0) * c.caught_up_slack_seconds + 10
        caught_visible = visible.value <= room
    if not k.age_behind and age.value <= limit and not caught_visible:
        k.notes.append(f"oldest message {age.value:g} s old but {visible.value:,.0f} visible, more than the baseline "
                       f"{facts.baseline_visible:,.0f} allows (messages received three times or more leave the age): "
                       f"behind")
    if not k.age_behind and age.value <= limit and caught_visible:
        since_caught = k.state.caught_up_since or age.at
        caught = (age.at + k.period - since_caught).total_seconds()
        # A missing alarm does not stop the restore: caught up at this cap, the consumer
        # needs no more than it ran at before the event. A warning or errors do.
        warned = [a.name for a in reading.downstream if a.severity == WARNING and a.state == ALARM]
        if warned:
            k.holds.append(f"warning {', '.join(warned)} in ALARM: the owner's original waits for it")
            k.waiting.append("the warning back to OK")
        if caught >= c.restore_after_seconds and len(k.holds) == k.missing:
            return k.out(RESTORE, k.cap, k.holds + k.notes + [
                f"oldest message {age.value:g} s old, within {c.caught_up_slack_seconds:g} s of its baseline for "
                f"{caught:g} s: the owner's original comes back"
            ], restore=True, caught_up_since=since_caught, restored=True)
        return k.out(HOLD, k.cap, k.holds + k.notes + [
            f"caught up: oldest message {age.value:g} s old{backlog}, at baseline for {caught:g} of "
            f"{c.restore_after_seconds:g} s before the owner's original"
        ], waiting=k.waiting + ["the age at baseline for the restore period"], caught_up_since=since_caught)
    k.behind = (f"queue behind: {reading.visible_now:,} messages visible, age unknown" if k.age_behind
                else f"queue behind: oldest message {age.value:g} s old{backlog}")
    if k.holds:
        reasons = k.holds + k.notes + [k.behind]
        return (k.keep_up(k.cap, reasons, additive=True) if k.health.level != CRITICAL else None) or k.out(
            HOLD, k.cap, reasons, waiting=k.waiting, caught_up_since=None)
    if k.health.level == UNKNOWN:
        return k.out(HOLD, k.cap, k.notes + [k.behind, "; ".join(k.health.reasons) + ": not raising"],
                     waiting=["NumberOfMessagesReceived, NumberOfMessagesDeleted and Duration of a whole minute with "
                              "messages"], caught_up_since=None)
    return None


def _probe(k: Tick) -> CapDecision | None:
    """A slow-start probe: judged on its own minute, against the highest cap measured below
    it. Paid: kept, and the next probe goes up from it. A plateau: the slow start ends at
    the concurrency that carried the probe's goodput at the lower cap's speed. Unsure: it
    ends at the cap the probe started from."""
    c, state, health = k.c, k.state, k.health
    if state.probe_at is None:
        return None
    minute = probe_minute(state.probe_at, c)
    tried = state.probe_cap
    if health.at is None or health.at < minute:
        return k.out(HOLD, k.cap, k.notes + [k.behind, f"waiting for the probe's minute ({minute.isoformat()}, at cap "
                                                        f"{tried})"],
                     waiting=[f"the datapoints of {minute.isoformat()}"], caught_up_since=None)
    measured = [m for m in state.measures if m.at == minute and m.cap == tried]
    unmeasured = [a.name for a in k.counted if a.measured_at is None or a.measured_at < minute]
    if measured and unmeasured:
        return k.out(HOLD, k.cap, k.notes + [k.behind, f"the probe at cap {tried} judged on its own evidence; waiting "
                                                        f"for {', '.join(unmeasured)} on a datapoint of its minute"],
                     waiting=[f"a datapoint of {', '.join(unmeasured)} of {minute.isoformat()} or later"],
                     caught_up_since=None)
    if not measured:
        k.notes.append(f"the probe at cap {tried} could not be judged on its own minute: probing again")
        k.state = replace(state, probe_at=None, probe_from=None)
        return None
    # Judged against the cap it started from, measured just before it; a cap measured
    # earlier between the two (a step back) is too close to the probe to tell it apart.
    started = at_cap(state.measures, state.probe_from) if state.probe_from < tried else []
    lower = started or reference(state.measures, tried, k.facts)
    verdict = (paid(lower, measured, k.facts, c) if lower else
               Verdict(UNSURE, f"no cap below {tried} measured to judge the probe against"))
    below = k.remembered_below()
    if verdict.outcome == PAID:
        if state.alarmed_cap is not None and tried >= state.alarmed_cap:
            k.state = state = replace(state, plateaus=0)   # past the cap that did not pay: the downstream grew
        fastest = min(m.seconds_per_message for m in state.measures)
        rise = slow_start_exit(k.facts, c)
        if not state.additive and measured[-1].seconds_per_message > fastest * (1 + rise):
            # Paid, but each message takes longer than the fastest minute of the drain: the
            # downstream is queueing, its capacity near. The slow start ends here (TCP's
            # HyStart on a rising round trip); the search goes on in additive steps.
            k.notes.append(f"the probe at {tried} paid with each message {measured[-1].seconds_per_message * 1000:,.0f} "
                           f"ms, more than {rise:.0%} over the drain's fastest {fastest * 1000:,.0f} ms: the slow "
                           f"start ends, raises go on in additive steps")
            k.state = state = replace(state, additive=True)
            # What the probe delivered, the cap it started from carries at its speed with
            # fewer batches (Little's law): the batches above that only queue (BBR's drain
            # after its startup, to the bandwidth-delay product). The slow start ends there,
            # and the additive search goes on from it.
            drained = tried if verdict.knee is None or verdict.knee >= tried else max(state.probe_from, verdict.knee)
            if drained < tried:
                return k.out(RAISE if drained > k.cap else HOLD, drained, k.notes + [
                    k.behind, f"the probe: {verdict.reason}: the slow start ends at {drained}, the concurrency that "
                              f"carries the probe's goodput at {state.probe_from}'s speed; the batches above it only "
                              f"queue"], caught_up_since=None, probe_at=None, probe_from=None)
        good = known_good(state.measures, k.facts, c)
        nxt = min(climb(tried, state.step, state.additive, k.top, good, c), below if below is not None else k.top)
        if not state.additive:
            nxt = max(tried, k.owners_end(nxt))
            state = k.state
        if k.late:
            nxt = tried     # kept, but no further probe on evidence that late (`Tick.late`)
        elif state.additive:
            nxt = min(k.top, max(nxt, tried + math.floor(step_share(k.facts, c) * tried)),
                      below if below is not None else k.top)
        if nxt > tried:
            return k.out(RAISE, nxt, k.notes + [k.behind, f"the probe: {verdict.reason}: probing {nxt} for one "
                                                          f"minute, then back to {tried}"],
                         caught_up_since=None, probe_at=k.now, probe_from=tried)
        return k.out(RAISE, tried, k.notes + [k.behind, f"the probe: {verdict.reason}: cap {tried}"],
                     caught_up_since=None, probe_at=None, probe_from=None)
    new = state.probe_from
    if verdict.outcome == PLATEAU and verdict.knee is not None:
        new = max(new, min(tried - 1, verdict.knee))
    new = max(k.low, min(new, k.top))
    changes = dict(caught_up_since=None, additive=True, probe_at=None, probe_from=None)
    if verdict.outcome == PLATEAU:
        changes.update(alarmed_cap=tried, alarmed_at=k.now, plateaus=_found(state, k.now, c))
    return k.out(RAISE if new > k.cap else HOLD, new, k.notes + [k.behind, f"the probe: {verdict.reason}: the slow "
                                                                          f"start ends at {new}"], **changes)


def _slowed(k: Tick) -> CapDecision | None:
    """The downstream slowed under a cap that has not moved (its capacity dropped: a
    failover to a smaller replica, a neighbour's load): the newest minute at the cap in
    force delivers less, each message taking longer, than the first did. Back to the
    concurrency that carries today's goodput at that first minute's speed (Little's law) —
    never below what the arrivals need, nor below what the downstream carried before."""
    cap = k.cap
    here = [m for m in k.state.measures if m.cap == cap and m.at >= k.since]
    if len(here) < 2 or k.state.probe_at is not None:
        return None
    # The earlier half of the minutes at this cap against the later half: a mean of k
    # minutes spreads 1/√k as far as one minute, so the bar is 2 × the noise × √(2/k) —
    # a single minute each (k = 1) must differ by 2.8 × the noise, a noisy consumer's
    # minute-to-minute spread is not read as a downstream that moved.
    half = len(here) // 2
    first, newest = _mean_measure(here[:half]), _mean_measure(here[half:])
    n = noise(k.facts) * math.sqrt(2 / half)
    if (k.state.alarmed_cap is not None and newest.seconds_per_message < first.seconds_per_message * (1 - 2 * n)
            and newest.deleted >= first.deleted * (1 - n)):
        # Faster at the same cap: the downstream grew (a replica added, a neighbour gone).
        # The cap that did not pay is forgotten, and the search goes on at once.
        k.notes.append(f"at cap {cap} the downstream got faster ({first.seconds_per_message * 1000:,.0f} -> "
                       f"{newest.seconds_per_message * 1000:,.0f} ms per message): the cap {k.state.alarmed_cap} that "
                       f"did not pay is forgotten")
        k.state = replace(k.state, alarmed_cap=None, alarmed_at=None, plateaus=0)
        return None
    if not (newest.seconds_per_message > first.seconds_per_message * (1 + 2 * n)
            and newest.deleted < first.deleted * (1 - n)):
        return None
    knee = math.floor(newest.deleted / k.c.period_seconds * first.seconds_per_message)
    back = max(k.protected(), min(cap - 1, knee))
    said = (f"at cap {cap} the downstream slowed: {first.deleted:,.0f} -> {newest.deleted:,.0f} deletions a minute, "
            f"{first.seconds_per_message * 1000:,.0f} -> {newest.seconds_per_message * 1000:,.0f} ms per message")
    if back >= cap:
        k.notes.append(said + f"; held at {cap}, what the arrivals need and the downstream carried before the event")
        return None
    return k.out(CUT, back, k.notes + [k.behind, f"{said}: back to {back}, the concurrency that carries today's goodput "
                                                 f"at the first minute's speed; raises stop below {cap} for "
                                                 f"{k.c.remember_alarm_seconds / 60:g} min"],
                 caught_up_since=None, alarmed_cap=cap, alarmed_at=k.now, additive=True)


def _mean_measure(measures: list[Measure]) -> Measure:
    """The mean of several minutes measured at one cap, as one (at: the newest's)."""
    return Measure(measures[-1].at, measures[-1].cap, _mean(measures, "deleted"), _mean(measures, "seconds_per_message"),
                   _mean(measures, "failure_share"))


def _judged(k: Tick) -> CapDecision | None:
    """The goodput's answer to the last raise, once a whole minute at the cap in force is
    measured: a plateau steps back to the concurrency that carried that goodput at the lower
    cap's speed (at least the last cap that paid, at least what the arrivals need); unsure
    holds for another minute. Paid, or nothing to judge against: None (the search goes on)."""
    state, c, cap = k.state, k.c, k.cap
    stale = [a.name for a in k.counted if a.measured_at is None or a.measured_at < k.since]
    here = [m for m in at_cap(state.measures, cap) if m.at >= k.since]
    if not here:
        why = [r for r in k.health.reasons if r.startswith("no ")]
        stale.append("the consumer's own metrics" + (f" ({'; '.join(why)})" if why else ""))
    if stale:
        return k.out(HOLD, cap, k.notes + [k.behind, f"waiting for {', '.join(stale)} on a datapoint measured at cap "
                                                     f"{cap} (in force since {k.since.isoformat()})"],
                     waiting=[f"a datapoint of {', '.join(stale)} measured at cap {cap}"], caught_up_since=None)
    lower = reference(state.measures, cap, k.facts)
    if not lower:
        return None
    verdict = paid(lower, here, k.facts, c)
    k.verdict = verdict
    if verdict.outcome == PAID:
        return None
    if verdict.outcome == UNSURE:
        reasons = k.notes + [k.behind, verdict.reason + ": holding"]
        return k.keep_up(cap, reasons) or k.out(HOLD, cap, reasons, waiting=["another minute at this cap"],
                                                caught_up_since=None)
    back = max(lower[0].cap, min(cap - 1, verdict.knee if verdict.knee is not None else lower[0].cap))
    back = max(back, min(cap, k.protected()))
    if back >= cap:
        reasons = k.notes + [k.behind, verdict.reason + f": held at {cap}, what the arrivals need"]
        return k.out(HOLD, cap, reasons, waiting=["the queue to catch up"], caught_up_since=None,
                     alarmed_cap=cap, alarmed_at=k.now, additive=True)
    return k.out(CUT, back, k.notes + [k.behind, f"{verdict.reason}: back to {back}; raises stop below {cap} for "
                                                 f"{c.remember_alarm_seconds / 60:g} min"],
                 caught_up_since=None, alarmed_cap=cap, alarmed_at=k.now, additive=True,
                 plateaus=_found(state, k.now, c))


def _raise(k: Tick) -> CapDecision:
    """The search goes on: a slow-start probe (× `slow_start_factor` for one minute) until
    the first plateau, warning or cut; then additive raises of `step_share` of the cap.
    After a plateau, raises stay below the cap that did not pay for `remember_alarm_seconds`
    and halve the gap to it, while the gap is wide enough to tell apart."""
    state, c, cap, top = k.state, k.c, k.cap, k.top
    if cap >= top:
        return k.out(HOLD, cap, k.notes + [k.behind, f"at the {k.top_why} ({top})"], waiting=["the queue to catch up"],
                     caught_up_since=None)
    if k.late:
        return k.out(HOLD, cap, k.notes + [k.behind, f"the newest whole minute ({k.health.at.isoformat()}) is older than "
                                                     f"{c.stale_seconds / 60:g} min, as long as the function's invocations "
                                                     f"may run: holding at {cap}, no raise on evidence that late"],
                     waiting=["a whole minute younger than the stale limit"], caught_up_since=None)
    evidence = ("every downstream alarm OK and " if k.counted else "") + "the goodput answering the cap"
    judged = k.verdict
    said = f"{evidence} at cap {cap}" + (f" ({judged.reason})" if judged is not None else "")
    below = k.remembered_below()
    if not state.additive:
        nxt = k.owners_end(min(raise_to(cap, state.step, False, top, c), below if below is not None else top))
        state = k.state
        if nxt > cap:
            return k.out(RAISE, nxt, k.notes + [k.behind, f"{said}: probing {nxt} for one minute, then back to {cap} "
                                                          f"until it is judged ({'additive' if state.additive else 'slow start'})"],
                         caught_up_since=None, probe_at=k.now, probe_from=cap, additive=state.additive)
    new = min(top, cap + max(state.step, math.floor(step_share(k.facts, c) * cap)))
    new = max(new, climb(cap, state.step, True, top, known_good(state.measures, k.facts, c), c))
    if below is not None:
        halfway = (cap + below + 1) // 2
        if halfway <= cap * (1 + noise(k.facts)) or halfway <= cap:
            left = remembered_for(state, c) - (k.now - state.alarmed_at).total_seconds()
            return k.out(HOLD, cap, k.notes + [k.behind, f"{said}; the cap {state.alarmed_cap} did not pay: not "
                                                         f"probing it again for {left / 60:.0f} min"],
                         waiting=["the plateau to be forgotten"], caught_up_since=None)
        new = min(new, halfway)
    # Each raise is a one-minute probe, back to `cap` until its minute is judged: a raise
    # past the knee costs one minute there, not the CloudWatch lag.
    return k.out(RAISE, new, k.notes + [k.behind, f"{said}: probing {new} for one minute, then back to {cap} until it "
                                                  f"is judged (additive)"],
                 caught_up_since=None, additive=True, probe_at=k.now, probe_from=cap)


RUNGS = (_restored, _critical, _clamped, _gone, _blind, _warned, _caught_up, _probe, _slowed, _judged)


def decide(state: CapState, facts: Facts, reading: Reading, now: datetime, constants: Constants = DEFAULTS) -> CapDecision:
    """The next cap for one mapping, from its state and this tick's reading: the first rung
    that decides (docs/drain.md has the rule and the order), else the search's next raise."""
    k = _tick(state, facts, reading, now, constants)
    for rung in RUNGS:
        decision = rung(k)
        if decision is not None:
            return decision
    return _raise(k)


def _remembered(state: CapState, then: int, now: datetime, c: Constants) -> int:
    """The cap raises stop below after a cut or step back from `then` (TCP's ssthresh):
    `then`, or the cap remembered from before when lower and not yet forgotten."""
    return then if state.alarmed_cap is None or _forgotten(state, now, c) else min(then, state.alarmed_cap)


def remembered_for(state: CapState, c: Constants) -> float:
    """How long a cap that alarmed or did not pay is remembered: `remember_alarm_seconds`,
    doubled each time it was found again on its re-probe (at most `remember_doublings`
    times), so a knee that stays put is crossed a few times in a drain, not every half hour."""
    return c.remember_alarm_seconds * 2 ** min(state.plateaus, c.remember_doublings)


def _found(state: CapState, now: datetime, c: Constants) -> int:
    """`plateaus` after a limit is found (a plateau, or the owner's critical alarm): one more
    when the memory of an earlier one had run out (its re-probe crossed it again), else as
    it was (a limit found again within the memory narrows it, it is not a re-probe)."""
    return state.plateaus + 1 if state.alarmed_cap is not None and _forgotten(state, now, c) else state.plateaus


def _forgotten(state: CapState, now: datetime, c: Constants) -> bool:
    return state.alarmed_at is None or (now - state.alarmed_at).total_seconds() >= remembered_for(state, c)
