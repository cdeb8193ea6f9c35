"""Record tags written and removed in batches where the API takes several resources: Auto
Scaling CreateOrUpdateTags / DeleteTags (12 groups of two tags a call), ELB AddTags /
RemoveTags (20 ARNs a call, one tag set each). Neither size is in the API references, so
both are assumptions, and a batch AWS refuses for its size is written one resource a call.
The write-ahead order holds for every resource of a batch, and one resource's error stays
its own."""

from __future__ import annotations

from collections import Counter

import pytest
from botocore.exceptions import ClientError

from holdfast.core.model import ENGAGED, FAILED, RESTORED
from holdfast.core.tags import read_record
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import describe_asg, make_asg, make_target_group

pytestmark = pytest.mark.usefixtures("aws_semantics")


class Calls:
    """Every call of one client, in order: (operation, params)."""

    def __init__(self, client, fail=None):
        self.seen: list[tuple[str, dict]] = []
        self.fail = fail or (lambda name, params: False)
        client.meta.events.register("before-parameter-build", self)

    def __call__(self, model, params, **_):
        self.seen.append((model.name, params))
        if self.fail(model.name, params):
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "injected"}}, model.name)

    def count(self) -> Counter:
        return Counter(name for name, _ in self.seen)


def test_groups_are_tagged_twelve_a_call_and_each_is_suspended_after_its_record(clients, ledger_table):
    names = [f"g{i:02d}" for i in range(14)]
    for name in names:
        make_asg(clients, name)
    calls = Calls(clients("autoscaling"))
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("asg",))
    assert {o.action for o in report.outcomes} == {ENGAGED} and len(report.outcomes) == 14
    assert calls.count()["CreateOrUpdateTags"] == 2          # 14 groups: 12 + 2
    assert calls.count()["SuspendProcesses"] == 14
    for name in names:
        # Write-ahead: the group's record tags went out before its processes were suspended.
        tagged = next(i for i, (op, p) in enumerate(calls.seen)
                      if op == "CreateOrUpdateTags" and any(t["ResourceId"] == name for t in p["Tags"]))
        suspended = next(i for i, (op, p) in enumerate(calls.seen)
                         if op == "SuspendProcesses" and p["AutoScalingGroupName"] == name)
        assert tagged < suspended, name
        tags = {t["Key"]: t["Value"] for t in describe_asg(clients, name)["Tags"]}
        assert read_record(tags) is not None

    calls.seen.clear()
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("asg",))
    assert {o.action for o in report.outcomes} == {RESTORED}
    assert calls.count()["DeleteTags"] == 2 and calls.count()["ResumeProcesses"] == 14
    for name in names:
        assert describe_asg(clients, name)["SuspendedProcesses"] == []
        assert read_record({t["Key"]: t["Value"] for t in describe_asg(clients, name)["Tags"]}) is None


def test_a_batch_that_fails_is_written_one_by_one_and_only_the_failing_group_fails(clients, ledger_table):
    for i in range(5):
        make_asg(clients, f"g{i}")

    def fail(name, params):   # any tag write that names g3 fails, batched or alone
        return name == "CreateOrUpdateTags" and any(t["ResourceId"] == "g3" for t in params["Tags"])

    calls = Calls(clients("autoscaling"), fail)
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("asg",))
    actions = {o.arn.rsplit("/", 1)[-1]: o.action for o in report.outcomes}
    assert actions == {"g0": ENGAGED, "g1": ENGAGED, "g2": ENGAGED, "g3": FAILED, "g4": ENGAGED}
    # g3 was never changed: no record on it, so no suspend (write-ahead).
    assert not [p for op, p in calls.seen if op == "SuspendProcesses" and p["AutoScalingGroupName"] == "g3"]
    assert describe_asg(clients, "g3")["SuspendedProcesses"] == []
    assert calls.count()["CreateOrUpdateTags"] == 1 + 5      # the batch, then each alone


def test_target_groups_share_an_add_tags_call_per_distinct_record(clients, ledger_table):
    plain = [make_target_group(clients, f"p{i}") for i in range(3)]
    custom = [make_target_group(clients, f"c{i}", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "2"}) for i in range(2)]
    calls = Calls(clients("elbv2"))
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert {o.action for o in report.outcomes} == {ENGAGED}
    adds = [p for op, p in calls.seen if op == "AddTags"]
    assert sorted(len(p["ResourceArns"]) for p in adds) == [2, 3]   # two records: the defaults, and dns_count 2
    assert {tuple(sorted(p["ResourceArns"])) for p in adds} == {tuple(sorted(plain)), tuple(sorted(custom))}

    calls.seen.clear()
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert {o.action for o in report.outcomes} == {RESTORED}
    assert calls.count()["RemoveTags"] == 1
    tags = clients("elbv2").describe_tags(ResourceArns=plain + custom)["TagDescriptions"]
    assert not [t for d in tags for t in d["Tags"] if t["Key"].startswith(("holdfast:original", "holdfast:applied"))]


def test_many_target_groups_are_listed_in_pages_and_tagged_in_whole_calls_per_record(clients, ledger_table):
    plain = [make_target_group(clients, f"p{i:02d}") for i in range(23)]
    custom = [make_target_group(clients, f"c{i:02d}", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "2"}) for i in range(4)]
    make_target_group(clients, "not-mine", selected=False)
    calls = Calls(clients("elbv2"))
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert sorted(o.arn for o in report.outcomes if o.action == ENGAGED) == sorted(plain + custom)
    # 27 selected: every target group of the account in pages of 400 (one here), not 2 calls by ARN.
    assert calls.count()["DescribeTargetGroups"] == 1
    assert [p.get("PageSize") for op, p in calls.seen if op == "DescribeTargetGroups"] == [400]
    # 23 with the default record: 20 + 3; 4 with the other one: 4 (the walk engages 60 at a time).
    adds = sorted(len(p["ResourceArns"]) for op, p in calls.seen if op == "AddTags")
    assert adds == [3, 4, 20]


def _too_many(limit, key):
    """AWS refusing any call with more than `limit` entries in `key` (what a lower real
    limit than Holdfast assumes would look like)."""
    return lambda name, params: len(params.get(key, ())) > limit


@pytest.mark.parametrize("limit", [1, 4])
def test_groups_are_engaged_and_restored_whatever_size_of_tag_call_aws_takes(clients, ledger_table, limit):
    for i in range(5):
        make_asg(clients, f"g{i}")
    client = clients("autoscaling")
    calls = Calls(client, lambda name, params: name in ("CreateOrUpdateTags", "DeleteTags")
                  and _too_many(2 * limit, "Tags")(name, params))
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("asg",))
    assert {o.action for o in report.outcomes} == {ENGAGED} and len(report.outcomes) == 5
    tagged = [p for op, p in calls.seen if op == "CreateOrUpdateTags" and len(p["Tags"]) <= 2 * limit]
    assert {t["ResourceId"] for p in tagged for t in p["Tags"]} == {f"g{i}" for i in range(5)}
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("asg",))
    assert {o.action for o in report.outcomes} == {RESTORED}
    for i in range(5):
        assert describe_asg(clients, f"g{i}")["SuspendedProcesses"] == []
        assert read_record({t["Key"]: t["Value"] for t in describe_asg(clients, f"g{i}")["Tags"]}) is None


def test_target_groups_are_engaged_and_restored_when_aws_takes_one_arn_a_tag_call(clients, ledger_table):
    arns = [make_target_group(clients, f"p{i}") for i in range(3)]
    Calls(clients("elbv2"), lambda name, params: name in ("AddTags", "RemoveTags") and _too_many(1, "ResourceArns")(name, params))
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert sorted(o.arn for o in report.outcomes if o.action == ENGAGED) == sorted(arns)
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert {o.action for o in report.outcomes} == {RESTORED}
    tags = clients("elbv2").describe_tags(ResourceArns=arns)["TagDescriptions"]
    assert not [t for d in tags for t in d["Tags"] if t["Key"].startswith(("holdfast:original", "holdfast:applied"))]
