"""The polling fallback, with botocore's Stubber: moto's DescribeScalingActivities always
returns [], so the request and response shapes here are the API reference's."""

from datetime import timedelta

import boto3
import pytest
from botocore.stub import Stubber

from holdfast.core.classify import CAPACITY
from holdfast.observation import polling
from holdfast.observation.polling import poll

PER_GROUP_MAX = getattr(polling, "PER_GROUP_MAX", 10)
from holdfast.core.signals import LAUNCHED, POLLING
from tests.support.factory import CAPACITY as CAPACITY_MESSAGE
from tests.support.factory import SETTINGS, utc

NOW = utc(2025, 10, 20, 6, 50)
SINCE = NOW - timedelta(minutes=10)
LOWER = {"Name": "StartTimeLowerBound", "Values": ["2025-10-20T06:40:00.000Z"]}
TAG_FILTER = {"Filters": [{"Name": "tag:holdfast:protect", "Values": ["true"]}], "MaxRecords": 100}


def activity(n, group, status, start, message="", zone="us-east-1a"):
    item = {
        "ActivityId": f"5ef2d6c1-0000-4000-8000-{n:012d}",
        "AutoScalingGroupName": group,
        "Description": "Launching a new EC2 instance" + (f": i-0{n:016x}" if status == "Successful" else ".  Status Reason: " + message),
        "Cause": f"At {start.isoformat()} an instance was started in response to a difference between desired and actual capacity, increasing the capacity from 1 to 2.",
        "StartTime": start,
        "EndTime": start + timedelta(seconds=30),
        "StatusCode": status,
        "Progress": 100,
        "Details": '{"Subnet ID":"subnet-1a2b3c4d","Availability Zone":"%s"}' % zone,
    }
    if message:  # StatusMessage has a minimum length of 1: absent when there is nothing to say
        item["StatusMessage"] = message
    return item


def group(name):
    return {
        "AutoScalingGroupName": name,
        "MinSize": 1, "MaxSize": 4, "DesiredCapacity": 2, "DefaultCooldown": 300,
        "AvailabilityZones": ["us-east-1a", "us-east-1b"], "HealthCheckType": "EC2",
        "CreatedTime": utc(2025, 1, 1),
    }


@pytest.fixture
def autoscaling():
    client = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_failed_and_successful_launches_of_selected_groups_since_the_window(autoscaling):
    client, stub = autoscaling
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [group("web"), group("api")]}, TAG_FILTER)
    fail = CAPACITY_MESSAGE.format(zone="us-east-1b")
    page1 = [
        activity(1, "web", "Failed", NOW - timedelta(minutes=1), fail, zone="us-east-1b"),
        activity(2, "not-selected", "Failed", NOW - timedelta(minutes=2), fail),
        activity(3, "api", "Successful", NOW - timedelta(minutes=3)),
        activity(4, "api", "InProgress", NOW - timedelta(minutes=4)),
    ]
    # Each selected group alone, from the window's start (few groups: never account-wide).
    stub.add_response("describe_scaling_activities", {"Activities": page1[2:], "NextToken": "a1"},
                      {"AutoScalingGroupName": "api", "Filters": [LOWER], "MaxRecords": 100})
    stub.add_response("describe_scaling_activities", {"Activities": []},
                      {"AutoScalingGroupName": "api", "Filters": [LOWER], "MaxRecords": 100, "NextToken": "a1"})
    page2 = [activity(5, "web", "Failed", NOW - timedelta(minutes=8), fail),
             activity(6, "web", "Failed", NOW - timedelta(minutes=30), fail)]  # older than the window: stop here
    stub.add_response("describe_scaling_activities", {"Activities": page1[:2] + page2, "NextToken": "w1"},
                      {"AutoScalingGroupName": "web", "Filters": [LOWER], "MaxRecords": 100})

    signals = poll(client, SETTINGS, SINCE)

    assert sorted((s.id[-2:], s.group, s.zone, s.klass) for s in signals) == [
        ("01", "web", "us-east-1b", CAPACITY),
        ("03", "api", "us-east-1a", LAUNCHED),
        ("05", "web", "us-east-1a", CAPACITY),
    ]
    assert not signals.truncated
    assert {s.source for s in signals} == {POLLING}


def test_no_selected_group_no_activity_call(autoscaling):
    client, stub = autoscaling
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": []}, TAG_FILTER)
    assert poll(client, SETTINGS, SINCE) == []


def test_many_groups_one_account_wide_read_bounded_by_start_time(autoscaling):
    """More than PER_GROUP_MAX groups: one account-wide listing, but only from the
    window's start (AWS: without a group name the call is account-wide and slow)."""
    client, stub = autoscaling
    names = [f"g{i:02d}" for i in range(PER_GROUP_MAX + 1)]
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [group(n) for n in names]}, TAG_FILTER)
    fail = CAPACITY_MESSAGE.format(zone="us-east-1a")
    stub.add_response("describe_scaling_activities",
                      {"Activities": [activity(1, "g03", "Failed", NOW - timedelta(minutes=1), fail)]},
                      {"Filters": [LOWER], "MaxRecords": 100})
    signals = poll(client, SETTINGS, SINCE)
    assert [s.group for s in signals] == ["g03"]


def test_a_poll_stops_at_its_time_budget_and_says_so(autoscaling):
    """A slow hour: no request starts after the budget; what was read is kept."""
    client, stub = autoscaling
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [group("web"), group("api")]}, TAG_FILTER)
    fail = CAPACITY_MESSAGE.format(zone="us-east-1a")
    stub.add_response("describe_scaling_activities",
                      {"Activities": [activity(1, "api", "Failed", NOW - timedelta(minutes=1), fail)], "NextToken": "a1"},
                      {"AutoScalingGroupName": "api", "Filters": [LOWER], "MaxRecords": 100})
    clock = iter([0.0, 0.0, 25.0])   # the first page took 25 s of a 20 s budget
    signals = poll(client, SETTINGS, SINCE, monotonic=lambda: next(clock), budget_seconds=20)
    assert [s.group for s in signals] == ["api"] and signals.truncated


def test_the_tick_polls_with_timeouts_for_a_bad_hour(monkeypatch):
    """The fallback gets its own client: a read timeout well above the probes' 2 s, and
    one attempt (the next tick re-reads the window), not the probes' settings."""
    from holdfast.aws import Clients
    from holdfast.clock import FakeClock
    from holdfast.observation import collect
    from holdfast.runtime import Runtime

    seen = {}

    def fake_poll(client, settings, since, **kw):
        seen["config"] = client.meta.config
        seen["monotonic"] = kw.get("monotonic")
        raise RuntimeError("stop here")

    monkeypatch.setattr(polling, "poll", fake_poll)
    monkeypatch.setattr("holdfast.observation.probes.run", lambda *a, **k: [])
    runtime = Runtime(clients=Clients(region="us-east-1"), settings=SETTINGS, table="t", clock=FakeClock(NOW))
    with pytest.raises(RuntimeError, match="stop here"):
        collect(runtime, NOW, None)
    assert seen["config"].read_timeout >= 10 > SETTINGS.probe_timeout_seconds
    assert seen["config"].retries["total_max_attempts"] == 1
    assert seen["monotonic"] is not None
