"""The Holdfast construct inside a stack of the user's that already has resources, and
its one-line grant for the user's own functions; HoldfastStack as a thin stack around it."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, CfnResource, Environment, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from holdfast_cdk import Holdfast
from holdfast_cdk.code import NOT_IN_ASSET

ACCOUNT, REGION = "123456789012", "us-east-1"  # as tests/stack/conftest.py


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _logical_id(template: Template, cfn_type: str, prefix: str) -> str:
    (found,) = [k for k in template.find_resources(cfn_type) if k.startswith(prefix)]
    return found


def _role_statements(template: Template, role_prefix: str) -> list[dict]:
    """Statements of the identity policies attached to the role whose logical ID starts with role_prefix."""
    role_id = _logical_id(template, "AWS::IAM::Role", role_prefix)
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


# ---- a foreign stack ------------------------------------------------------------------


def test_holdfast_sits_beside_the_users_own_resources_under_its_own_ids(foreign):
    t = foreign.template
    queues = t.find_resources("AWS::SQS::Queue")
    assert len(queues) == 4, "the user's queue and Holdfast's three (expired events, its anchor, dead letters)"
    assert [k for k in queues if k.startswith("Orders")], "the user's queue keeps its logical ID"
    functions = t.find_resources("AWS::Lambda::Function")
    handlers = {f["Properties"]["Handler"] for f in functions.values()}
    assert handlers == {"index.handler", "holdfast.handlers.detector.handler", "holdfast.handlers.reconciler.handler",
                        "holdfast.handlers.readiness.handler", "holdfast.handlers.teardown.handler"}
    holdfast_ids = {
        foreign.stack.resolve(foreign.stack.get_logical_id(c))
        for c in foreign.holdfast.node.find_all()
        if isinstance(c, CfnResource)
    }
    # 31, the settings parameter, the alarm on stuck resources, the parameter that names
    # Holdfast's own resources for the CLI (holdfast.core.own), the ledger name's parameter,
    # the expired-events queue's redrive anchor with its TLS-only policy, and the readiness
    # check's function (role, policy, logs, invoke config), schedule (and its permission) and alarm,
    # the deletion-time custom resource with its function (logs, invoke config; the reconciler's role),
    # and the stalled-drain alarm
    assert len(holdfast_ids) == 50 and all(k.startswith("Holdfast") for k in holdfast_ids)
    assert holdfast_ids <= set(t.to_json()["Resources"])
    # The user's consumer still has exactly its own permissions on its own queue.
    consumer = _role_statements(t, "ConsumerServiceRole")
    assert any("sqs:ReceiveMessage" in _as_list(s["Action"]) for s in consumer)


def test_the_grant_lets_the_users_execution_role_send_to_the_expired_events_queue(foreign):
    t = foreign.template
    queue_id = _logical_id(t, "AWS::SQS::Queue", "HoldfastQueuesExpiredEvents")
    statements = _role_statements(t, "ConsumerServiceRole")
    sends = [s for s in statements if "sqs:SendMessage" in _as_list(s["Action"])]
    assert sends == [{"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": {"Fn::GetAtt": [queue_id, "Arn"]}}]
    # SSE-SQS: Lambda needs no key to deliver, so none is granted.
    assert not [s for s in statements if any(a.startswith("kms:") for a in _as_list(s["Action"]))]
    assert t.find_resources("AWS::SQS::Queue")[queue_id]["Properties"]["SqsManagedSseEnabled"] is True


def test_with_a_key_of_the_users_the_grant_adds_what_an_sqs_producer_needs_on_that_key(foreign):
    t = foreign.key_template
    key_id = _logical_id(t, "AWS::KMS::Key", "TeamKey")
    queue_id = _logical_id(t, "AWS::SQS::Queue", "HoldfastQueuesExpiredEvents")
    assert t.find_resources("AWS::SQS::Queue")[queue_id]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    statements = _role_statements(t, "WorkerServiceRole")
    key_use = [s for s in statements if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
    assert key_use == [{"Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Effect": "Allow", "Resource": {"Fn::GetAtt": [key_id, "Arn"]}}]
    assert any(s["Action"] == "sqs:SendMessage" and s["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]} for s in statements)


def test_the_expired_events_queue_arn_is_published_where_the_cli_looks(foreign):
    for template, name in ((foreign.template, "/holdfast/OrdersService/expired-queue-arn"), (foreign.key_template, "/holdfast/keyed/expired-queue-arn")):
        parameters = template.find_resources("AWS::SSM::Parameter").values()
        (parameter,) = [p for p in parameters if p["Properties"]["Name"].endswith("/expired-queue-arn")]
        queue_id = _logical_id(template, "AWS::SQS::Queue", "HoldfastQueuesExpiredEvents")
        assert parameter["Properties"]["Name"] == name
        assert parameter["Properties"]["Value"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_the_deployed_settings_are_published_where_the_drill_reads_them(foreign):
    from holdfast.cli.context import SETTINGS_PARAMETER
    from holdfast.settings import Settings

    parameters = foreign.template.find_resources("AWS::SSM::Parameter").values()
    (parameter,) = [p for p in parameters if p["Properties"]["Name"] == f"/holdfast/OrdersService/{SETTINGS_PARAMETER}"]
    assert Settings.from_json(parameter["Properties"]["Value"]) == foreign.holdfast.settings
    assert len(parameter["Properties"]["Value"]) <= 4096  # a standard parameter


def test_holdfasts_own_resources_have_no_unacknowledged_nag_findings_in_a_foreign_stack(foreign):
    for stack in (foreign.stack, foreign.key_stack):
        findings = [m for m in foreign.synth.nag_findings(stack) if "/Holdfast/" in m.id]
        assert findings == [], [f"{m.id}: {m.entry.data}" for m in findings]


def test_the_grant_refuses_an_imported_function_whose_role_is_unknown(foreign):
    imported = lambda_.Function.from_function_arn(
        foreign.stack, "ImportedNoRole", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:legacy"
    )
    with pytest.raises(ValueError, match=r"has no known execution role \(an imported function\?\): pass its role"):
        foreign.holdfast.grant_expired_events_destination(imported)


def test_the_grant_refuses_what_is_neither_a_function_nor_a_role(foreign):
    with pytest.raises(TypeError, match="takes a Lambda function or an IAM role, not str"):
        foreign.holdfast.grant_expired_events_destination("arn:aws:iam::123456789012:role/x")


def test_the_grant_on_a_role_imported_by_arn_attaches_a_policy_to_that_role(tmp_path):
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Imported", env=Environment(account=ACCOUNT, region=REGION))
    holdfast = Holdfast(stack, "Holdfast")
    role = iam.Role.from_role_arn(stack, "LegacyRole", f"arn:aws:iam::{ACCOUNT}:role/legacy-worker")
    holdfast.grant_expired_events_destination(role)
    t = Template.from_stack(stack)
    queue_id = _logical_id(t, "AWS::SQS::Queue", "HoldfastQueuesExpiredEvents")
    attached = [p["Properties"] for p in t.find_resources("AWS::IAM::Policy").values() if p["Properties"].get("Roles") == ["legacy-worker"]]
    assert len(attached) == 1
    assert attached[0]["PolicyDocument"]["Statement"] == [
        {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": {"Fn::GetAtt": [queue_id, "Arn"]}}
    ]
    # For a role CDK cannot change, the same statement to add by hand:
    (statement,) = holdfast.expired_events_statements()
    assert stack.resolve(statement.to_json()) == {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": {"Fn::GetAtt": [queue_id, "Arn"]}}


def test_props_are_checked_before_anything_is_created():
    stack = Stack(App(), "Bad")
    with pytest.raises(TypeError, match=r"settings must be holdfast\.settings\.Settings \(from Settings\.from_mapping\), not dict"):
        Holdfast(stack, "Holdfast", settings={"mode": "recommend"})
    with pytest.raises(ValueError, match=r"parameter_prefix 'holdfast/x/' must be an SSM path such as /holdfast/my-stack"):
        Holdfast(stack, "Holdfast2", parameter_prefix="holdfast/x/")
    assert [c.node.id for c in stack.node.children if c.node.children] == []


# ---- HoldfastStack, the thin stack ---------------------------------------------------

# The stack's logical IDs before the construct existed (main at d599d62, synthesized with
# this session's settings): an update of a deployed stack must not replace (and so empty)
# the ledger or any other resource.
LOGICAL_IDS_BEFORE_THE_CONSTRUCT = {
    "ControllersDetectorA9E4C663", "ControllersDetectorEventInvokeConfig1A80EC7A", "ControllersDetectorLogs72B6632F",
    "ControllersDetectorRole0B0541F1", "ControllersDetectorRoleDefaultPolicy79601A41", "ControllersReconcilerCB0E84D7",
    "ControllersReconcilerEventInvokeConfigFC1C9692", "ControllersReconcilerLogs279DA420", "ControllersReconcilerRole9F7DEA21",
    "ControllersReconcilerRoleDefaultPolicy220EAD8B", "LedgerTable9343E4AA", "MonitoringDashboard0C3675C6",
    "MonitoringDeadLettersD99D287D", "MonitoringDetectorErrors56D6A426", "MonitoringDetectorThrottles8E349412",
    "MonitoringReconcilerErrors44882DE7", "MonitoringReconcilerThrottles5106C2B7", "NotificationsKeyADCFA950",
    "NotificationsTopicAE679CBD", "NotificationsTopicPolicyAF92D34A", "NotificationsTopiconcallexamplecom8883996E",
    "QueuesDeadLettersF0D5D2AD",
    "QueuesDeadLettersPolicyF100CBB3", "QueuesExpiredEventsE918299E", "QueuesExpiredEventsPolicy321474D9",
    "SignalsHealthIssues1B36245A", "SignalsLaunchResults85EA1006", "SignalsTick18B71C89",
    "SignalsHealthIssuesAllowEventRuleHoldfast123456789012useast1ControllersDetector933C6E2FA7BF85E1",
    "SignalsLaunchResultsAllowEventRuleHoldfast123456789012useast1ControllersDetector933C6E2FC8ECF99F",
    "SignalsTickAllowEventRuleHoldfast123456789012useast1ControllersReconcilerF9B57E1D01E14929",
}


def test_the_stack_keeps_the_logical_ids_it_had_before_the_construct(synthesized):
    ids = set(synthesized.template.to_json()["Resources"])
    assert LOGICAL_IDS_BEFORE_THE_CONSTRUCT <= ids
    # added since (nothing replaced): the queue's, the settings', the own resources' and the ledger
    # name's parameters, the alarms on stuck resources and stalled drains, the expired-events queue's redrive anchor
    # and its TLS-only policy, the readiness check (its function, role, policy, logs, invoke
    # config, schedule, permission, alarm)
    assert ids - LOGICAL_IDS_BEFORE_THE_CONSTRUCT == {
        "ExpiredQueueArnParameterD32586A0", "SettingsParameter5C8DE5DF", "MonitoringResourcesStuck3F2B8E47",
        "MonitoringDrainStalledC71D7A7D",
        "OwnResourcesParameterFB2F9564", "LedgerTableParameter552DD71F",
        "QueuesRedriveAnchorB2E3A4BC", "QueuesRedriveAnchorPolicy566EF1CB",
        "ControllersReadiness3090B04E", "ControllersReadinessEventInvokeConfigDC5D0998", "ControllersReadinessLogs01F9C829",
        "ControllersReadinessRoleC5BB28CB", "ControllersReadinessRoleDefaultPolicyDFF905B3", "ReadinessAlarm2C9CA320",
        "ReadinessSchedule33584F64",
        "ReadinessScheduleAllowEventRuleHoldfast123456789012useast1ControllersReadiness08A00A4A25B283CC",
        "Teardown", "ControllersTeardownFDA171B0", "ControllersTeardownLogsF1BC7BD0",
        "ControllersTeardownEventInvokeConfigFC25653F"}


def test_the_stack_outputs_the_expired_events_queue_and_its_parameter(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]
    assert outputs["ExpiredEventsQueueArn"]["Value"] == {"Fn::GetAtt": ["QueuesExpiredEventsE918299E", "Arn"]}
    assert outputs["ExpiredEventsQueueArnParameter"]["Value"] == {"Ref": "ExpiredQueueArnParameterD32586A0"}
    parameter = synthesized.resources("AWS::SSM::Parameter")["ExpiredQueueArnParameterD32586A0"]["Properties"]
    assert parameter["Name"] == f"/holdfast/{synthesized.stack.stack_name}/expired-queue-arn"
    assert parameter["Value"] == {"Fn::GetAtt": ["QueuesExpiredEventsE918299E", "Arn"]}


def test_the_lambda_asset_holds_the_function_code_and_not_the_cdk_or_cli_code(synthesized):
    (function, *_) = synthesized.resources("AWS::Lambda::Function").values()
    asset = Path(synthesized.app.outdir) / f"asset.{function['Properties']['Code']['S3Key'].removesuffix('.zip')}"
    files = {str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file()}
    assert {"holdfast/handlers/detector.py", "holdfast/handlers/reconciler.py", "holdfast/settings.py"} <= files
    for name in NOT_IN_ASSET:
        assert not [f for f in files if f.startswith(f"holdfast/{name}/")], name
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc") or ".egg-info" in f]
