"""The polling fallback: launch results of the selected groups, read from Auto Scaling.

For when event delivery is itself impaired. Each tick reads the account's scaling
activities newest first (one DescribeScalingActivities call per 100 activities, not
one per group) until they start before `since`, and keeps the launches of groups
that carry the selector tag. Every activity becomes the same signal its EventBridge
event would have (`activity:<ActivityId>`), so the ledger stores it once whichever
path saw it first. `since` is a window rather than "the last tick", so a skipped tick
loses nothing.
"""

from __future__ import annotations

from datetime import datetime

from holdfast.iam import uses
from holdfast.core.signals import Signal, activity_signal, parse_time


@uses("autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities", by=("reconciler",))
def poll(autoscaling, settings, since: datetime) -> list[Signal]:
    groups = selected_groups(autoscaling, settings)
    if not groups:
        return []
    signals = []
    kwargs = {"MaxRecords": 100}
    while True:
        page = autoscaling.describe_scaling_activities(**kwargs)
        activities = page.get("Activities", [])
        for activity in activities:
            if activity.get("AutoScalingGroupName") not in groups:
                continue
            signal = activity_signal(activity)
            if signal is not None and signal.time >= since:
                signals.append(signal)
        # Sorted by start time, newest first (in-progress ones lead): stop at the window.
        started = [parse_time(a["StartTime"]) for a in activities if a.get("StartTime")]
        if "NextToken" not in page or (started and min(started) < since):
            return signals
        kwargs["NextToken"] = page["NextToken"]


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
