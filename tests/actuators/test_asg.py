"""Auto Scaling groups through engage -> restore, with owner states that make it hard."""

from __future__ import annotations

from holdfast.core.model import ALREADY, ENGAGED, RESTORED
from holdfast.core.tags import ORIGINAL_KEY
from tests.support import walks
from tests.support.fleet import describe_asg, make_asg


def suspended(clients, name):
    return sorted(p["ProcessName"] for p in describe_asg(clients, name)["SuspendedProcesses"])


def tags(clients, name):
    return {t["Key"]: t["Value"] for t in describe_asg(clients, name)["Tags"]}


def test_engage_suspends_only_what_the_owner_had_not_and_restore_resumes_only_those(clients, ledger_table, settings):
    # GIVEN a group whose owner already suspended AZRebalance (in Holdfast's set) and Launch
    make_asg(clients, "g1", suspended=("AZRebalance", "Launch"))
    make_asg(clients, "twin", selected=False)
    twin_before = describe_asg(clients, "twin")

    report = walks.engage_all(clients, settings, ledger_table, kinds=("asg",))

    assert [(o.action, o.changes) for o in report.outcomes] == [
        (ENGAGED, {"ReplaceUnhealthy": {"from": False, "to": True}})
    ]
    assert suspended(clients, "g1") == ["AZRebalance", "Launch", "ReplaceUnhealthy"]
    assert ORIGINAL_KEY in tags(clients, "g1")
    assert report.api_calls["asg"] >= 3

    again = walks.engage_all(clients, settings, ledger_table, kinds=("asg",))
    assert [o.action for o in again.outcomes] == [ALREADY]

    restored = walks.relax_all(clients, settings, ledger_table, kinds=("asg",))
    assert [o.action for o in restored.outcomes] == [RESTORED]
    assert suspended(clients, "g1") == ["AZRebalance", "Launch"]
    assert tags(clients, "g1") == {"holdfast:protect": "true", "team": "owner"}
    assert describe_asg(clients, "twin") == twin_before


def test_a_process_the_owner_suspends_after_the_listing_is_theirs_and_stays_suspended(clients, ledger_table, settings):
    """The engage walk lists the groups in bulk and may reach a group minutes later: the
    original is taken from a read just before the write-ahead, not from the listing."""
    import boto3

    make_asg(clients, "g1")
    owner = boto3.client("autoscaling", region_name="us-east-1")
    listing = clients("autoscaling")

    def owner_suspends_after_the_listing(**_):
        listing.meta.events.unregister("after-call.auto-scaling.DescribeAutoScalingGroups", owner_suspends_after_the_listing)
        owner.suspend_processes(AutoScalingGroupName="g1", ScalingProcesses=["AZRebalance"])

    listing.meta.events.register("after-call.auto-scaling.DescribeAutoScalingGroups", owner_suspends_after_the_listing)
    [outcome] = walks.engage_all(clients, settings, ledger_table, kinds=("asg",)).outcomes
    assert outcome.action == ENGAGED and set(outcome.changes) == {"ReplaceUnhealthy"}
    assert suspended(clients, "g1") == ["AZRebalance", "ReplaceUnhealthy"]

    [restored] = walks.relax_all(clients, settings, ledger_table, kinds=("asg",)).outcomes
    assert restored.action == RESTORED
    assert suspended(clients, "g1") == ["AZRebalance"], "the owner's suspension was resumed"


def test_a_group_deleted_after_the_listing_is_reported_vanished(clients, ledger_table, settings):
    import boto3

    make_asg(clients, "g1")
    listing = clients("autoscaling")

    def owner_deletes(**_):
        listing.meta.events.unregister("after-call.auto-scaling.DescribeAutoScalingGroups", owner_deletes)
        boto3.client("autoscaling", region_name="us-east-1").delete_auto_scaling_group(AutoScalingGroupName="g1",
                                                                                        ForceDelete=True)

    listing.meta.events.register("after-call.auto-scaling.DescribeAutoScalingGroups", owner_deletes)
    [outcome] = walks.engage_all(clients, settings, ledger_table, kinds=("asg",)).outcomes
    assert outcome.action == "vanished"
