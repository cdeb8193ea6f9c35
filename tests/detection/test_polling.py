"""The polling fallback, with botocore's Stubber: moto's DescribeScalingActivities always
returns [], so the request and response shapes here are the API reference's."""

from datetime import timedelta

import boto3
import pytest
from botocore.stub import Stubber

from holdfast.core.classify import CAPACITY
from holdfast.observation.polling import poll
from holdfast.core.signals import LAUNCHED, POLLING
from tests.detection.factory import CAPACITY as CAPACITY_MESSAGE, SETTINGS, utc

NOW = utc(2025, 10, 20, 6, 50)
SINCE = NOW - timedelta(minutes=10)
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
    stub.add_response("describe_scaling_activities", {"Activities": page1, "NextToken": "t1"}, {"MaxRecords": 100})
    page2 = [activity(5, "web", "Failed", NOW - timedelta(minutes=8), fail),
             activity(6, "web", "Failed", NOW - timedelta(minutes=30), fail)]  # older than the window: stop here
    stub.add_response("describe_scaling_activities", {"Activities": page2, "NextToken": "t2"},
                      {"MaxRecords": 100, "NextToken": "t1"})

    signals = poll(client, SETTINGS, SINCE)

    assert [(s.id[-2:], s.group, s.zone, s.klass) for s in signals] == [
        ("01", "web", "us-east-1b", CAPACITY),
        ("03", "api", "us-east-1a", LAUNCHED),
        ("05", "web", "us-east-1a", CAPACITY),
    ]
    assert {s.source for s in signals} == {POLLING}


def test_no_selected_group_no_activity_call(autoscaling):
    client, stub = autoscaling
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": []}, TAG_FILTER)
    assert poll(client, SETTINGS, SINCE) == []
