"""The consumer's own evidence of its downstream, and whether the dependency is back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from holdfast.core.drain.constants import (
    ALARM,
    CRITICAL,
    DEFAULTS,
    INSUFFICIENT_DATA,
    OK,
    WARNING,
    Constants,
)
from holdfast.core.drain.inputs import Alarm, Datapoint, Facts, Reading

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
