"""`holdfast doctor` finds the ARC Region switch plans that name Holdfast's steps and
checks Holdfast in each of their Regions.

Moto has no ARC Region switch: its ListPlans and GetPlan are botocore's Stubber, with the
request shapes of the API reference (ListPlans takes no argument on a first page, GetPlan
the plan's `arn`) and a plan whose workflows are the ones `RegionSwitchSteps` synthesizes
(CloudFormation's casing turned into the API's). The functions and ledgers the checks read
are moto's, in both Regions."""

from __future__ import annotations

import copy
import functools
import json
import re

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_arcregionswitch as arcregionswitch
from aws_cdk.assertions import Template
from botocore.stub import Stubber

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.ledger.table import ensure_table
from holdfast_cdk import RegionSwitchSteps
from tests.support.fleet import ACCOUNT, role

REGIONS = ["us-east-1", "us-west-2"]
PLAN = f"arn:aws:arc-region-switch::{ACCOUNT}:plan/orders:abc123"
OTHER = f"arn:aws:arc-region-switch::{ACCOUNT}:plan/batch:def456"


def _camel(node):
    if isinstance(node, list):
        return [_camel(n) for n in node]
    if isinstance(node, dict):
        return {k[0].lower() + k[1:]: _camel(v) for k, v in node.items()}
    return node


def synthesized_workflows(*, post_recovery=True, mode="auto"):
    """The plan's workflows as RegionSwitchSteps writes them, in the API's casing: each
    variant synthesized once for the module (a synthesis is seconds of the jsii kernel's
    CPU), each caller given its own copy."""
    return copy.deepcopy(_synthesized(post_recovery, mode))


@functools.cache
def _synthesized(post_recovery, mode):
    stack = Stack(App(), "Plan", env=Environment(account=ACCOUNT, region="us-east-1"))
    steps = RegionSwitchSteps(stack, "Holdfast", regions=REGIONS, account=ACCOUNT, mode=mode)
    Workflow = arcregionswitch.CfnPlan.WorkflowProperty
    workflows = [Workflow(workflow_target_action="activate", workflow_target_region=r, steps=[*steps.deactivating])
                 for r in REGIONS]
    if post_recovery:
        workflows.append(Workflow(workflow_target_action="postRecovery", steps=[*steps.post_recovery]))
    plan = arcregionswitch.CfnPlan(stack, "Plan", name="orders", execution_role=f"arn:aws:iam::{ACCOUNT}:role/x",
                                   regions=REGIONS, recovery_approach="activePassive", primary_region="us-east-1",
                                   workflows=workflows)
    steps.bind(plan)
    (resource,) = Template.from_stack(stack).find_resources("AWS::ARCRegionSwitch::Plan").values()
    return _camel(resource["Properties"]["Workflows"])


def plan_doc(arn, name, workflows):
    return {"arn": arn, "name": name, "owner": ACCOUNT, "regions": REGIONS, "recoveryApproach": "activePassive",
            "executionRole": f"arn:aws:iam::{ACCOUNT}:role/x", "workflows": workflows}


@pytest.fixture
def region_switch(monkeypatch):
    """Answers for the CLI's arc-region-switch client: a Stubber on it when it is made."""
    answers: list[dict] = []
    stubs = []
    made = Clients.__call__

    def call(self, service):
        client = made(self, service)
        if service == "arc-region-switch" and not getattr(client, "_holdfast_stubbed", False):
            stub = Stubber(client)
            plans = [a for a in answers if a != "denied"]
            if "denied" in answers:
                stub.add_client_error("list_plans", "AccessDeniedException", "not authorized", 403, expected_params={})
                plans = []
            else:
                stub.add_response("list_plans", {"plans": [
                    {k: p[k] for k in ("arn", "owner", "name", "regions", "recoveryApproach")} for p in plans]}, {})
            for p in plans:
                stub.add_response("get_plan", {"plan": p}, {"arn": p["arn"]})
            stub.activate()
            client._holdfast_stubbed = True
            stubs.append(stub)
        return client

    monkeypatch.setattr(Clients, "__call__", call)
    yield answers
    for stub in stubs:
        stub.assert_no_pending_responses()


def deploy_step_function(region, *, mode="auto", ledger=True, table="holdfast-ledger"):
    clients = Clients(region=region)
    if ledger:
        ensure_table(clients("dynamodb"), table)
    clients("lambda").create_function(
        FunctionName="holdfast-region-switch", Runtime="python3.13", Role=role(Clients(region="us-east-1")),
        Handler="holdfast.handlers.region_switch.handler", Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        Environment={"Variables": {"HOLDFAST_LEDGER_TABLE": table, "HOLDFAST_SETTINGS": json.dumps({"mode": mode})}})


def region_switch_checks(capsys):
    capsys.readouterr()
    main(["--json", "--region", "us-east-1", "doctor"])
    doc = json.loads(capsys.readouterr().out)
    return {c["check"]: c for c in doc["checks"] if c["check"].startswith("region-switch")}


def test_a_plan_naming_holdfasts_steps_is_checked_in_each_of_its_regions(aws, region_switch, capsys):
    region_switch += [plan_doc(PLAN, "orders", synthesized_workflows()),
                      plan_doc(OTHER, "batch", [{"workflowTargetAction": "activate", "steps": []}])]
    for region in REGIONS:
        deploy_step_function(region)
    checks = region_switch_checks(capsys)
    assert set(checks) == {"region-switch orders us-east-1", "region-switch orders us-west-2"}   # batch names none
    for region in REGIONS:
        check = checks[f"region-switch orders {region}"]
        assert check["ok"] and check["checked"]
        assert "Holdfast deployed: step function holdfast-region-switch, ledger holdfast-ledger, mode auto" in check["detail"]


def test_a_region_without_holdfast_and_a_plan_that_never_lifts_fail_with_their_fix(aws, region_switch, capsys):
    region_switch.append(plan_doc(PLAN, "orders", synthesized_workflows(post_recovery=False)))
    deploy_step_function("us-east-1")
    deploy_step_function("us-west-2", ledger=False)
    checks = region_switch_checks(capsys)
    west = checks["region-switch orders us-west-2"]
    assert not west["ok"] and "its ledger holdfast-ledger does not exist" in west["detail"]
    assert "region_switch=RegionSwitchAccess()" in west["fix"]
    lift = checks["region-switch orders"]
    assert not lift["ok"] and "no lift step" in lift["detail"] and "post_recovery" in lift["fix"]
    assert checks["region-switch orders us-east-1"]["ok"]


def test_a_missing_function_a_foreign_payload_and_a_forbidden_mode_fail(aws, region_switch, capsys):
    workflows = synthesized_workflows()
    text = json.dumps(workflows)
    # The us-west-2 entry's payload names us-east-1: that step would refuse at every run.
    text = re.sub(r'(\\"region\\":\\")us-west-2', r"\1us-east-1", text)
    region_switch.append(plan_doc(PLAN, "orders", json.loads(text)))
    deploy_step_function("us-east-1", mode="recommend")
    checks = region_switch_checks(capsys)
    east, west = checks["region-switch orders us-east-1"], checks["region-switch orders us-west-2"]
    assert not east["ok"] and "deployed with mode recommend: the step refuses" in east["detail"]
    assert not west["ok"] and "names Region us-east-1 and account" in west["detail"]
    assert f"no function arn:aws:lambda:us-west-2:{ACCOUNT}:function:holdfast-region-switch" in west["detail"]


def test_no_plan_and_no_permission_are_not_failures(aws, region_switch, capsys):
    checks = region_switch_checks(capsys)
    assert checks["region-switch"]["ok"] and "none names Holdfast's steps" in checks["region-switch"]["detail"]


def test_credentials_that_may_not_list_plans_are_told_what_they_need(aws, region_switch, capsys):
    region_switch.append("denied")
    check = region_switch_checks(capsys)["region-switch"]
    assert check["ok"] and not check["checked"] and "AccessDeniedException" in check["detail"]
    assert "arc-region-switch:ListPlans" in check["detail"]
