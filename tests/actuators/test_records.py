"""The write-ahead record (a lagging tag index, a ledger write lost, a floor recorded
before it lands), on moto with the real actuators.

2. Re-engaging never skips the write-ahead on the strength of the Resource Groups Tagging
   API's index (which lags: holdfast_fixtures.moto_patches.lagging_tag_index).
3. With no readable tag, engage uses the ledger's record and rewrites the tag from it; a
   conditional put that finds a different original is a conflict, reported, not a success.
4. The record of what Holdfast applied only grows, so a stale controller's late tag write
   can never make Holdfast's own cap look like the owner's.
"""

from __future__ import annotations

import pytest

from holdfast.core.errors import Conflict, StalePlan
from holdfast.core.model import ALREADY, ENGAGED, FAILED, REFUSED_STALE, Record
from holdfast.core.tags import ORIGINAL_KEY, RECORD_KEYS, read_record
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from holdfast_fixtures.moto_patches import lagging_tag_index
from tests.support import walks
from tests.support.fleet import make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired"
SETTINGS = Settings()
KEY = "MaximumConcurrency"


def function_tags(clients, name="f") -> dict[str, str]:
    return clients("lambda").list_tags(Resource=clients("lambda").get_function(FunctionName=name)["Configuration"]["FunctionArn"])["Tags"]


def async_config(clients, name="f") -> dict:
    config = clients("lambda").get_function_event_invoke_config(FunctionName=name)
    return {k: config.get(k) for k in ("MaximumEventAgeInSeconds", "MaximumRetryAttempts", "DestinationConfig")}


def cap(clients, uuid) -> int | None:
    return (clients("lambda").get_event_source_mapping(UUID=uuid).get("ScalingConfig") or {}).get(KEY)


def mapping_record(clients, arn):
    return read_record(clients("lambda").list_tags(Resource=arn)["Tags"])


def strip_record_tags(clients, arn) -> None:
    """What a `terraform apply` does to tags it does not know."""
    clients("lambda").untag_resource(Resource=arn, TagKeys=list(RECORD_KEYS))


# ---- a lagging tag index -------------------------------------------------------------------------

def test_a_record_the_tag_index_still_lists_after_a_restore_does_not_skip_the_write_ahead(clients, ledger_table):
    # GIVEN a function engaged and fully restored, while the tagging API's index still lists its old record
    make_function(clients, "f")
    clients("lambda").put_function_event_invoke_config(FunctionName="f", MaximumEventAgeInSeconds=7200)
    before = async_config(clients)
    options = {"kinds": ("async",), "expired_queue_arn": QUEUE}
    walks.engage_all(clients, SETTINGS, ledger_table, **options)
    with lagging_tag_index(clients("resourcegroupstaggingapi")):
        walks.engage_all(clients, SETTINGS, ledger_table, **options)  # the index answers with the record
        walks.relax_all(clients, SETTINGS, ledger_table, **options)
        assert async_config(clients) == before and ORIGINAL_KEY not in function_tags(clients)

        # WHEN a new impairment engages it with the ledger unreachable (the October case)
        report = walks.engage_all(clients, SETTINGS, "no-such-table", **options)

    # THEN the function is changed only with its original on its own tag, which a restore from the tags uses
    [outcome] = report.outcomes
    assert outcome.action == ENGAGED
    assert async_config(clients)["MaximumEventAgeInSeconds"] == 900
    record = read_record(function_tags(clients))
    assert record is not None, "the function was changed with no record anywhere (the ledger is down)"
    assert record[0]["max_age"] == 7200
    walks.relax_all(clients, SETTINGS, "no-such-table", **options)
    assert async_config(clients) == before and ORIGINAL_KEY not in function_tags(clients)


# ---- a ledger write lost -------------------------------------------------------------------------

def test_a_stripped_tag_mid_drain_is_rewritten_from_the_ledger_and_the_owners_no_cap_comes_back(clients, ledger_table):
    # GIVEN a mapping without a cap, engaged to the floor and raised to the first drain step
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q")
    arn, uuid = mapping["EventSourceMappingArn"], mapping["UUID"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 5})
    assert cap(clients, uuid) == 5

    # WHEN an IaC apply strips Holdfast's tags and a new impairment re-engages it
    strip_record_tags(clients, arn)
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes

    # THEN the original is the ledger's (no cap), never Holdfast's 5, and the tag says so again
    assert outcome.action == ENGAGED and cap(clients, uuid) == 2
    original, applied = mapping_record(clients, arn)
    assert original == {KEY: None} and 5 in applied[KEY] and 2 in applied[KEY]
    [ledger_record] = ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()
    assert ledger_record.original == {KEY: None}

    # AND a full restore gives the owner back no cap at all
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert cap(clients, uuid) is None


def test_a_stripped_tag_on_an_engaged_mapping_in_posture_is_rewritten_from_the_ledger(clients, ledger_table):
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q", cap=50)
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    strip_record_tags(clients, mapping["EventSourceMappingArn"])
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert outcome.action == ALREADY and outcome.recorded_in == ["tag", "ledger"]
    assert mapping_record(clients, mapping["EventSourceMappingArn"])[0] == {KEY: 50}


def test_a_conditional_put_that_finds_another_original_is_a_conflict_and_the_ledgers_stays(clients, ledger_table):
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    arn = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:00000000-0000-0000-0000-000000000001"
    assert ledger.put_original(Record("esm", arn, {KEY: None}, {KEY: 2}), "m") is True
    # the same original again (another controller, a retry) is fine, and grows the applied values
    assert ledger.put_original(Record("esm", arn, {KEY: None}, {KEY: [2, 5]}), "m") is True
    with pytest.raises(Conflict, match="ledger None, this write 5"):
        ledger.put_original(Record("esm", arn, {KEY: 5}, {KEY: 2}), "m")
    [kept] = ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()
    assert kept.original == {KEY: None} and kept.applied == {KEY: [2, 5]}


def test_an_engage_whose_put_finds_another_original_is_reported_and_the_next_walk_repairs_it(clients, ledger_table):
    # GIVEN a mapping (no cap) engaged and raised to 5 by controller A, then stripped of its tags
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q")
    arn, uuid = mapping["EventSourceMappingArn"], mapping["UUID"]
    # controller B read the ledger before A wrote its record (its one Query per walk is older)
    b = walks.actuators(clients, SETTINGS, ResourceLedger(Ledger(clients("dynamodb"), ledger_table)), ("esm",))["esm"]
    assert b.ledger.records() == []
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 5})
    strip_record_tags(clients, arn)

    # WHEN B engages from its stale view (no tag, no record: the current 5 looks like the original)
    [resource] = b.discover()
    outcome = b.engage(resource)

    # THEN the put finds the ledger's other original: a conflict, reported, and the mapping is not changed
    assert outcome.action == FAILED and "conflict" in outcome.error and "ledger None" in outcome.error
    assert cap(clients, uuid) == 5
    # AND the next walk takes the ledger's record, fixes the tag, engages; the restore is exact
    [again] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert again.action == ENGAGED and cap(clients, uuid) == 2
    assert mapping_record(clients, arn)[0] == {KEY: None}
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert cap(clients, uuid) is None


# ---- the floor recorded first -------------------------------------------------------------------------

class LateTagWrites:
    """Holds back every TagResource one controller's client sends, as a retried request
    that lands later; `land()` sends them."""

    def __init__(self, client):
        self.client, self.held = client, []

    def __enter__(self):
        self.client.meta.events.register("before-parameter-build.lambda.TagResource", self.keep)
        self.client.meta.events.register("before-call.lambda.TagResource", self.hold)
        return self

    def __exit__(self, *exc):
        self.client.meta.events.unregister("before-parameter-build.lambda.TagResource", self.keep)
        self.client.meta.events.unregister("before-call.lambda.TagResource", self.hold)

    def keep(self, params, **_):
        self.held.append(dict(params))

    def hold(self, **_):
        class Accepted:  # botocore takes a before-call answer as the service's
            status_code = 204
            headers: dict = {}

        return Accepted(), {}

    def land(self) -> int:
        self.__exit__()
        for params in self.held:
            self.client.tag_resource(Resource=params["Resource"], Tags=params["Tags"])
        return len(self.held)


def test_a_stale_controllers_late_tag_write_never_turns_the_floor_into_the_owners_cap(clients, ledger_table):
    # GIVEN a mapping (no cap) engaged to 2 and raised to 5 in drain
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q")
    arn, uuid = mapping["EventSourceMappingArn"], mapping["UUID"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 5})

    # AND controller A, whose drain decided 30 (a cap not recorded yet), raising it: its guard
    # passed, its tag write is retried and lands late, and its guard before the cap write finds the plan moved on
    from holdfast.aws import Clients
    a_clients = Clients(region="us-east-1")
    a_settings = Settings()
    a = walks.actuators(a_clients, a_settings, ResourceLedger(Ledger(a_clients("dynamodb"), ledger_table)), ("esm",))["esm"]
    with LateTagWrites(a_clients("lambda")) as late:
        def guard():   # passes until A's tag write went out; the next finds the plan moved on
            if late.held:
                raise StalePlan("plan generation 3 is no longer current")

        [resource] = a.discover()
        assert a.relax(resource, {KEY: 30}, guard).action == REFUSED_STALE
        # WHEN a newer generation (back to hold) re-engages it to the floor
        walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
        assert cap(clients, uuid) == 2
        # AND A's late tag write lands after it
        assert late.land() == 1

    # THEN the floor is still Holdfast's value: the restore gives back no cap, nothing is blamed on the owner
    original, applied = mapping_record(clients, arn)
    assert original == {KEY: None} and 2 in applied[KEY]
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert (outcome.action, outcome.drift) == ("restored", {})
    assert cap(clients, uuid) is None


def test_the_applied_record_holds_the_floor_and_grows_by_each_cap_before_it_is_written(clients, ledger_table):
    """The drain's controller decides its caps as it goes: the first write-ahead records the
    floor; each cap not recorded yet is added to the ledger's copy, then the tag's, before
    the cap is written; a cap already recorded writes no record."""
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q", cap=300)
    arn = mapping["EventSourceMappingArn"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    original, applied = mapping_record(clients, arn)
    assert original == {KEY: 300} and applied == {KEY: 2}
    before = clients.calls["lambda:TagResource"]
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 5})
    assert clients.calls["lambda:TagResource"] == before + 1 and cap(clients, mapping["UUID"]) == 5
    assert mapping_record(clients, arn)[1] == {KEY: [2, 5]}
    [ledger] = [r for r in ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() if r.arn == arn]
    assert 5 in ledger.applied[KEY]
    # down to the floor and up to 5 again: both recorded, no record written
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 2})
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",), target_for=lambda _r: {KEY: 5})
    assert clients.calls["lambda:TagResource"] == before + 1 and cap(clients, mapping["UUID"]) == 5