"""`holdfast audit` when one of its checks fails: that check's failure is its reported
outcome (named on stderr, exit 1), and every other finding still prints.

`holdfast.cli.main` runs in this process (tests/cli/cli_inprocess.py: its own stdin, stdout,
stderr and exit code, as the console script would have) against the session's moto server. Without the
fixtures' emulation, moto has no SimulatePrincipalPolicy and answers an HTML 500 page
(botocore: ResponseParserError, which is not a BotoCoreError); with it
(holdfast_fixtures.iam_simulation), a deleted execution role answers NoSuchEntity."""

from __future__ import annotations

import json

import pytest

from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
    make_queue,
    role,
)


def audit(server) -> tuple[int, dict | None, str]:
    proc = cli_inprocess.run(["--endpoint-url", server.url, "--region", REGION, "--json", "audit"])
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr


def fleet(clients) -> None:
    queue = make_queue(clients, "HoldfastStack-ExpiredEvents1A2B")
    clients("ssm").put_parameter(Name="/holdfast/HoldfastStack/expired-queue-arn", Value=queue, Type="String",
                                 Overwrite=True)
    make_asg(clients, "asg-risky", selected=False)
    make_function(clients, "granted")
    make_function(clients, "narrow", role_arn=role(clients, "narrow", policy=None))


def test_audit_prints_every_finding_when_iam_simulation_answers_garbage(moto_server):
    # GIVEN an endpoint whose SimulatePrincipalPolicy answers a 500 page, not AWS's XML
    moto_server.reset()
    fleet(moto_server.clients())
    # WHEN the audit runs
    code, doc, err = audit(moto_server)
    # THEN the simulation's failure is that check's outcome, and the rest is reported
    assert "Traceback" not in err
    assert code == 1 and doc is not None
    assert any(f["kind"] == "asg" and f["resource"].endswith("asg-risky") for f in doc["findings"]), doc
    assert "simulating sqs:SendMessage needs iam:SimulatePrincipalPolicy" in err and "ResponseParserError" in err


def test_a_deleted_role_is_its_own_check_and_the_others_are_decided(moto_server, aws_semantics):
    moto_server.reset()
    clients = moto_server.clients()
    fleet(clients)
    iam = clients("iam")
    gone = role(clients, "gone", policy=None)
    make_function(clients, "orphan", role_arn=gone)
    iam.delete_role(RoleName="gone")

    code, doc, err = audit(moto_server)
    assert code == 1 and "Traceback" not in err
    assert f"role {gone}" in err and "NoSuchEntity" in err
    destinations = {f["resource"].rsplit(":", 1)[-1] for f in doc["findings"] if "may not send to Holdfast's expired-events queue" in f["problem"]}
    assert "narrow" in destinations and "granted" not in destinations and "orphan" not in destinations
    assert any(f["kind"] == "asg" for f in doc["findings"])


def test_an_audit_without_the_queue_known_makes_no_simulation(moto_server):
    moto_server.reset()
    clients = moto_server.clients()
    make_asg(clients, "asg-risky", selected=False)
    code, doc, err = audit(moto_server)
    assert code == 0, err
    assert doc["findings"]


@pytest.mark.usefixtures("aws_semantics")
class TestSimulation:
    """The emulation's answers, through boto3: the documented shapes and decisions."""

    QUEUE = "arn:aws:sqs:us-east-1:123456789012:q"

    def _role(self, clients, name, *statements):
        return role(clients, name, policy={"Version": "2012-10-17", "Statement": list(statements)})

    def test_allowed_implicit_and_explicit_deny(self, clients):
        iam = clients("iam")
        allow = {"Sid": "Send", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}
        deny = {"Sid": "NotQ", "Effect": "Deny", "Action": "sqs:*", "Resource": self.QUEUE}
        arn = self._role(clients, "r1", allow, deny)
        answer = iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["sqs:SendMessage", "sqs:ListQueues"],
                                               ResourceArns=[self.QUEUE, "arn:aws:sqs:us-east-1:123456789012:other"])
        send, listing = answer["EvaluationResults"]
        assert answer["IsTruncated"] is False
        # One result per action; the most restrictive decision over the resources on top.
        assert send["EvalActionName"] == "sqs:SendMessage" and send["EvalDecision"] == "explicitDeny"
        assert send["EvalResourceName"] == "*"
        assert [(r["EvalResourceName"].rsplit(":", 1)[-1], r["EvalResourceDecision"])
                for r in send["ResourceSpecificResults"]] == [("q", "explicitDeny"), ("other", "allowed")]
        assert send["MatchedStatements"] == [{"SourcePolicyId": "owner", "SourcePolicyType": "role"}]
        assert listing["EvalDecision"] == "explicitDeny"
        other = iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["s3:GetObject"])["EvaluationResults"][0]
        assert other["EvalDecision"] == "implicitDeny" and other["EvalResourceName"] == "*"

    def test_context_entries_decide_conditions_and_missing_keys_are_named(self, clients):
        iam = clients("iam")
        arn = self._role(clients, "r2", {"Effect": "Allow", "Action": "lambda:TagResource", "Resource": "*",
                                         "Condition": {"StringEquals": {"aws:ResourceTag/holdfast:protect": "true"}}})
        ask = lambda entries: iam.simulate_principal_policy(
            PolicySourceArn=arn, ActionNames=["lambda:TagResource"], ResourceArns=["arn:aws:lambda:us-east-1:123456789012:function:f"],
            ContextEntries=entries)["EvaluationResults"][0]
        tagged = ask([{"ContextKeyName": "aws:ResourceTag/holdfast:protect", "ContextKeyValues": ["true"],
                       "ContextKeyType": "string"}])
        assert tagged["EvalDecision"] == "allowed" and tagged["MissingContextValues"] == []
        bare = ask([])
        assert bare["EvalDecision"] == "implicitDeny"
        assert bare["MissingContextValues"] == ["aws:ResourceTag/holdfast:protect"]

    def test_a_users_groups_count_and_errors_are_the_documented_ones(self, clients):
        from botocore.exceptions import ClientError

        iam = clients("iam")
        iam.create_user(UserName="u")
        iam.create_group(GroupName="g")
        iam.add_user_to_group(GroupName="g", UserName="u")
        iam.put_group_policy(GroupName="g", PolicyName="from-group", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}]}))
        user = iam.get_user(UserName="u")["User"]["Arn"]
        result = iam.simulate_principal_policy(PolicySourceArn=user, ActionNames=["sqs:SendMessage"])["EvaluationResults"][0]
        assert result["EvalDecision"] == "allowed"
        assert result["MatchedStatements"] == [{"SourcePolicyId": "from-group", "SourcePolicyType": "group"}]

        with pytest.raises(ClientError) as missing:
            iam.simulate_principal_policy(PolicySourceArn="arn:aws:iam::123456789012:role/nobody", ActionNames=["s3:*"])
        assert missing.value.response["Error"]["Code"] == "NoSuchEntity"
        odd = self._role(clients, "r3", {"Effect": "Allow", "Action": "*", "Resource": "*",
                                         "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}})
        with pytest.raises(ClientError) as unsupported:
            iam.simulate_principal_policy(PolicySourceArn=odd, ActionNames=["s3:GetObject"])
        assert unsupported.value.response["Error"]["Code"] == "PolicyEvaluation"

    def test_results_are_paged_past_max_items(self, clients):
        iam = clients("iam")
        arn = self._role(clients, "r4", {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"})
        actions = ["sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage"]
        pages = list(iam.get_paginator("simulate_principal_policy").paginate(
            PolicySourceArn=arn, ActionNames=actions, PaginationConfig={"PageSize": 2}))
        assert [len(p["EvaluationResults"]) for p in pages] == [2, 1]
        assert [r["EvalActionName"] for p in pages for r in p["EvaluationResults"]] == actions
