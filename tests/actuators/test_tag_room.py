"""Tag headroom: a resource with no room for Holdfast's two record tags
(50 user tags per resource) is engaged through the ledger record only, or — when the ledger
is unreachable too — left unchanged, and the outcome says which. A tag write that answers
the tag limit ends the same way, never in a retry every tick.

Moto 5.2.5 has no tag limit for Lambda or Auto Scaling: `aws_semantics` emulates AWS's
(holdfast_fixtures.moto_patches._tag_limits)."""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.core.model import ALREADY, ENGAGED, RESTORED
from holdfast.ledger import Ledger

SKIPPED = "skipped"  # holdfast.core.model.SKIPPED (spelled out: the test runs against older code too)
from holdfast.core.tags import RECORD_KEYS
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import describe_asg, make_asg, make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()


def owner_tags(n: int) -> dict[str, str]:
    return {f"owner-{i:02d}": "x" for i in range(n)}


def group_tags(clients, name) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in describe_asg(clients, name)["Tags"]}


def suspended(clients, name) -> set[str]:
    return {p["ProcessName"] for p in describe_asg(clients, name)["SuspendedProcesses"]}


def writes(clients, before: Counter) -> Counter:
    return Counter({op: n for op, n in (clients.calls - before).items()
                    if op.split(":")[1].startswith(("Create", "Suspend", "Resume", "Tag", "Delete", "Update", "Put"))
                    and not op.startswith("dynamodb:")})


def test_a_group_with_no_room_for_the_record_tags_is_engaged_through_the_ledger_only(clients, ledger_table):
    # GIVEN a selected group already carrying 49 tags of its owner's (selector and team among them)
    make_asg(clients, "full", tags=owner_tags(47))
    assert len(group_tags(clients, "full")) == 49
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))

    # WHEN engaged THEN its processes are suspended, its original is in the ledger only, and the outcome says so
    report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("asg",))
    [outcome] = report.outcomes
    assert outcome.action == ENGAGED and outcome.recorded_in == ["ledger"]
    assert "no room for the record tags (49 of 50" in outcome.notes["record"]["why"]
    assert suspended(clients, "full") == {"ReplaceUnhealthy", "AZRebalance"}
    assert not set(RECORD_KEYS) & set(group_tags(clients, "full"))
    assert [r.original for r in ledger.records()] == [{"AZRebalance": False, "ReplaceUnhealthy": False}]

    # AND the next walk writes nothing (no tag write tried again)
    before = Counter(clients.calls)
    again = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("asg",))
    assert [(o.action, o.recorded_in) for o in again.outcomes] == [(ALREADY, ["ledger"])]
    assert writes(clients, before) == Counter()

    # AND status lists it as recorded in the ledger, and a restore returns it exactly
    [row] = walks.status(clients, SETTINGS, ledger_table, kinds=("asg",))
    assert row["recorded_in"] == ["ledger"]
    restored = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("asg",))
    assert [o.action for o in restored.outcomes] == [RESTORED]
    assert suspended(clients, "full") == set() and ledger.records() == []


def test_no_room_and_no_ledger_leaves_the_group_unchanged_and_says_so(clients):
    make_asg(clients, "full", tags=owner_tags(48))
    report = walks.engage_all(clients, SETTINGS, "no-such-table", kinds=("asg",))
    [outcome] = report.outcomes
    assert outcome.action == SKIPPED and outcome.recorded_in is None
    assert "no room for the record tags" in outcome.notes["record"]["why"] and "ledger is unreachable" in outcome.notes["record"]["why"]
    assert suspended(clients, "full") == set()
    assert report.failed == []   # not a failure to retry: nothing can be done until the ledger answers


def test_a_tag_write_that_answers_the_limit_ends_in_the_same_outcome_never_a_retry(clients, ledger_table):
    # GIVEN a mapping read with room to spare, whose owner adds tags up to the limit before Holdfast writes
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q", tags=owner_tags(30))
    arn = mapping["EventSourceMappingArn"]
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    act = walks.actuators(clients, SETTINGS, ledger, ("esm",))["esm"]
    [resource] = act.discover()
    clients("lambda").tag_resource(Resource=arn, Tags={f"late-{i:02d}": "x" for i in range(19)})

    # WHEN engaged THEN TagResource answers the limit, and the mapping is capped through the ledger only
    outcome = act.engage(resource)
    assert outcome.action == ENGAGED and outcome.recorded_in == ["ledger"]
    assert "tag limit" in outcome.notes["record"]["why"] and "InvalidParameterValueException" in outcome.notes["record"]["why"]
    assert clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert [r.original for r in ledger.records()] == [{"MaximumConcurrency": None}]

    # AND every later walk sees no room before writing: no tag write, no failure, tick after tick
    for _ in range(3):
        before = Counter(clients.calls)
        report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
        assert [o.action for o in report.outcomes] == [ALREADY] and report.failed == []
        assert clients.calls["lambda:TagResource"] == before["lambda:TagResource"]

    # AND the restore removes the cap exactly
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert clients("lambda").get_event_source_mapping(UUID=mapping["UUID"]).get("ScalingConfig") in (None, {})
    assert ledger.records() == []
