"""The readiness function (holdfast.handlers.readiness): doctor's read-only checks run by
themselves, the result recorded in the ledger and shown by `holdfast status`, a metric
the alarm watches; against moto, in an account set up as a deploy leaves it (the
`deployed` fixture of test_doctor, plus the settings parameter and the reconciler's
settings). SimulatePrincipalPolicy is emulated (holdfast_fixtures), as for doctor."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from holdfast.cli import main
from holdfast.clock import FakeClock
from holdfast.core import policy
from holdfast.handlers import readiness as handler
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import readiness as ledger_readiness
from holdfast.runtime import Runtime
from holdfast.settings import ENV_VAR, Settings
from holdfast_cdk import role_policies
from tests.cli.test_doctor import deployed  # noqa: F401  (a fixture)
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
)

pytestmark = pytest.mark.usefixtures("aws_semantics")
REGION = "us-east-1"
NOW = datetime(2026, 3, 1, 6, 0, tzinfo=timezone.utc)
PARAMETER = "/holdfast/HoldfastStack/settings"
SETTINGS = Settings()


@pytest.fixture
def stack(deployed, clients, ledger_table):  # noqa: F811
    """The settings parameter and the reconciler's settings, as the stack writes them."""
    clients("ssm").put_parameter(Name=PARAMETER, Value=SETTINGS.to_json(), Type="String")
    fn = clients("lambda")
    fn.update_function_configuration(FunctionName="HoldfastStack-Reconciler", Environment={"Variables": {
        "HOLDFAST_LEDGER_TABLE": ledger_table, ENV_VAR: SETTINGS.to_json()}})
    config = fn.get_function_configuration(FunctionName="HoldfastStack-Reconciler")
    return {"reconciler_role": config["Role"], "reconciler_function": config["FunctionArn"], "settings_parameter": PARAMETER,
            "queue": deployed}


def _run(clients, ledger_table, stack, settings=SETTINGS):
    runtime = Runtime(clients=clients, settings=settings, table=ledger_table, clock=FakeClock(NOW),
                      controller_id="readiness:test", expired_queue_arn=stack["queue"])
    return handler.run(runtime, reconciler_role=stack["reconciler_role"], reconciler_function=stack["reconciler_function"],
                       settings_parameter=stack["settings_parameter"])


def test_a_ready_account_passes_every_check_and_the_result_is_recorded(stack, clients, ledger_table):
    make_asg(clients, "web")
    make_function(clients, "orders")
    result = _run(clients, ledger_table, stack)

    assert result["ok"], [c for c in result["checks"] if not c["ok"]]
    names = {c["check"] for c in result["checks"]}
    assert {"powertools-layer us-east-1", "expired-events-queue", "health-rule", "settings-drift", "resources",
            "controller-role asg", "controller-role async"} <= names
    assert result["selected"]["asg"] == 1 and result["selected"]["async"] == 1
    assert ledger_readiness.read_result(Ledger(clients("dynamodb"), ledger_table)) == result
    assert result["at"] == NOW.isoformat()


def test_settings_drift_and_a_missing_layer_fail_and_status_shows_them(stack, clients, ledger_table, capsys):
    changed = Settings.from_mapping({"mode": "auto"})   # the stack runs the default, recommend
    clients("ssm").put_parameter(Name=PARAMETER, Value=changed.to_json(), Type="String", Overwrite=True)
    result = _run(clients, ledger_table, stack)

    assert not result["ok"] and result["failed"] == ["settings-drift"]
    drift = next(c for c in result["checks"] if c["check"] == "settings-drift")
    assert drift["detail"].endswith("differ in: mode") and "cdk deploy" in drift["fix"]

    capsys.readouterr()
    assert main(["--region", REGION, "status"]) == 0
    out = capsys.readouterr().out
    assert f"readiness   1 check(s) failed at {NOW.isoformat()}: settings-drift" in out
    assert "settings-drift: " in out and "fix: deploy the stack again" in out
    assert main(["--json", "--region", REGION, "status"]) == 0
    assert json.loads(capsys.readouterr().out)["readiness"]["failed"] == ["settings-drift"]


def test_status_says_when_no_check_has_run(ledger_table, capsys):
    assert main(["--region", REGION, "status"]) == 0
    assert "readiness   no scheduled check has run yet" in capsys.readouterr().out


def test_during_an_event_the_resources_are_not_walked(stack, clients, ledger_table):
    make_asg(clients, "web")
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), policy.Plan(generation=1, stage=policy.HOLD, entered_at=NOW),
                      controller_id="r", now=NOW)
    before = dict(clients.calls)
    result = _run(clients, ledger_table, stack)
    made = {op for op, n in clients.calls.items() if n > before.get(op, 0)}
    assert "autoscaling:DescribeAutoScalingGroups" not in made and result["selected"] == {}
    assert next(c for c in result["checks"] if c["check"] == "resources")["detail"].startswith("not walked: plan generation 1")


def test_with_the_plan_unreadable_the_resources_are_not_walked_and_the_result_says_so(stack, clients, ledger_table):
    """An unreadable plan means "assume engaged": the reconciler may be engaging from tags
    alone against the same Lambda budget, so no walk competes with it."""
    make_asg(clients, "web")
    make_function(clients, "orders")
    clients("dynamodb").delete_table(TableName=ledger_table)     # the ledger cannot be read
    before = dict(clients.calls)
    result = _run(clients, ledger_table, stack)
    made = {op for op, n in clients.calls.items() if n > before.get(op, 0)}
    walked = {"autoscaling:DescribeAutoScalingGroups", "lambda:ListFunctions", "lambda:ListFunctionEventInvokeConfigs",
              "lambda:ListEventSourceMappings", "tag:GetResources"}
    assert not made & walked, made & walked
    assert result["selected"] == {} and "ledger" in result["failed"]
    resources = next(c for c in result["checks"] if c["check"] == "resources")
    assert resources["detail"].startswith("not walked: the plan cannot be read, so Holdfast assumes one is in force")


def test_every_call_a_run_makes_is_granted_to_the_readiness_role(stack, clients, ledger_table):
    make_asg(clients, "web")
    make_function(clients, "orders")
    _run(clients, ledger_table, stack)
    granted = {a for s in role_policies.read("readiness")["Statement"] for a in s["Action"]}
    prefix = {"resourcegroupstaggingapi": "tag", "elbv2": "elasticloadbalancing"}
    made = {prefix.get(op.split(":")[0], op.split(":")[0]) + ":" + op.split(":")[1] for op in clients.calls}
    made -= {"dynamodb:CreateTable", "dynamodb:DescribeTable", "dynamodb:UpdateTimeToLive",   # the fixtures' setup
             "ssm:PutParameter", "lambda:CreateFunction", "lambda:UpdateFunctionConfiguration", "iam:CreateRole",
             "iam:PutRolePolicy", "events:PutRule", "sqs:CreateQueue", "autoscaling:CreateAutoScalingGroup",
             "ec2:CreateVpc", "ec2:CreateSubnet", "ec2:CreateLaunchTemplate", "lambda:TagResource",
             "autoscaling:CreateOrUpdateTags"}
    made = {op for op in made if not op.startswith(("ec2:", "iam:Create", "iam:Put", "iam:GetRole", "sqs:Create"))}
    assert made and made <= granted, made - granted


def test_the_handler_publishes_the_failed_checks_metric(stack, clients, ledger_table, capsys, monkeypatch):
    runtime = Runtime(clients=clients, settings=SETTINGS, table=ledger_table, clock=FakeClock(NOW),
                      controller_id="readiness:test", expired_queue_arn=None)   # no queue: one failed check
    handler.use(runtime)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Holdfast")
    try:
        capsys.readouterr()
        answer = handler.handler({}, _Context(), env={
            handler.RECONCILER_ROLE_ENV: stack["reconciler_role"],
            handler.RECONCILER_FUNCTION_ENV: stack["reconciler_function"],
            handler.SETTINGS_PARAMETER_ENV: PARAMETER})
    finally:
        handler.use(None)
    assert answer["failed"] == ["expired-events-queue"] and answer["ok"] is False
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (metric,) = [m for m in emf if handler.FAILED_METRIC in m]
    assert metric[handler.FAILED_METRIC] == [1.0] or metric[handler.FAILED_METRIC] == 1.0
    assert metric["service"] == "holdfast-readiness"
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Holdfast"


class _Context:
    function_name = "HoldfastStack-Readiness"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:HoldfastStack-Readiness"
    aws_request_id = "r-1"
    log_stream_name = "2026/03/01/[$LATEST]abc"

    def get_remaining_time_in_millis(self):
        return 300_000


def test_the_scheduled_run_names_doctors_destination_rule_as_not_checked_and_why(stack, clients, ledger_table, capsys):
    """The schedule cannot check that each selected function's role may send to the
    expired-events queue without iam:SimulatePrincipalPolicy on every role of the account
    (policies/readiness.json simulates the reconciler's role only): it lists doctor's rule
    by the same name, not checked, never as a failure, and says who checks it."""
    from holdfast.readiness import DESTINATIONS

    make_function(clients, "orders")
    result = _run(clients, ledger_table, stack)
    (rule,) = [c for c in result["checks"] if c["check"] == DESTINATIONS]
    assert (rule["ok"], rule["checked"]) == (True, False) and result["ok"]
    assert "iam:SimulatePrincipalPolicy" in rule["detail"] and "holdfast doctor" in rule["fix"]
    assert all(c["checked"] for c in result["checks"] if c["check"] != DESTINATIONS)
    simulate = {a for s in role_policies.read("readiness")["Statement"] if "iam:SimulatePrincipalPolicy" in s["Action"]
                for a in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])}
    assert simulate == {"${ReconcilerRoleArn}"}

    capsys.readouterr()
    assert main(["--region", REGION, "status"]) == 0
    assert f"not checked by the schedule: {DESTINATIONS}: `holdfast doctor`" in capsys.readouterr().out
