"""The Lambda reads a correct engage and restore can do without, and the
cases where they cannot: the record on a resource's tag that only the tag holds."""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.core.model import ALREADY, ENGAGED, RESTORED, SKIPPED
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()


def _lambda_calls(clients, before: Counter) -> Counter:
    return Counter({op: n for op, n in (clients.calls - before).items() if op.startswith("lambda:")})


def _mappings(clients, caps):
    out = []
    for i, cap in enumerate(caps):
        fn = make_function(clients, f"f{i}")
        out.append(make_mapping(clients, fn, f"q{i}", cap=cap))
    return out


def test_reserved_concurrency_is_read_by_get_function_and_only_where_the_floor_lowers_a_cap(clients, ledger_table):
    lam = clients("lambda")
    _mappings(clients, [None, 50, 2])                 # f2's mapping is at the floor already
    lam.put_function_concurrency(FunctionName="f0", ReservedConcurrentExecutions=0)   # throttled to nothing
    before = Counter(clients.calls)
    report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    made = _lambda_calls(clients, before)
    assert made["lambda:GetFunctionConcurrency"] == 0
    assert made["lambda:GetFunction"] == 2            # f0 and f1; not f2 (its cap decides nothing)
    by_fn = {o.arn: o.action for o in report.outcomes}
    actions = sorted(by_fn.values())
    assert actions == sorted([SKIPPED, ENGAGED, ALREADY])   # reserved 0 < floor: skipped, never written


def test_a_restore_reads_no_tags_of_a_mapping_the_ledger_holds(clients, ledger_table):
    _mappings(clients, [None, 40, 2])
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    before = Counter(clients.calls)
    report = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    made = _lambda_calls(clients, before)
    assert sorted(o.action for o in report.outcomes) == [RESTORED, RESTORED]
    # The one at the floor has no record: its tags are read (a record may be on them only).
    assert made["lambda:ListTags"] == 1
    assert made["lambda:GetEventSourceMapping"] == 2          # the fresh read before each relaxing write
    assert made["lambda:GetFunction"] == made["lambda:GetFunctionConcurrency"] == 0
    assert made["lambda:UntagResource"] == 2
    caps = sorted(((m.get("ScalingConfig") or {}).get("MaximumConcurrency") or 0)
                  for m in clients("lambda").list_event_source_mappings()["EventSourceMappings"])
    assert caps == [0, 2, 40]


def test_records_on_tags_only_are_still_restored_when_the_ledger_is_back(clients, ledger_table):
    """Engaged while the ledger was unreachable: the records are on the tags only. A
    restore with the ledger answering (and empty) must read the tags and restore them."""
    lam = clients("lambda")
    mapping = _mappings(clients, [None])[0]
    make_function(clients, "async-only")
    walks.engage_all(clients, SETTINGS, "no-such-table", kinds=("esm", "async"))
    assert lam.get_event_source_mapping(UUID=mapping["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert lam.get_function_event_invoke_config(FunctionName="async-only")["MaximumRetryAttempts"] == SETTINGS.async_max_retry_attempts

    report = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm", "async"))
    assert {o.action for o in report.outcomes} == {RESTORED}
    assert lam.get_event_source_mapping(UUID=mapping["UUID"]).get("ScalingConfig") in (None, {})
    with pytest.raises(lam.exceptions.ResourceNotFoundException):
        lam.get_function_event_invoke_config(FunctionName="async-only")   # it had none


def test_a_restore_lists_async_configs_only_of_functions_with_a_record(clients, ledger_table):
    lam = clients("lambda")
    for i in range(4):
        make_function(clients, f"a{i}")
    lam.put_function_event_invoke_config(FunctionName="a3", MaximumRetryAttempts=0, MaximumEventAgeInSeconds=60)
    report = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("async",))
    engaged = sorted(o.arn for o in report.outcomes if o.action == ENGAGED)
    assert len(engaged) == 3                          # a3 was in posture already
    before = Counter(clients.calls)
    report = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("async",))
    made = _lambda_calls(clients, before)
    assert sorted(o.arn for o in report.outcomes if o.action == RESTORED) == engaged
    assert made["lambda:ListFunctionEventInvokeConfigs"] == 0
    assert made["lambda:GetFunctionEventInvokeConfig"] == 3   # one each, just before its restore
    assert lam.get_function_event_invoke_config(FunctionName="a3")["MaximumRetryAttempts"] == 0
