"""Holdfast never engages its own resources, whatever their tags, and says so: a stack
tagged as a whole with the selector tags Holdfast's own detector and reconciler too, and
the tick (and `holdfast plan` / `engage`) must leave them, and the mappings of their
functions, alone.

The functions carry the tags CloudFormation gives every resource it creates
(`aws:cloudformation:stack-id`, `aws:cloudformation:logical-id`); the controller knows
its stack's id and its resources' logical IDs from its environment, the CLI from the
stack's SSM parameter (holdfast.core.own). Moto (in-process), with AWS's semantics where
it departs from them."""

from __future__ import annotations

import json

from holdfast.cli import main
from holdfast.clock import FakeClock
from holdfast.core.model import ENGAGED, SKIPPED
from holdfast.core.own import LOGICAL_ID_TAG, STACK_ID_TAG
from holdfast.handlers.shell import runtime_from_env
from holdfast.reconciler import tick
from holdfast.settings import Settings
from tests.support.fakes import Script
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_function,
    make_mapping,
)
from tests.support.harness import T0

STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/OrdersService/0a1b2c3d-0000-0000-0000-000000000000"
OWN = {"detector": "HoldfastControllersDetector1A2B3C4D", "reconciler": "HoldfastControllersReconciler5E6F7A8B"}


def stack_of_the_users(clients):
    """The user's consumer and Holdfast's two controllers, all selected by a stack-wide tag."""
    arns = {}
    for name, logical in OWN.items():
        arns[name] = make_function(clients, f"OrdersService-{logical[:20]}-XYZ",
                                   tags={STACK_ID_TAG: STACK_ID, LOGICAL_ID_TAG: logical})
    arns["orders"] = make_function(clients, "OrdersService-Consumer-XYZ",
                                   tags={STACK_ID_TAG: STACK_ID, LOGICAL_ID_TAG: "Consumer1234ABCD"})
    arns["own-mapping"] = make_mapping(clients, arns["reconciler"], "holdfast-own-q")["EventSourceMappingArn"]
    arns["user-mapping"] = make_mapping(clients, arns["orders"], "orders-q")["EventSourceMappingArn"]
    return arns


def has_config(clients, arn) -> bool:
    lam = clients("lambda")
    try:
        lam.get_function_event_invoke_config(FunctionName=arn)
        return True
    except lam.exceptions.ResourceNotFoundException:
        return False


def test_the_tick_never_engages_holdfasts_own_functions_or_their_mappings(clients, ledger_table, aws_semantics):
    # GIVEN Holdfast's controllers selected by a stack-wide tag, and the reconciler's
    # runtime built from its environment as deployed (holdfast_cdk.construct)
    arns = stack_of_the_users(clients)
    env = {"HOLDFAST_LEDGER_TABLE": ledger_table, "HOLDFAST_STACK_ID": STACK_ID,
           "HOLDFAST_OWN_LOGICAL_IDS": ",".join(OWN.values()),
           "AWS_LAMBDA_FUNCTION_NAME": arns["reconciler"].split(":")[6],
           "HOLDFAST_SETTINGS": Settings(mode="auto").to_json()}   # a stack that acts
    runtime = runtime_from_env("reconciler", env).but(clients=clients, clock=FakeClock(T0))
    script = Script()
    script.set("impaired", runtime.clock.now())

    # WHEN the region is impaired and a tick engages
    result = tick(runtime, collect=script.collect)

    # THEN the user's function and mapping are engaged, Holdfast's own are not, and say why
    by_arn = {o.arn: o for o in result.outcomes}
    assert by_arn[arns["orders"]].action == ENGAGED and by_arn[arns["user-mapping"]].action == ENGAGED
    for own in ("detector", "reconciler", "own-mapping"):
        assert by_arn[arns[own]].action == SKIPPED and "Holdfast's own" in by_arn[arns[own]].notes["own"]["why"]
    for own in ("detector", "reconciler"):
        assert not has_config(clients, arns[own])
        assert not [k for k in clients("lambda").list_tags(Resource=arns[own])["Tags"] if k.startswith("holdfast:o")]
    assert (clients("lambda").get_event_source_mapping(UUID=arns["own-mapping"].rsplit(":", 1)[-1])
            .get("ScalingConfig") or {}) == {}


def test_plan_and_engage_say_holdfasts_own_resources_are_left_alone(clients, ledger_table, aws_semantics, capsys):
    arns = stack_of_the_users(clients)
    clients("ssm").put_parameter(Name="/holdfast/OrdersService/own-resources", Type="String", Value=json.dumps({
        "stack_id": STACK_ID, "logical_ids": list(OWN.values()),
        "functions": [arns[n].split(":")[6] for n in OWN]}))

    assert main(["--region", "us-east-1", "--json", "plan"]) == 0
    plan = {r["arn"]: r for r in json.loads(capsys.readouterr().out)["resources"]}
    for own in ("detector", "reconciler", "own-mapping"):
        assert plan[arns[own]]["action"] == SKIPPED and "never engaged" in plan[arns[own]]["notes"]["own"]["why"]
    assert plan[arns["orders"]]["action"] == "planned"

    assert main(["--region", "us-east-1", "--json", "engage", "--yes"]) == 0
    engaged = {r["arn"]: r["action"] for r in json.loads(capsys.readouterr().out)["resources"]}
    assert engaged[arns["orders"]] == ENGAGED and engaged[arns["reconciler"]] == SKIPPED
    assert not has_config(clients, arns["detector"]) and not has_config(clients, arns["reconciler"])


def test_holdfasts_own_resources_do_not_count_toward_max_resources_in_the_tick(clients, ledger_table, aws_semantics):
    """The tick counts each kind on its own: two of the three functions and one of the two
    mappings are Holdfast's, so a limit of one per kind is the user's own resource alone."""
    arns = stack_of_the_users(clients)
    env = {"HOLDFAST_LEDGER_TABLE": ledger_table, "HOLDFAST_STACK_ID": STACK_ID,
           "HOLDFAST_OWN_LOGICAL_IDS": ",".join(OWN.values()),
           "AWS_LAMBDA_FUNCTION_NAME": arns["reconciler"].split(":")[6],
           "HOLDFAST_SETTINGS": Settings(mode="auto", max_resources=1).to_json()}
    runtime = runtime_from_env("reconciler", env).but(clients=clients, clock=FakeClock(T0))
    script = Script()
    script.set("impaired", runtime.clock.now())

    result = tick(runtime, collect=script.collect)

    by_arn = {o.arn: o for o in result.outcomes}
    assert by_arn[arns["orders"]].action == ENGAGED and by_arn[arns["user-mapping"]].action == ENGAGED, result.outcomes
    assert has_config(clients, arns["orders"]) and not has_config(clients, arns["reconciler"])


def test_holdfasts_own_resources_do_not_count_toward_max_resources_in_plan(clients, ledger_table, aws_semantics,
                                                                          capsys, tmp_path):
    """`holdfast plan` counts every kind together: five candidates, three of them Holdfast's."""
    arns = stack_of_the_users(clients)
    clients("ssm").put_parameter(Name="/holdfast/OrdersService/own-resources", Type="String", Value=json.dumps({
        "stack_id": STACK_ID, "logical_ids": list(OWN.values()),
        "functions": [arns[n].split(":")[6] for n in OWN]}))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"holdfast": {"max_resources": 2}}))

    code = main(["--region", "us-east-1", "--json", "--settings", str(settings), "plan"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and not doc.get("refused"), doc
    plan = {r["arn"]: r["action"] for r in doc["resources"]}
    assert plan[arns["orders"]] == "planned" and plan[arns["user-mapping"]] == "planned"
    assert plan[arns["reconciler"]] == SKIPPED
