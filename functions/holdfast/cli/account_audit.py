"""`holdfast audit`: read an account's automation and list what makes recovery worse.

The imperative shell over holdfast.cli.audit_rules: it lists Auto Scaling groups, SQS
event source mappings, Lambda functions (their environment and async invoke config),
NLB target groups and Application Auto Scaling targets, every page of each, and hands
each resource to its rule.
Read-only. A resource that cannot be read is named in `unreadable`, and the audit
carries on with the rest: each check (a kind's listing, each resource's read, each
role's simulation) catches the AWS errors of its own calls, whatever they are (an
AccessDenied, a throttle past the SDK's retries, an answer that is not AWS's at all), and
the check that fails is that check's outcome, never the whole audit's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from botocore.exceptions import ClientError

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.cli import audit_rules as rules
from holdfast.actuators.scalable_target import ScalableTargetActuator
from holdfast.core.kinds import ALL, BY_NAME, KINDS
from holdfast.iam import uses
from holdfast.settings import Settings

Progress = Callable[[str], None]
# Namespaces whose scale-in removes compute while new capacity cannot be launched. Holdfast
# engages only ECS targets (holdfast.actuators.scalable_target); the audit lists them all.
NAMESPACES = ("ecs", "ec2", "elasticmapreduce", "sagemaker")


@dataclass
class AuditResult:
    findings: list[rules.Finding] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)   # "what: why", one per resource or listing

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings]}


def run(clients, settings: Settings, progress: Progress | None = None, *, expired_queue_arn: str | None = None) -> AuditResult:
    result = AuditResult()
    say = progress or (lambda _: None)
    checks = [(kind, lambda kind=kind: READERS[kind](clients, settings, result, say)) for kind in KINDS]
    if expired_queue_arn:
        checks.append(("expired-events destinations",
                       lambda: destinations(clients, settings, expired_queue_arn, result, say)))
    for name, check in checks:
        try:
            check()
        except AWS_ERRORS as err:   # an error the check itself did not name: still only this check's
            result.unreadable.append(f"{name}: {_error(err)}")
    result.findings.sort(key=lambda f: (f.kind, f.name, f.resource))
    return result


def destinations(clients, settings: Settings, queue_arn: str, result: AuditResult, say: Progress) -> None:
    """Selected functions whose execution role may not send to Holdfast's queue: the
    DESTINATIONS rule of holdfast.readiness (`doctor` checks the same simulation), as
    findings with each role's grant."""
    from holdfast.readiness import destination_decisions

    say("checking which functions' roles can deliver expired events")
    decided, unreadable = destination_decisions(clients, settings, queue_arn)
    result.unreadable.extend(unreadable)
    for function, decision, command in decided:
        _add(result, rules.destination_finding(function, decision, queue_arn, command))


def _rule(kind: str) -> Callable[..., Any]:
    """The audit rule a kind declares (core.kinds: Kind.audit_rule)."""
    return getattr(rules, BY_NAME[kind].audit_rule)


def _error(err: Exception) -> str:
    if isinstance(err, ClientError):
        return f"{err.response['Error']['Code']}: {err.response['Error'].get('Message', '')}".rstrip(": ")
    return error_text(err)[:300]   # an unparsable answer carries the whole page it got


def _pages(client, operation: str, key: str, **kwargs) -> Iterator[dict]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, ())


@uses("autoscaling:DescribeAutoScalingGroups", by=("cli",))
def _asgs(clients, settings: Settings, result: AuditResult, say: Progress) -> None:
    say("reading Auto Scaling groups")
    try:
        for group in _pages(clients("autoscaling"), "describe_auto_scaling_groups", "AutoScalingGroups"):
            _add(result, _rule("asg")(group, settings, clients.region))
    except AWS_ERRORS as err:
        result.unreadable.append(f"Auto Scaling groups: {_error(err)}")


@uses("lambda:ListEventSourceMappings", by=("cli",))
def _mappings(clients, settings: Settings, result: AuditResult, say: Progress) -> None:
    say("reading event source mappings")
    try:
        for mapping in _pages(clients("lambda"), "list_event_source_mappings", "EventSourceMappings"):
            _add(result, _rule("esm")(mapping, settings, clients.region))
    except AWS_ERRORS as err:
        result.unreadable.append(f"event source mappings: {_error(err)}")


@uses("lambda:ListFunctions", "lambda:ListFunctionEventInvokeConfigs", by=("cli",))
def _functions(clients, settings: Settings, result: AuditResult, say: Progress) -> None:
    client = clients("lambda")
    try:
        functions = list(_pages(client, "list_functions", "Functions"))
    except AWS_ERRORS as err:
        result.unreadable.append(f"Lambda functions: {_error(err)}")
        return
    for n, function in enumerate(functions, 1):
        say(f"reading Lambda functions {n}/{len(functions)}")
        _add(result, rules.retry_mode_finding(function))
        try:
            configs = list(_pages(client, "list_function_event_invoke_configs", "FunctionEventInvokeConfigs", FunctionName=function["FunctionName"]))
        except AWS_ERRORS as err:
            if isinstance(err, ClientError) and err.response["Error"]["Code"] == "ResourceNotFoundException":
                continue  # deleted since it was listed: nothing left to audit
            result.unreadable.append(f"async invoke config of {function['FunctionName']}: {_error(err)}")
            continue
        _add(result, _rule("async")(function, _unqualified(function, configs), settings, clients.region))


def _unqualified(function: dict, configs: list[dict]) -> dict | None:
    """The config of the function itself: its ARN bare or with :$LATEST, not a version's or an alias's."""
    arns = {function["FunctionArn"], f"{function['FunctionArn']}:$LATEST"}
    return next((c for c in configs if c.get("FunctionArn") in arns), None)


@uses("elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetGroupAttributes", by=("cli",))
def _target_groups(clients, settings: Settings, result: AuditResult, say: Progress) -> None:
    client = clients("elbv2")
    try:
        groups = [g for g in _pages(client, "describe_target_groups", "TargetGroups") if g.get("Protocol") in rules.NLB_PROTOCOLS]
    except AWS_ERRORS as err:
        result.unreadable.append(f"target groups: {_error(err)}")
        return
    for n, group in enumerate(groups, 1):
        say(f"reading target groups {n}/{len(groups)}")
        try:
            attributes = client.describe_target_group_attributes(TargetGroupArn=group["TargetGroupArn"])["Attributes"]
        except AWS_ERRORS as err:
            if isinstance(err, ClientError) and err.response["Error"]["Code"] == "TargetGroupNotFound":
                continue  # deleted since it was listed
            result.unreadable.append(f"target group {group.get('TargetGroupName', group['TargetGroupArn'])}: {_error(err)}")
            continue
        values = {a["Key"]: a["Value"] for a in attributes}
        _add(result, _rule("nlb")(group, values, settings, clients.region))


@uses("application-autoscaling:DescribeScalableTargets", by=("cli",))
def _scalable_targets(clients, settings: Settings, result: AuditResult, say: Progress) -> None:
    say("reading scalable targets")
    try:
        # The actuator's discovery decides what Holdfast selects (the target's tag or its ECS service's).
        holdfasts = {r.arn for r in ScalableTargetActuator(clients, settings, None).discover()}
        client = clients("application-autoscaling")
        for namespace in NAMESPACES:
            for target in _pages(client, "describe_scalable_targets", "ScalableTargets", ServiceNamespace=namespace):
                selected = target.get("ScalableTargetARN") in holdfasts
                _add(result, _rule("scalable-target")(target, selected, clients.region))
    except AWS_ERRORS as err:
        result.unreadable.append(f"scalable targets: {_error(err)}")


def _add(result: AuditResult, finding: rules.Finding | None) -> None:
    if finding is not None:
        result.findings.append(finding)


# kind -> the reader that lists its resources and hands each to the kind's rule (the
# function each Kind names as its audit_reader, holdfast.core.kinds).
READERS: dict[str, Callable[[Any, Settings, AuditResult, Progress], None]] = {
    k.name: globals()[k.audit_reader] for k in ALL
}
