"""The October 2025 us-east-1 event as a stream of signals, for the demo and its test.

Pure: it reads the published timeline (shared/data/oct2025-timeline.csv, PDT) and a
description of the fleet, and returns what the account would have seen, in event time
(UTC): EventBridge events exactly as AWS delivers them, changes in what the DNS probe
resolves, and the owner's own change mid-event. The demo feeds these to the real
handlers and reconciler; nothing here decides anything.

What the stream holds, and where it departs from the record:
- capacity-class launch failures ("InsufficientInstanceCapacity") every 5 minutes from
  a rotating third of the groups, in rotating zones, from 23:48 until launches resume
  at 05:28;
- successful launches from 05:28;
- a configuration-class failure (a bad AMI in one team's group) every 40 minutes
  throughout, as noise that must never engage anything;
- an AWS Health issue for EC2, delivered in the region and again from the backup
  region (a duplicate the detector must count once). AWS kept its Health event open
  until the afternoon; the demo closes it when launches resume, so the replay ends
  within two minutes of wall time. The recovery logic under test is the same;
- DNS answers for the regional DynamoDB endpoint empty from 23:48 until 02:25;
- at 03:00 the owner of one event source mapping raises its cap by hand (above the
  floor, below their own original): drift that every later cap step and the restore
  must keep, and report.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

PDT = timezone(timedelta(hours=-7), "PDT")

CAPACITY_MESSAGE = (
    "We currently do not have sufficient {itype} capacity in the Availability Zone you requested ({zone}). "
    "Our system will be working on provisioning additional capacity. You can currently get {itype} capacity "
    "by not specifying an Availability Zone in your request or choosing {other}."
)
CAPACITY_STATUS = "Launching a new EC2 instance. Status Reason: {msg} Launching EC2 instance failed."
CONFIG_STATUS = "The image id '[ami-0badbadbadbadbad0]' does not exist. Launching EC2 instance failed."

# Event milestones of the demo, in PDT on the night of 19–20 October 2025.
START = datetime(2025, 10, 19, 23, 30, tzinfo=PDT)
IMPAIRMENT = datetime(2025, 10, 19, 23, 48, tzinfo=PDT)
DNS_RESTORED = datetime(2025, 10, 20, 2, 25, tzinfo=PDT)
OWNER_DRIFT = datetime(2025, 10, 20, 3, 0, tzinfo=PDT)
LAUNCHES_RESUME = datetime(2025, 10, 20, 5, 28, tzinfo=PDT)


@dataclass(frozen=True)
class Milestone:
    time: datetime
    text: str


@dataclass(frozen=True)
class Step:
    """One thing that happens at `time` (UTC): an EventBridge event, a DNS change, a drift."""

    time: datetime
    kind: str  # "event" | "dns" | "drift"
    payload: Any


def load_milestones(path: Path) -> list[Milestone]:
    with path.open(newline="") as f:
        return [
            Milestone(datetime.fromisoformat(row["time_pdt"]).replace(tzinfo=PDT), row["event"])
            for row in csv.DictReader(f)
        ]


def _id(*parts: object) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def launch_event(
    *, account: str, region: str, group: str, zone: str, at: datetime, ok: bool, status_message: str = ""
) -> dict:
    """An ASG launch event in the shape EventBridge delivers (Auto Scaling user guide)."""
    activity = _id("activity", group, zone, at.isoformat(), ok)
    return {
        "version": "0",
        "id": _id("event", activity),
        "detail-type": "EC2 Instance Launch Successful" if ok else "EC2 Instance Launch Unsuccessful",
        "source": "aws.autoscaling",
        "account": account,
        "time": _iso(at),
        "region": region,
        "resources": [f"arn:aws:autoscaling:{region}:{account}:autoScalingGroup:{_id('g', group)}:autoScalingGroupName/{group}"],
        "detail": {
            "StatusCode": "InProgress" if ok else "Failed",
            "AutoScalingGroupName": group,
            "ActivityId": activity,
            "Details": {"Availability Zone": zone, "Subnet ID": f"subnet-{_id('s', zone)[:8]}"},
            "RequestId": _id("request", activity),
            "StatusMessage": status_message,
            "EndTime": _iso(at),
            "EC2InstanceId": f"i-{_id('i', activity)[:17].replace('-', '')}" if ok else "",
            "StartTime": _iso(at - timedelta(seconds=20)),
            "Cause": (
                f"At {_iso(at - timedelta(seconds=25))} an instance was started in response to a difference "
                "between desired and actual capacity, increasing the capacity from 2 to 3."
            ),
            "Origin": "EC2",
            "Destination": "AutoScalingGroup",
        },
    }


def health_event(*, account: str, region: str, delivered_in: str, at: datetime, status: str, communication: str) -> dict:
    """An AWS Health issue event for EC2, as EventBridge delivers it."""
    arn = f"arn:aws:health:{region}::event/EC2/AWS_EC2_OPERATIONAL_ISSUE/AWS_EC2_OPERATIONAL_ISSUE_DEMO_20251020"
    return {
        "version": "0",
        "id": _id("health", delivered_in, communication, status),
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": account,
        "time": _iso(at),
        "region": delivered_in,
        "resources": [],
        "detail": {
            "eventArn": arn,
            "service": "EC2",
            "eventScopeCode": "PUBLIC",
            "communicationId": communication,
            "lastUpdatedTime": at.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "statusCode": status,
            "eventRegion": region,
            "eventTypeCode": "AWS_EC2_OPERATIONAL_ISSUE",
            "eventTypeCategory": "issue",
            "startTime": IMPAIRMENT.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "eventDescription": [
                {"language": "en_US", "latestDescription": "Increased error rates and latencies for EC2 instance launches."}
            ],
            "affectedEntities": [],
        },
    }


def build(
    *,
    account: str,
    region: str,
    backup_region: str,
    groups: Sequence[str],
    zones: Sequence[str],
    noisy_group: str,
    drift_target: str,
    drift_cap: int,
    end: datetime,
) -> list[Step]:
    """The whole event as steps in time order, up to `end`.

    `groups` are the fleet's Auto Scaling groups, each spanning all of `zones`;
    `noisy_group` is the team whose launch template is broken; at OWNER_DRIFT the
    owner of mapping `drift_target` sets its MaximumConcurrency to `drift_cap`.
    """
    if len(zones) < 2 or not groups:
        raise ValueError("the replay needs groups spanning at least two zones")
    steps: list[Step] = []

    def at(t: datetime, kind: str, payload: Any) -> None:
        steps.append(Step(t.astimezone(timezone.utc), kind, payload))

    t = IMPAIRMENT
    wave = 0
    while t < min(LAUNCHES_RESUME, end):
        for i, group in enumerate(groups):
            if i % 3 == wave % 3:
                zone = zones[(i // 3 + wave) % len(zones)]
                other = ", ".join(z for z in zones if z != zone)
                msg = CAPACITY_MESSAGE.format(itype="m5.large", zone=zone, other=other)
                at(t, "event", launch_event(account=account, region=region, group=group, zone=zone, at=t, ok=False,
                                            status_message=CAPACITY_STATUS.format(msg=msg)))
        wave += 1
        t += timedelta(minutes=5)

    t = LAUNCHES_RESUME
    while t < end:
        wave += 1
        group, zone = groups[wave % len(groups)], zones[wave % len(zones)]
        at(t, "event", launch_event(account=account, region=region, group=group, zone=zone, at=t, ok=True))
        t += timedelta(minutes=5)

    t = START
    while t < end:
        at(t, "event", launch_event(account=account, region=region, group=noisy_group, zone=zones[0], at=t, ok=False,
                                    status_message=CONFIG_STATUS))
        t += timedelta(minutes=40)

    opened = IMPAIRMENT + timedelta(minutes=23)
    for delivered_in in (region, backup_region):
        at(opened, "event", health_event(account=account, region=region, delivered_in=delivered_in, at=opened,
                                         status="open", communication="demo-comm-1"))
    at(LAUNCHES_RESUME, "event", health_event(account=account, region=region, delivered_in=region,
                                              at=LAUNCHES_RESUME, status="closed", communication="demo-comm-9"))

    dynamodb = f"dynamodb.{region}.amazonaws.com"
    at(IMPAIRMENT, "dns", {"host": dynamodb, "resolves": False})
    at(DNS_RESTORED, "dns", {"host": dynamodb, "resolves": True})
    at(OWNER_DRIFT, "drift", {"arn": drift_target, "MaximumConcurrency": drift_cap})

    steps.sort(key=lambda s: (s.time, s.kind))
    return [s for s in steps if s.time < end]
