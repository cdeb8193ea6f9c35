"""The audit's pure rules, one table per resource kind, and the commands they print.

Each row is a resource as the AWS API describes it. The commands are checked against
botocore's service models, which the AWS CLI is generated from: every option must be
an input of the operation it names.
"""

from __future__ import annotations

import shlex

import botocore.session
import pytest
from botocore import xform_name

from holdfast.core import audit, kinds
from holdfast.settings import Settings

S = Settings()
R = "us-east-1"
SQS = "arn:aws:sqs:us-east-1:123456789012:orders"
FN = "arn:aws:lambda:us-east-1:123456789012:function:worker"
TG = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef"
SELECTOR_TAG = {"Key": "holdfast:protect", "Value": "true"}


def asg(suspended=(), tags=()):
    return {
        "AutoScalingGroupName": "web 1",
        "AutoScalingGroupARN": "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/web 1",
        "SuspendedProcesses": [{"ProcessName": p, "SuspensionReason": "owner"} for p in suspended],
        "Tags": list(tags),
    }


@pytest.mark.parametrize(
    "group, active",
    [
        (asg(), ["ReplaceUnhealthy", "AZRebalance"]),
        (asg(suspended=["AZRebalance"]), ["ReplaceUnhealthy"]),       # the owner's suspension stays theirs
        (asg(suspended=["ReplaceUnhealthy", "AZRebalance"]), None),
        (asg(tags=[SELECTOR_TAG]), None),                                # Holdfast protects it
        (asg(tags=[{"Key": "holdfast:protect", "Value": "false"}]), ["ReplaceUnhealthy", "AZRebalance"]),
    ],
)
def test_asg_rule(group, active):
    finding = kinds.asg_finding(group, S, R)
    if active is None:
        assert finding is None
        return
    assert finding.kind == "asg" and finding.resource == group["AutoScalingGroupARN"]
    assert " and ".join(active) in finding.problem
    assert finding.pause_command == shlex.join(
        ["aws", "autoscaling", "suspend-processes", "--auto-scaling-group-name", "web 1", "--scaling-processes", *active, "--region", R]
    )
    assert finding.resume_command == finding.pause_command.replace("suspend-processes", "resume-processes")


def test_asg_rule_checks_the_configured_processes():
    settings = Settings.from_mapping({"asg_processes": ["Terminate"]})
    assert "--scaling-processes Terminate --region" in kinds.asg_finding(asg(), settings, R).pause_command


@pytest.mark.parametrize(
    "mapping, listed",
    [
        ({"UUID": "u-1", "EventSourceArn": SQS, "FunctionArn": FN}, True),
        ({"UUID": "u-1", "EventSourceArn": SQS, "FunctionArn": FN, "ScalingConfig": {}}, True),
        ({"UUID": "u-1", "EventSourceArn": SQS, "FunctionArn": FN, "ScalingConfig": {"MaximumConcurrency": 50}}, False),
        ({"UUID": "u-1", "EventSourceArn": "arn:aws:kinesis:us-east-1:123456789012:stream/s", "FunctionArn": FN}, False),
    ],
)
def test_esm_rule(mapping, listed):
    finding = kinds.esm_finding(mapping, S, R)
    assert (finding is not None) == listed
    if listed:
        assert finding.resource == "u-1" and finding.name == "orders -> worker"
        assert finding.pause_command == f"aws lambda update-event-source-mapping --uuid u-1 --scaling-config MaximumConcurrency=2 --region {R}"
        assert finding.resume_command == f"aws lambda update-event-source-mapping --uuid u-1 --scaling-config '{{}}' --region {R}"


@pytest.mark.parametrize(
    "config, listed, problem, resume",
    [
        ({"MinimumPollers": 10, "MaximumPollers": 200}, True, "MaximumPollers 200: up to 2,000 concurrent batches",
         "MinimumPollers=10,MaximumPollers=200"),
        ({"MinimumPollers": 4}, True, "MaximumPollers 200", "MinimumPollers=4,MaximumPollers=200"),   # AWS's default maximum
        ({"MinimumPollers": 2, "MaximumPollers": 100}, True, "up to 1,000", "MinimumPollers=2,MaximumPollers=100"),
        ({"MinimumPollers": 2, "MaximumPollers": 99}, False, None, None),   # 990 batches: below an uncapped mapping's
    ],
)
def test_esm_rule_on_a_provisioned_mapping_names_its_pollers_never_a_cap_lambda_refuses(config, listed, problem, resume):
    mapping = {"UUID": "u-1", "EventSourceArn": SQS, "FunctionArn": FN, "ProvisionedPollerConfig": config}
    finding = kinds.esm_finding(mapping, S, R)
    assert (finding is not None) == listed
    if listed:
        assert problem in finding.problem and "provisioned mode" in finding.problem
        assert finding.pause_command == ("aws lambda update-event-source-mapping --uuid u-1 --provisioned-poller-config "
                                         f"MinimumPollers=2,MaximumPollers=2 --region {R}")
        assert finding.resume_command == ("aws lambda update-event-source-mapping --uuid u-1 --provisioned-poller-config "
                                          f"{resume} --region {R}")
        assert "--scaling-config" not in finding.pause_command   # MaximumConcurrency and pollers are exclusive


def test_esm_rule_names_the_mapping_by_arn_when_lambda_gives_one():
    arn = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:u-1"
    finding = kinds.esm_finding({"UUID": "u-1", "EventSourceArn": SQS, "EventSourceMappingArn": arn}, S, R)
    assert finding.resource == arn


FUNCTION = {"FunctionName": "worker", "FunctionArn": FN}
OWN_DLQ = {"OnFailure": {"Destination": "arn:aws:sqs:us-east-1:123456789012:dlq"}}


@pytest.mark.parametrize(
    "config, problems, pause, resume",
    [
        (None, ["no async invoke config", "6 hours", "retried twice", "no on-failure destination"],
         "put-function-event-invoke-config --function-name worker --maximum-event-age-in-seconds 900 --maximum-retry-attempts 1",
         "delete-function-event-invoke-config --function-name worker"),
        ({"MaximumRetryAttempts": 0, "DestinationConfig": OWN_DLQ}, ["6 hours"],
         "update-function-event-invoke-config --function-name worker --maximum-event-age-in-seconds 900",
         "put-function-event-invoke-config --function-name worker --maximum-retry-attempts 0 "
         "--destination-config '{\"OnFailure\":{\"Destination\":\"arn:aws:sqs:us-east-1:123456789012:dlq\"}}'"),
        ({"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2, "DestinationConfig": {"OnFailure": {}, "OnSuccess": {}}},
         ["retried twice", "no on-failure destination"],
         "update-function-event-invoke-config --function-name worker --maximum-event-age-in-seconds 900 --maximum-retry-attempts 1",
         "put-function-event-invoke-config --function-name worker --maximum-event-age-in-seconds 3600 --maximum-retry-attempts 2"),
        # Already at or below Holdfast's posture: only the destination is missing, nothing to pause.
        ({"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 0}, ["no on-failure destination"], None, None),
        ({"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 1, "DestinationConfig": OWN_DLQ}, None, None, None),
    ],
)
def test_async_rule(config, problems, pause, resume):
    finding = kinds.async_finding(FUNCTION, config, S, R)
    if problems is None:
        assert finding is None
        return
    assert finding.kind == "async" and finding.resource == FN
    for problem in problems:
        assert problem in finding.problem
    assert len(finding.problem.split(";")) == len(problems) - (config is None)
    for command, expected in ((finding.pause_command, pause), (finding.resume_command, resume)):
        assert command == (None if expected is None else f"aws lambda {expected} --region {R}")


def nlb_group(protocol="TCP"):
    return {"TargetGroupArn": TG, "TargetGroupName": "web", "Protocol": protocol}


@pytest.mark.parametrize(
    "protocol, attributes, listed",
    [
        ("TCP", {}, True),                                   # nothing set: every threshold at its default
        ("TLS", dict(kinds.NLB_HEALTH_DEFAULTS), True),      # set explicitly to the defaults
        ("UDP", {"deregistration_delay.timeout_seconds": "300"}, True),
        ("TCP", {kinds.DNS_COUNT: "off"}, False),
        ("TCP", {kinds.ROUTING_PERCENTAGE: "50"}, False),
        ("HTTP", {}, False),                                 # an ALB's target group
        ("GENEVE", {}, False),                               # a GWLB's
    ],
)
def test_nlb_rule(protocol, attributes, listed):
    finding = kinds.nlb_finding(nlb_group(protocol), attributes, S, R)
    assert (finding is not None) == listed
    if listed:
        assert finding.resource == TG and finding.name == "web"
        base = f"aws elbv2 modify-target-group-attributes --target-group-arn {TG} --attributes"
        assert finding.pause_command == (
            f"{base} Key={kinds.DNS_COUNT},Value=off Key={kinds.ROUTING_PERCENTAGE},Value=50 --region {R}"
        )
        assert finding.resume_command == (
            f"{base} Key={kinds.DNS_COUNT},Value=1 Key={kinds.ROUTING_PERCENTAGE},Value=off --region {R}"
        )


def test_nlb_rule_has_nothing_to_pause_when_the_posture_is_the_default():
    settings = Settings.from_mapping({"nlb_dns_failover_minimum_healthy_count": 1, "nlb_routing_minimum_healthy_percentage": "off"})
    finding = kinds.nlb_finding(nlb_group(), {}, settings, R)
    assert finding is not None and finding.pause_command is None and finding.resume_command is None


@pytest.mark.parametrize(
    "environment, listed",
    [
        (None, True),
        ({"Variables": {}}, True),
        ({"Variables": {"AWS_RETRY_MODE": "legacy"}}, True),
        ({"Variables": {"AWS_RETRY_MODE": "standard"}}, False),
        ({"Variables": {"AWS_RETRY_MODE": "adaptive"}}, False),
        ({"Variables": {"AWS_RETRY_MODE": " Standard"}}, False),
    ],
)
def test_retry_mode_rule(environment, listed):
    function = {**FUNCTION, **({} if environment is None else {"Environment": environment})}
    finding = audit.retry_mode_finding(function)
    assert (finding is not None) == listed
    if listed:
        assert finding.kind == "function" and finding.resource == FN
        assert (finding.pause_command, finding.resume_command) == (None, None)
        assert ("legacy" if environment and environment["Variables"] else "not set") in finding.problem


def test_values_are_shell_quoted():
    group = {**asg(), "AutoScalingGroupName": "web; rm -rf ~"}
    assert "'web; rm -rf ~'" in kinds.asg_finding(group, S, R).pause_command


def target(**suspended):
    return {
        "ServiceNamespace": "ecs", "ResourceId": "service/main/api", "ScalableDimension": "ecs:service:DesiredCount",
        "ScalableTargetARN": "arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/0ec1",
        "SuspendedState": suspended,
    }


@pytest.mark.parametrize(
    "scalable, is_selected, listed",
    [
        (target(), False, True),
        (target(ScheduledScalingSuspended=True), False, True),
        (target(DynamicScalingInSuspended=True), False, False),   # the owner paused it already
        (target(), True, False),                                  # Holdfast protects it
    ],
)
def test_scalable_target_rule(scalable, is_selected, listed):
    finding = kinds.scalable_target_finding(scalable, is_selected, R)
    assert (finding is not None) == listed
    if listed:
        scheduled = str(scalable["SuspendedState"].get("ScheduledScalingSuspended", False)).lower()
        base = (
            "aws application-autoscaling register-scalable-target --service-namespace ecs --resource-id service/main/api "
            "--scalable-dimension ecs:service:DesiredCount --suspended-state "
        )
        rest = f",DynamicScalingOutSuspended=false,ScheduledScalingSuspended={scheduled} --region {R}"
        assert finding.pause_command == f"{base}DynamicScalingInSuspended=true{rest}"
        assert finding.resume_command == f"{base}DynamicScalingInSuspended=false{rest}"
        assert finding.resource == scalable["ScalableTargetARN"]


# ---- every command names a real AWS CLI operation and its real options --------------

_SESSION = botocore.session.get_session()


def _cli_operations(service: str) -> dict[str, object]:
    model = _SESSION.get_service_model(service)
    return {xform_name(name, "-"): model.operation_model(name) for name in model.operation_names}


def _commands():
    findings = [
        kinds.asg_finding(asg(), S, R),
        kinds.esm_finding({"UUID": "u-1", "EventSourceArn": SQS}, S, R),
        kinds.async_finding(FUNCTION, None, S, R),
        kinds.async_finding(FUNCTION, {"MaximumRetryAttempts": 2, "DestinationConfig": OWN_DLQ}, S, R),
        kinds.nlb_finding(nlb_group(), {}, S, R),
        kinds.scalable_target_finding(target(), False, R),
    ]
    return [c for f in findings for c in (f.pause_command, f.resume_command)]


@pytest.mark.parametrize("command", _commands())
def test_command_matches_the_cli_model(command):
    words = shlex.split(command)
    assert words[0] == "aws"
    service, operation, options = words[1], words[2], words[3:]
    model = _cli_operations(service)[operation]
    members = {xform_name(m, "-") for m in model.input_shape.members}
    given = {w[2:] for w in options if w.startswith("--")} - {"region"}
    assert given <= members, f"unknown options {given - members} for aws {service} {operation}"
    assert set(model.input_shape.required_members) and {xform_name(m, "-") for m in model.input_shape.required_members} <= given
    assert options[-2:] == ["--region", R]
