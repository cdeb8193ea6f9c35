"""The record of a mapping's cap through a long drain, on moto with the real engine (the
walk the reconciler's drain stage calls: `relax(kinds=("esm",), target_for=...)`).

- However many caps the drain writes, the tag on the mapping stays exact: it holds the
  original and the caps that can be on the mapping now (the floor, the cap before the
  latest write and the latest), so a re-engage from the tag alone (the ledger unreachable,
  the case the tag exists for) reads Holdfast's own cap as Holdfast's.
- An owner's cap equal to one of the drain's earlier steps is the owner's: kept and reported.
"""

from __future__ import annotations

import pytest

from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, RAISED, RESTORED
from holdfast.core.tags import APPLIED_KEY, MAX_VALUE, read_record
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import FailKth, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
KEY = "MaximumConcurrency"
UNREACHABLE = "no-such-table"   # a ledger table that answers ResourceNotFoundException: unreachable


def cap(clients, uuid) -> int | None:
    return (clients("lambda").get_event_source_mapping(UUID=uuid).get("ScalingConfig") or {}).get(KEY)


def tags(clients, arn) -> dict[str, str]:
    return clients("lambda").list_tags(Resource=arn)["Tags"]


def drain_to(clients, table, n: int) -> list:
    return walks.relax_all(clients, SETTINGS, table, kinds=("esm",), target_for=lambda _r: {KEY: n}).outcomes


# A drain from the floor to 875 with a few cuts on the way: 64 caps (57 distinct), more
# than the 51 or so values a 256-character tag could list.
CAPS = [*range(5, 400, 20), 250, 200, *range(215, 600, 20), 450, *range(475, 876, 20)]


def test_a_long_drain_keeps_the_tag_exact_and_a_re_engage_from_the_tag_alone_caps_the_mapping(clients, ledger_table):
    # GIVEN a mapping without a cap, engaged to the floor and drained through 62 caps to 875
    fn = make_function(clients, "consumer")
    mapping = make_mapping(clients, fn, "q")
    arn, uuid = mapping["EventSourceMappingArn"], mapping["UUID"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert len(CAPS) > 60 and len(set(CAPS)) > 51
    for n in CAPS:
        [outcome] = drain_to(clients, ledger_table, n)
        assert outcome.action == RAISED, (n, outcome)
    assert cap(clients, uuid) == 875

    on_tag = tags(clients, arn)

    # WHEN a new impairment re-engages it with the ledger unreachable
    [outcome] = walks.engage_all(clients, SETTINGS, UNREACHABLE, kinds=("esm",)).outcomes

    # THEN the 875 is not mistaken for the owner's: the mapping is back at the floor for the new hold
    assert (outcome.action, outcome.drift) == (ENGAGED, {}), outcome
    assert cap(clients, uuid) == SETTINGS.esm_floor
    # (the tag said 875 is Holdfast's, and fits)
    original, applied = read_record(on_tag)
    assert original == {KEY: None} and 875 in applied[KEY]
    assert len(on_tag[APPLIED_KEY]) <= MAX_VALUE
    # AND a restore from the tag alone gives the owner back no cap at all
    [outcome] = walks.relax_all(clients, SETTINGS, UNREACHABLE, kinds=("esm",)).outcomes
    assert (outcome.action, outcome.drift) == (RESTORED, {})
    assert cap(clients, uuid) is None


def test_the_ledgers_copy_stays_as_short_as_the_tags(clients, ledger_table):
    fn = make_function(clients, "consumer")
    mapping = make_mapping(clients, fn, "q", cap=900)
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    for n in CAPS[:20]:
        drain_to(clients, ledger_table, n)
    [record] = ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()
    assert record.original == {KEY: 900}
    assert sorted(record.applied[KEY]) == sorted({SETTINGS.esm_floor, CAPS[18], CAPS[19]})
    assert read_record(tags(clients, mapping["EventSourceMappingArn"]))[1] == record.applied


def test_an_owners_cap_equal_to_an_earlier_drain_step_is_the_owners_and_kept(clients, ledger_table):
    # GIVEN a mapping capped at 500 by its owner, engaged and drained 5 -> 20 -> 100 -> 300
    fn = make_function(clients, "consumer")
    mapping = make_mapping(clients, fn, "q", cap=500)
    uuid = mapping["UUID"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    for n in (5, 20, 100, 300):
        drain_to(clients, ledger_table, n)

    # WHEN the owner sets 20 by hand (the value of an earlier step)
    clients("lambda").update_event_source_mapping(UUID=uuid, ScalingConfig={KEY: 20})

    # THEN the drain's next step leaves it, and the restore keeps it and reports it
    [outcome] = drain_to(clients, ledger_table, 400)
    assert outcome.action == ALREADY and cap(clients, uuid) == 20
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert outcome.action == DRIFT_KEPT and outcome.drift[KEY]["current"] == 20
    assert cap(clients, uuid) == 20


def test_a_cap_whose_write_failed_after_its_record_is_still_holdfasts(clients, ledger_table):
    """The one earlier value the record keeps: a write that failed (or a controller that
    stopped) between the record and the cap leaves the cap before it on the mapping."""
    fn = make_function(clients, "consumer")
    mapping = make_mapping(clients, fn, "q", cap=500)
    uuid = mapping["UUID"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    for n in (5, 20, 100):
        drain_to(clients, ledger_table, n)
    with FailKth(clients, ("lambda",), 2):   # the tag write passes, the cap write fails
        [outcome] = drain_to(clients, ledger_table, 300)
    assert outcome.action == "failed" and cap(clients, uuid) == 100
    assert 300 in read_record(tags(clients, mapping["EventSourceMappingArn"]))[1][KEY]
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",)).outcomes
    assert (outcome.action, outcome.drift) == (RESTORED, {}) and cap(clients, uuid) == 500
