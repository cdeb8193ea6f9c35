"""A drain that cannot finish is a finding, not a wait.

Each tick `judge` says whether one mapping's drain is stalled and why: its oldest message
has not got younger for `stall_seconds` while behind (a downstream that never recovers, a
backlog of messages that can never be processed, a metric that never arrives), it runs
past its forecast by `stall_forecast_factor`, or its evidence can never be read (a queue in
another account, a read denied, the function deleted). A stalled drain keeps the cap its
controller judges safe and stops holding the later stages (fresh work, routing, capacity);
the report clears itself once the oldest message gets younger again.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from holdfast.core.drain.constants import DEFAULTS, Constants
from holdfast.core.drain.evidence import consumer_health
from holdfast.core.drain.inputs import Reading

# A new low of the oldest-message age counts as progress when it is this much younger
# (a share of the age, and at least a second): CloudWatch's age moves by the second.
PROGRESS_SHARE = 0.01


def _age(reading: Reading, now: datetime, c: Constants) -> float | None:
    """The oldest-message age now (a fresh datapoint), 0 for a queue read empty, else None."""
    dp = reading.oldest_age
    if dp is not None and dp.at + timedelta(seconds=c.period_seconds + c.stale_seconds) >= now:
        return dp.value
    if reading.visible_now == 0:
        return 0.0
    return None


def _unprocessable(drain, reading: Reading, now: datetime, c: Constants) -> str:
    """Why a backlog may never drain, when the evidence says: messages received and none
    deleted, on a queue without a dead-letter queue."""
    health = consumer_health(drain.facts, reading, now, c)
    if drain.facts.has_dlq is False and health.failure_share is not None and health.failure_share >= 0.95:
        return (f"; {health.failure_share:.0%} of the messages received are not deleted and the queue has no "
                f"dead-letter queue: a backlog of messages that cannot be processed never drains")
    return ""


def judge(drain, reading: Reading, now: datetime, constants: Constants = DEFAULTS, *, tracking: bool = True):
    """The drain (holdfast.core.drain.record.Drain) with its stall fields brought up to date.
    `tracking`: the drain has started, or the plan's drain stage is waiting on it (before
    that a queue is expected to grow: the outage itself)."""
    c = constants
    if drain.restored:
        return replace(drain, stalled_since=None, stalled_why=None, lowest_age=None, lowest_age_at=None)
    if reading.unreachable:
        return replace(drain, stalled_since=drain.stalled_since or now, stalled_why=reading.unreachable)
    if not tracking:
        return drain
    age = _age(reading, now, c)
    caught = (drain.facts.baseline_age_seconds or 0.0) + c.caught_up_slack_seconds
    if age is not None and age <= caught:
        return replace(drain, stalled_since=None, stalled_why=None, lowest_age=None, lowest_age_at=None)
    lowest, since = drain.lowest_age, drain.lowest_age_at or now
    if age is not None and (lowest is None or age < lowest - max(1.0, PROGRESS_SHARE * lowest)):
        drain = replace(drain, lowest_age=age, lowest_age_at=now, stalled_since=None, stalled_why=None)
        lowest, since = age, now
    elif drain.lowest_age_at is None:
        drain = replace(drain, lowest_age_at=now)
    why = None
    flat = (now - since).total_seconds()
    if flat >= c.stall_seconds:
        what = (f"the oldest message has not got younger for {flat / 60:.0f} min (at its youngest {lowest:,.0f} s, "
                f"{since.isoformat()})" if lowest is not None else
                f"no ApproximateAgeOfOldestMessage for {flat / 60:.0f} min: the drain cannot tell it is catching up")
        why = what + _unprocessable(drain, reading, now, c)
    if drain.started_at is not None:
        ran = (now - drain.started_at).total_seconds()
        m = drain.measured
        if drain.projected_seconds is None and ran >= c.stall_seconds and m is not None and m.seconds:
            # The forecast a stall is judged against: made once the search has had the stall
            # period to find the downstream's capacity, on the throughput measured then (the
            # forecast at the start assumes the downstream keeps up to the ceiling).
            drain = replace(drain, projected_seconds=ran + m.seconds)
        p = drain.projected_seconds
        if why is None and p and ran > c.stall_forecast_factor * p:
            why = (f"running {ran / 60:.0f} min, more than {c.stall_forecast_factor:g}× its forecast of {p / 60:.0f} min "
                   f"(made {c.stall_seconds / 60:.0f} min in), and still behind")
    if why is None:
        return replace(drain, stalled_since=None, stalled_why=None)
    return replace(drain, stalled_since=drain.stalled_since or now, stalled_why=why)
