"""The minutes the drain's decision tables are written in, and the consumer they drain:
16 batches before the event, 0.8 s a message, nothing failing, 20 messages a second
arriving, a 30 s timeout."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from holdfast.core import drain as dc

T0 = datetime(2025, 10, 20, 9, 40, tzinfo=timezone.utc)
FACTS = dc.Facts(pre_event_concurrency=16, baseline_age_seconds=2, seconds_per_message=0.8, baseline_failure_share=0.0,
                 arrival_per_second=20.0, timeout_seconds=30.0)


def m(minutes: float) -> datetime:
    """`minutes` after T0."""
    return T0 + timedelta(minutes=minutes)


def dp(minute: float, value: float) -> dc.Datapoint:
    """A datapoint of the minute `minute` after T0."""
    return dc.Datapoint(m(minute), value)
