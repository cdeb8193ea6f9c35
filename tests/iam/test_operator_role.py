"""HoldfastOperator's policy (policies/operator.json) evaluated on the requests Holdfast's
operator commands really make. Moto evaluates no IAM, so every DynamoDB request of a
client is put through holdfast_fixtures.iam_policy before moto sees it, with the
request context DynamoDB gives IAM: the action (one per item of a transaction, as IAM
has no TransactWriteItems action) and `dynamodb:LeadingKeys`, the partition key values
the request names (DynamoDB Developer Guide, "Using IAM policy conditions for
fine-grained access control"; a Scan names none)."""

from __future__ import annotations

from datetime import datetime, timezone

import boto3
import pytest
from botocore.exceptions import ClientError

from holdfast.core import policy
from holdfast.core.model import Record
from holdfast.ledger import PK, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.resources import ResourceLedger
from holdfast_cdk import role_policies
from holdfast_fixtures import iam_policy

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ACCOUNT = "123456789012"
TABLE_ARN = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/holdfast-ledger"


def _requests(operation: str, params: dict) -> list[tuple[str, list[str]]]:
    """(IAM action, leading keys) for each authorization DynamoDB makes of this call."""
    if operation == "TransactWriteItems":
        out = []
        for item in params["TransactItems"]:
            (kind, body), = item.items()
            action = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}[kind]
            key = body.get("Item") or body.get("Key")
            out.append((f"dynamodb:{action}", [key[PK]["S"]]))
        return out
    key = params.get("Item") or params.get("Key")
    if key is not None:
        return [(f"dynamodb:{operation}", [key[PK]["S"]])]
    if operation == "Query":
        values = params.get("ExpressionAttributeValues", {})
        return [(f"dynamodb:{operation}", [v["S"] for v in values.values() if "S" in v][:1])]
    return [(f"dynamodb:{operation}", [])]


@pytest.fixture
def operator_dynamodb(clients, ledger_table):
    """A DynamoDB client that can do only what HoldfastOperator's policy allows."""
    document = role_policies.render(role_policies.read("operator"),
                                    {"Partition": "aws", "Account": ACCOUNT, "LedgerTableName": ledger_table})
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    denied: list[str] = []

    def authorize(model, params, **_):
        for action, keys in _requests(model.name, params):
            # The ledger table carries the tag its stack gives it (holdfast_cdk.constructs.ledger).
            context = {"aws:ResourceTag/holdfast:component": "ledger", **({"dynamodb:LeadingKeys": keys} if keys else {})}
            if not iam_policy.allows([document], action, TABLE_ARN, context):
                denied.append(f"{action} {keys}")
                raise ClientError({"Error": {"Code": "AccessDeniedException",
                                             "Message": f"not authorized to perform: {action}"}}, model.name)

    # The API parameters as the caller gave them, before they are serialized.
    dynamodb.meta.events.register("before-parameter-build.dynamodb.*", authorize)
    dynamodb.denied = denied
    return dynamodb


def test_the_operator_commands_requests_are_allowed(operator_dynamodb, clients, ledger_table):
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), policy.Plan(generation=1, stage=policy.HOLD, entered_at=NOW),
                      controller_id="r", now=NOW)
    ledger_control.set_paused(Ledger(operator_dynamodb, ledger_table), True, by="oncall", reason="drill", now=NOW)
    ledger_control.set_paused(Ledger(operator_dynamodb, ledger_table), False, by="oncall", reason="", now=NOW)
    assert ledger_control.request_engage(Ledger(operator_dynamodb, ledger_table), by="oncall", reason="x", now=NOW) == 1
    assert ledger_plan.read(Ledger(operator_dynamodb, ledger_table)).generation == 1     # advance --all-accounts reads it first
    ledger_control.request_advance(Ledger(operator_dynamodb, ledger_table), 1, by="oncall", now=NOW)
    group = f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:u:autoScalingGroupName/g"
    assert ledger_control.request_release(Ledger(operator_dynamodb, ledger_table), group, by="oncall", reason="x", now=NOW,
                                          request_id="r1")[1] is True
    # A duplicate while it is pending: its conditional PutItem fails, and the GetItem reads the pending one.
    assert ledger_control.request_release(Ledger(operator_dynamodb, ledger_table), group, by="other", reason="x", now=NOW,
                                          request_id="r2")[0].id == "r1"
    assert operator_dynamodb.denied == []
    control = ledger_control.read_control(Ledger(clients("dynamodb"), ledger_table))
    assert (control.paused, control.engage_generation, control.advance_generation) == (False, 1, 1)
    assert [(r.arn, r.id, r.state) for r in control.releases] == [(group, "r1", "requested")]


def test_the_operator_role_cannot_change_the_plan_the_records_or_scan(operator_dynamodb, clients, ledger_table):
    with pytest.raises(Exception):   # LedgerUnavailable: AccessDeniedException
        ledger_plan.write(Ledger(operator_dynamodb, ledger_table), policy.Plan(generation=1, stage=policy.NORMAL, entered_at=NOW),
                          controller_id="op", now=NOW)
    # A resource record is refused (the ledger reports it unavailable, as for any failed write).
    assert ResourceLedger(Ledger(operator_dynamodb, ledger_table)).put_original(
        Record("asg", f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:u:autoScalingGroupName/g", {"x": 1}, {"x": 2}),
        "n") is False
    with pytest.raises(ClientError):
        operator_dynamodb.scan(TableName=ledger_table)
    denied = operator_dynamodb.denied
    assert denied[0] == "dynamodb:PutItem ['PLAN']" and denied[-1] == "dynamodb:Scan []"
    assert any(d.startswith("dynamodb:") and "'RES'" in d for d in denied), denied
    assert clients("dynamodb").scan(TableName=ledger_table)["Items"] == []   # nothing got through


def test_without_the_leading_keys_condition_the_same_policy_would_let_the_plan_be_written():
    """The condition is what makes the role safe: the statement alone allows PutItem anywhere in the table."""
    document = role_policies.render(role_policies.read("operator"),
                                    {"Partition": "aws", "Account": ACCOUNT, "LedgerTableName": "holdfast-ledger"})
    plan_write = ("dynamodb:PutItem", TABLE_ARN, {"dynamodb:LeadingKeys": ["PLAN"], "aws:ResourceTag/holdfast:component": "ledger"})
    assert not iam_policy.allows([document], *plan_write)
    for statement in document["Statement"]:
        statement.pop("Condition", None)
    assert iam_policy.allows([document], *plan_write)


@pytest.mark.parametrize("action", ["autoscaling:SuspendProcesses", "lambda:UpdateEventSourceMapping",
                                    "elasticloadbalancing:ModifyTargetGroupAttributes", "dynamodb:DeleteItem"])
def test_no_resource_write_is_allowed(action):
    document = role_policies.render(role_policies.read("operator"),
                                    {"Partition": "aws", "Account": ACCOUNT, "LedgerTableName": "holdfast-ledger"})
    assert not iam_policy.allows([document], action, "*", {"dynamodb:LeadingKeys": ["CONTROL"]})
