"""Parsing EventBridge events and scaling activities into Signals."""

from datetime import datetime, timezone

import pytest

from holdfast.core.classify import CAPACITY
from holdfast.core.signals import (
    ELB_TERMINATION,
    HEALTH_CLOSED,
    HEALTH_OPEN,
    IGNORED,
    LAUNCHED,
    MALFORMED,
    POLLING,
    Signal,
    activity_signal,
    parse_event,
)
from tests.support.factory import REGION, SETTINGS, fixture, health, utc


def parse(event, region=REGION):
    return parse_event(event, region=region, settings=SETTINGS)


def test_launch_unsuccessful_as_aws_documents_it():
    parsed = parse(fixture("launch_unsuccessful"))
    s = parsed.signal
    assert (s.klass, s.group, s.zone, s.source) == (CAPACITY, "web", "us-east-1a", "aws.autoscaling")
    assert s.id == "activity:87654321-4321-4321-4321-210987654321"
    assert s.time == datetime(2025, 10, 20, 6, 48, 29, 512000, tzinfo=timezone.utc)  # the activity's EndTime
    assert "group web in us-east-1a" in parsed.reason


def test_launch_successful_is_the_recovery_signal():
    s = parse(fixture("launch_successful")).signal
    assert (s.klass, s.group, s.zone) == (LAUNCHED, "web", "us-east-1b")


def test_health_issue_open_and_closed():
    assert parse(fixture("health_issue_open")).signal.klass == HEALTH_OPEN
    closed = parse(fixture("health_issue_closed"))
    assert closed.signal.klass == HEALTH_CLOSED and closed.report_class == "health"


def test_another_regions_backup_copy_delivered_here_is_ignored():
    """us-east-1 is us-west-2's backup region: its bus receives us-west-2's public Health
    events with `region` us-east-1. The impaired region is detail.eventRegion."""
    parsed = parse(health("open", utc(2025, 10, 20), region="us-west-2", delivered_in="us-east-1"))
    assert parsed.signal is None and "us-west-2, not us-east-1" in parsed.reason


def test_backup_region_copy_is_the_same_signal():
    at = utc(2025, 10, 20, 7, 11)
    home = parse(health("open", at, delivered_in="us-east-1")).signal
    backup = parse(health("open", at, delivered_in="us-west-2")).signal
    assert home.id == backup.id  # eventArn + communicationId; the event ids differ


@pytest.mark.parametrize(
    "event, reason",
    [
        (health("open", utc(2025, 10, 20), region="us-west-2"), "us-west-2, not us-east-1"),
        (health("open", utc(2025, 10, 20), service="S3"), "S3, not one of EC2"),
        (health("open", utc(2025, 10, 20), category="scheduledChange"), "not an issue"),
        (health("upcoming", utc(2025, 10, 20)), "neither open nor closed"),
        ({**fixture("launch_unsuccessful"), "detail-type": "EC2 Instance Terminate Unsuccessful"}, "not a launch result"),
        # A scale-in (the Cause says why it was terminated) is not a health-check replacement.
        ({**fixture("launch_unsuccessful"), "detail-type": "EC2 Instance Terminate Successful"}, "not caused by an ELB health check"),
        ({**fixture("launch_unsuccessful"), "region": "eu-west-1"}, "launch in eu-west-1"),
        ({**fixture("launch_unsuccessful"), "source": "aws.ec2"}, "aws.ec2 is not a signal"),
    ],
)
def test_out_of_scope_events_are_ignored_with_a_reason(event, reason):
    parsed = parse(event)
    assert parsed.klass == IGNORED and parsed.signal is None
    assert reason in parsed.reason


def _without(path):
    event = fixture("launch_unsuccessful")
    target = event
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return event


@pytest.mark.parametrize(
    "event, reason",
    [
        ([1, 2], "not a JSON object"),
        (_without(("detail",)), "event.detail"),
        (_without(("id",)), "event.id"),
        (_without(("detail", "AutoScalingGroupName")), "detail.AutoScalingGroupName"),
        ({**fixture("launch_unsuccessful"), "time": "yesterday", "detail": {"AutoScalingGroupName": "g"}}, "unreadable time"),
        ({**fixture("health_issue_open"), "detail": {"service": "EC2"}}, "detail.eventArn"),
    ],
)
def test_malformed_events_say_why_and_never_raise(event, reason):
    parsed = parse(event)
    assert parsed.klass == MALFORMED and parsed.signal is None
    assert reason in parsed.reason


def test_health_times_in_rfc_1123_and_iso_both_read():
    event = health("open", utc(2025, 10, 20, 7, 11))
    assert parse(event).signal.time == utc(2025, 10, 20, 7, 11)


def test_polled_activity_is_the_same_signal_as_its_event():
    event = fixture("launch_unsuccessful")
    d = event["detail"]
    activity = {
        "ActivityId": d["ActivityId"],
        "AutoScalingGroupName": "web",
        "Description": "Launching a new EC2 instance.  Status Reason: " + d["StatusMessage"],
        "Cause": d["Cause"],
        "StartTime": datetime(2025, 10, 20, 6, 48, 27, 4000, tzinfo=timezone.utc),
        "EndTime": datetime(2025, 10, 20, 6, 48, 29, 512000, tzinfo=timezone.utc),
        "StatusCode": "Failed",
        "StatusMessage": d["StatusMessage"],
        "Progress": 100,
        "Details": '{"Subnet ID":"subnet-12345678","Availability Zone":"us-east-1a"}',
    }
    polled = activity_signal(activity)
    evented = parse(event).signal
    assert polled.source == POLLING
    assert (polled.id, polled.time, polled.klass, polled.zone) == (evented.id, evented.time, evented.klass, evented.zone)
    assert activity_signal({**activity, "Description": "Terminating EC2 instance: i-1"}) is None
    assert activity_signal({**activity, "StatusCode": "InProgress"}) is None


def test_signal_round_trips_through_a_dict():
    s = parse(fixture("launch_unsuccessful")).signal
    back = Signal.from_dict(s.to_dict())
    assert back == s and back.detail == s.detail


def _with_detail(**changes):
    event = fixture("launch_unsuccessful")
    event["detail"].update(changes)
    return event


@pytest.mark.parametrize(
    "event, reason",
    [
        (_with_detail(StatusMessage=123), "detail.StatusMessage"),
        (_with_detail(StatusMessage={"text": "InsufficientInstanceCapacity"}), "detail.StatusMessage"),
        (_with_detail(StatusMessage=None, Cause=["At 2025-10-20 an instance was started"]), "detail.Cause"),
        (_with_detail(Cause=7.5), "detail.Cause"),
        (_with_detail(Details={"Availability Zone": ["us-east-1a"]}), "Availability Zone"),
        (_with_detail(ActivityId={"id": 1}), "detail.ActivityId"),
    ],
)
def test_non_string_launch_fields_are_malformed_never_a_crash(event, reason):
    """classify() once did `pattern.search(123)` and raised TypeError out of
    parse_event, which promises never to raise; the detector Lambda then retried an event
    that can never parse. A non-string StatusMessage, Cause, zone or activity id is
    malformed (counted as EventsMalformed by holdfast.observation.intake) and dropped."""
    parsed = parse(event)
    assert parsed.klass == MALFORMED and parsed.signal is None
    assert reason in parsed.reason


def test_a_polled_activity_with_a_non_string_message_is_dropped_not_raised():
    activity = {
        "ActivityId": "a-1", "AutoScalingGroupName": "web", "Description": "Launching a new EC2 instance.",
        "StartTime": datetime(2025, 10, 20, 6, 48, tzinfo=timezone.utc), "StatusCode": "Failed",
        "StatusMessage": 42, "Details": '{"Availability Zone": 5}',
    }
    assert activity_signal(activity) is None


def test_a_termination_after_an_elb_health_check_failure_is_a_signal():
    parsed = parse(fixture("terminate_elb_health_check"))
    s = parsed.signal
    assert (s.klass, s.group, s.zone, s.source) == (ELB_TERMINATION, "web", "us-east-1c", "aws.autoscaling")
    assert s.id == "activity:87654321-4321-4321-4321-210987654421"
    assert s.time == datetime(2025, 10, 20, 14, 4, 30, 250000, tzinfo=timezone.utc)
    assert s.detail == {"instance": "i-0abcdef1234567890"}
    assert parsed.report_class == ELB_TERMINATION and "ELB health check" in parsed.reason


@pytest.mark.parametrize("cause", [
    "At 2025-10-20T14:04:12Z an instance was taken out of service in response to an EC2 instance status checks failure.",
    "At 2025-10-20T14:04:12Z a monitor alarm TargetTracking-web-AlarmLow was in state ALARM and triggered policy "
    "shrinking the capacity from 3 to 2.",
    None, 17,
])
def test_other_terminations_are_ignored(cause):
    event = fixture("terminate_elb_health_check")
    event["detail"]["Cause"] = cause
    parsed = parse(event)
    assert parsed.klass == IGNORED and parsed.signal is None


def test_polled_health_check_termination_is_the_same_signal_as_its_event():
    event = fixture("terminate_elb_health_check")
    d = event["detail"]
    activity = {
        "ActivityId": d["ActivityId"], "AutoScalingGroupName": "web", "Description": d["Description"],
        "Cause": d["Cause"], "StartTime": datetime(2025, 10, 20, 14, 4, 12, 911000, tzinfo=timezone.utc),
        "EndTime": datetime(2025, 10, 20, 14, 4, 30, 250000, tzinfo=timezone.utc), "StatusCode": "Successful",
        "Progress": 100, "Details": '{"Subnet ID":"subnet-34567890","Availability Zone":"us-east-1c"}',
    }
    polled, evented = activity_signal(activity), parse(event).signal
    assert polled.source == POLLING
    assert (polled.id, polled.time, polled.klass, polled.zone, polled.detail) == (
        evented.id, evented.time, evented.klass, evented.zone, evented.detail)
    assert activity_signal({**activity, "StatusCode": "InProgress"}) is None
    assert activity_signal({**activity, "Cause": "At 2025-10-20T14:04:12Z an instance was taken out of service in "
                                                "response to a user request."}) is None
