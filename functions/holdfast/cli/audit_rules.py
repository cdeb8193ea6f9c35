"""The audit's rules: which settings make recovery from a regional impairment worse.

Pure: each rule takes one resource as the AWS API describes it (plain dicts) and the
settings, and returns a Finding or None. No boto3, no clock. holdfast.cli.account_audit reads the
account and calls them.

For each mechanism Holdfast engages, a finding carries the exact AWS CLI command that
puts it into Holdfast's posture (the settings' values) and the one that puts back
what is there now; the other findings (AWS_RETRY_MODE, a missing on-failure
destination alone) have nothing to pause, and their commands are None.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from holdfast.settings import Settings

ASYNC_DEFAULT_MAX_AGE = 21600   # 6 hours
ASYNC_DEFAULT_RETRIES = 2
RETRY_MODES = ("standard", "adaptive")

DNS_COUNT = "target_group_health.dns_failover.minimum_healthy_targets.count"
DNS_PERCENTAGE = "target_group_health.dns_failover.minimum_healthy_targets.percentage"
ROUTING_COUNT = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count"
ROUTING_PERCENTAGE = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage"
# ELB answers these when the owner never set them (ELBv2 API reference, target group attributes: target_group_health.*).
NLB_HEALTH_DEFAULTS = {DNS_COUNT: "1", DNS_PERCENTAGE: "off", ROUTING_COUNT: "1", ROUTING_PERCENTAGE: "off"}
# Network Load Balancer target group protocols; HTTP(S) belong to ALBs, GENEVE to GWLBs.
NLB_PROTOCOLS = frozenset({"TCP", "TLS", "UDP", "TCP_UDP", "QUIC", "TCP_QUIC"})


@dataclass(frozen=True)
class Finding:
    kind: str               # asg, esm, async, nlb, scalable-target, function
    resource: str           # ARN, or the name where the API gives no ARN
    problem: str
    pause_command: str | None = None
    resume_command: str | None = None
    name: str = ""          # short name for tables; not part of the JSON shape
    fix_command: str | None = None   # what fixes it, where that is not a pause (in the JSON when set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "problem": self.problem,
            "pause_command": self.pause_command,
            "resume_command": self.resume_command,
            **({"fix_command": self.fix_command} if self.fix_command else {}),
        }


def aws(region: str, *words: Any) -> str:
    """An AWS CLI command line, every word shell-quoted."""
    return shlex.join(["aws", *map(str, words), "--region", region])


def selected(tags: Any, settings: Settings) -> bool:
    """Whether a resource's tags (a list of Key/Value pairs or a mapping) carry the selector."""
    pairs = tags.items() if isinstance(tags, Mapping) else ((t.get("Key"), t.get("Value")) for t in tags or ())
    return any(k == settings.selector_key and v == settings.selector_value for k, v in pairs)


# ---- Auto Scaling groups -------------------------------------------------------------


def asg_finding(group: Mapping[str, Any], settings: Settings, region: str) -> Finding | None:
    """A group outside Holdfast's selector whose capacity-removing processes run."""
    if selected(group.get("Tags"), settings):
        return None
    suspended = {p["ProcessName"] for p in group.get("SuspendedProcesses") or ()}
    active = [p for p in settings.asg_processes if p not in suspended]
    if not active:
        return None
    name = group["AutoScalingGroupName"]
    # Pause and resume only what is active now: never resume a process its owner suspended.
    return Finding(
        kind="asg",
        resource=group.get("AutoScalingGroupARN") or name,
        name=name,
        problem=(
            f"{' and '.join(active)} active and not selected by Holdfast ({settings.selector}): "
            "it terminates instances it cannot replace while launches fail"
        ),
        pause_command=aws(region, "autoscaling", "suspend-processes", "--auto-scaling-group-name", name, "--scaling-processes", *active),
        resume_command=aws(region, "autoscaling", "resume-processes", "--auto-scaling-group-name", name, "--scaling-processes", *active),
    )


# ---- SQS event source mappings -------------------------------------------------------


def esm_finding(mapping: Mapping[str, Any], settings: Settings, region: str) -> Finding | None:
    """An SQS mapping without MaximumConcurrency."""
    if ":sqs:" not in mapping.get("EventSourceArn", ""):
        return None  # MaximumConcurrency exists for SQS only
    if (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency"):
        return None
    uuid = mapping["UUID"]
    queue = mapping["EventSourceArn"].rsplit(":", 1)[-1]
    function = mapping.get("FunctionArn", "").rsplit(":", 1)[-1]
    return Finding(
        kind="esm",
        resource=mapping.get("EventSourceMappingArn") or uuid,
        name=f"{queue} -> {function}",
        problem=(
            "no MaximumConcurrency: the mapping scales to about 1,000 concurrent batches "
            "against a dependency that has just come back"
        ),
        pause_command=aws(region, "lambda", "update-event-source-mapping", "--uuid", uuid, "--scaling-config", f"MaximumConcurrency={settings.esm_floor}"),
        # An empty ScalingConfig removes the cap, which is how the owner had it.
        resume_command=aws(region, "lambda", "update-event-source-mapping", "--uuid", uuid, "--scaling-config", "{}"),
    )


# ---- Lambda async invoke configs -----------------------------------------------------


def async_finding(function: Mapping[str, Any], config: Mapping[str, Any] | None, settings: Settings, region: str) -> Finding | None:
    """A function's unqualified async invoke config (None: it has none) at the defaults or
    without an on-failure destination.

    Every function is checked, not only those with a known asynchronous trigger: anything
    (S3, SNS, EventBridge, any caller with InvocationType=Event) can invoke any function
    asynchronously, and the audit cannot see them all. A function with no config runs at
    the defaults whenever that happens.
    """
    name = function["FunctionName"]
    age = (config or {}).get("MaximumEventAgeInSeconds", ASYNC_DEFAULT_MAX_AGE)
    retries = (config or {}).get("MaximumRetryAttempts", ASYNC_DEFAULT_RETRIES)
    on_failure = (((config or {}).get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    problems = []
    if age >= ASYNC_DEFAULT_MAX_AGE:
        problems.append("events kept up to 6 hours")
    if retries >= ASYNC_DEFAULT_RETRIES:
        problems.append("retried twice")
    if not on_failure:
        problems.append("no on-failure destination, so expired events are lost")
    if not problems:
        return None
    prefix = "no async invoke config (the defaults): " if config is None else "async invoke config: "
    pause, resume = _async_commands(name, config, age, retries, settings, region)
    return Finding(
        kind="async",
        resource=function["FunctionArn"],
        name=name,
        problem=prefix + "; ".join(problems),
        pause_command=pause,
        resume_command=resume,
    )


def _async_commands(name, config, age, retries, settings: Settings, region: str) -> tuple[str | None, str | None]:
    current = {"--maximum-event-age-in-seconds": age, "--maximum-retry-attempts": retries}
    posture = {
        "--maximum-event-age-in-seconds": min(age, settings.async_max_event_age_seconds),
        "--maximum-retry-attempts": min(retries, settings.async_max_retry_attempts),
    }
    changed = [word for option, value in posture.items() if value != current[option] for word in (option, value)]
    if not changed:
        return None, None  # already at or below Holdfast's posture: nothing to pause
    if config is None:
        all_values = [word for option, value in posture.items() for word in (option, value)]
        return (
            aws(region, "lambda", "put-function-event-invoke-config", "--function-name", name, *all_values),
            aws(region, "lambda", "delete-function-event-invoke-config", "--function-name", name),
        )
    # Update changes only what it names; Put replaces the whole config, so the resume
    # command names every setting the owner had, and only those.
    original = []
    if "MaximumEventAgeInSeconds" in config:
        original += ["--maximum-event-age-in-seconds", config["MaximumEventAgeInSeconds"]]
    if "MaximumRetryAttempts" in config:
        original += ["--maximum-retry-attempts", config["MaximumRetryAttempts"]]
    destinations = {k: v for k, v in (config.get("DestinationConfig") or {}).items() if v and v.get("Destination")}
    if destinations:
        original += ["--destination-config", json.dumps(destinations, separators=(",", ":"), sort_keys=True)]
    return (
        aws(region, "lambda", "update-function-event-invoke-config", "--function-name", name, *changed),
        aws(region, "lambda", "put-function-event-invoke-config", "--function-name", name, *original),
    )


# ---- NLB target groups ---------------------------------------------------------------


def nlb_finding(group: Mapping[str, Any], attributes: Mapping[str, str], settings: Settings, region: str) -> Finding | None:
    """An NLB target group whose health thresholds are all at ELB's defaults.

    `attributes` is DescribeTargetGroupAttributes as a key -> value mapping; a missing
    key is at its default.
    """
    if group.get("Protocol") not in NLB_PROTOCOLS:
        return None
    current = {key: str(attributes.get(key, default)) for key, default in NLB_HEALTH_DEFAULTS.items()}
    if current != NLB_HEALTH_DEFAULTS:
        return None
    posture = {
        DNS_COUNT: str(settings.nlb_dns_failover_minimum_healthy_count),
        DNS_PERCENTAGE: str(settings.nlb_dns_failover_minimum_healthy_percentage),
        ROUTING_COUNT: str(settings.nlb_routing_minimum_healthy_count),
        ROUTING_PERCENTAGE: str(settings.nlb_routing_minimum_healthy_percentage),
    }
    changed = [key for key in NLB_HEALTH_DEFAULTS if posture[key] != current[key]]
    arn = group["TargetGroupArn"]

    def modify(values: Mapping[str, str]) -> str | None:
        if not changed:
            return None
        pairs = [f"Key={key},Value={values[key]}" for key in changed]
        return aws(region, "elbv2", "modify-target-group-attributes", "--target-group-arn", arn, "--attributes", *pairs)

    return Finding(
        kind="nlb",
        resource=arn,
        name=group.get("TargetGroupName", arn),
        problem=(
            "default target-group health thresholds: DNS failover removes a zone from DNS "
            "as soon as its targets fail health checks"
        ),
        pause_command=modify(posture),
        resume_command=modify(current),
    )


# ---- Application Auto Scaling targets ------------------------------------------------

SUSPENDED_FLAGS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")


def scalable_target_finding(target: Mapping[str, Any], is_selected: bool, region: str) -> Finding | None:
    """A scalable target outside Holdfast's selector whose dynamic scale-in runs.

    `is_selected` comes from the scalable-target actuator's own discovery (the target's
    tag, or its ECS service's), so the audit and Holdfast agree on what Holdfast protects.
    """
    state = {flag: bool((target.get("SuspendedState") or {}).get(flag, False)) for flag in SUSPENDED_FLAGS}
    if is_selected or state["DynamicScalingInSuspended"]:
        return None
    ref = [
        "--service-namespace", target["ServiceNamespace"],
        "--resource-id", target["ResourceId"],
        "--scalable-dimension", target["ScalableDimension"],
    ]

    def register(scale_in: bool) -> str:
        # Every flag named: the owner's other two go back exactly as they are.
        flags = {**state, "DynamicScalingInSuspended": scale_in}
        shorthand = ",".join(f"{flag}={str(value).lower()}" for flag, value in flags.items())
        return aws(region, "application-autoscaling", "register-scalable-target", *ref, "--suspended-state", shorthand)

    return Finding(
        kind="scalable-target",
        resource=target.get("ScalableTargetARN") or target["ResourceId"],
        name=target["ResourceId"],
        problem=(
            "dynamic scale-in active and not selected by Holdfast: it removes capacity "
            "that cannot be launched again while launches fail"
        ),
        pause_command=register(True),
        resume_command=register(False),
    )


# ---- Lambda functions' SDK retry mode ------------------------------------------------


def retry_mode_finding(function: Mapping[str, Any]) -> Finding | None:
    """A function whose environment does not choose a retry mode with a retry quota."""
    variables = (function.get("Environment") or {}).get("Variables") or {}
    mode = variables.get("AWS_RETRY_MODE")
    if mode is not None and mode.strip().lower() in RETRY_MODES:
        return None
    what = "AWS_RETRY_MODE not set" if mode is None else f"AWS_RETRY_MODE={mode}"
    return Finding(
        kind="function",
        resource=function["FunctionArn"],
        name=function["FunctionName"],
        problem=(
            f"{what} (want standard or adaptive): SDKs that default to legacy retries have no "
            "retry quota, so their retries multiply the load on a recovering dependency"
        ),
    )


# ---- async destinations: can the function's role deliver to Holdfast's queue? -------


def destination_finding(function: Mapping[str, Any], decision: str, queue_arn: str,
                        grant_command: str) -> Finding | None:
    """A selected function whose execution role may not send to Holdfast's expired-events
    queue (`decision` is IAM's simulation of sqs:SendMessage by that role on the queue:
    allowed, implicitDeny or explicitDeny). Lambda refuses the queue as its on-failure
    destination, so while engaged Holdfast bounds only its retries and keeps its event
    age: a long age, and events kept, but not in Holdfast's queue."""
    if decision == "allowed":
        return None
    return Finding(
        kind="async",
        resource=function["FunctionArn"],
        name=function["FunctionName"],
        problem=(f"its execution role may not send to Holdfast's expired-events queue ({decision} for sqs:SendMessage "
                 f"on {queue_arn}): Lambda refuses the queue as destination, so while engaged only its retries are "
                 "bounded and its event age is kept"),
        fix_command=grant_command,
    )
