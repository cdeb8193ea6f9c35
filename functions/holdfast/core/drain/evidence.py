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
    """What one whole minute of the consumer's own metrics says about its downstream.

    `level` says only what is wrong in absolute terms — failures above their baseline
    share, the time per message near the function's or the client's timeout — never how
    far the time per message is from a quiet pre-event baseline: a database's latency rises
    with load long before its capacity, and whether that rise still pays is judged by the
    controller from how goodput answered the cap (`Measure`, `paid`). `complete`: the
    minute has Duration, receives and deletions (it can be measured)."""

    at: datetime | None
    level: str
    reasons: tuple[str, ...]
    ratio: float | None = None              # time per message ÷ its pre-event baseline (reported, not judged)
    failure_share: float | None = None
    knee_estimate: int | None = None        # the goodput's concurrency at the baseline time per message
    complete: bool = False
    deleted: float | None = None            # NumberOfMessagesDeleted in the minute
    seconds_per_message: float | None = None
    failures_critical: bool = False         # critical on failures (not on time alone): the one reason to go below the arrivals


# The standard deviation of a normal sample is 1.4826 × its median absolute deviation: the
# baseline's spread (MAD ÷ median) read as one minute's standard deviation.
MAD_TO_SD = 1.4826


def noise(facts: Facts) -> float:
    """How far one minute's time per message (and so its goodput) spreads from another's,
    as a share: the baseline's spread read as a standard deviation, and at least 1 %."""
    return max(MAD_TO_SD * facts.spread, 0.01)


def consumer_health(facts: Facts, reading: Reading, now: datetime, constants: Constants = DEFAULTS) -> Health:
    """Judge the newest whole minute with messages received, from the consumer's own metrics:

    - failure share: NumberOfMessagesReceived not deleted ÷ received (a batch item failed
      with ReportBatchItemFailures leaves Errors at 0 and is seen here), and Errors ÷
      Invocations, each against its baseline share: a warning a point above, critical
      `failure_critical_slack` above;
    - the mean invocation against the function's timeout, and the time per message against
      the client's timeout where the owner declared it: a warning at
      `timeout_warning_share`, critical at `timeout_critical_share` — only once the minute
      is measurably slower than its baseline (full batches sized near the timeout are how
      the owner sized it, and no cap changes a batch's length).

    The time per message against the baseline is reported, never judged here. A metric
    without a datapoint for the minute is left out and said so. No receives, or none
    fresh: UNKNOWN (never a raise)."""
    c = constants
    period = timedelta(seconds=c.period_seconds)
    received = reading.received
    if received is None:
        return Health(None, UNKNOWN, ("no NumberOfMessagesReceived datapoint: the consumer's downstream cannot be judged",))
    # A judged minute waits for its invocations to end (the function's timeout) before it is
    # read at all (`inputs.whole_minute`): it is stale only that much later.
    if received.at + period + timedelta(seconds=c.stale_seconds + (facts.timeout_seconds or 0.0)) < now:
        return Health(None, UNKNOWN, (f"NumberOfMessagesReceived is stale (from {received.at.isoformat()}): "
                                      f"the consumer's downstream cannot be judged",))
    at = received.at
    if received.value <= 0:
        return Health(at, UNKNOWN, (f"no messages received in the minute of {at.isoformat()}: nothing to judge the "
                                    f"downstream by",))

    def same(dp: Datapoint | None) -> Datapoint | None:
        return dp if dp is not None and dp.at == at else None

    deleted, duration = same(reading.deleted), same(reading.duration)
    invocations, errors = same(reading.invocations), same(reading.errors)
    level, reasons, failing = GOOD, [], False

    def seen(new: str, why: str, *, failures: bool = False) -> None:
        nonlocal level, failing
        if _RANK[new] > _RANK[level]:
            level = new
        failing = failing or (failures and new == CRITICAL)
        reasons.append(why)

    share = None
    if deleted is not None:
        share = max(0.0, received.value - deleted.value) / received.value
        base = facts.baseline_failure_share or 0.0
        said = f"{share:.1%} of {received.value:,.0f} messages received not deleted (baseline {base:.1%})"
        if share > base + c.failure_critical_slack:
            seen(CRITICAL, said + f": more than {c.failure_critical_slack:.0%} above it", failures=True)
        elif share > base + c.error_share_slack:
            seen(WARNING, said + f": more than {c.error_share_slack:.0%} above it")
    else:
        reasons.append("no NumberOfMessagesDeleted datapoint for the minute: failure share unknown")
    if errors is not None and invocations is not None and invocations.value > 0:
        e_share = errors.value / invocations.value
        base = facts.baseline_error_share or 0.0
        said = f"function Errors {e_share:.1%} of {invocations.value:,.0f} invocations (baseline {base:.1%})"
        if e_share > base + c.failure_critical_slack:
            seen(CRITICAL, said, failures=True)
        elif e_share > base + c.error_share_slack:
            seen(WARNING, said)
        share = e_share if share is None else max(share, e_share)

    ratio = estimate = spm = None
    complete = False
    if duration is None:
        reasons.append("no Duration datapoint for the minute: judged on the failure share alone")
    else:
        spm = duration.value / 1000.0 / received.value
        complete = deleted is not None
        said = f"{spm * 1000:,.0f} ms per message"
        if facts.seconds_per_message:
            ratio = spm / facts.seconds_per_message
            said += f", {ratio:.2f}× its baseline {facts.seconds_per_message * 1000:,.0f} ms"
            if deleted is not None:
                estimate = math.floor(deleted.value / c.period_seconds * facts.seconds_per_message)
        reasons.append(said)
        limits = []
        if invocations is not None and invocations.value > 0 and facts.timeout_seconds:
            limits.append((duration.value / 1000.0 / invocations.value / facts.timeout_seconds,
                           f"the function's {facts.timeout_seconds:g} s timeout", "mean invocation"))
        if facts.client_timeout_seconds and facts.seconds_per_message:
            # The client's timeout bounds its call, not the message's own work: what the call
            # takes beyond the baseline's whole time per message is a lower bound of it.
            extra = max(0.0, spm - facts.seconds_per_message)
            limits.append((extra / facts.client_timeout_seconds, f"the client's {facts.client_timeout_seconds:g} s timeout",
                           "the call's time beyond the baseline"))
        for used, limit, what in limits:
            # The share of the headroom the baseline speed left that the slowdown has used:
            # a full batch sized near the timeout at the baseline speed is how the owner
            # sized it (no cap changes a batch's length); a slowdown eating its headroom is not.
            full = min(used, used / ratio) if ratio and what == "mean invocation" else 0.0
            eaten = (used - full) / (1 - full) if full < 1 else 1.0
            said = f"{what} {used:.0%} of {limit} ({eaten:.0%} of the headroom its baseline speed leaves)"
            if used >= c.timeout_critical_share and eaten >= c.timeout_critical_share:
                seen(CRITICAL, said)
            elif used >= c.timeout_warning_share and eaten >= c.timeout_warning_share:
                seen(WARNING, said)
            elif used >= c.timeout_warning_share:
                reasons.append(said + ": full batches at about the baseline speed, as the owner sized them")
    if share is None and duration is None:
        return Health(at, UNKNOWN, tuple(reasons + ["neither the time per message nor the failure share can be judged"]))
    return Health(at, level, tuple(reasons), ratio, share, estimate, complete,
                  None if deleted is None else deleted.value, spm, failing)


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
