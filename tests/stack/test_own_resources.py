"""A stack-wide selector tag (`Tags.of(stack).add("holdfast:protect", "true")`, a common
habit) tags Holdfast's own functions and queues too; the controllers must not select
themselves. The synthesized template gives each controller what it needs to know its
own resources (holdfast.core.own): its stack's id and the logical IDs of the construct's
resources, matched against the tags CloudFormation puts on every resource it creates;
and the CLI the same, with the function names, in SSM."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Environment, Stack, Tags
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from holdfast.core.own import LOGICAL_ID_TAG, STACK_ID_TAG, from_document
from holdfast.handlers.shell import runtime_from_env
from holdfast.settings import Settings
from holdfast_cdk import Holdfast
from holdfast_cdk.construct import OWN_TYPES

STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/OrdersService/0a1b2c3d-0000-0000-0000-000000000000"


def _resolve(value):
    """A template value as CloudFormation resolves it in this stack (the refs it needs)."""
    if isinstance(value, dict) and value.get("Ref") == "AWS::StackId":
        return STACK_ID
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolve(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return value


@pytest.fixture(scope="module")
def tagged_stack(tmp_path_factory):
    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.tagged")))
    stack = Stack(app, "OrdersService", env=Environment(account="123456789012", region="us-east-1"))
    sqs.Queue(stack, "Orders")
    lambda_.Function(stack, "Consumer", runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                     code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"))
    Holdfast(stack, "Holdfast", settings=Settings.from_mapping({"mode": "recommend"}))
    Tags.of(stack).add("holdfast:protect", "true")
    return Template.from_stack(stack).to_json()["Resources"]


def _selected(resources, cfn_type):
    return {k: r for k, r in resources.items() if r["Type"] == cfn_type
            and {"Key": "holdfast:protect", "Value": "true"} in (r["Properties"].get("Tags") or [])}


def test_a_stack_wide_tag_selects_holdfasts_own_functions_and_queues(tagged_stack):
    # The premise: the tag reaches Holdfast's own resources, not only the user's.
    functions = _selected(tagged_stack, "AWS::Lambda::Function")
    # the detector, the reconciler, the readiness check and the deletion-time teardown
    assert len([k for k in functions if k.startswith("Holdfast")]) == 4 and "Consumer" in "".join(functions)
    assert len([k for k in _selected(tagged_stack, "AWS::SQS::Queue") if k.startswith("Holdfast")]) == 3   # expired events, its anchor, dead letters


def test_the_controllers_know_every_selected_resource_of_holdfasts_as_their_own(tagged_stack):
    controllers = {k: r for k, r in tagged_stack.items() if r["Type"] == "AWS::Lambda::Function"
                   and r["Properties"]["Handler"].startswith("holdfast.handlers.")}
    assert len(controllers) == 4
    for name, function in controllers.items():
        env = {k: _resolve(v) for k, v in function["Properties"]["Environment"]["Variables"].items()}
        env["AWS_LAMBDA_FUNCTION_NAME"] = f"OrdersService-{name}-ABC123"
        own = runtime_from_env("test", env).own
        # Every resource of a type Holdfast acts on, with the tags CloudFormation gives it.
        for logical_id, resource in tagged_stack.items():
            if resource["Type"] not in OWN_TYPES:
                continue
            tags = {STACK_ID_TAG: STACK_ID, LOGICAL_ID_TAG: logical_id, "holdfast:protect": "true"}
            arn = f"arn:aws:lambda:us-east-1:123456789012:function:OrdersService-{logical_id}-XYZ"
            assert own.holds(arn, tags) == logical_id.startswith("Holdfast"), (name, logical_id)


def test_the_cli_finds_holdfasts_own_resources_in_ssm(tagged_stack):
    (parameter,) = [r for r in tagged_stack.values() if r["Type"] == "AWS::SSM::Parameter"
                    and r["Properties"]["Name"].endswith("/own-resources")]
    value = parameter["Properties"]["Value"]
    document = _resolve(value)
    own = from_document(document.replace('"<', '"').replace('>"', '"'))
    holdfast_functions = sorted(k for k, r in tagged_stack.items() if r["Type"] == "AWS::Lambda::Function"
                                and k.startswith("Holdfast"))
    assert own.functions == frozenset(holdfast_functions), "the functions' names (their Refs)"
    assert {logical for _, logical in own.resources} == {
        k for k, r in tagged_stack.items() if r["Type"] in OWN_TYPES and k.startswith("Holdfast")}
    assert json.loads(document.replace('"<', '"').replace('>"', '"'))["stack_id"] == STACK_ID
