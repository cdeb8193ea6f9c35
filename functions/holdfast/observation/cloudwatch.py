"""Where CloudWatch's one-minute datapoints are complete: the one lag every evidence
reader uses (the drain's inputs, the stage gates' evidence).

Lambda and SQS publish a minute's datapoint 1–3 minutes after it ends, and a datapoint
read before then holds only part of the minute: a Sum too low (fewer messages received,
fewer errors), a Maximum not yet reached. A partial minute reads "healthier" than the
minute was, the direction that opens gates and raises caps, so every reader ends its
window (GetMetricData's EndTime, exclusive) at `complete_until(now)`: the start of the
minute that began `COMPLETE_AFTER` plus one minute ago. The newest minute a reader sees
therefore ended at least `COMPLETE_AFTER` before `now`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

COMPLETE_AFTER = timedelta(minutes=2)
PERIOD = timedelta(minutes=1)


def complete_until(now: datetime) -> datetime:
    """GetMetricData's EndTime for a read at `now`: the newest datapoint it returns is of
    the minute that ended at least COMPLETE_AFTER ago."""
    return (now - COMPLETE_AFTER).replace(second=0, microsecond=0)
