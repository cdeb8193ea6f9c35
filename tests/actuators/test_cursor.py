"""The engage walk's cursor: it never passes a failed resource, and a walk resumed from it
reads no resource at or before it (target groups: one DescribeTargetGroupAttributes each)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from holdfast.core.model import ALREADY, ENGAGED, FAILED
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import make_target_group

pytestmark = pytest.mark.usefixtures("aws_semantics")


@pytest.fixture
def groups(clients) -> list[str]:
    return sorted(make_target_group(clients, f"t{i}") for i in range(4))


class Watch:
    """Records which target groups were read, and fails the engaging write of one."""

    def __init__(self, clients, fail: str | None = None):
        self.fail, self.read = fail, []
        clients("elbv2").meta.events.register("before-parameter-build", self)

    def __call__(self, model, params, **_):
        if model.name == "DescribeTargetGroupAttributes":
            self.read.append(params["TargetGroupArn"])
        if model.name == "ModifyTargetGroupAttributes" and params["TargetGroupArn"] == self.fail:
            raise ClientError({"Error": {"Code": "InjectedFault", "Message": "throttled"}}, model.name)


def test_the_cursor_stops_before_a_failed_resource(clients, ledger_table, groups):
    Watch(clients, fail=groups[1])
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",))
    assert {o.arn: o.action for o in report.outcomes} == {
        groups[0]: ENGAGED, groups[1]: FAILED, groups[2]: ENGAGED, groups[3]: ENGAGED}
    assert report.cursor["nlb"].split(" ") == ["1000000000000", groups[0]]   # (rank, ARN): no load balancer, harm 0


def test_a_resumed_walk_reads_nothing_before_the_cursor(clients, ledger_table, groups):
    walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",))
    watch = Watch(clients)
    report = walks.engage_all(clients, Settings(), ledger_table, kinds=("nlb",), after={"nlb": groups[1]})
    assert sorted(watch.read) == groups[2:]
    assert {o.arn: o.action for o in report.outcomes} == {groups[2]: ALREADY, groups[3]: ALREADY}
    assert report.cursor == {"nlb": None}


def test_the_blast_radius_counts_every_candidate_even_past_the_cursor(clients, ledger_table, groups):
    watch = Watch(clients)
    report = walks.engage_all(clients, Settings.from_mapping({"max_resources": 3}), ledger_table, kinds=("nlb",),
                               after={"nlb": groups[2]})
    assert report.refused and not report.outcomes and not watch.read
