"""holdfast audit against a small moto account: every finding and every non-finding.

GIVEN one resource per case, each named for what the audit must say about it,
WHEN `holdfast --json audit` runs, THEN exactly the risky ones are listed.

moto 5.2.5 has no Application Auto Scaling ListTagsForResource, which the
scalable-target discovery calls: the actuators' `aws_semantics` fixture adds it.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from botocore.exceptions import ClientError

from holdfast.cli import account_audit, main
from holdfast.settings import Settings
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

SELECTOR = [{"Key": "holdfast:protect", "Value": "true"}]


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


@pytest.fixture
def account(clients, aws_semantics):
    """The small fleet; returns name -> ARN (or UUID) of what was made."""
    made = {}
    ec2 = clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    ec2.create_launch_template(LaunchTemplateName="audit-lt", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"})

    asg = clients("autoscaling")
    for name, tags, suspended in [
        ("asg-risky", [], []),
        ("asg-half-suspended", [], ["AZRebalance"]),
        ("asg-owner-suspended", [], ["ReplaceUnhealthy", "AZRebalance"]),
        ("asg-selected", SELECTOR, []),
    ]:
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name, MinSize=0, MaxSize=1, DesiredCapacity=0,
            LaunchTemplate={"LaunchTemplateName": "audit-lt"}, VPCZoneIdentifier=subnet,
            Tags=[{**t, "ResourceId": name, "ResourceType": "auto-scaling-group", "PropagateAtLaunch": False} for t in tags],
        )
        if suspended:
            asg.suspend_processes(AutoScalingGroupName=name, ScalingProcesses=suspended)

    role = clients("iam").create_role(
        RoleName="fn",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
    )["Role"]["Arn"]
    # The owner let the role send to its queues (Lambda checks a destination against the role).
    clients("iam").put_role_policy(RoleName="fn", PolicyName="send", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:*:*:*"}]}))
    lam = clients("lambda")
    code = _zip()
    for name, retry_mode in [("fn-no-config", None), ("fn-safe", "standard"), ("fn-own-config", "adaptive"), ("fn-legacy", "legacy")]:
        env = {"Environment": {"Variables": {"AWS_RETRY_MODE": retry_mode}}} if retry_mode else {}
        made[name] = lam.create_function(
            FunctionName=name, Runtime="python3.12", Role=role, Handler="index.handler", Code={"ZipFile": code}, **env
        )["FunctionArn"]
    dlq = clients("sqs").create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = clients("sqs").get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    lam.put_function_event_invoke_config(
        FunctionName="fn-safe", MaximumEventAgeInSeconds=600, MaximumRetryAttempts=0,
        DestinationConfig={"OnFailure": {"Destination": dlq_arn}},
    )
    lam.put_function_event_invoke_config(FunctionName="fn-own-config", MaximumEventAgeInSeconds=21600, MaximumRetryAttempts=1)
    lam.put_function_event_invoke_config(FunctionName="fn-legacy", MaximumEventAgeInSeconds=300, MaximumRetryAttempts=0)

    for name, cap in [("orders-uncapped", None), ("orders-capped", 50)]:
        queue = clients("sqs").create_queue(QueueName=name)["QueueUrl"]
        arn = clients("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        extra = {"ScalingConfig": {"MaximumConcurrency": cap}} if cap else {}
        made[name] = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName="fn-safe", BatchSize=10, **extra)["UUID"]

    elb = clients("elbv2")
    for name, protocol, attributes in [
        ("tg-default", "TCP", []),
        ("tg-tuned", "TCP", [{"Key": "target_group_health.dns_failover.minimum_healthy_targets.count", "Value": "off"}]),
        ("tg-alb", "HTTP", []),
    ]:
        arn = elb.create_target_group(Name=name, Protocol=protocol, Port=80, VpcId=vpc, TargetType="instance")["TargetGroups"][0]["TargetGroupArn"]
        if attributes:
            elb.modify_target_group_attributes(TargetGroupArn=arn, Attributes=attributes)
        made[name] = arn

    ecs = clients("ecs")
    ecs.create_cluster(clusterName="main")
    ecs.register_task_definition(family="api", containerDefinitions=[{"name": "app", "image": "nginx", "memory": 128}])
    for name, tags, scale_in_suspended in [
        ("svc-risky", [], False),
        ("svc-selected", [{"key": "holdfast:protect", "value": "true"}], False),
        ("svc-owner-suspended", [], True),
    ]:
        ecs.create_service(cluster="main", serviceName=name, taskDefinition="api", desiredCount=1, **({"tags": tags} if tags else {}))
        made[name] = clients("application-autoscaling").register_scalable_target(
            ServiceNamespace="ecs", ResourceId=f"service/main/{name}", ScalableDimension="ecs:service:DesiredCount",
            MinCapacity=1, MaxCapacity=10,
            SuspendedState={"DynamicScalingInSuspended": scale_in_suspended, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": False},
        )["ScalableTargetARN"]
    return made


def by_name(findings: list[dict], account: dict[str, str]) -> dict[tuple[str, str], dict]:
    """(kind, the name the fleet gave the resource) -> finding."""
    names = {arn: name for name, arn in account.items()}
    out = {}
    for f in findings:
        tail = f["resource"].rsplit("/", 1)[-1].rsplit(":", 1)[-1]   # an ASG's name, a mapping's UUID
        out[(f["kind"], names.get(f["resource"]) or names.get(tail) or tail)] = f
    return out


def test_audit_lists_exactly_the_risky_settings(account, capsys):
    assert main(["--json", "audit"]) == 0
    doc = json.loads(capsys.readouterr().out)

    assert list(doc) == ["findings"]
    for finding in doc["findings"]:
        assert list(finding) == ["kind", "resource", "problem", "pause_command", "resume_command"]
    found = by_name(doc["findings"], account)
    assert set(found) == {
        ("asg", "asg-risky"),
        ("asg", "asg-half-suspended"),
        ("esm", "orders-uncapped"),
        ("async", "fn-no-config"),
        ("async", "fn-own-config"),
        ("async", "fn-legacy"),        # short age, no retries, but no on-failure destination
        ("nlb", "tg-default"),
        ("function", "fn-no-config"),
        ("function", "fn-legacy"),
        ("scalable-target", "svc-risky"),
    }
    assert account["orders-uncapped"] in found[("esm", "orders-uncapped")]["pause_command"]
    assert "--scaling-processes ReplaceUnhealthy --region" in found[("asg", "asg-half-suspended")]["pause_command"]
    assert found[("async", "fn-legacy")]["pause_command"] is None
    assert found[("function", "fn-legacy")]["pause_command"] is None
    assert found[("nlb", "tg-default")]["resource"] == account["tg-default"]
    assert found[("scalable-target", "svc-risky")]["resource"] == account["svc-risky"]


def test_text_output_is_a_table_with_the_commands(account, capsys):
    assert main(["audit"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["kind", "resource", "problem"]
    assert "pause during an event, resume afterwards:" in out
    assert "aws autoscaling suspend-processes --auto-scaling-group-name asg-risky --scaling-processes ReplaceUnhealthy AZRebalance --region us-east-1" in out
    assert "10 findings: 2 asg, 3 async, 1 esm, 2 function, 1 nlb, 1 scalable-target" in out


def test_selector_option_changes_which_groups_are_holdfasts(account, capsys):
    assert main(["--json", "--selector", "team=none", "audit"]) == 0
    groups = {f["resource"].rsplit("/", 1)[-1] for f in json.loads(capsys.readouterr().out)["findings"] if f["kind"] == "asg"}
    assert groups == {"asg-risky", "asg-half-suspended", "asg-selected"}


def test_an_empty_account_has_no_findings(aws, capsys):
    assert main(["audit"]) == 0
    assert capsys.readouterr().out.strip() == "no findings"


def test_unreadable_resources_are_named_and_exit_1(account, clients, capsys, monkeypatch):
    """AccessDenied on one target group's attributes and on the whole ASG listing."""
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, "Describe")
    elb, asg = clients("elbv2"), clients("autoscaling")
    real = elb.describe_target_group_attributes

    def attributes(**kwargs):
        if kwargs["TargetGroupArn"] == account["tg-default"]:
            raise denied
        return real(**kwargs)

    monkeypatch.setattr(elb, "describe_target_group_attributes", attributes)
    monkeypatch.setattr(asg, "get_paginator", lambda _: (_ for _ in ()).throw(denied))

    result = account_audit.run(clients, Settings())

    assert result.unreadable == ["Auto Scaling groups: AccessDenied: not allowed", "target group tg-default: AccessDenied: not allowed"]
    assert {f.kind for f in result.findings} == {"esm", "async", "function", "scalable-target"}
