"""The October 2025 us-east-1 event as a stream of signals, for the demo and its test.

Pure: it reads the published timeline (a copy of shared/data/oct2025-timeline.csv, PDT)
and a description of the fleet, and returns what the account would have seen, in event
time (UTC): EventBridge events exactly as AWS delivers them, changes in what the DNS
probe resolves, and the owner's own change mid-event. What AWS's services publish that
depends on the fleet's state as Holdfast leaves it (metrics, health-check terminations)
is world.py's. Nothing here decides anything.

The stream, phase by phase, with the demo's compressions (the timeline gives times, not
rates: the rates are the demo's, chosen so each phase reads as the record describes it):
- 23:48 "Empty DNS record for the DynamoDB regional endpoint": the DynamoDB endpoint
  resolves empty until 02:25; from 23:48 every group's launches fail with
  InsufficientInstanceCapacity (EC2's lease manager could not reach DynamoDB), a wave of
  failures every 5 minutes from a third of the groups (at least four), in rotating zones,
  through the collapse, until 05:28.
- 00:11 an AWS Health issue for EC2 opens, delivered in the region and again from the
  backup region (one signal); AWS closes it at 14:20 "event ends".
- 05:28 "launches begin to succeed (many hit request limit exceeded)": every 5 minutes
  three RequestLimitExceeded failures from three groups in three zones and two successful
  launches: capacity-class failures are 60 % of the outcomes, not recovery.
- 11:23 "EC2 request throttles begin to relax": for 20 minutes two failures to eight
  successes (20 %), then a burst of three throttled failures across three zones every 10
  minutes among seventeen successes every 5 (about 8 % of a window): recovery by share,
  but failures across the region in every window until the last burst, a minute before
  13:50 "All EC2 APIs and new instance launches normal"; after it, successes only.
- throughout, one team's group fails on a bad AMI every 40 minutes (configuration noise),
  and once an hour another's fails with "The device 'sda1' is used in more than one
  block-device mapping" (configuration, by its words);
- at 03:00 the owner of one event source mapping raises its cap by hand (above the floor,
  below their own original): drift that every later cap step and the restore keep.

Ticks: the reconciler runs once a minute; the demo ticks on a cadence per phase (TICKS,
printed), finer where Holdfast acts and coarser through the long holds, and paces wall
time per phase. Holds are measured in time, so a coarser tick only delays a step.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

PDT = timezone(timedelta(hours=-7), "PDT")
TIMELINE = Path(__file__).with_name("oct2025-timeline.csv")  # a copy of shared/data/oct2025-timeline.csv

CAPACITY_STATUS = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
    "{itype} capacity in the Availability Zone you requested ({zone}). Our system will be working on provisioning "
    "additional capacity. You can currently get {itype} capacity by not specifying an Availability Zone in your "
    "request or choosing {other}. Launching EC2 instance failed."
)
THROTTLED_STATUS = "Could not launch On-Demand Instances. RequestLimitExceeded - Request limit exceeded. Launching EC2 instance failed."
CONFIG_STATUS = "The image id '[ami-0badbadbadbadbad0]' does not exist. Launching EC2 instance failed."
DEVICE_STATUS = "The device 'sda1' is used in more than one block-device mapping. Launching EC2 instance failed."
ELB_CAUSE = "At {at} an instance was taken out of service in response to an ELB system health check failure."


@dataclass(frozen=True)
class Milestone:
    time: datetime
    text: str


def load_milestones(path: Path = TIMELINE) -> list[Milestone]:
    with path.open(newline="") as f:
        return [Milestone(datetime.fromisoformat(row["time_pdt"]).replace(tzinfo=PDT), row["event"])
                for row in csv.DictReader(f)]


def milestone(text: str) -> datetime:
    """The time of the one timeline row that mentions `text`."""
    rows = [m for m in load_milestones() if text in m.text]
    if len(rows) != 1:
        raise ValueError(f"the timeline has {len(rows)} rows mentioning {text!r}")
    return rows[0].time


START = datetime(2025, 10, 19, 23, 30, tzinfo=PDT)
IMPAIRMENT = milestone("Empty DNS record")
DNS_RESTORED = milestone("All DNS information restored")
DYNAMODB_BACK = milestone("DynamoDB customer impact ends")
OWNER_DRIFT = datetime(2025, 10, 20, 3, 0, tzinfo=PDT)
POLLING_RESTORED = milestone("Lambda SQS polling subsystem restored")
LAUNCHES_RESUME = milestone("launches begin to succeed")
NETWORK_LAG = milestone("Network propagation latency rises")
HEALTH_CHECK_TERMINATIONS = milestone("NLB health check failures trigger terminations")
FAILOVER_DISABLED = milestone("Automatic NLB health check failover disabled")
NETWORK_NORMAL = milestone("Network propagation back to normal")
THROTTLES_RELAX = milestone("EC2 request throttles begin to relax")
EC2_NORMAL = milestone("All EC2 APIs and new instance launches normal")
FAILOVER_ENABLED = milestone("NLB automatic failover re-enabled")
LAMBDA_BACKLOGS_DONE = milestone("Lambda backlogs processed")
EVENT_ENDS = milestone("event ends")
HEALTH_OPENED = IMPAIRMENT + timedelta(minutes=23)

# (from, reconciler tick minutes, wall seconds per event hour, what the compression is).
TICKS = [
    (START, 5, 4.0, "before the event: a tick per 5 min"),
    (IMPAIRMENT - timedelta(minutes=3), 1, 24.0, "the onset: a tick a minute, as deployed"),
    (IMPAIRMENT + timedelta(minutes=7), 30, 1.5, "the DynamoDB phase and the collapse: a tick per 30 min"),
    (LAUNCHES_RESUME - timedelta(minutes=3), 20, 2.0, "mixed launches, network propagation: a tick per 20 min"),
    (THROTTLES_RELAX - timedelta(minutes=3), 5, 11.0, "the recovery: a tick per 5 min"),
]


def cadence(at: datetime) -> tuple[int, float, str]:
    """(tick minutes, wall seconds per event hour, label) in force at `at`."""
    current = TICKS[0]
    for phase in TICKS:
        if at >= phase[0]:
            current = phase
    return current[1], current[2], current[3]


@dataclass(frozen=True)
class Step:
    """One thing that happens at `time` (UTC): an EventBridge event, a DNS change, a drift."""

    time: datetime
    kind: str  # "event" | "dns" | "drift"
    payload: Any


def _id(*parts: object) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _asg_event(*, account: str, region: str, group: str, zone: str, at: datetime, detail_type: str,
               status: str, description: str, status_message: str, cause: str, instance: str, seed: str) -> dict:
    activity = _id("activity", group, zone, at.isoformat(), seed)
    return {
        "version": "0",
        "id": _id("event", activity),
        "detail-type": detail_type,
        "source": "aws.autoscaling",
        "account": account,
        "time": _iso(at),
        "region": region,
        "resources": [f"arn:aws:autoscaling:{region}:{account}:autoScalingGroup:{_id('g', group)}:autoScalingGroupName/{group}"],
        "detail": {
            "StatusCode": status,
            "Description": description,
            "AutoScalingGroupName": group,
            "ActivityId": activity,
            "Details": {"Availability Zone": zone, "Subnet ID": f"subnet-{_id('s', zone)[:8]}"},
            "RequestId": _id("request", activity),
            "StatusMessage": status_message,
            "EndTime": _iso(at),
            "EC2InstanceId": instance,
            "StartTime": _iso(at - timedelta(seconds=20)),
            "Cause": cause,
            "Origin": "EC2",
            "Destination": "AutoScalingGroup",
        },
    }


def launch_event(*, account: str, region: str, group: str, zone: str, at: datetime, ok: bool, status_message: str = "") -> dict:
    """An ASG launch event in the shape EventBridge delivers (Auto Scaling user guide)."""
    instance = f"i-{_id('i', group, zone, at.isoformat())[:17].replace('-', '')}" if ok else ""
    return _asg_event(
        account=account, region=region, group=group, zone=zone, at=at,
        detail_type="EC2 Instance Launch Successful" if ok else "EC2 Instance Launch Unsuccessful",
        status="InProgress" if ok else "Failed",
        description=f"Launching a new EC2 instance: {instance}" if ok else "Launching a new EC2 instance.  Status Reason: "
                                                                          + status_message,
        status_message=status_message, instance=instance, seed=ok,
        cause=(f"At {_iso(at - timedelta(seconds=25))} an instance was started in response to a difference "
               "between desired and actual capacity, increasing the capacity from 2 to 3."),
    )


def termination_event(*, account: str, region: str, group: str, zone: str, at: datetime, instance: str) -> dict:
    """An instance Auto Scaling replaced after it failed its ELB health check (user guide's wording)."""
    return _asg_event(
        account=account, region=region, group=group, zone=zone, at=at,
        detail_type="EC2 Instance Terminate Successful", status="InProgress",
        description=f"Terminating EC2 instance: {instance}", status_message="", instance=instance, seed=instance,
        cause=ELB_CAUSE.format(at=_iso(at - timedelta(seconds=18))),
    )


def health_event(*, account: str, region: str, delivered_in: str, at: datetime, status: str, communication: str) -> dict:
    """An AWS Health issue event for EC2, as EventBridge delivers it."""
    arn = f"arn:aws:health:{region}::event/EC2/AWS_EC2_OPERATIONAL_ISSUE/AWS_EC2_OPERATIONAL_ISSUE_DEMO_20251020"
    gmt = lambda t: t.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
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
            "lastUpdatedTime": gmt(at),
            "statusCode": status,
            "eventRegion": region,
            "eventTypeCode": "AWS_EC2_OPERATIONAL_ISSUE",
            "eventTypeCategory": "issue",
            "startTime": gmt(IMPAIRMENT),
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

    `groups` are the fleet's selected Auto Scaling groups, each spanning all of `zones`;
    `noisy_group` is the team whose launch template is broken; at OWNER_DRIFT the owner
    of mapping `drift_target` sets its MaximumConcurrency to `drift_cap`."""
    if len(zones) < 2 or len(groups) < 3:
        raise ValueError("the replay needs three groups spanning at least two zones")
    steps: list[Step] = []
    n, z = len(groups), len(zones)

    def at(t: datetime, kind: str, payload: Any) -> None:
        if t < end:
            steps.append(Step(t.astimezone(timezone.utc), kind, payload))

    def fail(t: datetime, g: int, k: int, status: str) -> None:
        zone = zones[(g + k) % z]
        other = ", ".join(x for x in zones if x != zone)
        at(t, "event", launch_event(account=account, region=region, group=groups[g % n], zone=zone, at=t, ok=False,
                                    status_message=status.format(itype="m5.large", zone=zone, other=other)))

    def ok(t: datetime, g: int, k: int) -> None:
        at(t, "event", launch_event(account=account, region=region, group=groups[g % n], zone=zones[(g + k) % z],
                                    at=t, ok=True))

    def slots(first: datetime, last: datetime, every: timedelta = timedelta(minutes=5)):
        t, k = first, 0
        while t < last:
            yield k, t
            t, k = t + every, k + 1

    # The collapse: a third of the groups (at least four) fail each wave, in rotating zones.
    wave = max(4, n // 3)
    for k, t in slots(IMPAIRMENT, LAUNCHES_RESUME):
        for j in range(wave):
            fail(t + timedelta(seconds=j), k * wave + j, k, CAPACITY_STATUS)
    # Mixed: three throttled failures in three zones, two successes, every 5 minutes.
    for k, t in slots(LAUNCHES_RESUME, THROTTLES_RELAX):
        for j in range(3):
            fail(t + timedelta(seconds=j), k * 3 + j, j, THROTTLED_STATUS)
        for j in range(2):
            ok(t + timedelta(seconds=30 + j), k * 2 + j + 1, j + k)
    # Throttles relax: 20 % for 20 minutes, then a burst every 20 minutes among many successes.
    tapering = THROTTLES_RELAX + timedelta(minutes=20)
    for k, t in slots(THROTTLES_RELAX, tapering):
        for j in range(2):
            fail(t + timedelta(seconds=j), k * 2 + j, j + 1, THROTTLED_STATUS)
        for j in range(8):
            ok(t + timedelta(seconds=20 + j), k * 8 + j, j)
    last_burst = EC2_NORMAL - timedelta(minutes=1)
    # One burst in every window, never two (two would be above the recovery share).
    bursts = [t for _, t in slots(tapering + timedelta(minutes=2), last_burst - timedelta(minutes=10),
                                  timedelta(minutes=10))] + [last_burst]
    for b, t in enumerate(bursts):
        for j in range(3):
            fail(t + timedelta(seconds=j), b * 3 + j, j, THROTTLED_STATUS)
    for k, t in slots(tapering, EC2_NORMAL):
        for j in range(17):
            ok(t + timedelta(seconds=5 + 17 * j), k * 17 + j, j)
    # Normal again: successes only.
    for k, t in slots(EC2_NORMAL, end):
        for j in range(4):
            ok(t + timedelta(seconds=40 + j), k * 4 + j, j)

    for k, t in slots(START, end, timedelta(minutes=40)):
        at(t, "event", launch_event(account=account, region=region, group=noisy_group, zone=zones[0], at=t, ok=False,
                                    status_message=CONFIG_STATUS))
    for k, t in slots(START + timedelta(minutes=25), end, timedelta(minutes=60)):
        at(t, "event", launch_event(account=account, region=region, group=groups[(k * 7) % n], zone=zones[k % z], at=t,
                                    ok=False, status_message=DEVICE_STATUS))

    for delivered_in in (region, backup_region):
        at(HEALTH_OPENED, "event", health_event(account=account, region=region, delivered_in=delivered_in,
                                                at=HEALTH_OPENED, status="open", communication="demo-comm-1"))
    at(EVENT_ENDS, "event", health_event(account=account, region=region, delivered_in=region, at=EVENT_ENDS,
                                         status="closed", communication="demo-comm-9"))

    dynamodb = f"dynamodb.{region}.amazonaws.com"
    at(IMPAIRMENT, "dns", {"host": dynamodb, "resolves": False})
    at(DNS_RESTORED, "dns", {"host": dynamodb, "resolves": True})
    at(OWNER_DRIFT, "drift", {"arn": drift_target, "MaximumConcurrency": drift_cap})

    steps.sort(key=lambda s: (s.time, s.kind))
    return steps


def launch_outcomes(steps: Sequence[Step]) -> list[tuple[datetime, str, str, bool]]:
    """(time, group, zone, succeeded) of every capacity-class or successful launch in the stream."""
    out = []
    for s in steps:
        if s.kind != "event" or s.payload.get("source") != "aws.autoscaling":
            continue
        d = s.payload["detail"]
        message = d.get("StatusMessage", "")
        if s.payload["detail-type"] == "EC2 Instance Launch Successful":
            out.append((s.time, d["AutoScalingGroupName"], d["Details"]["Availability Zone"], True))
        elif "InsufficientInstanceCapacity" in message or "RequestLimitExceeded" in message:
            out.append((s.time, d["AutoScalingGroupName"], d["Details"]["Availability Zone"], False))
    return out
