"""Within a kind, the engage walk writes the most harmful resources first,
and a walk resumed from its cursor never passes over a resource whose harm rose past
the cursor between the walks."""

from __future__ import annotations

import pytest

from holdfast.core.model import ENGAGED
from holdfast.engine import Engine, position
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from tests.support.fleet import make_asg, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")


class Writes:
    """The order of one operation's calls, by a parameter of each."""

    def __init__(self, client, operation: str, param: str):
        self.order: list[str] = []
        self.operation, self.param = operation, param
        client.meta.events.register("before-parameter-build", self)

    def __call__(self, model, params, **_):
        if model.name == self.operation:
            self.order.append(params[self.param])


def _engine(clients, table, kinds, *, stop_after: int | None = None) -> Engine:
    """One writer (a deterministic order); `stop_after`: the deadline passes after that many
    resources were started."""
    started = [0]

    def deadline() -> bool:
        if stop_after is None:
            return False
        started[0] += 1
        return started[0] > stop_after

    runtime = Runtime(clients=clients, settings=Settings(), table=table)
    engine = Engine(runtime, kinds=kinds, deadline=deadline, writers=1)
    # The record tags first, so a deadline counted in resources cuts only the engage itself
    # (the deferred tags' own pass and its cursor: tests/actuators/test_deferred_tags.py).
    for act in engine.actuators.values():
        act.defers_tag = False
    return engine


def _mappings_least_harmful_first_by_arn(clients, caps):
    """Mappings whose ARN order is the reverse of their harm: the lowest ARN gets the first cap."""
    fn = make_function(clients, "consumer")
    made = [make_mapping(clients, fn, f"q{i}") for i in range(len(caps))]
    made.sort(key=lambda m: m["EventSourceMappingArn"])
    lam = clients("lambda")
    for mapping, cap in zip(made, caps):
        lam.update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": cap} if cap else {})
    return [m["UUID"] for m in made]


def test_mappings_are_capped_uncapped_first_then_the_highest_cap(clients, ledger_table):
    uuids = _mappings_least_harmful_first_by_arn(clients, [10, 50, 200, 800, None])
    writes = Writes(clients("lambda"), "UpdateEventSourceMapping", "UUID")
    report = _engine(clients, ledger_table, ("esm",)).engage()
    assert all(o.action == ENGAGED for o in report.outcomes)
    # ARN order would be uuids as made; harm order is the reverse.
    assert writes.order == list(reversed(uuids))


def test_groups_with_the_most_instances_are_suspended_first(clients, ledger_table):
    names = [f"g{i}" for i in range(3)]
    for name in names:
        make_asg(clients, name)
    # ARN order g0 < g1 < g2 (same prefix, the name last); most instances on g2, then g1.
    asg = clients("autoscaling")
    asg.update_auto_scaling_group(AutoScalingGroupName="g1", DesiredCapacity=1)
    asg.update_auto_scaling_group(AutoScalingGroupName="g2", DesiredCapacity=2)
    writes = Writes(asg, "SuspendProcesses", "AutoScalingGroupName")
    _engine(clients, ledger_table, ("asg",)).engage()
    assert writes.order == ["g2", "g1", "g0"]


def test_a_resumed_walk_reads_a_resource_whose_harm_rose_past_the_cursor(clients, ledger_table):
    uuids = _mappings_least_harmful_first_by_arn(clients, [10, 20, 200, 300, None])
    arn = {m["UUID"]: m["EventSourceMappingArn"] for m in clients("lambda").list_event_source_mappings()["EventSourceMappings"]}
    first = _engine(clients, ledger_table, ("esm",), stop_after=2).engage()
    assert not first.complete
    assert {o.arn for o in first.outcomes} == {arn[uuids[4]], arn[uuids[3]]}   # uncapped, then 300
    cursor = first.cursor["esm"]
    assert cursor.endswith(arn[uuids[3]])

    # Between the walks the owner lifts the cap of the least harmful one: it is now uncapped,
    # so its place in the order is before the cursor. A cursor over positions alone would skip it.
    clients("lambda").update_event_source_mapping(UUID=uuids[0], ScalingConfig={})
    resumed_engine = _engine(clients, ledger_table, ("esm",))
    moved = next(c for c in resumed_engine.actuators["esm"].candidates() if c.arn == arn[uuids[0]])
    assert position(resumed_engine.actuators["esm"], moved) < cursor

    reads = Writes(clients("lambda"), "ListTags", "Resource")
    resumed = resumed_engine.engage(after={"esm": cursor})
    assert resumed.complete and resumed.cursor == {"esm": None}
    assert {o.arn: o.action for o in resumed.outcomes} == {
        arn[uuids[0]]: ENGAGED, arn[uuids[1]]: ENGAGED, arn[uuids[2]]: ENGAGED}
    # The two finished before the cursor (capped at the floor, recorded) are not read again.
    assert set(reads.order) == {arn[u] for u in uuids[:3]}
    caps = {m["UUID"]: (m.get("ScalingConfig") or {}).get("MaximumConcurrency")
            for m in clients("lambda").list_event_source_mappings()["EventSourceMappings"]}
    assert set(caps.values()) == {2}


def test_a_cursor_written_as_a_bare_arn_still_resumes_safely(clients, ledger_table):
    uuids = _mappings_least_harmful_first_by_arn(clients, [10, 20, 300])
    arn = {m["UUID"]: m["EventSourceMappingArn"] for m in clients("lambda").list_event_source_mappings()["EventSourceMappings"]}
    # A cursor from before positions (ARN order): every mapping is at or before the last ARN,
    # but none is settled (all out of posture, no record): all are walked.
    report = _engine(clients, ledger_table, ("esm",)).engage(after={"esm": arn[uuids[-1]]})
    assert {o.arn for o in report.outcomes if o.action == ENGAGED} == set(arn.values())


def test_a_resumed_walk_never_moves_its_cursor_back(clients, ledger_table):
    from botocore.exceptions import ClientError

    uuids = _mappings_least_harmful_first_by_arn(clients, [10, 20, 200, 300, None])
    first = _engine(clients, ledger_table, ("esm",), stop_after=2).engage()
    cursor = first.cursor["esm"]
    # The least harmful mapping's harm rises past the cursor; the first after it (cap 200) will fail.
    lam = clients("lambda")
    lam.update_event_source_mapping(UUID=uuids[0], ScalingConfig={})

    def fail(model, params, **_):
        if model.name == "UpdateEventSourceMapping" and params.get("UUID") == uuids[2]:
            raise ClientError({"Error": {"Code": "InjectedFault", "Message": "no"}}, model.name)

    lam.meta.events.register("before-parameter-build", fail)
    resumed = _engine(clients, ledger_table, ("esm",)).engage(after={"esm": cursor})
    actions = {o.arn.rsplit(":", 1)[-1]: o.action for o in resumed.outcomes}
    assert actions == {uuids[0]: ENGAGED, uuids[2]: "failed", uuids[1]: ENGAGED}
    # The one read again before the cursor does not pull it back; the failure holds it where it was.
    assert resumed.cursor["esm"] == cursor
