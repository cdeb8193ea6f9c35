"""The fleet snapshot the CLI and benchmark tests compare must see every owner-visible change.

GIVEN a small fleet of every kind, WHEN one owner-set value of each resource changes,
THEN that resource's snapshot differs and no other's does — so `after == before`
in the other tests can fail.
"""

from __future__ import annotations

from holdfast_demo.fleet import build_fleet, snapshot


def test_snapshot_sees_every_owner_visible_change(clients):
    fleet = build_fleet(clients, asgs=1, esms=1, asyncs=1, nlbs=1, services=1, unselected=0)
    before = snapshot(clients, fleet)
    assert len(before) == fleet.count() and None not in before.values()

    h = fleet.handles
    (asg,), (esm,), (fn,), (tg,), (target,) = (fleet.selected[k] for k in ("asg", "esm", "async", "nlb", "scalable-target"))
    clients("autoscaling").suspend_processes(AutoScalingGroupName=h[asg], ScalingProcesses=["ReplaceUnhealthy"])
    clients("lambda").update_event_source_mapping(UUID=h[esm], ScalingConfig={"MaximumConcurrency": 7})
    clients("lambda").put_function_event_invoke_config(FunctionName=h[fn], MaximumRetryAttempts=0)
    clients("elbv2").add_tags(ResourceArns=[tg], Tags=[{"Key": "holdfast:original", "Value": "x"}])
    clients("application-autoscaling").register_scalable_target(
        ServiceNamespace="ecs", ResourceId=h[target], ScalableDimension="ecs:service:DesiredCount",
        SuspendedState={"DynamicScalingInSuspended": True, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": False},
    )

    after = snapshot(clients, fleet)
    assert {arn for arn in before if after[arn] != before[arn]} == set(before)
