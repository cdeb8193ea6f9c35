"""Invariants under stress: faults at every mutating call, an unreachable ledger, resources
that vanish, idempotency and the blast-radius limit. One fleet with every kind and the
hard owner states; a snapshot of its full describe output is the ground truth."""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.actuators.nlb import ATTRIBUTES
from holdfast.core.model import ALREADY, ENGAGED, FAILED, VANISHED
from holdfast.core.tags import ORIGINAL_KEY, read_record
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import (
    MUTATING,
    FailKth,
    describe_asg,
    describe_target,
    make_asg,
    make_function,
    make_mapping,
    make_service_target,
    make_target_group,
)

QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired"
SERVICES = ("autoscaling", "lambda", "elbv2", "application-autoscaling", "dynamodb")
pytestmark = pytest.mark.usefixtures("aws_semantics")


def options():
    return {"expired_queue_arn": QUEUE}


@pytest.fixture
def fleet(clients):
    make_asg(clients, "g", suspended=("AZRebalance",))
    fn = make_function(clients, "f")
    lam = clients("lambda")
    lam.put_function_event_invoke_config(
        FunctionName="f", MaximumEventAgeInSeconds=7200,
        DestinationConfig={"OnSuccess": {"Destination": "arn:aws:sqs:us-east-1:123456789012:done"}})
    esm = make_mapping(clients, fn, "q", enabled=False)
    tg = make_target_group(clients, "t", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "2"})
    make_service_target(clients, "s", suspended={"DynamicScalingInSuspended": False,
                                                 "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": True})
    return {"esm": esm["UUID"], "tg": tg, "fn": fn}


def snapshot(clients, fleet) -> dict:
    """Everything the owner can see of the fleet, minus timestamps and request ids."""
    lam, elb = clients("lambda"), clients("elbv2")
    group = describe_asg(clients, "g")
    try:
        config = lam.get_function_event_invoke_config(FunctionName="f")
        config.pop("LastModified"), config.pop("ResponseMetadata")
    except lam.exceptions.ResourceNotFoundException:
        config = None
    mapping = lam.get_event_source_mapping(UUID=fleet["esm"])
    attrs = {a["Key"]: a["Value"] for a in elb.describe_target_group_attributes(TargetGroupArn=fleet["tg"])["Attributes"]}
    target = describe_target(clients, "s")
    return {
        "asg": {**group, "Tags": sorted(group["Tags"], key=lambda t: t["Key"])},
        "async": config,
        # An empty ScalingConfig is how the API removes a cap; absent and {} both mean none.
        "esm": (mapping.get("ScalingConfig") or {}, mapping["State"], lam.list_tags(Resource=mapping["EventSourceMappingArn"])["Tags"]),
        "fn_tags": lam.list_tags(Resource=fleet["fn"])["Tags"],
        # moto stores no defaults where AWS always answers them: compare in AWS's view.
        "nlb": {**{n: d for n, d in ATTRIBUTES.values()}, **attrs},
        "nlb_tags": elb.describe_tags(ResourceArns=[fleet["tg"]])["TagDescriptions"][0]["Tags"],
        "target": target,
        "target_tags": clients("application-autoscaling").list_tags_for_resource(
            ResourceARN=target["ScalableTargetARN"])["Tags"],
    }


def mutating(clients, before: Counter) -> int:
    return sum(n for op, n in (clients.calls - before).items() if op.split(":")[1].startswith(MUTATING))


def test_second_engage_makes_no_write_and_restore_returns_exact_originals(clients, ledger_table, fleet):
    original = snapshot(clients, fleet)
    first = walks.engage_all(clients, Settings(), ledger_table, **options())
    assert {o.kind for o in first.outcomes if o.action == ENGAGED} == {"asg", "esm", "async", "nlb", "scalable-target"}
    assert first.ledger_available and all(o.ledger_written for o in first.outcomes)
    assert set(first.api_calls) == {"asg", "esm", "async", "nlb", "scalable-target"}

    before = Counter(clients.calls)
    walks.engage_all(clients, Settings(), ledger_table, **options())
    assert mutating(clients, before) == 0

    rows = walks.status(clients, Settings(), ledger_table)
    assert {r["kind"] for r in rows} == {"asg", "esm", "async", "nlb", "scalable-target"}
    assert all(r["recorded_in"] == ["tag", "ledger"] and not r["drift"] for r in rows)

    walks.relax_all(clients, Settings(), ledger_table, **options())
    assert snapshot(clients, fleet) == original
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []


def writes_of_a_clean_cycle(clients, ledger_table) -> tuple[int, int]:
    before = Counter(clients.calls)
    walks.engage_all(clients, Settings(), ledger_table, **options())
    engage_writes = mutating(clients, before)
    before = Counter(clients.calls)
    walks.relax_all(clients, Settings(), ledger_table, **options())
    return engage_writes, mutating(clients, before)


def test_a_fault_at_any_engage_write_loses_no_original_and_a_rerun_converges(clients, ledger_table, fleet):
    original = snapshot(clients, fleet)
    settings = Settings()
    engage_writes, _ = writes_of_a_clean_cycle(clients, ledger_table)
    assert snapshot(clients, fleet) == original
    for k in range(1, engage_writes + 1):
        with FailKth(clients, SERVICES, k) as fault:
            report = walks.engage_all(clients, settings, ledger_table, **options())
        # A deferred record tag that failed is its engaged outcome's note, the walk unfinished.
        tag_pending = any("tag" in o.notes for o in report.outcomes) and not report.complete
        assert fault.seen >= k and (report.failed or not report.ledger_available or tag_pending), k
        walks.engage_all(clients, settings, ledger_table, **options())
        assert all(r["recorded_in"] == ["tag", "ledger"] for r in walks.status(clients, settings, ledger_table)), k
        walks.relax_all(clients, settings, ledger_table, **options())
        assert snapshot(clients, fleet) == original, f"engage fault at write {k}"


def test_a_fault_at_any_restore_write_loses_no_original_and_a_rerun_converges(clients, ledger_table, fleet):
    original = snapshot(clients, fleet)
    settings = Settings()
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    _, restore_writes = writes_of_a_clean_cycle(clients, ledger_table)
    for k in range(1, restore_writes + 1):
        walks.engage_all(clients, settings, ledger_table, **options())
        with FailKth(clients, SERVICES, k):
            walks.relax_all(clients, settings, ledger_table, **options())
        # whatever is still engaged still carries its original somewhere
        for row in walks.status(clients, settings, ledger_table):
            assert row["recorded_in"], row
        walks.relax_all(clients, settings, ledger_table, **options())
        assert snapshot(clients, fleet) == original, f"restore fault at write {k}"
        assert ledger.records() == []


def test_ledger_unreachable_engage_protects_and_restore_from_tags_is_exact(clients, fleet):
    original = snapshot(clients, fleet)
    report = walks.engage_all(clients, Settings(), "no-such-table", **options())
    assert not report.ledger_available and "ResourceNotFoundException" in report.ledger_error
    engaged = [o for o in report.outcomes if o.action == ENGAGED]
    assert len(engaged) == 5 and all(o.ledger_written is False for o in engaged)
    assert ORIGINAL_KEY in {t["Key"] for t in describe_asg(clients, "g")["Tags"]}

    walks.relax_all(clients, Settings(), "no-such-table", **options())
    assert snapshot(clients, fleet) == original


def test_api_calls_per_kind_add_up_to_every_call_made_discovery_included(clients, ledger_table, fleet):
    """A kind is walked more than once in a run (listed, then engaged): the per-kind counts
    must add every walk, so they sum to exactly the calls the run made."""
    for dry_run in (True, False):
        before = Counter(clients.calls)
        report = walks.engage_all(clients, Settings(), ledger_table, dry_run=dry_run, **options())
        made = sum((clients.calls - before).values())
        assert all(report.api_calls[kind] > 0 for kind in report.api_calls)
        assert sum(report.api_calls.values()) == made
        assert all(sum(ops.values()) == report.api_calls[k] for k, ops in report.operations.items())


def test_when_the_ledger_returns_an_engage_puts_back_its_copy_of_tag_only_originals(clients, ledger_table, fleet):
    """Engaged while the ledger was unreachable, the originals live on the tags only. The
    next engage with the ledger back writes nothing to the resources (they are in posture)
    but restores the ledger's copy, so write-ahead holds again: tag AND ledger."""
    walks.engage_all(clients, Settings(), "no-such-table", **options())
    assert walks.status(clients, Settings(), ledger_table)[0]["recorded_in"] == ["tag"]

    before = Counter(clients.calls)
    report = walks.engage_all(clients, Settings(), ledger_table, **options())
    assert {o.action for o in report.outcomes} == {ALREADY}
    resource_writes = {op for op in clients.calls - before if op.split(":")[1].startswith(MUTATING) and not op.startswith("dynamodb:")}
    assert resource_writes == set()
    assert all(r["recorded_in"] == ["tag", "ledger"] for r in walks.status(clients, Settings(), ledger_table))


def test_a_resource_deleted_after_discovery_is_reported_and_the_walk_goes_on(clients, ledger_table, fleet):
    settings = Settings()
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    # (Auto Scaling is left out: moto 5.2.5 answers CreateOrUpdateTags on a deleted group
    # with an internal KeyError instead of AWS's ValidationError.)
    acts = walks.actuators(clients, settings, ledger, ("nlb", "esm"), **options())
    group, mapping = acts["nlb"].discover()[0], acts["esm"].discover()[0]
    clients("elbv2").delete_target_group(TargetGroupArn=fleet["tg"])
    clients("lambda").delete_event_source_mapping(UUID=fleet["esm"])
    assert acts["nlb"].engage(group).action == VANISHED
    assert acts["esm"].engage(mapping).action == VANISHED


def test_a_vanished_engaged_resource_is_forgotten(clients, ledger_table, fleet):
    walks.engage_all(clients, Settings(), ledger_table, kinds=("esm", "nlb"), **options())
    clients("elbv2").delete_target_group(TargetGroupArn=fleet["tg"])
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("esm", "nlb"), **options())
    assert {o.kind: o.action for o in report.outcomes}["nlb"] == VANISHED
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []


def test_owner_drift_on_a_group_is_kept(clients, ledger_table, fleet):
    walks.engage_all(clients, Settings(), ledger_table, kinds=("asg",), **options())
    # the owner resumes ReplaceUnhealthy themselves while engaged: their call, kept
    clients("autoscaling").resume_processes(AutoScalingGroupName="g", ScalingProcesses=["ReplaceUnhealthy"])
    report = walks.relax_all(clients, Settings(), ledger_table, kinds=("asg",), **options())
    assert [o.action for o in report.outcomes] == ["restored"]
    suspended = {p["ProcessName"] for p in describe_asg(clients, "g")["SuspendedProcesses"]}
    assert suspended == {"AZRebalance"}


def test_blast_radius_refuses_before_any_write(clients, ledger_table, fleet):
    before = Counter(clients.calls)
    report = walks.engage_all(clients, Settings.from_mapping({"max_resources": 2}), ledger_table, **options())
    assert report.refused and "max_resources" in report.refused and report.outcomes == []
    assert mutating(clients, before) == 0


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_kinds_counted_together_as_listed_never_engage_more_than_max_resources(clients, ledger_table, fleet, limit):
    """The command's engage walks each kind as soon as it is listed (its mappings capped
    before Lambda's slowest listing), its kinds' counts adding up against max_resources:
    the kind whose listing takes the sum past the limit, and every one listed after it, is
    refused whole, with nothing of it written."""
    engine = walks.engine(clients, Settings.from_mapping({"max_resources": limit}), ledger_table, **options())
    report = engine.engage_as_listed(count_together=True)
    written = [o for o in report.outcomes if o.action == ENGAGED]
    assert len({o.arn for o in report.outcomes}) <= limit and report.refused_kinds
    assert "max_resources" in report.refused and not {o.kind for o in written} & report.refused_kinds
    for kind in report.refused_kinds:
        assert not report.operations.get(kind, {}).keys() & {f"{s}:{op}" for s in SIGNED for op in WRITES}, kind


SIGNED = ("autoscaling", "lambda", "elbv2", "application-autoscaling")
WRITES = ("SuspendProcesses", "CreateOrUpdateTags", "UpdateEventSourceMapping", "TagResource",
          "PutFunctionEventInvokeConfig", "UpdateFunctionEventInvokeConfig", "ModifyTargetGroupAttributes", "AddTags",
          "RegisterScalableTarget", "TagResource")


def test_a_tag_that_cannot_be_written_leaves_the_resource_unchanged(clients, ledger_table, fleet):
    clients("autoscaling").create_or_update_tags(Tags=[
        {"ResourceId": "g", "ResourceType": "auto-scaling-group", "Key": f"k{i}", "Value": "v", "PropagateAtLaunch": False}
        for i in range(20)])
    before = describe_asg(clients, "g")["SuspendedProcesses"]
    with FailKth(clients, ("autoscaling",), 1):  # CreateOrUpdateTags refused, as at the 50-tag limit
        report = walks.engage_all(clients, Settings(), ledger_table, kinds=("asg",), **options())
    assert [o.action for o in report.outcomes] == [FAILED] and "InjectedFault" in report.outcomes[0].error
    assert describe_asg(clients, "g")["SuspendedProcesses"] == before
    assert read_record({t["Key"]: t["Value"] for t in describe_asg(clients, "g")["Tags"]}) is None
