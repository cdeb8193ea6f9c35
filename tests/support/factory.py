"""Events and signals for the detection tests, built from the fixtures (AWS's documented
shapes) so that every test goes through the real parser."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from holdfast.core.signals import iso, parse_event, probe_signal
from holdfast.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures"
REGION = "us-east-1"
SETTINGS = Settings()

CAPACITY = (
    "We currently do not have sufficient m5.large capacity in the Availability Zone you requested ({zone}). "
    "Our system will be working on provisioning additional capacity. Launching EC2 instance failed."
)
BAD_AMI = "The image id '[ami-0badbadbadbadbad0]' does not exist. Launching EC2 instance failed."
THROTTLED = "Could not launch On-Demand Instances. RequestLimitExceeded - Request limit exceeded. Launching EC2 instance failed."


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _uuid(*parts) -> str:
    d = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"


def launch(group: str, zone: str, at: datetime, *, message: str | None = None, ok: bool = False, n: int = 0) -> dict:
    event = copy.deepcopy(fixture("launch_successful" if ok else "launch_unsuccessful"))
    activity = _uuid(group, zone, at, ok, n)
    event["id"] = _uuid("event", activity)
    event["time"] = iso(at)
    d = event["detail"]
    d.update(AutoScalingGroupName=group, ActivityId=activity, EndTime=iso(at), StartTime=iso(at))
    d["Details"]["Availability Zone"] = zone
    if not ok:
        d["StatusMessage"] = (message or CAPACITY).format(zone=zone)
    return event


def health(status: str, at: datetime, *, region: str = REGION, delivered_in: str = REGION,
           communication: str = "comm-1", service: str = "EC2", category: str = "issue",
           delivered_at: datetime | None = None) -> dict:
    """`at` is when AWS wrote the communication; `delivered_at` when EventBridge sent this copy."""
    event = copy.deepcopy(fixture("health_issue_open"))
    event["id"] = _uuid("health", region, delivered_in, communication, status)
    event["time"] = iso(delivered_at or at)
    event["region"] = delivered_in
    d = event["detail"]
    d.update(statusCode=status, communicationId=communication, service=service, eventRegion=region,
             lastUpdatedTime=at.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT"),
             eventTypeCategory=category,
             eventArn=f"arn:aws:health:{region}::event/{service}/AWS_{service}_OPERATIONAL_ISSUE/AWS_{service}_OPERATIONAL_ISSUE_X1")
    return event


def signal(event: dict, settings: Settings = SETTINGS, region: str = REGION):
    parsed = parse_event(event, region=region, settings=settings)
    assert parsed.signal is not None, parsed
    return parsed.signal


def capacity(group: str, zone: str, at: datetime, **kw):
    return signal(launch(group, zone, at, **kw))


def config(group: str, zone: str, at: datetime, n: int = 0):
    return signal(launch(group, zone, at, message=BAD_AMI, n=n))


def launched(group: str, zone: str, at: datetime):
    return signal(launch(group, zone, at, ok=True))


def probe(target: str, ok: bool, at: datetime):
    return probe_signal(target, ok, None if ok else "empty answer", at)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)
