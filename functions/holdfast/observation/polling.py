"""The polling fallback: launch results of the selected groups, read from Auto Scaling.

For when event delivery is itself impaired. Each tick reads the scaling activities that
started within the window (`since`), newest first, and keeps the launches of groups
that carry the selector tag. Every activity becomes the same signal its EventBridge
event would have (`activity:<ActivityId>`), so the ledger stores it once whichever
path saw it first. `since` is a window rather than "the last tick", so a skipped tick,
or one whose poll ran out of time, loses nothing: the next tick reads the window again.

Bounded, because AWS warns that DescribeScalingActivities without a group name "performs
an account-wide operation, which can result in slower or timed-out requests", and the
fallback matters most in the hour when every API is slow:

- every request carries the `StartTimeLowerBound` filter (the window's start), so AWS
  never reads the account's six weeks of history;
- with at most PER_GROUP_MAX selected groups, one request per group
  (`AutoScalingGroupName`), never account-wide;
- its own client settings (CONFIG): a read timeout long enough for a slow answer in a
  bad hour (12 s, not the probes' 2 s), one attempt per request (the next tick is
  the retry), and no request started after `budget_seconds` of polling (TIME_BUDGET),
  nor more than MAX_PAGES pages. A poll cut short returns what it read and says so
  (`Polled.truncated`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from botocore.config import Config

from holdfast.core.signals import activity_signal, iso, parse_time
from holdfast.iam import uses

PER_GROUP_MAX = 10
MAX_PAGES = 20
TIME_BUDGET = 20.0
CONNECT_TIMEOUT, READ_TIMEOUT = 3, 12
# Worst case of one poll: TIME_BUDGET + one request's CONNECT_TIMEOUT + READ_TIMEOUT (35 s).
CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1},
                connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT)


class Polled(list):
    """The signals a poll found; `truncated` when it stopped at its budget or page cap."""

    truncated: bool = False


@uses("autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities", by=("reconciler",))
def poll(autoscaling, settings, since: datetime, *, monotonic: Callable[[], float] | None = None,
         budget_seconds: float = TIME_BUDGET, max_pages: int = MAX_PAGES) -> Polled:
    """Launch signals of the selected groups since `since`. `monotonic` (the tick's clock)
    times the budget; None: no time budget, only the page cap."""
    out = Polled()
    groups = selected_groups(autoscaling, settings)
    if not groups:
        return out
    start = monotonic() if monotonic else 0.0
    lower = {"Name": "StartTimeLowerBound", "Values": [iso(since.astimezone(timezone.utc))]}
    requests = ([{"AutoScalingGroupName": g} for g in sorted(groups)] if len(groups) <= PER_GROUP_MAX else [{}])
    pages = 0
    for request in requests:
        kwargs = {**request, "Filters": [lower], "MaxRecords": 100}
        while True:
            if pages >= max_pages or (monotonic and monotonic() - start >= budget_seconds):
                out.truncated = True
                return out
            page = autoscaling.describe_scaling_activities(**kwargs)
            pages += 1
            activities = page.get("Activities", [])
            for activity in activities:
                if activity.get("AutoScalingGroupName") not in groups:
                    continue
                signal = activity_signal(activity)
                if signal is not None and signal.time >= since:
                    out.append(signal)
            # Sorted by start time, newest first (in-progress ones lead): stop at the window,
            # in case an endpoint ignores the filter.
            started = [parse_time(a["StartTime"]) for a in activities if a.get("StartTime")]
            if "NextToken" not in page or (started and min(started) < since):
                break
            kwargs["NextToken"] = page["NextToken"]
    return out


def selected_groups(autoscaling, settings) -> set[str]:
    """Names of the groups carrying the selector tag (DescribeAutoScalingGroups filters
    by tag; the tagging API does not return Auto Scaling groups)."""
    names: set[str] = set()
    kwargs = {
        "Filters": [{"Name": f"tag:{settings.selector_key}", "Values": [settings.selector_value]}],
        "MaxRecords": 100,
    }
    while True:
        page = autoscaling.describe_auto_scaling_groups(**kwargs)
        names.update(g["AutoScalingGroupName"] for g in page.get("AutoScalingGroups", []))
        if "NextToken" not in page:
            return names
        kwargs["NextToken"] = page["NextToken"]
