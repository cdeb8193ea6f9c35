"""A mapping's write-ahead while the ledger answers: the ledger's record, then the cap, and
the record tags in the walk's second pass, once every mapping is capped; with the ledger
unreachable, the tag first as for every other kind. Nothing is changed before its original
is durable, and the record ends on both copies — a tag the second pass did not write is
written by the next walk."""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.actuators.esm import EsmActuator
from holdfast.core.model import ENGAGED, SKIPPED
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import SELECTOR, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()


class Calls:
    """Every Lambda call in order: (operation, the mapping or function it names)."""

    def __init__(self, client):
        self.order: list[tuple[str, str]] = []
        client.meta.events.register("before-parameter-build", self)

    def __call__(self, model, params, **_):
        self.order.append((model.name, str(params.get("UUID") or params.get("Resource") or "")))

    def of(self, operation: str) -> list[int]:
        return [i for i, (op, _) in enumerate(self.order) if op == operation]


def _mappings(clients, caps) -> list[dict]:
    out = []
    for i, cap in enumerate(caps):
        fn = make_function(clients, f"f{i}")
        out.append(make_mapping(clients, fn, f"q{i}", cap=cap))
    return out


def _records(clients, table):
    ledger = ResourceLedger(Ledger(clients("dynamodb"), table))
    act = walks.actuators(clients, SETTINGS, ledger, ("esm",))["esm"]
    on_tags = {r.arn: (r.record.original, r.record.applied) for r in act.discover() if r.record is not None}
    return on_tags, {r.arn: (r.original, r.applied) for r in ledger.records()}


def test_with_the_ledger_every_cap_lands_before_any_record_tag_and_both_copies_agree_after(clients, ledger_table):
    made = _mappings(clients, [None, 500, 50, None])
    calls = Calls(clients("lambda"))
    report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)
    assert report.complete and [o.action for o in report.outcomes] == [ENGAGED] * 4
    caps, tags = calls.of("UpdateEventSourceMapping"), calls.of("TagResource")
    assert len(caps) == len(tags) == 4 and max(caps) < min(tags), calls.order
    assert all(o.recorded_in == ["tag", "ledger"] for o in report.outcomes)
    on_tags, in_ledger = _records(clients, ledger_table)
    assert on_tags == in_ledger and set(in_ledger) == {m["EventSourceMappingArn"] for m in made}
    # Their functions' tag selects them: one Lambda call before each cap (the cap), and each
    # mapping's tags are read in the second pass, just before its record tag.
    assert Counter(op for op, _ in calls.order[:max(caps) + 1]) == {
        "ListEventSourceMappings": 1, "GetFunction": 4, "UpdateEventSourceMapping": 4}
    for uuid in {target.rsplit(":", 1)[-1] for op, target in calls.order if op == "TagResource"}:
        tag = next(i for i, (op, target) in enumerate(calls.order) if op == "TagResource" and target.endswith(uuid))
        read = [i for i, (op, target) in enumerate(calls.order[:tag]) if op == "ListTags" and target.endswith(uuid)]
        assert len(read) == 1 and max(caps) < read[0] < tag, calls.order


def test_a_mapping_only_its_own_tag_selects_has_its_tags_read_before_its_cap(clients, ledger_table):
    """Its selection is on its tags alone (the Tagging API's index does not list it yet: it
    was tagged after the index was read): never capped before they are read."""
    from holdfast.actuators.esm import INDEX_TYPE
    from holdfast.actuators.selection import tagged
    from holdfast_fixtures.moto_patches import lagging_tag_index

    fn = make_function(clients, "owner-fn", selected=False)
    mapping = make_mapping(clients, fn, "own-q")
    make_mapping(clients, make_function(clients, "other-fn", selected=False), "other-q")   # not selected
    with lagging_tag_index(clients("resourcegroupstaggingapi")):
        assert tagged(clients, SETTINGS, INDEX_TYPE) == {}
        clients("lambda").tag_resource(Resource=mapping["EventSourceMappingArn"], Tags=SELECTOR)
        calls = Calls(clients("lambda"))
        report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)
    assert [(o.arn, o.action) for o in report.outcomes] == [(mapping["EventSourceMappingArn"], ENGAGED)]
    [cap] = calls.of("UpdateEventSourceMapping")
    assert ("ListTags", mapping["EventSourceMappingArn"]) in calls.order[:cap], calls.order


def test_a_record_only_its_tag_held_is_read_after_the_cap_and_the_owners_change_is_reported_and_kept(
        clients, ledger_table):
    """Engaged while the ledger was unreachable (the record on its tag only), the owner then
    set a cap of 500. A walk with the ledger caps it before reading its tags; the second
    pass finds the tag's record: the owner's 500 is reported as drift, both copies hold it
    as the original, and a full restore puts back the owner's 500."""
    [mapping] = _mappings(clients, [None])
    arn = mapping["EventSourceMappingArn"]
    first = walks.engage_all(clients, SETTINGS, "no-such-table", kinds=("esm",))
    assert [o.recorded_in for o in first.outcomes] == [["tag"]]
    clients("lambda").update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": 500})

    calls = Calls(clients("lambda"))
    second = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)
    [outcome] = second.outcomes
    [cap] = calls.of("UpdateEventSourceMapping")
    assert not [c for c in calls.order[:cap] if c[0] == "ListTags"], calls.order   # capped before its tags
    assert outcome.drift == {"MaximumConcurrency": {"original": None, "applied": SETTINGS.esm_floor, "current": 500}}
    assert "owner" in outcome.notes["drift"]["why"] and outcome.recorded_in == ["tag", "ledger"]
    on_tags, in_ledger = _records(clients, ledger_table)
    assert on_tags == in_ledger and in_ledger[arn][0] == {"MaximumConcurrency": 500}

    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    now = clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])
    assert (now.get("ScalingConfig") or {}).get("MaximumConcurrency") == 500


def test_with_the_ledger_failing_before_a_cap_whose_tags_were_not_read_nothing_is_written(clients, ledger_table):
    """The ledger answered the walk's Query, then refused the write-ahead: the tag-first
    order would need the mapping's tags, which were not read: left for the next walk."""
    from botocore.exceptions import ClientError

    [mapping] = _mappings(clients, [None])

    def refuse(model, **_):
        if model.name in ("PutItem", "UpdateItem", "TransactWriteItems"):
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, model.name)

    clients("dynamodb").meta.events.register("before-call", refuse)
    calls = Calls(clients("lambda"))
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert outcome.action == "failed" and "next walk" in outcome.error
    assert not calls.of("UpdateEventSourceMapping") and not calls.of("TagResource")
    current = clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])
    assert not (current.get("ScalingConfig") or {}).get("MaximumConcurrency")


def test_the_ledger_record_is_written_before_the_cap_it_covers(clients, ledger_table):
    [mapping] = _mappings(clients, [None])
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    seen = []

    def at_cap(model, params, **_):
        if model.name == "UpdateEventSourceMapping":
            seen.append(ledger.get(mapping["EventSourceMappingArn"]))

    clients("lambda").meta.events.register("before-call", at_cap)
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert [r.original for r in seen] == [{"MaximumConcurrency": None}], "the cap went out before its original was durable"


def test_with_the_ledger_unreachable_each_mapping_is_tagged_before_its_cap(clients):
    _mappings(clients, [None, 500])
    calls = Calls(clients("lambda"))
    report = walks.engage_all(clients, SETTINGS, "no-such-table", kinds=("esm",), writers=1)
    assert not report.ledger_available and [o.action for o in report.outcomes] == [ENGAGED, ENGAGED]
    assert all(o.recorded_in == ["tag"] for o in report.outcomes)
    for _, uuid in [c for c in calls.order if c[0] == "UpdateEventSourceMapping"]:
        cap = calls.order.index(("UpdateEventSourceMapping", uuid))
        tag = next(i for i, (op, target) in enumerate(calls.order) if op == "TagResource" and target.endswith(uuid))
        assert tag < cap, calls.order


def test_a_deadline_before_the_tags_leaves_the_walk_unfinished_and_the_next_walk_writes_them(clients, ledger_table):
    made = _mappings(clients, [None, 500, 50])
    calls = Calls(clients("lambda"))
    # The deadline passes once the first record tag is written: every cap came before it,
    # and the one writer checks the deadline before each of the other two tags.
    deadline = lambda: bool(calls.of("TagResource"))   # noqa: E731
    first = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1, deadline=deadline)
    assert len(calls.of("UpdateEventSourceMapping")) == 3 and len(calls.of("TagResource")) == 1
    assert not first.complete and "esm" in first.unfinished
    pending = [o for o in first.outcomes if "tag" in o.notes]
    assert [o.action for o in first.outcomes] == [ENGAGED] * 3 and len(pending) == 2
    assert all(o.recorded_in == ["ledger"] and "next walk" in o.notes["tag"]["fix"] for o in pending)
    # The cursor stops before the first mapping still without its tag: the next walk reads it again.
    assert first.cursor["esm"] is not None and pending[0].arn not in first.cursor["esm"]
    assert first.seen["esm"] and len(first.seen["esm"]) == 1

    calls = Calls(clients("lambda"))
    second = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1, after=first.cursor)
    assert second.complete and not calls.of("UpdateEventSourceMapping"), "no cap is written twice"
    assert len(calls.of("TagResource")) == 2
    on_tags, in_ledger = _records(clients, ledger_table)
    assert on_tags == in_ledger and set(in_ledger) == {m["EventSourceMappingArn"] for m in made}


def test_a_tag_the_second_pass_could_not_write_is_noted_and_written_by_the_next_walk(clients, ledger_table):
    [mapping] = _mappings(clients, [None])
    fail = {"on": True}

    def refuse(model, **_):
        from botocore.exceptions import ClientError

        if model.name == "TagResource" and fail["on"]:
            raise ClientError({"Error": {"Code": "ServiceException", "Message": "injected"}}, model.name)

    clients("lambda").meta.events.register("before-call", refuse)
    first = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    [outcome] = first.outcomes
    assert outcome.action == ENGAGED and outcome.recorded_in == ["ledger"] and not first.complete
    assert "ServiceException" in outcome.notes["tag"]["why"]
    fail["on"] = False
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    on_tags, in_ledger = _records(clients, ledger_table)
    assert on_tags == in_ledger and list(in_ledger) == [mapping["EventSourceMappingArn"]]


class _Refusing(EsmActuator):
    """An actuator whose one write-ahead check refuses every mapping."""

    def may_write_ahead(self, resource, record):
        return "refused for the test"


@pytest.mark.parametrize("table", ["ledger", "unreachable"])
def test_the_one_write_ahead_check_stops_both_orders_before_anything_is_written(clients, ledger_table, table):
    [mapping] = _mappings(clients, [None])
    engine = walks.engine(clients, SETTINGS, ledger_table if table == "ledger" else "no-such-table", kinds=("esm",))
    engine.actuators["esm"].__class__ = _Refusing
    calls = Calls(clients("lambda"))
    [outcome] = engine.engage().outcomes
    assert outcome.action == SKIPPED and outcome.notes["write-ahead"]["why"] == "refused for the test"
    assert not calls.of("UpdateEventSourceMapping") and not calls.of("TagResource")
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []
    current = clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])
    assert not (current.get("ScalingConfig") or {}).get("MaximumConcurrency")
