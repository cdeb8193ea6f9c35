"""The Tagging API's index of mappings (actuators.esm): a mapping it lists as selected is
capped with one Lambda call, before any mapping it does not list has its tags read; its
ListTags follows in the second pass, before its record tag, and decides. An index that
lags its owner's removal of the selector never leaves that mapping engaged: it is restored
from the record this walk wrote, and nothing of the owner's is lost. An index that lists
no mapping at all leaves the walk as it was without one (ListTags before an own-tag cap).

The index lags through holdfast_fixtures.moto_patches.lagging_tag_index (AWS updates it
asynchronously; moto's is always current)."""

from __future__ import annotations

import json

import pytest

from holdfast.actuators.esm import INDEX_TYPE
from holdfast.actuators.selection import tagged
from holdfast.core.model import ENGAGED, SKIPPED
from holdfast.core.tags import RECORD_KEYS
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from holdfast_fixtures.moto_patches import lagging_tag_index
from tests.actuators.test_deferred_tags import Calls
from tests.support import walks
from tests.support.fleet import SELECTOR, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()


def _cap(clients, mapping):
    now = clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])
    return (now.get("ScalingConfig") or {}).get("MaximumConcurrency")


def _names(mapping) -> set[str]:
    return {mapping["UUID"], mapping["EventSourceMappingArn"]}


def _mine(calls: Calls, mapping) -> list[str]:
    """The Lambda operations that named `mapping`, in order."""
    return [op for op, target in calls.order if target in _names(mapping)]


def test_the_emulated_index_lists_mappings_with_their_tags(clients):
    fn = make_function(clients, "fn", selected=False)
    listed = make_mapping(clients, fn, "q1", tags=SELECTOR)
    make_mapping(clients, fn, "q2")
    assert tagged(clients, SETTINGS, INDEX_TYPE) == {listed["EventSourceMappingArn"]: SELECTOR}


def test_an_indexed_mapping_is_capped_with_one_lambda_call_before_any_unindexed_ones_listtags(clients, ledger_table):
    """`listed`: its own tag selects it and the index lists it (a cap of 500: less harm than
    `late`'s). `late`: tagged after the index was read (uncapped, the most harm), and
    `unselected`: neither. The index lists some mappings, so the two it does not list come
    after `listed`, whose only call before its cap is the cap; `late` is still found by its
    ListTags and engaged; every record ends on both copies."""
    tagging = clients("resourcegroupstaggingapi")
    listed = make_mapping(clients, make_function(clients, "f-listed", selected=False), "q-listed", cap=500,
                          tags=SELECTOR)
    late = make_mapping(clients, make_function(clients, "f-late", selected=False), "q-late")
    unselected = make_mapping(clients, make_function(clients, "f-none", selected=False), "q-none")
    with lagging_tag_index(tagging):
        assert set(tagged(clients, SETTINGS, INDEX_TYPE)) == {listed["EventSourceMappingArn"]}
        clients("lambda").tag_resource(Resource=late["EventSourceMappingArn"], Tags=SELECTOR)
        calls = Calls(clients("lambda"))
        report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)

    assert {o.arn: o.action for o in report.outcomes} == {listed["EventSourceMappingArn"]: ENGAGED,
                                                          late["EventSourceMappingArn"]: ENGAGED}
    assert _mine(calls, listed) == ["UpdateEventSourceMapping", "ListTags", "TagResource"], calls.order
    first_cap = calls.order.index(("UpdateEventSourceMapping", listed["UUID"]))
    assert not [c for c in calls.order[:first_cap] if c[0] == "ListTags"], calls.order
    assert ("ListTags", late["EventSourceMappingArn"]) in calls.order[first_cap:]
    assert ("ListTags", unselected["EventSourceMappingArn"]) in calls.order[first_cap:]
    assert _mine(calls, late)[:2] == ["ListTags", "UpdateEventSourceMapping"]   # its selection first
    assert _cap(clients, listed) == _cap(clients, late) == SETTINGS.esm_floor and _cap(clients, unselected) is None
    assert all(o.recorded_in == ["tag", "ledger"] for o in report.outcomes)


@pytest.mark.parametrize("owner_cap", [None, 500])
def test_an_index_listing_a_mapping_its_tags_do_not_select_ends_with_it_restored_and_nothing_lost(
        clients, ledger_table, owner_cap):
    """The owner removed the selector; the index still lists the mapping. It is capped
    before its tags are read, its ListTags in the second pass says it is not selected: it
    is put back as the owner had it, no record tag is written, the ledger keeps no record,
    and the outcome says why. A relax afterwards has nothing to do."""
    tagging = clients("resourcegroupstaggingapi")
    mapping = make_mapping(clients, make_function(clients, "fn", selected=False), "q", cap=owner_cap,
                           tags={**SELECTOR, "team": "owner"})
    arn = mapping["EventSourceMappingArn"]
    with lagging_tag_index(tagging):
        assert arn in tagged(clients, SETTINGS, INDEX_TYPE)
        clients("lambda").untag_resource(Resource=arn, TagKeys=list(SELECTOR))
        calls = Calls(clients("lambda"))
        [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1).outcomes

    assert _mine(calls, mapping) == ["UpdateEventSourceMapping", "ListTags", "GetEventSourceMapping",
                                     "UpdateEventSourceMapping"], calls.order
    assert outcome.action == SKIPPED and outcome.action != ENGAGED and "index" in outcome.notes["selection"]["why"]
    assert _cap(clients, mapping) == owner_cap
    assert clients("lambda").list_tags(Resource=arn)["Tags"] == {"team": "owner"}
    assert not set(RECORD_KEYS) & set(clients("lambda").list_tags(Resource=arn)["Tags"])
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []
    assert not walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert _cap(clients, mapping) == owner_cap


def test_an_owner_cap_set_between_the_cap_and_the_tags_read_is_kept(clients, ledger_table):
    """The index's wrong selection is undone from a fresh read: a cap the owner set after
    Holdfast's is theirs, kept and reported as drift."""
    tagging = clients("resourcegroupstaggingapi")
    mapping = make_mapping(clients, make_function(clients, "fn", selected=False), "q", tags=SELECTOR)
    arn = mapping["EventSourceMappingArn"]

    def owner_sets_a_cap(model, params, **_):
        if model.name == "ListTags" and params.get("Resource") == arn:
            clients("lambda").meta.events.unregister("before-parameter-build", owner_sets_a_cap)
            clients("lambda").update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": 40})

    with lagging_tag_index(tagging):
        tagged(clients, SETTINGS, INDEX_TYPE)
        clients("lambda").untag_resource(Resource=arn, TagKeys=list(SELECTOR))
        clients("lambda").meta.events.register("before-parameter-build", owner_sets_a_cap)
        [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert outcome.action == SKIPPED and outcome.drift and _cap(clients, mapping) == 40
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []


def _no_mappings_in_index(clients) -> None:
    """An account whose Tagging API lists no mappings: every mapping GetResources page empty."""

    def empty(params, **_):
        body = params.get("body") or b"{}"
        if INDEX_TYPE in json.loads(body if isinstance(body, (str, bytes)) else "{}").get("ResourceTypeFilters", []):
            class _Http:
                status_code = 200
                headers: dict = {}
            return _Http(), {"ResourceTagMappingList": [], "PaginationToken": ""}
        return None

    clients("resourcegroupstaggingapi").meta.events.register(
        "before-call.resource-groups-tagging-api.GetResources", empty)


def test_without_mappings_in_the_index_an_own_tag_mapping_has_its_tags_read_before_its_cap(clients, ledger_table):
    _no_mappings_in_index(clients)
    mapping = make_mapping(clients, make_function(clients, "owner-fn", selected=False), "own-q", tags=SELECTOR)
    assert tagged(clients, SETTINGS, INDEX_TYPE) == {}
    calls = Calls(clients("lambda"))
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1).outcomes
    assert outcome.action == ENGAGED and _mine(calls, mapping)[:2] == ["ListTags", "UpdateEventSourceMapping"]


def test_an_index_that_cannot_be_read_leaves_the_walk_as_without_one(clients, ledger_table):
    from botocore.exceptions import ClientError

    def refuse(params, model, **_):
        body = params.get("body") or b"{}"
        if INDEX_TYPE in json.loads(body).get("ResourceTypeFilters", []):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "injected"}}, model.name)

    clients("resourcegroupstaggingapi").meta.events.register(
        "before-call.resource-groups-tagging-api.GetResources", refuse)
    mapping = make_mapping(clients, make_function(clients, "owner-fn", selected=False), "own-q", tags=SELECTOR)
    calls = Calls(clients("lambda"))
    report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)
    assert report.complete and [o.action for o in report.outcomes] == [ENGAGED]
    assert _mine(calls, mapping)[:2] == ["ListTags", "UpdateEventSourceMapping"]


def test_a_rewalk_caps_nothing_on_the_word_of_an_index_that_still_lags(clients, ledger_table):
    """The first walk caps and restores a mapping the lagging index still lists (above). A
    re-walk of the same plan is no race to cap first: it reads the mapping's tags before
    anything else and, finding no selector, writes nothing to it."""
    tagging = clients("resourcegroupstaggingapi")
    mapping = make_mapping(clients, make_function(clients, "fn", selected=False), "q", cap=500, tags=SELECTOR)
    arn = mapping["EventSourceMappingArn"]
    with lagging_tag_index(tagging):
        assert arn in tagged(clients, SETTINGS, INDEX_TYPE)
        clients("lambda").untag_resource(Resource=arn, TagKeys=list(SELECTOR))
        first = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1)
        assert [o.action for o in first.outcomes] == [SKIPPED]
        calls = Calls(clients("lambda"))
        walks.engine(clients, SETTINGS, ledger_table, kinds=("esm",), writers=1).engage(seen=first.seen)

    assert "UpdateEventSourceMapping" not in _mine(calls, mapping), calls.order
    assert _mine(calls, mapping)[:1] == ["ListTags"], calls.order
    assert _cap(clients, mapping) == 500
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []
