"""SQS mappings in provisioned mode: held through their pollers, drained as pollers, restored
exactly, an owner's change kept, and a fault at any write of engage, a drain step or the
restore losing nothing — against moto taught AWS's rules for the field
(holdfast_fixtures.moto_patches: no MaximumConcurrency beside it, SQS's poller bounds)."""

from __future__ import annotations

from collections import Counter

import pytest
from botocore.exceptions import ClientError

from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, RAISED, RESTORED
from holdfast.core.tags import MAX_VALUE, RECORD_KEYS, read_record
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.observation import drain_inputs
from holdfast.settings import Settings
from tests.actuators.test_kinds import run
from tests.support import walks
from tests.support.fleet import MUTATING, FailKth, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")

OWNER = {"MinimumPollers": 10, "MaximumPollers": 50}


def pollers(clients, uuid) -> dict:
    return clients("lambda").get_event_source_mapping(UUID=uuid).get("ProvisionedPollerConfig")


def record_tags(clients, mapping) -> tuple | None:
    return read_record(clients("lambda").list_tags(Resource=mapping["EventSourceMappingArn"])["Tags"])


def ledger_records(clients, ledger_table):
    return ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()


def writes(clients, before: Counter) -> int:
    return sum(n for op, n in (clients.calls - before).items() if op.split(":")[1].startswith(MUTATING))


def drain_to(cap):
    return lambda resource: {"MaximumConcurrency": cap}


@pytest.fixture
def held(clients):
    fn = make_function(clients, "consumer")
    return make_mapping(clients, fn, "q-provisioned", pollers=OWNER)


def test_engage_lowers_the_pollers_to_the_least_and_records_the_original_exactly(clients, ledger_table, settings, held):
    out, report = run(clients, settings, ledger_table, "esm")
    outcome = out[held["EventSourceMappingArn"]]
    assert outcome.action == ENGAGED and report.failed == []
    assert outcome.changes == {"MaximumPollers": {"from": 50, "to": 2}, "MinimumPollers": {"from": 10, "to": 2}}
    assert "up to 20 concurrent invokes" in outcome.notes["provisioned"]["why"]
    assert outcome.recorded_in == ["tag", "ledger"]
    assert pollers(clients, held["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": 2}
    # The write-ahead record, on the mapping's own tag and in the ledger: the original pollers exactly.
    assert record_tags(clients, held) == ({"MaximumPollers": 50, "MinimumPollers": 10},
                                          {"MaximumPollers": 2, "MinimumPollers": 2})
    (record,) = ledger_records(clients, ledger_table)
    assert dict(record.original) == {"MaximumPollers": 50, "MinimumPollers": 10}

    before = Counter(clients.calls)
    again, _ = run(clients, settings, ledger_table, "esm")
    assert again[held["EventSourceMappingArn"]].action == ALREADY and writes(clients, before) == 0

    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    assert out[held["EventSourceMappingArn"]].action == RESTORED
    assert pollers(clients, held["UUID"]) == OWNER
    assert record_tags(clients, held) is None and ledger_records(clients, ledger_table) == []


def test_plan_shows_the_pollers_it_would_lower_and_writes_nothing(clients, ledger_table, settings, held):
    before = Counter(clients.calls)
    report = walks.engage_all(clients, settings, ledger_table, kinds=("esm",), dry_run=True)
    (outcome,) = report.outcomes
    assert outcome.action == "planned"
    assert outcome.changes == {"MaximumPollers": {"from": 50, "to": 2}, "MinimumPollers": {"from": 10, "to": 2}}
    assert "provisioned" in outcome.notes
    assert writes(clients, before) == 0 and pollers(clients, held["UUID"]) == OWNER


def test_a_minimum_at_the_least_is_left_and_an_absent_field_counts_as_its_default(clients, ledger_table, settings):
    fn = make_function(clients, "consumer")
    only_max = make_mapping(clients, fn, "q-max", pollers={"MaximumPollers": 30})
    least = make_mapping(clients, fn, "q-least", pollers={"MinimumPollers": 2, "MaximumPollers": 2})
    out, _ = run(clients, settings, ledger_table, "esm")
    assert out[only_max["EventSourceMappingArn"]].changes == {"MaximumPollers": {"from": 30, "to": 2}}
    assert out[least["EventSourceMappingArn"]].action == ALREADY
    assert record_tags(clients, only_max)[0] == {"MaximumPollers": 30}
    assert record_tags(clients, least) is None

    run(clients, settings, ledger_table, "esm", "relax")
    # MinimumPollers absent is its default, 2: the restore sends both fields, the same config.
    assert pollers(clients, only_max["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": 30}


def test_the_drains_caps_are_written_as_pollers_never_above_the_owners_and_restored_clean(clients, ledger_table, settings):
    fn = make_function(clients, "consumer")
    wide = make_mapping(clients, fn, "q-wide", pollers=OWNER)
    narrow = make_mapping(clients, fn, "q-narrow", pollers={"MinimumPollers": 2, "MaximumPollers": 6})
    run(clients, settings, ledger_table, "esm")
    # cap (concurrent batches) -> MaximumPollers: rounded down, at least 2, at most the owner's.
    for cap, want_wide, want_narrow in ((25, 2, 2), (34, 3, 3), (100, 10, 6), (59, 5, 5), (1000, 50, 6), (2, 2, 2)):
        out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(cap))
        assert pollers(clients, wide["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": want_wide}, cap
        assert pollers(clients, narrow["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": want_narrow}, cap
        assert all(o.action in (RAISED, ALREADY) for o in out.values())
        for m in (wide, narrow):   # the record follows every step and stays within a tag
            tags = clients("lambda").list_tags(Resource=m["EventSourceMappingArn"])["Tags"]
            assert all(len(tags[k]) <= MAX_VALUE for k in RECORD_KEYS)
    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    assert {o.action for o in out.values()} == {RESTORED} and all(not o.drift for o in out.values())
    assert pollers(clients, wide["UUID"]) == OWNER
    assert pollers(clients, narrow["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": 6}


def test_the_functions_reserved_concurrency_bounds_the_pollers_a_drain_step_writes(clients, ledger_table, settings, held):
    clients("lambda").put_function_concurrency(FunctionName="consumer", ReservedConcurrentExecutions=25)
    run(clients, settings, ledger_table, "esm")
    run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(300))
    assert pollers(clients, held["UUID"])["MaximumPollers"] == 2   # 25 batches: 2 pollers, never 3


def test_an_owners_lower_maximum_while_held_is_kept_and_reported(clients, ledger_table, settings, held):
    run(clients, settings, ledger_table, "esm")
    clients("lambda").update_event_source_mapping(UUID=held["UUID"], ProvisionedPollerConfig={
        "MinimumPollers": 2, "MaximumPollers": 8})
    out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(300))
    assert out[held["EventSourceMappingArn"]].action == ALREADY
    assert pollers(clients, held["UUID"])["MaximumPollers"] == 8
    again, _ = run(clients, settings, ledger_table, "esm")   # a re-engage leaves the owner's value too
    assert again[held["EventSourceMappingArn"]].action == ALREADY
    assert pollers(clients, held["UUID"])["MaximumPollers"] == 8

    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    restored = out[held["EventSourceMappingArn"]]
    assert restored.action == DRIFT_KEPT
    assert restored.drift["MaximumPollers"]["current"] == 8 and set(restored.drift) == {"MaximumPollers"}
    # The minimum comes back as far as the owner's maximum lets it (10 would be above 8), and says so.
    assert restored.changes == {"MinimumPollers": {"from": 2, "to": 8}}
    assert pollers(clients, held["UUID"]) == {"MinimumPollers": 8, "MaximumPollers": 8}
    assert record_tags(clients, held) is None and ledger_records(clients, ledger_table) == []


def test_an_owners_higher_maximum_while_held_is_kept_and_the_minimum_restored(clients, ledger_table, settings, held):
    run(clients, settings, ledger_table, "esm")
    clients("lambda").update_event_source_mapping(UUID=held["UUID"], ProvisionedPollerConfig={
        "MinimumPollers": 2, "MaximumPollers": 100})
    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    restored = out[held["EventSourceMappingArn"]]
    assert restored.action == DRIFT_KEPT and restored.drift["MaximumPollers"]["current"] == 100
    assert pollers(clients, held["UUID"]) == {"MinimumPollers": 10, "MaximumPollers": 100}


def test_an_owner_leaving_provisioned_mode_while_held_is_kept_and_nothing_is_written_for_it(
        clients, ledger_table, settings, held):
    run(clients, settings, ledger_table, "esm")
    lam = clients("lambda")
    lam.update_event_source_mapping(UUID=held["UUID"], ProvisionedPollerConfig={},
                                    ScalingConfig={"MaximumConcurrency": 40})
    before = Counter(clients.calls)
    out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(300))
    assert out[held["EventSourceMappingArn"]].action == ALREADY
    assert not [op for op in clients.calls - before if op.endswith("UpdateEventSourceMapping")]
    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    restored = out[held["EventSourceMappingArn"]]
    assert restored.action == DRIFT_KEPT and set(restored.drift) == {"MaximumPollers", "MinimumPollers"}
    assert lam.get_event_source_mapping(UUID=held["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 40}


MODES = {
    # mode: (how the mapping is made, how its setting is read, that setting at a drain step to 100)
    "provisioned": (dict(pollers=OWNER), lambda m: m.get("ProvisionedPollerConfig"),
                    {"MinimumPollers": 2, "MaximumPollers": 10}),
    # The same faults on a mapping with a cap: a drain step's ledger write failing must stop its cap write too.
    "cap": (dict(cap=500), lambda m: m.get("ScalingConfig") or {}, {"MaximumConcurrency": 100}),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("phase", ["engage", "drain", "restore"])
def test_a_fault_at_any_write_loses_no_original_and_a_rerun_converges(clients, ledger_table, phase, mode):
    made, setting, at_100 = MODES[mode]
    mapping = make_mapping(clients, make_function(clients, "consumer"), "q-faults", **made)
    state = lambda: setting(clients("lambda").get_event_source_mapping(UUID=mapping["UUID"]))  # noqa: E731
    owner = state()
    settings = Settings()
    services = ("lambda", "dynamodb")
    before = Counter(clients.calls)
    run(clients, settings, ledger_table, "esm")
    engage_writes = writes(clients, before)
    before = Counter(clients.calls)
    run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(100))
    drain_writes = writes(clients, before)
    assert state() == at_100
    before = Counter(clients.calls)
    run(clients, settings, ledger_table, "esm", "relax")
    restore_writes = writes(clients, before)
    assert state() == owner
    # Engage: tag, ledger, mapping; a drain step: the record moved (ledger, tag) before the
    # mapping, and the walk's own bookkeeping; restore: the write claimed in the ledger,
    # mapping, the claim settled, untag, forget (a mapping's writes are serialised).
    assert (engage_writes, restore_writes) == (3, 5) and drain_writes >= 3

    count = {"engage": engage_writes, "drain": drain_writes, "restore": restore_writes}[phase]
    step = {"engage": dict(verb="engage"), "drain": dict(verb="relax", target_for=drain_to(100)),
            "restore": dict(verb="relax")}[phase]
    for k in range(1, count + 1):
        if phase != "engage":
            run(clients, settings, ledger_table, "esm")
        if phase == "restore":
            run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(100))
        with FailKth(clients, services, k) as fault:
            run(clients, settings, ledger_table, "esm", **step)
        assert fault.seen >= k
        if state() != owner:   # whatever is still changed carries its original somewhere
            assert record_tags(clients, mapping) is not None or ledger_records(clients, ledger_table), (phase, k)
        if phase == "engage":
            run(clients, settings, ledger_table, "esm")
        if phase in ("engage", "drain"):
            run(clients, settings, ledger_table, "esm", "relax", target_for=drain_to(100))
            assert state() == at_100, (phase, k)
        out, _ = run(clients, settings, ledger_table, "esm", "relax")
        assert all(not o.drift for o in out.values()), (phase, k, out)
        assert state() == owner, (phase, k)
        assert record_tags(clients, mapping) is None and ledger_records(clients, ledger_table) == [], (phase, k)


def test_the_ledger_unreachable_engage_holds_it_from_the_tag_and_restores_exactly(clients, held):
    settings = Settings()
    out, report = run(clients, settings, "no-such-table", "esm")
    assert not report.ledger_available and out[held["EventSourceMappingArn"]].action == ENGAGED
    assert pollers(clients, held["UUID"]) == {"MinimumPollers": 2, "MaximumPollers": 2}
    run(clients, settings, "no-such-table", "esm", "relax")
    assert pollers(clients, held["UUID"]) == OWNER and record_tags(clients, held) is None


def test_the_drain_reads_a_provisioned_mappings_pollers_as_the_batches_they_carry(clients, ledger_table, settings, held):
    listed = drain_inputs.mappings(clients)[held["EventSourceMappingArn"]]
    assert (listed.cap, listed.pollers) == (500, 50)
    run(clients, settings, ledger_table, "esm")
    listed = drain_inputs.mappings(clients)[held["EventSourceMappingArn"]]
    assert (listed.cap, listed.pollers) == (20, 2)


def test_the_emulation_refuses_what_lambda_refuses_on_a_provisioned_sqs_mapping(clients, held):
    lam = clients("lambda")
    with pytest.raises(ClientError, match="cannot be used with ProvisionedPollerConfig"):
        lam.update_event_source_mapping(UUID=held["UUID"], ScalingConfig={"MaximumConcurrency": 2})
    for bad in ({"MinimumPollers": 1, "MaximumPollers": 5}, {"MinimumPollers": 2, "MaximumPollers": 10_001},
                {"MinimumPollers": 201, "MaximumPollers": 300}, {"MinimumPollers": 20, "MaximumPollers": 10}):
        with pytest.raises(ClientError, match="InvalidParameterValue"):
            lam.update_event_source_mapping(UUID=held["UUID"], ProvisionedPollerConfig=bad)
    assert pollers(clients, held["UUID"]) == OWNER


def test_a_provisioned_mapping_is_walked_by_the_batches_its_pollers_carry(clients, ledger_table, settings):
    """Within the engage walk: 150 pollers (1,500 batches) before an uncapped mapping (about
    1,000), 30 pollers (300 batches) after a cap of 500 and before one of 50."""
    from holdfast.engine import Engine
    from holdfast.runtime import Runtime

    fn = make_function(clients, "consumer")
    made = {name: make_mapping(clients, fn, f"q-{name}", **spec) for name, spec in {
        "cap-50": dict(cap=50), "pollers-30": dict(pollers={"MinimumPollers": 2, "MaximumPollers": 30}),
        "cap-500": dict(cap=500), "uncapped": {}, "pollers-150": dict(pollers={"MinimumPollers": 2, "MaximumPollers": 150}),
    }.items()}
    order: list[str] = []
    clients("lambda").meta.events.register(
        "before-parameter-build",
        lambda model, params, **_: order.append(params["UUID"]) if model.name == "UpdateEventSourceMapping" else None)
    report = Engine(Runtime(clients=clients, settings=settings, table=ledger_table), kinds=("esm",), writers=1).engage()
    assert {o.action for o in report.outcomes} == {ENGAGED}
    by_uuid = {m["UUID"]: name for name, m in made.items()}
    assert [by_uuid[u] for u in order] == ["pollers-150", "uncapped", "cap-500", "pollers-30", "cap-50"]

