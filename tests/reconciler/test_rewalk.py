"""Kinds held in posture are walked again while the hold lasts.

On moto with the real engine. A group created and opted in during a long hold (a
blue/green deploy), a process an IaC apply resumed and a cap an IaC apply reset are all
protected by the re-walk every `rewalk_minutes`; the re-walk lists in bulk and reads only
what the listing shows changed (one ListTags for the one mapping whose cap changed, none
for the others).
"""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.clock import FakeClock
from holdfast.core.policy import NORMAL
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from tests.support.fakes import Script
from tests.support.fleet import make_asg
from tests.support.harness import T0

SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "rewalk_minutes": 5})
HOLDFAST = {"ReplaceUnhealthy", "AZRebalance"}


@pytest.fixture
def aws_semantics(aws):
    from holdfast_fixtures.moto_patches import aws_semantics as patched

    with patched():
        yield


def suspended(clients, name) -> set[str]:
    group = clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
    return {p["ProcessName"] for p in group["SuspendedProcesses"]}


def cap(clients, arn):
    mapping = clients("lambda").get_event_source_mapping(UUID=arn.rsplit(":", 1)[1])
    return (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")


def test_a_long_hold_protects_what_was_created_opted_in_or_reset_during_it(clients, ledger_table, aws_semantics):
    fleet = build_fleet(clients, asgs=2, esms=3, unselected=0, workers=1)
    before = snapshot(clients, fleet)
    clock, script = FakeClock(T0), Script()
    run = lambda: tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo"), collect=script.collect)
    group_arn = sorted(fleet.selected["asg"])[0]
    group = group_arn.split("autoScalingGroupName/")[1]
    mappings = sorted(fleet.selected["esm"])

    # GIVEN an impairment: everything engaged, every kind done
    script.set("impaired", clock.now())
    first = run()
    assert first.complete and suspended(clients, group) >= HOLDFAST

    # WHEN, during the hold, a new group is opted in and an IaC apply resets a group and a mapping
    clock.advance(60)
    make_asg(clients, "green")
    originals = {r.arn: r.original for r in ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()}
    reset = next(a for a in mappings if cap(clients, a) != originals[a]["MaximumConcurrency"])
    clients("lambda").update_event_source_mapping(
        UUID=reset.rsplit(":", 1)[1],
        ScalingConfig={} if originals[reset]["MaximumConcurrency"] is None else {"MaximumConcurrency": originals[reset]["MaximumConcurrency"]})
    resumed = set(originals[group_arn])  # the processes Holdfast suspended there (not the owner's own)
    clients("autoscaling").resume_processes(AutoScalingGroupName=group, ScalingProcesses=sorted(resumed))

    # THEN nothing happens before the re-walk period is up (the kinds are done)
    for _ in range(3):
        run()
        clock.advance(60)
    assert suspended(clients, "green") == set()

    # AND the re-walk protects all three, reading only what changed
    clock.advance(60)
    calls = Counter(clients.calls)
    result = run()
    made = clients.calls - calls
    assert suspended(clients, "green") == HOLDFAST
    assert suspended(clients, group) >= HOLDFAST
    assert cap(clients, reset) == SETTINGS.esm_floor
    assert made["lambda:ListTags"] == 1, made      # the one mapping whose listing changed
    assert any(a.startswith("rewalk:asg") for a in result.actions) and any(a.startswith("rewalk:esm") for a in result.actions)

    # AND the next re-walk, nothing having changed, reads nothing per resource and writes nothing
    clock.advance(5 * 60)
    calls = Counter(clients.calls)
    run()
    made = clients.calls - calls
    assert made["lambda:ListTags"] == 0 and not [op for op in made if op.split(":")[1].startswith(("Suspend", "Update", "Tag"))
                                                 and not op.startswith("dynamodb")], made

    # AND the recovery restores everything exactly, the new group too
    script.set("recovering", clock.now())
    for _ in range(120):
        clock.advance(60)
        if run().stage == NORMAL:
            break
    assert snapshot(clients, fleet) == before
    assert suspended(clients, "green") == set()
