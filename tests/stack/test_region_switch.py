"""Holdfast's Region switch steps in a user's app: the step function in each Region's
Holdfast, and a plan of the user's that names them, synthesized and checked against
CloudFormation's own schema of AWS::ARCRegionSwitch::Plan (cfn-lint), and the IAM that
lets Region switch run them, evaluated (dev/holdfast_fixtures/iam_policy.py)."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Aspects, Environment, Stack
from aws_cdk import aws_arcregionswitch as arcregionswitch
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from holdfast.settings import Settings
from holdfast_cdk import Holdfast, RegionSwitchAccess, RegionSwitchSteps
from holdfast_cdk import role_policies as policies
from holdfast_fixtures.iam_policy import allows
from tests.stack.checks import cfn_lint, synth

HOLDFAST, PLANS = "123456789012", "210987654321"
REGIONS = ["us-east-1", "us-west-2"]
EXECUTION_ROLE = f"arn:aws:iam::{PLANS}:role/orders-region-switch"
EXTERNAL_ID = "orders-7f3a"
Workflow = arcregionswitch.CfnPlan.WorkflowProperty


def plan_stack(app, account, *, cross_account):
    stack = Stack(app, f"Plan{account}", env=Environment(account=account, region="us-east-1"))
    role = iam.Role(stack, "ExecutionRole", role_name="orders-region-switch",
                    assumed_by=iam.ServicePrincipal("arc-region-switch.amazonaws.com"))
    steps = RegionSwitchSteps(stack, "Holdfast", regions=REGIONS, account=HOLDFAST, cross_account=cross_account,
                              external_id=EXTERNAL_ID if cross_account else None)
    plan = arcregionswitch.CfnPlan(stack, "Plan", name="orders", execution_role=role.role_arn, regions=steps.regions,
                            recovery_approach="activePassive", primary_region="us-east-1", workflows=[
                                Workflow(workflow_target_action="activate", workflow_target_region="us-west-2",
                                         steps=[*steps.deactivating]),
                                Workflow(workflow_target_action="activate", workflow_target_region="us-east-1",
                                         steps=[*steps.deactivating]),
                                Workflow(workflow_target_action="postRecovery", steps=[
                                    arcregionswitch.CfnPlan.StepProperty(
                                        name="together", execution_block_type="Parallel",
                                        execution_block_configuration=arcregionswitch.CfnPlan
                                        .ExecutionBlockConfigurationProperty(
                                            parallel_config=arcregionswitch.CfnPlan
                                            .ParallelExecutionBlockConfigurationProperty(
                                                steps=[*steps.post_recovery])))]),
                            ])
    assert steps.bind(plan) == 5
    steps.grant_invoke(role)
    return stack, steps


@pytest.fixture(scope="module")
def app():
    app = App()
    holdfasts = {}
    for region in REGIONS:
        stack = Stack(app, f"Holdfast-{region}", env=Environment(account=HOLDFAST, region=region))
        Holdfast(stack, "Holdfast", settings=Settings.from_mapping({"mode": "auto"}),
                 region_switch=RegionSwitchAccess(plan_execution_roles=[EXECUTION_ROLE], external_id=EXTERNAL_ID))
        holdfasts[region] = stack
    same, _ = plan_stack(app, HOLDFAST, cross_account=False)
    other, _ = plan_stack(app, PLANS, cross_account=True)
    Aspects.of(app).add(AwsSolutionsChecks())
    done = synth(app)
    return {"holdfast": {r: done.template(s) for r, s in holdfasts.items()},
            "same": done.template(same), "other": done.template(other),
            "stacks": [*holdfasts.values(), same, other], "synth": done}


def lint_errors(template: Template | dict) -> list[str]:
    doc = template if isinstance(template, dict) else template.to_json()
    matches = cfn_lint(doc, regions=["us-east-1"])
    return [f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}" for m in matches if m.rule.severity == "error"]


def the_plan(template: Template) -> dict:
    (plan,) = template.find_resources("AWS::ARCRegionSwitch::Plan").values()
    return resolved(plan["Properties"])


def steps_of(plan: dict) -> list[dict]:
    """Every step, those inside a parallel block too."""
    def each(steps):
        for s in steps:
            yield s
            yield from each(s["ExecutionBlockConfiguration"].get("ParallelConfig", {}).get("Steps", []))
    return [s for w in plan["Workflows"] for s in each(w["Steps"])]


@pytest.mark.parametrize("which", ["same", "other"])
def test_the_plan_is_valid_against_cloudformations_schema(app, which):
    assert lint_errors(app[which]) == []


def test_cdk_nag_has_no_unacknowledged_findings(app):
    findings = [finding for stack in app["stacks"] for finding in app["synth"].nag_errors(stack)]
    assert findings == []


def test_a_plan_that_cloudformation_would_reject_is_reported(app):
    """The check can fail: a step without its retry interval, a Region to run in that does not exist."""
    doc = app["same"].to_json()
    (plan,) = [r for r in doc["Resources"].values() if r["Type"] == "AWS::ARCRegionSwitch::Plan"]
    config = plan["Properties"]["Workflows"][0]["Steps"][0]["ExecutionBlockConfiguration"]["CustomActionLambdaConfig"]
    del config["RetryIntervalMinutes"]
    config["RegionToRun"] = "leavingRegion"
    errors = lint_errors(doc)
    assert any("RetryIntervalMinutes" in e for e in errors) and any("leavingRegion" in e for e in errors)


def test_each_step_names_holdfasts_function_and_payload_in_each_region(app):
    plan = the_plan(app["same"])
    by_name = {s["Name"]: s for s in steps_of(plan)}
    assert set(by_name) == {"holdfast-engage", "holdfast-posture", "holdfast-lift", "together"}
    del by_name["together"]
    runs = {n: s["ExecutionBlockConfiguration"]["CustomActionLambdaConfig"]["RegionToRun"] for n, s in by_name.items()}
    assert runs == {"holdfast-engage": "deactivatingRegion", "holdfast-posture": "deactivatingRegion",
                    "holdfast-lift": "inactiveRegion"}
    engage = by_name["holdfast-engage"]["ExecutionBlockConfiguration"]["CustomActionLambdaConfig"]
    assert engage["Ungraceful"] == {"Behavior": "skip"} and engage["TimeoutMinutes"] == 20
    for entry, region in zip(engage["Lambdas"], REGIONS):
        assert entry["Arn"] == f"arn:aws:lambda:{region}:{HOLDFAST}:function:holdfast-region-switch"
        assert json.loads(entry["Payload"]) == {"holdfast": {"step": "engage", "region": region, "account": HOLDFAST,
                                                             "mode": "auto", "wait": True}}
        assert "CrossAccountRole" not in entry
    lift = by_name["holdfast-lift"]["ExecutionBlockConfiguration"]["CustomActionLambdaConfig"]   # in a parallel block
    assert [json.loads(e["Payload"])["holdfast"]["step"] for e in lift["Lambdas"]] == ["lift", "lift"]


def test_each_regions_holdfast_has_the_named_step_function(app):
    for region, template in app["holdfast"].items():
        (fn,) = [f for f in template.find_resources("AWS::Lambda::Function").values()
                 if f["Properties"].get("FunctionName") == "holdfast-region-switch"]
        assert fn["Properties"]["Handler"] == "holdfast.handlers.region_switch.handler"
        env = fn["Properties"]["Environment"]["Variables"]
        assert {"HOLDFAST_SETTINGS", "HOLDFAST_LEDGER_TABLE", "HOLDFAST_TICK_FUNCTION_ARN"} <= set(env)
        # Own resources: a stack-wide selector tag never makes Holdfast engage its own step function.
        (own,) = [p for p in template.find_resources("AWS::SSM::Parameter").values()
                  if "own-resources" in json.dumps(p["Properties"]["Name"])]
        logical = next(k for k, f in template.find_resources("AWS::Lambda::Function").items()
                       if f["Properties"].get("FunctionName") == "holdfast-region-switch")
        assert logical in json.dumps(own["Properties"]["Value"])


def _policy_of(template: Template, role_logical: str) -> list[dict]:
    roles = template.find_resources("AWS::IAM::Role")
    inline = [p["PolicyDocument"] for p in roles[role_logical]["Properties"].get("Policies", [])]
    attached = [p["Properties"]["PolicyDocument"] for p in template.find_resources("AWS::IAM::Policy").values()
                if {"Ref": role_logical} in p["Properties"]["Roles"]]
    return resolved(inline + attached)


def resolved(node):
    """The template's partition references and joins of plain strings, as a deploy in the
    `aws` partition resolves them (other references are left as they are)."""
    if isinstance(node, list):
        return [resolved(n) for n in node]
    if isinstance(node, dict):
        if node == {"Ref": "AWS::Partition"}:
            return "aws"
        if set(node) == {"Fn::Join"}:
            sep, parts = node["Fn::Join"]
            parts = resolved(parts)
            if all(isinstance(p, str) for p in parts):
                return sep.join(parts)
            return {"Fn::Join": [sep, parts]}
        return {k: resolved(v) for k, v in node.items()}
    return node


def test_the_plans_execution_role_may_invoke_the_step_function_in_each_region(app):
    template = app["same"]
    role = next(k for k, r in template.find_resources("AWS::IAM::Role").items()
                if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
                == {"Service": "arc-region-switch.amazonaws.com"})
    documents = _policy_of(template, role)
    for region in REGIONS:
        fn = f"arn:aws:lambda:{region}:{HOLDFAST}:function:holdfast-region-switch"
        # Region switch's invoke, and plan evaluation's GetFunction and dry run (InvokeFunction too).
        assert allows(documents, "lambda:InvokeFunction", fn) and allows(documents, "lambda:GetFunction", fn)
    assert not allows(documents, "lambda:InvokeFunction",
                      f"arn:aws:lambda:us-east-1:{HOLDFAST}:function:holdfast-reconciler")


def test_a_plan_in_another_account_assumes_each_regions_role_with_the_external_id(app):
    template = app["other"]
    plan = the_plan(template)
    engage = next(s for s in steps_of(plan) if s["Name"] == "holdfast-engage")
    entries = engage["ExecutionBlockConfiguration"]["CustomActionLambdaConfig"]["Lambdas"]
    assert [e["CrossAccountRole"] for e in entries] == [
        f"arn:aws:iam::{HOLDFAST}:role/holdfast-region-switch-{r}" for r in REGIONS]
    assert {e["ExternalId"] for e in entries} == {EXTERNAL_ID}
    role = next(k for k, r in template.find_resources("AWS::IAM::Role").items() if "ExecutionRole" in k)
    documents = _policy_of(template, role)
    target = f"arn:aws:iam::{HOLDFAST}:role/holdfast-region-switch-us-east-1"
    assert allows(documents, "sts:AssumeRole", target, {"sts:ExternalId": EXTERNAL_ID})
    assert not allows(documents, "sts:AssumeRole", target, {"sts:ExternalId": "guess"})


def test_the_cross_account_role_trusts_only_the_plans_role_with_the_external_id(app):
    template = app["holdfast"]["us-east-1"]
    (role,) = [resolved(r) for k, r in template.find_resources("AWS::IAM::Role").items() if "CrossAccountRole" in k]
    assert role["Properties"]["RoleName"] == "holdfast-region-switch-us-east-1"
    trust = role["Properties"]["AssumeRolePolicyDocument"]
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{PLANS}:root"}
    # The trust as IAM evaluates it for an AssumeRole by the plan's execution role.
    rendered = {"Statement": [{**statement, "Resource": "*"}]}
    good = {"aws:PrincipalArn": EXECUTION_ROLE, "sts:ExternalId": EXTERNAL_ID}
    assert allows([rendered], "sts:AssumeRole", "*", good)
    assert not allows([rendered], "sts:AssumeRole", "*", {**good, "sts:ExternalId": "guess"})
    assert not allows([rendered], "sts:AssumeRole", "*", {**good, "aws:PrincipalArn": f"arn:aws:iam::{PLANS}:role/other"})
    (invoke,) = role["Properties"]["Policies"]
    (grant,) = invoke["PolicyDocument"]["Statement"]
    assert sorted(grant["Action"]) == ["lambda:GetFunction", "lambda:InvokeFunction"]


def test_the_step_functions_role_is_policies_regionswitch(app):
    """Its inline policy is policies/regionswitch.json filled in, and as IAM evaluates it
    the role writes only Holdfast's control and plan partitions of its own ledger."""
    template = app["holdfast"]["us-east-1"]
    (role,) = [r for k, r in template.find_resources("AWS::IAM::Role").items() if "RegionSwitchRole" in k]
    (policy,) = [p for p in role["Properties"]["Policies"] if p["PolicyName"] == "regionswitch"]
    document = policy["PolicyDocument"]
    assert [s["Sid"] for s in document["Statement"]] == [s["Sid"] for s in policies.read("regionswitch")["Statement"]]
    ledger = next(iter(template.find_resources("AWS::DynamoDB::Table")))
    table = f"arn:aws:dynamodb:us-east-1:{HOLDFAST}:table/ledger"
    assert all(s["Resource"] == {"Fn::GetAtt": [ledger, "Arn"]} for s in document["Statement"]
               if s["Sid"] != "StartTickReconcilerOnly")   # the stack's own ledger, nothing else
    statements = [s for s in document["Statement"] if s["Sid"] != "StartTickReconcilerOnly"]
    for s in statements:
        s["Resource"] = table
    assert allows([{"Statement": statements}], "dynamodb:PutItem", table, {"dynamodb:LeadingKeys": ["CONTROL"]})
    assert not allows([{"Statement": statements}], "dynamodb:PutItem", table, {"dynamodb:LeadingKeys": ["RES"]})
    assert not allows([{"Statement": statements}], "dynamodb:Scan", table, {})


def test_bad_props_fail_synth_with_the_key():
    app = App()
    stack = Stack(app, "S", env=Environment(account=HOLDFAST, region="us-east-1"))
    with pytest.raises(ValueError, match="regions must be the plan's two Regions"):
        RegionSwitchSteps(stack, "A", regions=["us-east-1"])
    with pytest.raises(ValueError, match="cross_account needs external_id"):
        RegionSwitchSteps(stack, "B", regions=REGIONS, cross_account=True)
    with pytest.raises(ValueError, match="mode 'act' must be auto or recommend"):
        RegionSwitchSteps(stack, "C", regions=REGIONS, mode="act")
    with pytest.raises(ValueError, match="plan_execution_roles needs external_id"):
        RegionSwitchAccess(plan_execution_roles=[EXECUTION_ROLE])
    with pytest.raises(ValueError, match="is not an IAM role ARN"):
        RegionSwitchAccess(plan_execution_roles=["orders-role"], external_id="x")


def test_an_app_that_fails_synth_on_cdk_validation_findings_synthesizes_the_plan():
    """aws-cdk-lib's bundled validation knows no Lambdas.Payload (CloudFormation's schema,
    which cfn-lint checks above, has it): `bind` acknowledges that one rule on the plan, so
    an app with @aws-cdk/core:validateAgainstDefaultRules still synthesizes."""
    app = App(context={"@aws-cdk/core:validateAgainstDefaultRules": True})
    stack, _ = plan_stack(app, HOLDFAST, cross_account=False)
    assert the_plan(synth(app).template(stack))["Name"] == "orders"
