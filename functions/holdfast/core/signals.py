"""Signals: everything the detector sees, parsed into one typed, normalized form.

Pure: no boto3, no clock. Four sources feed it:

- ASG "EC2 Instance Launch Unsuccessful" / "EC2 Instance Launch Successful" events
  (`aws.autoscaling`). A failure is classified (classify.py); a success is the recovery
  signal. The id is the activity's (`activity:<ActivityId>`), so the event, its
  redelivery, and the same activity found by the polling fallback are one signal.
  The time is the activity's EndTime (else StartTime, else the event's time).
- ASG "EC2 Instance Terminate Successful" events whose Cause says the instance was
  "taken out of service in response to an ELB system health check failure" (the
  wording the Auto Scaling user guide documents): health-check replacements, which
  across several groups and zones are the October pattern (new instances without
  network state failing their load balancer's health checks). Other terminations
  (scale-in, EC2 status checks, a user's request) are ignored.
- AWS Health events (`aws.health`, "AWS Health Event") for a service in
  settings.health_services, category `issue`, affecting this region. The affected
  region is `detail.eventRegion` (the eventArn's region only when an event lacks it);
  the event's own `region` is only where it was delivered. AWS Health sends each
  public event to the affected region and to a backup region (us-west-2 for most
  regions, us-east-1 for us-west-2), so this region's bus receives other regions'
  backup copies (ignored here: their eventRegion is not this region), while the backup
  copies of this region's events go to the other bus. The id is
  `<eventArn>#<communicationId>`, so a redelivered copy is the same signal.
- Probe results (probes.py) and polled scaling activities (polling.py).

Which region is "this region" is the caller's knowledge (the Lambda's AWS_REGION, the
CLI's --region), passed to `parse_event`; Health events for other regions are
`ignored` here and never reach the detector, which therefore needs no region.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Mapping, NamedTuple

from holdfast.core.classify import CAPACITY, CONFIGURATION, UNKNOWN, classify

# The API probes (holdfast.observation.probes): one cheap read-only call per service,
# (client method, arguments). settings.probe_api_services may name these services only.
PROBE_API_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "dynamodb": ("list_tables", {"Limit": 1}),
    "ec2": ("describe_availability_zones", {}),
    "autoscaling": ("describe_auto_scaling_groups", {"MaxRecords": 1}),
    "lambda": ("list_functions", {"MaxItems": 1}),
    "sqs": ("list_queues", {"MaxResults": 1}),
}

# Signal classes.
LAUNCHED = "launch"
ELB_TERMINATION = "elb-termination"   # an instance replaced after failing its ELB health check
HEALTH_OPEN, HEALTH_CLOSED = "health-open", "health-closed"
PROBE_OK, PROBE_FAILED = "probe-ok", "probe-failed"
# A probe that only timed out in a round where nothing else failed: the controller may be
# the slow one (a loaded Lambda, a slow network path), so it is evidence of nothing.
PROBE_INCONCLUSIVE = "probe-inconclusive"
LAUNCH_FAILURES = (CAPACITY, CONFIGURATION, UNKNOWN)
KLASSES = LAUNCH_FAILURES + (LAUNCHED, ELB_TERMINATION, HEALTH_OPEN, HEALTH_CLOSED, PROBE_OK, PROBE_FAILED,
                             PROBE_INCONCLUSIVE)

# Sources.
ASG, HEALTH, PROBE, POLLING = "aws.autoscaling", "aws.health", "probe", "polling"

LAUNCH_FAILED_TYPE = "EC2 Instance Launch Unsuccessful"
LAUNCH_OK_TYPE = "EC2 Instance Launch Successful"
TERMINATE_OK_TYPE = "EC2 Instance Terminate Successful"
# Every Auto Scaling detail type the detector reads (the stack's EventBridge rule matches these).
ASG_DETAIL_TYPES = (LAUNCH_FAILED_TYPE, LAUNCH_OK_TYPE, TERMINATE_OK_TYPE)
_ELB_HEALTH_CHECK = re.compile(r"in response to an? ELB system health check failure", re.IGNORECASE)
HEALTH_TYPE = "AWS Health Event"

# What `holdfast detect` reports for each event.
IGNORED, MALFORMED = "ignored", "malformed"


@dataclass(frozen=True)
class Signal:
    time: datetime  # UTC, aware
    source: str
    zone: str | None
    group: str | None
    klass: str
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": iso(self.time),
            "source": self.source,
            "zone": self.zone,
            "group": self.group,
            "klass": self.klass,
            "detail": dict(self.detail),
            "id": self.id,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Signal":
        return cls(
            time=parse_time(raw["time"]),
            source=raw["source"],
            zone=raw.get("zone"),
            group=raw.get("group"),
            klass=raw["klass"],
            detail=dict(raw.get("detail") or {}),
            id=raw["id"],
        )


class Parsed(NamedTuple):
    """One event's fate: its report class (as `holdfast detect` prints it), why, and
    the signal it became (None when ignored or malformed)."""

    klass: str
    reason: str
    signal: Signal | None = None

    @property
    def report_class(self) -> str:
        if self.signal is None:
            return self.klass
        return "health" if self.signal.source == HEALTH else self.signal.klass


class Malformed(ValueError):
    """An event that does not have the shape its source documents."""


def iso(t: datetime) -> str:
    """Fixed-width UTC ISO-8601, so that ledger sort keys order by time."""
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: Any) -> datetime:
    """ISO-8601 (EventBridge, Auto Scaling) or RFC 1123 (AWS Health's detail times)."""
    if isinstance(value, datetime):
        t = value
    elif isinstance(value, str) and value:
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            try:
                t = parsedate_to_datetime(value)
            except (TypeError, ValueError) as err:
                raise Malformed(f"unreadable time {value!r}") from err
    else:
        raise Malformed(f"unreadable time {value!r}")
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc)


def _field(mapping: Mapping[str, Any], key: str, where: str = "detail") -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{where}.{key} is missing or not a string")
    return value


def _text(mapping: Mapping[str, Any], key: str, where: str = "detail") -> str | None:
    """An optional text field: a string or absent (None). Anything else is malformed:
    the classifier and the detector read these as text (a number here once raised
    TypeError out of the parser, and the detector Lambda retried an event that can never
    parse)."""
    value = mapping.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"{where}.{key} is not a string ({type(value).__name__})")
    return value


def parse_event(event: Any, *, region: str, settings) -> Parsed:
    """An EventBridge event -> its fate. Never raises: a bad event is `malformed`."""
    try:
        if not isinstance(event, Mapping):
            raise Malformed("event is not a JSON object")
        for key in ("id", "source", "detail-type", "time"):
            _field(event, key, "event")
        if not isinstance(event.get("detail"), Mapping):
            raise Malformed("event.detail is missing or not an object")
        if event["source"] == ASG:
            return _launch_event(event, region)
        if event["source"] == HEALTH:
            return _health_event(event, region, settings)
        return Parsed(IGNORED, f"source {event['source']} is not a signal")
    except Malformed as err:
        return Parsed(MALFORMED, str(err))


def _launch_event(event: Mapping[str, Any], region: str) -> Parsed:
    kind = event["detail-type"]
    if kind == TERMINATE_OK_TYPE:
        return _termination_event(event, region)
    if kind not in (LAUNCH_FAILED_TYPE, LAUNCH_OK_TYPE):
        return Parsed(IGNORED, f"{kind} is not a launch result")
    detail = event["detail"]
    group = _field(detail, "AutoScalingGroupName")
    details = detail.get("Details") or {}
    if not isinstance(details, Mapping):
        raise Malformed("detail.Details is not an object")
    if event.get("region") not in (None, region):
        return Parsed(IGNORED, f"launch in {event.get('region')}, not {region}")
    zone = _text(details, "Availability Zone", "detail.Details")
    status_message, cause = _text(detail, "StatusMessage"), _text(detail, "Cause")
    activity = _text(detail, "ActivityId")
    when = parse_time(detail.get("EndTime") or detail.get("StartTime") or event["time"])
    signal_id = f"activity:{activity}" if activity else f"event:{event['id']}"
    return _launch_signal(
        when=when,
        source=ASG,
        group=group,
        zone=zone,
        ok=kind == LAUNCH_OK_TYPE,
        status_message=status_message,
        cause=cause,
        signal_id=signal_id,
    )


def _launch_signal(*, when, source, group, zone, ok, status_message, cause, signal_id) -> Parsed:
    where = f"group {group} in {zone or 'an unknown zone'}"
    if ok:
        klass, reason = LAUNCHED, f"launch succeeded: {where}"
        detail = {}
    else:
        klass, why = classify(status_message, cause)
        reason = f"{why}: {where}"
        detail = {"reason": why, "message": (status_message or cause or "")[:500]}
    return Parsed(klass, reason, Signal(when, source, zone, group, klass, detail, signal_id))


def _termination_event(event: Mapping[str, Any], region: str) -> Parsed:
    detail = event["detail"]
    group = _field(detail, "AutoScalingGroupName")
    details = detail.get("Details") or {}
    if not isinstance(details, Mapping):
        raise Malformed("detail.Details is not an object")
    if event.get("region") not in (None, region):
        return Parsed(IGNORED, f"termination in {event.get('region')}, not {region}")
    cause = detail.get("Cause")
    if not isinstance(cause, str) or not _ELB_HEALTH_CHECK.search(cause):
        return Parsed(IGNORED, f"termination in group {group} not caused by an ELB health check")
    when = parse_time(detail.get("EndTime") or detail.get("StartTime") or event["time"])
    signal_id = f"activity:{detail['ActivityId']}" if detail.get("ActivityId") else f"event:{event['id']}"
    return _termination_signal(when, ASG, group, details.get("Availability Zone"), detail.get("EC2InstanceId"), signal_id)


def _termination_signal(when, source, group, zone, instance, signal_id) -> Parsed:
    where = f"group {group} in {zone or 'an unknown zone'}"
    detail = {"instance": instance} if isinstance(instance, str) and instance else {}
    return Parsed(ELB_TERMINATION, f"instance replaced after an ELB health check failure: {where}",
                  Signal(when, source, zone, group, ELB_TERMINATION, detail, signal_id))


def activity_signal(activity: Mapping[str, Any]) -> Signal | None:
    """A scaling activity (DescribeScalingActivities) -> a launch signal (or an ELB
    health-check termination), or None when it is neither a finished launch nor one (or
    not one this parser can read: dropped, never raised)."""
    try:
        return _activity_signal(activity)
    except Malformed:
        return None


def _activity_signal(activity: Mapping[str, Any]) -> Signal | None:
    description = str(activity.get("Description", ""))
    if description.startswith("Terminating EC2 instance"):
        return _polled_termination(activity)
    if not description.startswith("Launching a new EC2 instance"):
        return None
    status = activity.get("StatusCode")
    # A failed launch ends Failed or Cancelled, its StatusMessage saying why.
    if status not in ("Successful", "Failed", "Cancelled"):
        return None
    try:
        details = json.loads(activity.get("Details") or "{}")
    except (json.JSONDecodeError, TypeError):
        details = {}
    return _launch_signal(
        when=parse_time(activity.get("EndTime") or activity.get("StartTime")),
        source=POLLING,
        group=_field(activity, "AutoScalingGroupName", "activity"),
        zone=_text(details, "Availability Zone", "activity.Details") if isinstance(details, dict) else None,
        ok=status == "Successful",
        status_message=_text(activity, "StatusMessage", "activity"),
        cause=_text(activity, "Cause", "activity"),
        signal_id=f"activity:{activity['ActivityId']}",
    ).signal


def _polled_termination(activity: Mapping[str, Any]) -> Signal | None:
    cause = activity.get("Cause")
    if activity.get("StatusCode") != "Successful" or not isinstance(cause, str) or not _ELB_HEALTH_CHECK.search(cause):
        return None
    try:
        details = json.loads(activity.get("Details") or "{}")
    except json.JSONDecodeError:
        details = {}
    instance = description_instance(str(activity.get("Description", "")))
    return _termination_signal(
        parse_time(activity.get("EndTime") or activity["StartTime"]), POLLING, activity["AutoScalingGroupName"],
        details.get("Availability Zone") if isinstance(details, dict) else None, instance,
        f"activity:{activity['ActivityId']}",
    ).signal


def description_instance(description: str) -> str | None:
    """The instance id in "Terminating EC2 instance: i-0123..."."""
    match = re.search(r"\bi-[0-9a-f]+\b", description)
    return match.group(0) if match else None


def _health_event(event: Mapping[str, Any], region: str, settings) -> Parsed:
    if event["detail-type"] != HEALTH_TYPE:
        return Parsed(IGNORED, f"{event['detail-type']} is not an AWS Health Event")
    detail = event["detail"]
    arn = _field(detail, "eventArn")
    service = _field(detail, "service")
    category = _field(detail, "eventTypeCategory")
    status = _field(detail, "statusCode")
    communication = _field(detail, "communicationId")
    affected = detail.get("eventRegion") or (arn.split(":")[3] if arn.count(":") >= 5 else "")
    if category != "issue":
        return Parsed(IGNORED, f"Health {category}, not an issue")
    if service not in settings.health_services:
        return Parsed(IGNORED, f"Health issue for {service}, not one of {', '.join(settings.health_services)}")
    if affected != region:
        return Parsed(IGNORED, f"Health issue for {affected or 'no region'}, not {region}")
    if status not in ("open", "closed"):
        return Parsed(IGNORED, f"Health issue {status}, neither open nor closed")
    klass = HEALTH_OPEN if status == "open" else HEALTH_CLOSED
    signal = Signal(
        # When AWS wrote this communication, identical in every copy; delivery times differ.
        time=parse_time(detail.get("lastUpdatedTime") or event["time"]),
        source=HEALTH,
        zone=None,
        group=None,
        klass=klass,
        detail={
            "eventArn": arn,
            "service": service,
            "eventTypeCode": detail.get("eventTypeCode", ""),
            "communicationId": communication,
            "deliveredIn": event.get("region", ""),
        },
        id=f"{arn}#{communication}",
    )
    return Parsed(klass, f"{service} issue {status} in {region}: {detail.get('eventTypeCode', arn)}", signal)


class ProbeOutcome(NamedTuple):
    """What one probe target did in a round: its error (None when it answered) and
    whether that error was only a timeout."""

    error: str | None
    timed_out: bool = False


def probe_round(outcomes: Mapping[str, ProbeOutcome], now: datetime) -> list[Signal]:
    """One signal per target for a round of probes.

    A timeout is evidence only beside an answer that failed: an empty DNS answer or an
    error from an endpoint (what clients saw in October). A round whose only failures
    are timeouts is what a slow controller sees of a healthy region (a loaded Lambda, a
    slow network path, a CPU-starved host) as much as what a hung region looks like, so
    its timeouts are inconclusive: recorded, never counted toward a probe's failure
    ratio. A region that only hangs still shows itself through launch failures and
    AWS Health."""
    answered_failure = any(o.error is not None and not o.timed_out for o in outcomes.values())
    return [probe_signal(target, o.error is None, o.error, now,
                         inconclusive=o.timed_out and not answered_failure)
            for target, o in outcomes.items()]


def probe_signal(target: str, ok: bool, error: str | None, now: datetime, *, inconclusive: bool = False) -> Signal:
    """One probe result; its id is unique per target and tick."""
    return Signal(
        time=now,
        source=PROBE,
        zone=None,
        group=None,
        klass=PROBE_OK if ok else PROBE_INCONCLUSIVE if inconclusive else PROBE_FAILED,
        detail={"target": target, **({"error": error[:300]} if error else {})},
        id=f"probe:{target}@{iso(now)}",
    )
