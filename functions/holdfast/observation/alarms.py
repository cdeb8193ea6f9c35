"""The gating alarms' states, read in pages of 100 names (DescribeAlarms' limit)."""

from __future__ import annotations

import logging
from typing import Iterable

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.iam import uses

logger = logging.getLogger(__name__)

ALARM_NAMES_PER_CALL = 100


@uses("cloudwatch:DescribeAlarms", by=("reconciler", "cli"))
def gating_alarms(clients, names: Iterable[str]) -> dict[str, str | None]:
    """Alarm name -> state (OK, ALARM, INSUFFICIENT_DATA); None for a missing alarm.
    An unreadable alarm counts as missing: it gates, it never crashes the tick."""
    names = list(names)
    states: dict[str, str | None] = {n: None for n in names}
    cloudwatch = clients("cloudwatch") if names else None
    for i in range(0, len(names), ALARM_NAMES_PER_CALL):
        try:
            page = cloudwatch.describe_alarms(
                AlarmNames=names[i:i + ALARM_NAMES_PER_CALL],
                AlarmTypes=["MetricAlarm", "CompositeAlarm"],
                MaxRecords=ALARM_NAMES_PER_CALL,
            )
        except (ClientError, BotoCoreError):
            logger.exception("gating alarms unreadable: treated as not OK")
            continue
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            states[alarm["AlarmName"]] = alarm["StateValue"]
    return states
