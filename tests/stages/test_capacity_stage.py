"""The capacity stage on moto with the real engine: instances marked unhealthy during the
hold are reset when healthy now, the groups resume in waves with a hold between them, a
group whose replacements fail to launch is held again, and nothing terminates an
instance that is healthy now.

Moto marks nothing and terminates nothing on a resume; holdfast_fixtures.instance_health
emulates what EC2 Auto Scaling does (its docstring cites the User Guide)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from holdfast.clock import FakeClock
from holdfast.core.classify import CAPACITY
from holdfast.core.policy import CAPACITY as CAPACITY_STAGE
from holdfast.core.policy import NORMAL
from holdfast.core.signals import ASG, Signal
from holdfast.core.tags import ORIGINAL_KEY
from holdfast.ledger import Ledger
from holdfast.ledger import drain as ledger_records
from holdfast.ledger import signals as ledger_signals
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_fixtures.instance_health import InstanceHealth
from tests.support.fakes import Script
from tests.support.harness import T0

SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "capacity_wave_groups_percent": 25, "capacity_wave_instances_percent": 40,
                                  "capacity_wave_minutes": 5})
GROUPS = 8
SIZE = 3


@pytest.fixture
def aws_semantics(aws):
    from holdfast_fixtures.moto_patches import aws_semantics as patched

    with patched():
        yield


@pytest.fixture
def health(aws_semantics):
    with InstanceHealth() as emulated:
        yield emulated


def _fleet(clients) -> dict[str, str]:
    """GROUPS selected groups of SIZE instances, half of them with ELB health checks on a
    target group of their own: name -> ARN."""
    ec2, asg, elb = clients("ec2"), clients("autoscaling"), clients("elbv2")
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    ec2.create_launch_template(LaunchTemplateName="web-lt", LaunchTemplateData={"ImageId": "ami-12c6146b",
                                                                            "InstanceType": "t3.micro"})
    out = {}
    for i in range(GROUPS):
        name = f"web-{i}"
        extra = {}
        if i % 2:
            tg = elb.create_target_group(Name=f"tg-{i}", Protocol="TCP", Port=80, VpcId=vpc,
                                         TargetType="instance")["TargetGroups"][0]["TargetGroupArn"]
            extra = {"TargetGroupARNs": [tg], "HealthCheckType": "ELB"}
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateName": "web-lt"}, MinSize=SIZE, MaxSize=SIZE * 2,
            DesiredCapacity=SIZE, AvailabilityZones=["us-east-1a"],
            Tags=[{"Key": "holdfast:protect", "Value": "true", "PropagateAtLaunch": False}], **extra)
        out[name] = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]["AutoScalingGroupARN"]
    return out


def _group(clients, name):
    return clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]


def _instances(clients, name) -> list[str]:
    return sorted(i["InstanceId"] for i in _group(clients, name)["Instances"])


def _held(clients, name) -> bool:
    return ORIGINAL_KEY in {t["Key"] for t in _group(clients, name)["Tags"]}


class Event:
    def __init__(self, clients, table):
        self.clients, self.table = clients, table
        self.clock, self.script = FakeClock(T0), Script()

    def tick(self):
        return tick(Runtime(self.clients, SETTINGS, self.table, self.clock, controller_id="solo"),
                    collect=self.script.collect)

    def until_capacity(self):
        self.script.set("impaired", self.clock.now())
        assert self.tick().stage == "hold"
        self.clock.advance(60)
        self.script.set("recovering", self.clock.now())
        for _ in range(200):
            self.clock.advance(60)
            result = self.tick()
            if result.stage == CAPACITY_STAGE:
                return result
        raise AssertionError("never reached the capacity stage")


def test_the_capacity_stage_resets_the_healthy_resumes_in_waves_and_terminates_only_what_is_still_unhealthy(
        clients, ledger_table, health):
    # GIVEN a fleet engaged for an event, whose instances fail their health checks during the hold
    groups = _fleet(clients)
    event = Event(clients, ledger_table)
    event.script.set("impaired", event.clock.now())
    event.tick()
    assert all(_held(clients, n) for n in groups)
    marked_all, still_failing = [], []
    for n, name in enumerate(sorted(groups)):
        instances = _instances(clients, name)
        for i in instances[: 1 + n % 3]:   # 1 to 3 of each group's instances fail their checks
            health.fail(i)
            marked_all.append(i)
    # ... and most of them pass again by the time the region recovers: only 4 stay failing
    for i in marked_all:
        if len(still_failing) < 4 and marked_all.index(i) % 3 == 0:
            still_failing.append(i)
        else:
            health.recover(i)
    assert not health.terminated                       # suspended: marked, not replaced
    assert all(i["HealthStatus"] == "Unhealthy" for n in groups for i in _group(clients, n)["Instances"]
               if i["InstanceId"] in marked_all)

    # WHEN the plan reaches the capacity stage and ticks on until normal
    event.clock.advance(60)
    event.script.set("recovering", event.clock.now())
    resumed_at: dict[str, object] = {}
    waves = []
    for _ in range(300):
        event.clock.advance(60)
        result = event.tick()
        for name in groups:
            if name not in resumed_at and not _held(clients, name):
                resumed_at[name] = event.clock.now()
        waves += [a for a in result.actions if a.startswith("wave:")]
        if result.stage == NORMAL:
            break
    assert result.stage == NORMAL

    # THEN nothing terminated an instance that is healthy now, and each one still failing was replaced
    assert sorted(health.terminated) == sorted(still_failing)
    assert not set(health.terminated) & (set(marked_all) - set(still_failing))
    assert all(i["HealthStatus"] == "Healthy" for n in groups for i in _group(clients, n)["Instances"])
    assert all(len(_group(clients, n)["Instances"]) == SIZE for n in groups)   # replacements launched
    # ... and the groups came back in waves: at most 25 % of 8 groups a wave, 5 minutes apart
    times = sorted(set(resumed_at.values()))
    assert len(resumed_at) == GROUPS and len(times) >= GROUPS // 2
    assert all(sum(1 for t in resumed_at.values() if t == at) <= 2 for at in times)
    assert all(b - a >= timedelta(minutes=5) for a, b in zip(times, times[1:]))
    assert len(waves) == len(times) and "reset" in waves[0]


def test_a_group_whose_replacements_fail_to_launch_is_held_again_and_the_next_wave_waits(
        clients, ledger_table, health):
    groups = _fleet(clients)
    event = Event(clients, ledger_table)
    event.until_capacity()
    # run until the first wave has resumed a group
    first = None
    for _ in range(20):
        event.clock.advance(60)
        event.tick()
        back = sorted(n for n in groups if not _held(clients, n))
        if back:
            first = back
            break
    assert first and len(first) <= 2
    # WHEN its replacements fail with a capacity-class error (the detector's signal)
    failed_at = event.clock.now()
    ledger_signals.record(Ledger(clients("dynamodb"), ledger_table),
                          Signal(failed_at, ASG, "us-east-1a", first[0], CAPACITY, id=f"activity:{first[0]}"),
                          ttl_hours=24)
    event.clock.advance(60)
    result = event.tick()
    # THEN it is held again, and no other group resumes for a wave hold after the failure
    assert _held(clients, first[0])
    assert any(a.startswith("wave-step-back:1") for a in result.actions)
    resumed_now = {n for n in groups if not _held(clients, n)}
    for _ in range(3):
        event.clock.advance(60)
        event.tick()
        assert {n for n in groups if not _held(clients, n)} == resumed_now
    record = ledger_records.read_all(Ledger(clients("dynamodb"), ledger_table), ledger_records.WAVES)
    [doc] = [i.doc["waves"] for i in record.values()]
    assert list(doc["stepped_back"]) == [groups[first[0]]]


def test_holdfast_stage_says_how_many_were_marked_reset_and_left_to_replace(clients, ledger_table, health, capsys,
                                                                            monkeypatch):
    import json

    from holdfast.cli import main

    groups = _fleet(clients)
    event = Event(clients, ledger_table)
    event.script.set("impaired", event.clock.now())
    event.tick()
    for name in sorted(groups):
        first, second = _instances(clients, name)[:2]
        health.fail(first)
        health.fail(second)
        health.recover(first)     # passes again: reset, never terminated; `second` is left to replace
    event.until_capacity()
    while not any(not _held(clients, n) for n in groups):
        event.clock.advance(60)
        event.tick()
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: event.clock)
    capsys.readouterr()
    assert main(["--ledger-table", ledger_table, "--json", "stage"]) == 0
    capacity = json.loads(capsys.readouterr().out)["capacity"]
    assert (capacity["waves"], capacity["groups"], capacity["total_groups"]) == (1, 2, GROUPS)
    assert (capacity["marked"], capacity["reset"], capacity["to_replace"]) == (4, 2, 2)
    assert main(["--ledger-table", ledger_table, "stage"]) == 0
    assert ("capacity    1 wave(s), 2 of 8 group(s) resumed: 4 instance(s) marked unhealthy, 2 reset (healthy now), "
            "2 left to replace") in capsys.readouterr().out
