"""`holdfast doctor` against moto, in an account set up as a deploy leaves it (the
reconciler function and its role with the rendered policy, the Health rule, the queue's
SSM parameter) and with the problems a real account has: a target region without the
Powertools parameter, a function whose role may not deliver expired events, a service
scaled above its target's maximum, a role missing a statement.

IAM's policy simulation (SimulatePrincipalPolicy) is not in moto; holdfast_fixtures
emulates it with its policy evaluator. The public Powertools parameter is added to
moto's store (moto refuses PutParameter under /aws)."""

from __future__ import annotations

import json

import pytest

from holdfast import readiness
from holdfast.cli import main
from holdfast.readiness import DESTINATIONS
from holdfast_cdk import role_policies
from holdfast_fixtures.moto_patches import publish_public_parameter
from tests.support.fleet import (
    ACCOUNT,
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
    make_service_target,
    role,
)

pytestmark = pytest.mark.usefixtures("aws_semantics")
REGION = "us-east-1"


def test_the_doctor_checks_the_layer_parameter_the_stack_deploys():
    from holdfast_cdk.constructs import controllers

    assert readiness.POWERTOOLS_LAYER_PARAMETER == controllers.POWERTOOLS_LAYER_PARAMETER


@pytest.fixture
def deployed(clients, ledger_table):
    """What `cdk deploy` leaves in us-east-1, by the APIs."""
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName="HoldfastStack-ExpiredEvents")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    clients("ssm").put_parameter(Name="/holdfast/HoldfastStack/expired-queue-arn", Value=queue, Type="String")
    publish_public_parameter(ACCOUNT, REGION, readiness.POWERTOOLS_LAYER_PARAMETER,
                             f"arn:aws:lambda:{REGION}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:20")
    document = role_policies.render(role_policies.read("reconciler"), {
        "Partition": "aws", "Region": REGION, "Account": ACCOUNT, "SelectorKey": "holdfast:protect",
        "SelectorValue": "true", "LedgerTableArn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{ledger_table}",
        "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:stage", "ExpiredQueueArn": queue})
    iam = clients("iam")
    reconciler_role = iam.create_role(RoleName="HoldfastReconcilerRole", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    iam.put_role_policy(RoleName="HoldfastReconcilerRole", PolicyName="reconciler", PolicyDocument=json.dumps(document))
    clients("lambda").create_function(
        FunctionName="HoldfastStack-Reconciler", Runtime="python3.13", Role=reconciler_role,
        Handler="holdfast.handlers.reconciler.handler", Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        Environment={"Variables": {"HOLDFAST_LEDGER_TABLE": ledger_table}})
    clients("events").put_rule(Name="HoldfastStack-HealthIssues", State="ENABLED", EventPattern=json.dumps({
        "source": ["aws.health"], "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["issue"], "eventRegion": [REGION]}}))
    return queue


def doctor_run(capsys, *args):
    capsys.readouterr()
    code = main(["--json", "--region", REGION, "doctor", *args])
    doc = json.loads(capsys.readouterr().out)
    return code, {c["check"] + (f" {c['detail'].split(':')[0]}" if c["check"].startswith("resource ") else ""): c
                  for c in doc["checks"]}, doc


def test_a_healthy_deploy_passes_every_check(deployed, clients, capsys):
    make_asg(clients, "web")
    make_function(clients, "orders")
    make_service_target(clients, "api")
    code, checks, doc = doctor_run(capsys)
    assert code == 0 and doc["ok"], [c for c in doc["checks"] if not c["ok"]]
    assert {"powertools-layer us-east-1", "expired-events-queue", "health-rule", "resources",
            "controller-role asg", "controller-role esm", "controller-role async", "controller-role nlb",
            "controller-role scalable-target"} <= set(checks)


def test_the_doctor_checks_that_the_accounts_unreserved_concurrency_leaves_room_for_the_controllers(
        deployed, clients, capsys, monkeypatch):
    # GIVEN an account whose concurrency quota leaves 110 unreserved: 15 more would leave 95
    monkeypatch.setenv("MOTO_LAMBDA_CONCURRENCY_QUOTA", "110")
    code, checks, _ = doctor_run(capsys)
    check = checks["concurrency"]
    assert code == 1 and not check["ok"]
    assert "110 of 110 concurrent executions unreserved" in check["detail"] and "(15)" in check["detail"]
    assert "controller_reserved_concurrency" in check["fix"]
    # WHEN the deployed reconciler already holds its reservation, and the quota is the default
    monkeypatch.delenv("MOTO_LAMBDA_CONCURRENCY_QUOTA")
    clients("lambda").put_function_concurrency(FunctionName="HoldfastStack-Reconciler", ReservedConcurrentExecutions=5)
    _, checks, _ = doctor_run(capsys)
    assert checks["concurrency"]["ok"] and "995 of 1000" in checks["concurrency"]["detail"]
    assert "(in place)" in checks["concurrency"]["detail"]


def test_the_doctor_says_when_a_retained_holdfast_ledger_still_holds_records(deployed, clients, capsys):
    """A stack first deployed under the old fixed table name and updated without
    ledger_table_name gets a new, empty ledger; the retained one keeps its records."""
    from holdfast.ledger.table import ensure_table

    db = clients("dynamodb")
    ledger_table = "HoldfastStack-LedgerTable-NEW"   # the stack's new ledger; holdfast-ledger (the fixture's) is the old
    ensure_table(db, ledger_table)
    ensure_table(db, "someone-elses-table")      # not Holdfast's, records or not
    for table in ("holdfast-ledger", "someone-elses-table"):
        db.put_item(TableName=table, Item={"pk": {"S": "RES"}, "sk": {"S": "arn:aws:autoscaling:...:web"}})
    _, checks, _ = doctor_run(capsys, "--ledger-table", ledger_table)
    check = checks["retained-ledgers"]
    assert not check["ok"] and check["detail"].startswith("holdfast-ledger: a Holdfast ledger other than this stack's")
    assert "someone-elses-table" not in check["detail"]
    assert check["fix"].startswith("restore them from it: `holdfast --ledger-table holdfast-ledger resume --now`")
    # A tagged ledger of another (deleted) stack counts too; emptied, neither is reported.
    ensure_table(db, "Old-LedgerTable-ABC")
    arn = db.describe_table(TableName="Old-LedgerTable-ABC")["Table"]["TableArn"]
    db.tag_resource(ResourceArn=arn, Tags=[{"Key": "holdfast:component", "Value": "ledger"}])
    db.put_item(TableName="Old-LedgerTable-ABC", Item={"pk": {"S": "RES"}, "sk": {"S": "arn:x"}})
    _, checks, _ = doctor_run(capsys, "--ledger-table", ledger_table)
    assert checks["retained-ledgers"]["detail"].startswith("holdfast-ledger, Old-LedgerTable-ABC: ")
    for table, sk in (("holdfast-ledger", "arn:aws:autoscaling:...:web"), ("Old-LedgerTable-ABC", "arn:x")):
        db.delete_item(TableName=table, Key={"pk": {"S": "RES"}, "sk": {"S": sk}})
    _, checks, _ = doctor_run(capsys, "--ledger-table", ledger_table)
    assert checks["retained-ledgers"]["ok"]


def test_each_problem_is_a_failed_check_with_its_fix(deployed, clients, capsys, tmp_path):
    make_asg(clients, "web")
    make_function(clients, "orders", role_arn=role(clients, "narrow", policy=None))
    make_service_target(clients, "api")
    clients("ecs").update_service(cluster="c", service="api", desiredCount=9)   # above the target's maximum 4
    # The role lost its Auto Scaling statements (a permission boundary, a hand edit...).
    policy = clients("iam").get_role_policy(RoleName="HoldfastReconcilerRole", PolicyName="reconciler")["PolicyDocument"]
    policy = json.loads(policy) if isinstance(policy, str) else policy
    policy["Statement"] = [s for s in policy["Statement"] if not s["Sid"].startswith("AutoScalingGroups")]
    clients("iam").put_role_policy(RoleName="HoldfastReconcilerRole", PolicyName="reconciler", PolicyDocument=json.dumps(policy))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"holdfast": {"targets": [{"account": ACCOUNT, "region": REGION},
                                                             {"account": ACCOUNT, "region": "eu-west-1"}]}}))

    code, checks, doc = doctor_run(capsys, "--settings", str(settings))
    assert code == 1 and not doc["ok"]
    failed = {name: c for name, c in checks.items() if not c["ok"]}
    layer = failed["powertools-layer eu-west-1"]
    assert "ParameterNotFound" in layer["detail"] and "pin a release" in layer["fix"]
    assert checks["powertools-layer us-east-1"]["ok"]
    asg = failed["controller-role asg"]
    assert "autoscaling:SuspendProcesses (implicitDeny)" in asg["detail"]
    assert checks["controller-role esm"]["ok"] and checks["controller-role async"]["ok"]
    destination = failed[DESTINATIONS]          # the rule the scheduled run names too
    assert "may not send to Holdfast's expired-events queue" in destination["detail"] and "orders" in destination["detail"]
    assert destination["fix"].startswith("aws iam put-role-policy --role-name narrow")
    capacity = next(c for n, c in failed.items() if n.startswith("resource scalable-target"))
    assert "skipped" in capacity["detail"] and "register-scalable-target" in capacity["fix"]
    assert checks["health-rule"]["ok"] and checks["expired-events-queue"]["ok"]


def test_all_regions_checks_the_layer_in_every_region_the_organization_deploys_to(deployed, clients, capsys, tmp_path):
    """The rollout step before a StackSet reaches a region: a region of org_regions without
    the layer's parameter is a failed check, not a failed deploy in every account there."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"holdfast": {
        "org_organizational_unit_ids": ["ou-ab12-cd345678"], "org_regions": [REGION, "ap-southeast-2"],
        "org_admin_account": ACCOUNT, "org_id": "o-a1b2c3d4e5"}}))
    _, checks, _ = doctor_run(capsys, "--settings", str(settings))
    assert "powertools-layer ap-southeast-2" not in checks
    _, checks, _ = doctor_run(capsys, "--settings", str(settings), "--all-regions")
    assert checks["powertools-layer us-east-1"]["ok"]
    layer = checks["powertools-layer ap-southeast-2"]
    assert not layer["ok"] and "ParameterNotFound" in layer["detail"] and "pin a release" in layer["fix"]


def test_a_missing_health_rule_queue_and_controller_are_failed_checks(clients, ledger_table, capsys):
    code, checks, doc = doctor_run(capsys)
    assert code == 1
    assert not checks["health-rule"]["ok"] and "cdk deploy" in checks["health-rule"]["fix"]
    assert not checks["expired-events-queue"]["ok"] and "--expired-queue-arn" in checks["expired-events-queue"]["fix"]
    assert not checks["controller-role"]["ok"] and "not deployed here" in checks["controller-role"]["detail"]
    assert "ParameterNotFound" in checks["powertools-layer us-east-1"]["detail"]


def test_a_health_rule_on_the_delivery_region_is_not_enough(deployed, clients, capsys):
    clients("events").put_rule(Name="HoldfastStack-HealthIssues", State="ENABLED", EventPattern=json.dumps({
        "source": ["aws.health"], "region": [REGION], "detail": {"service": ["EC2"], "eventTypeCategory": ["issue"]}}))
    code, checks, _ = doctor_run(capsys)
    assert code == 1 and not checks["health-rule"]["ok"] and "detail.eventRegion" in checks["health-rule"]["detail"]


def test_audit_lists_functions_whose_role_cannot_deliver_to_the_queue(deployed, clients, capsys):
    make_function(clients, "orders", role_arn=role(clients, "narrow", policy=None))
    make_function(clients, "billing")                       # its role may send to any queue
    make_function(clients, "unselected", selected=False, role_arn=role(clients, "narrow", policy=None))
    capsys.readouterr()
    code = main(["--json", "--region", REGION, "audit"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    fixes = [f for f in doc["findings"] if f.get("fix_command")]
    assert [f["resource"].split(":")[-1] for f in fixes] == ["orders"]
    assert "may not send to Holdfast's expired-events queue" in fixes[0]["problem"]
    assert fixes[0]["fix_command"].startswith("aws iam put-role-policy --role-name narrow --policy-name holdfast-expired-events")
    assert deployed in fixes[0]["fix_command"]
