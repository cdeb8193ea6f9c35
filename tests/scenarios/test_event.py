"""A full event on moto with the real engine and actuators: impairment -> hold -> every
stage -> normal. Every resource ends equal to its original, except the owner's change
made while engaged, which is kept and reported. Also: a large fleet engages over
several ticks within the tick budget with nothing written twice."""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.clock import FakeClock
from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, KINDS
from holdfast.core.policy import CONTROLLED, NORMAL
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from tests.support.fakes import Script
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)
from tests.support.harness import T0

SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "lambda_writes_per_second": 15})
# Engage walks done: a controlled kind's mark is `<kind>/engaged` (the kind itself is done
# when every mapping is back at its owner's value).
ENGAGED_MARKS = (set(KINDS) - CONTROLLED) | {f"{k}/engaged" for k in CONTROLLED}
WRITE_VERBS = ("Update", "Put", "Delete", "Suspend", "Resume", "Register", "Tag", "Untag", "CreateOrUpdateTags",
               "DeleteTags", "AddTags", "RemoveTags", "Modify")


def mutations(calls: Counter) -> Counter:
    """Mutating calls to resources (the ledger's own DynamoDB writes excluded)."""
    return Counter({k: n for k, n in calls.items() if not k.startswith("dynamodb:") and k.split(":")[1].startswith(WRITE_VERBS)})


def test_a_full_event_restores_every_resource_and_keeps_the_owners_change(clients, ledger_table, aws_semantics):
    fleet = build_fleet(clients, asgs=2, esms=2, asyncs=2, nlbs=1, services=1)
    before = snapshot(clients, fleet)
    clock, script = FakeClock(T0), Script()
    run = lambda: tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo"), collect=script.collect)

    script.set("impaired", clock.now())
    first = run()
    assert first.stage == "hold" and first.complete and not [o for o in first.outcomes if o.action == "failed"]
    engaged = snapshot(clients, fleet)
    assert all(engaged[a] != before[a] for a in fleet.arns() if a in sum(fleet.selected.values(), []))
    assert all(engaged[a] == before[a] for k in fleet.unselected for a in fleet.unselected[k])

    clock.advance(60)
    script.set("recovering", clock.now())
    stages, outcomes = [], []
    drifted = fleet.selected["nlb"][0]
    key = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage"
    for _ in range(120):
        clock.advance(60)
        result = run()
        outcomes += result.outcomes
        if not stages or stages[-1] != result.stage:
            stages.append(result.stage)
            if result.stage == "fresh-work":
                # the owner sets their own threshold on an engaged target group
                clients("elbv2").modify_target_group_attributes(TargetGroupArn=drifted, Attributes=[{"Key": key, "Value": "60"}])
        if result.stage == NORMAL:
            break
    assert stages == ["hold", "drain", "replay", "fresh-work", "routing", "capacity", "normal"]
    after = snapshot(clients, fleet)
    assert after[drifted]["Attributes"] == {**before[drifted]["Attributes"], key: "60"}
    assert after[drifted]["Tags"] == before[drifted]["Tags"]
    assert {a: v for a, v in after.items() if a != drifted} == {a: v for a, v in before.items() if a != drifted}
    assert [o.arn for o in outcomes if o.action == DRIFT_KEPT] == [drifted]


def engage_in_ticks(clients, ledger_table, fleet_size: dict, budget_calls: int, seconds_per_call: float = 0.05,
                    prepare=None):
    """Engage a fleet tick by tick. The fake clock moves `seconds_per_call` per AWS call, so the tick
    budget is spent after budget_calls calls; returns (fleet, ticks, calls, outcomes).
    `prepare(fleet)`: changes the fleet before the first tick."""
    fleet = build_fleet(clients, **fleet_size, unselected=0, workers=1)  # in-process moto is not thread-safe while creating
    if prepare is not None:
        prepare(fleet)
    settings = Settings.from_mapping({**SETTINGS.to_mapping(), "tick_budget_seconds": max(10, round(budget_calls * seconds_per_call))})
    clock, script = FakeClock(T0), Script()
    for service in ("autoscaling", "lambda", "elbv2", "application-autoscaling", "dynamodb", "resourcegroupstaggingapi"):
        clients(service).meta.events.register("before-call", lambda **_: clock.advance(seconds_per_call))
    script.set("impaired", clock.now())
    start = Counter(clients.calls)
    ticks, outcomes = 0, []
    while True:
        ticks += 1
        result = tick(Runtime(clients, settings, ledger_table, clock, controller_id="solo"), collect=script.collect)
        outcomes += result.outcomes
        if ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done >= ENGAGED_MARKS:
            break
        assert ticks < 60, "engage never completed"
        clock.advance(60)
    calls = Counter(clients.calls) - start
    return fleet, ticks, calls, outcomes


def test_a_fleet_engages_over_several_ticks_with_nothing_written_twice(clients, ledger_table, aws_semantics):
    # 40 calls a tick: the services' walks run at once, so where in its walk each kind is
    # when the deadline comes depends on the threads; a fleet needing well over twice the
    # budget (batched tags made it fewer calls) spans more than two ticks whatever the order.
    fleet, ticks, calls, outcomes = engage_in_ticks(clients, ledger_table, {"asgs": 12, "esms": 12, "asyncs": 12, "nlbs": 12, "services": 12}, 40, 0.25)
    engaged = Counter(o.arn for o in outcomes if o.action == ENGAGED)
    selected = set(sum(fleet.selected.values(), []))
    assert sum(calls.values()) > 3 * 40, "the fleet no longer needs several ticks' budgets: make it larger"
    assert ticks > 2
    assert max(engaged.values()) == 1, "a resource was engaged twice"
    # some owners' settings are already in posture (the fleet's hard cases): those say `already`
    assert selected == set(engaged) | {o.arn for o in outcomes if o.action == ALREADY}
    assert not [o for o in outcomes if o.action == "failed"]
    writes = mutations(calls)
    print(f"\n{len(selected)} resources engaged in {ticks} ticks; {sum(calls.values())} API calls, {sum(writes.values())} mutating")


def test_aliases_without_a_config_are_engaged_over_ticks_only_after_every_listed_config(clients, ledger_table,
                                                                                         aws_semantics):
    """Each function of the fleet has an alias with no async config: the aliases are listed
    (one ListAliases per function) in the later phase of the async walk, which resumes
    tick after tick, and not one of those calls comes before the last listed config's cap."""
    made: list[tuple[str, str | None]] = []
    aliases: list[str] = []

    def with_aliases(fleet) -> None:
        lam = clients("lambda")
        for arn in fleet.selected["async"]:
            name = arn.split(":")[6]
            lam.create_alias(FunctionName=name, Name="live", FunctionVersion=lam.publish_version(FunctionName=name)["Version"])
            aliases.append(f"{arn}:live")
        lam.meta.events.register("before-parameter-build.lambda",
                                 lambda model, params, **_: made.append((model.name, params.get("Qualifier"))))

    fleet, ticks, calls, outcomes = engage_in_ticks(clients, ledger_table, {"esms": 12, "asyncs": 12}, 40, 0.25,
                                                    prepare=with_aliases)
    engaged = Counter(o.arn for o in outcomes if o.action == ENGAGED)
    assert ticks > 2 and max(engaged.values()) == 1
    assert all(engaged[a] == 1 for a in aliases)
    assert not [o for o in outcomes if o.action == "failed"]
    writes = [i for i, (op, q) in enumerate(made) if q is None
              and op in ("PutFunctionEventInvokeConfig", "UpdateFunctionEventInvokeConfig")]
    assert max(writes) < made.index(("ListAliases", None))
    # One ListAliases per listed function, but for the few a tick's writers finished past its
    # cursor (the cursor stops at the first step the deadline reached): listed again, once.
    functions = {o.arn for o in outcomes if o.kind == "async" and o.arn.count(":") == 6}
    assert len(functions) <= calls["lambda:ListAliases"] < 2 * len(functions)


@pytest.mark.benchmark
def test_bench_2000_resources_engage_over_ticks(clients, ledger_table, aws_semantics):
    fleet, ticks, calls, outcomes = engage_in_ticks(clients, ledger_table, {"asgs": 400, "esms": 400, "asyncs": 400, "nlbs": 400, "services": 400}, 900)
    engaged = Counter(o.arn for o in outcomes if o.action == ENGAGED)
    assert max(engaged.values()) == 1 and not [o for o in outcomes if o.action == "failed"]
    writes = mutations(calls)
    print(f"\n2000 resources: {ticks} ticks, {sum(calls.values())} API calls ({sum(writes.values())} mutating)")
    for op, n in sorted(calls.items()):
        print(f"  {op}: {n}")
