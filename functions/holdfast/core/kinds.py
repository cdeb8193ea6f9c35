"""The resource kinds Holdfast manages, each declared once (as Cloud Custodian's
`resource_type` declares a resource: c7n/resources/asg.py).

A `Kind` carries everything the rest of Holdfast derives for a kind:

- its name, label and the ARN shape that names one (`kind_of(arn)`), and a sample ARN
  `holdfast doctor` simulates the kind's writes on when no resource of it is selected;
- the stage in which it is relaxed (before that stage it is held: holdfast.core.policy),
  and whether a drain-stage controller drives it (`controlled`: holdfast.stages.drain
  decides its resources' targets; policy gives it the CONTROL posture in hold and drain);
- the evidence its held resources feed (`evidence`: the gate of holdfast.core.evidence
  whose built-in reader, holdfast.observation.evidence, watches them);
- its AWS service (`service`): the rate budget its calls spend (holdfast.budget builds a
  budget per declared service and routes the service's calls to it) and the engine's
  walk lane (holdfast.engine walks kinds of different services at once);
- the request context its writes are evaluated with (`tag_condition_prefixes`,
  `write_context`): `holdfast doctor` simulates each write the actuator declares with
  @uses (holdfast.cli.readiness.kind_requests) in that context;
- its audit rule (`audit_rule`, written beside the declaration below): which settings of
  one resource, as the AWS API describes it, make recovery worse (holdfast.core.audit).
  The reader that lists the account's resources and hands each to the rule is the
  actuator's `audit` method, the half that calls AWS.

The actuator for a kind names its Kind (`spec = kinds.ASG`); `holdfast.actuators.REGISTRY`
finds every actuator module and maps each Kind to its actuator. Every property is a
required keyword, so a declaration that leaves one out fails at import;
tests/actuators/test_registry.py fails when a Kind has no actuator, an actuator no Kind,
or a property's value is one the rest cannot use.

The declarations live in the core, not on the actuator classes, because the stage
policy is pure and may not import the shell (.importlinter).
Pure: no boto3.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from holdfast.core import pollers
from holdfast.core.audit import Finding, aws, selected

# Stage names (holdfast.core.policy.STAGES); repeated here, where the kinds name them.
DRAIN, FRESH_WORK, ROUTING, CAPACITY = "drain", "fresh-work", "routing", "capacity"


# Evidence names (holdfast.core.evidence DRAIN, ROUTING); repeated here, where kinds name them.
DRAIN_EVIDENCE, ROUTING_EVIDENCE = "drain", "routing"


@dataclass(frozen=True)
class Service:
    """An AWS service a kind's calls go to, and the client-side rate budget they spend."""

    name: str               # the IAM prefix, and the budget's name (holdfast.budget)
    botocore_id: str        # botocore's service id, hyphenized: what the Governor routes on
    ceiling: float          # requests a second, never above
    start: float | None = None   # the first rate; None: the ceiling (a published quota)


# Lambda: 15/s for the whole control plane, reads included (Lambda quotas). Auto Scaling,
# ELB and Application Auto Scaling publish no figure (ELB's page gives its Describe bucket
# as 40 tokens refilled at 10/s): start at 10/s, let AIMD find out whether more is allowed,
# up to 20/s.
LAMBDA = Service("lambda", "lambda", 15.0)
AUTOSCALING = Service("autoscaling", "auto-scaling", 20.0, start=10.0)
ELB = Service("elasticloadbalancing", "elastic-load-balancing-v2", 20.0, start=10.0)
APPLICATION_AUTOSCALING = Service("application-autoscaling", "application-auto-scaling", 20.0, start=10.0)
# Not a kind's own service: the Resource Groups Tagging API selects resources of several kinds.
TAGGING = Service("tagging", "resource-groups-tagging-api", 20.0, start=10.0)


@dataclass(frozen=True, kw_only=True)
class Kind:
    name: str
    label: str
    # The ARN of one resource: partition-agnostic (aws, aws-us-gov, aws-cn).
    arn_pattern: str
    relaxed_in: str
    # The audit's rule for one resource of the kind (holdfast.core.audit: a Finding or None).
    audit_rule: Callable[..., Finding | None]
    service: Service
    # One resource's ARN with {partition}, {region} and {account} to fill in.
    sample_arn: str
    # Condition-key prefixes whose `<prefix>:ResourceTag/<key>` the service sets from the
    # resource's tags on the kind's writes (empty: the service sets none for them).
    tag_condition_prefixes: tuple[str, ...]
    # Fixed condition keys the kind's writes (other than its tag writes) carry.
    write_context: tuple[tuple[str, str], ...]
    controlled: bool
    evidence: str | None

    def names(self, arn: str) -> bool:
        return re.fullmatch(self.arn_pattern, arn) is not None


_ARN = r"arn:aws[a-z-]*:"
_SAMPLE = "arn:{partition}:"


# ---- Auto Scaling groups -------------------------------------------------------------


def asg_finding(group: Mapping[str, Any], settings, region: str) -> Finding | None:
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


ASG = Kind(
    name="asg", label="Auto Scaling groups", relaxed_in=CAPACITY, service=AUTOSCALING, audit_rule=asg_finding,
    arn_pattern=_ARN + r"autoscaling:[^:]+:\d{12}:autoScalingGroup:[^:]+:autoScalingGroupName/.+",
    sample_arn=_SAMPLE + "autoscaling:{region}:{account}:autoScalingGroup:00000000-0000-0000-0000-000000000000"
                         ":autoScalingGroupName/holdfast-doctor",
    tag_condition_prefixes=("aws", "autoscaling"), write_context=(), controlled=False, evidence=None)


# ---- SQS event source mappings -------------------------------------------------------


# An SQS mapping without a cap scales to about 1,000 concurrent batches.
UNCAPPED_BATCHES = 1000


def esm_finding(mapping: Mapping[str, Any], settings, region: str) -> Finding | None:
    """An SQS mapping without MaximumConcurrency, or in provisioned mode with pollers that
    carry at least as many concurrent batches as a mapping without a cap reaches."""
    if ":sqs:" not in mapping.get("EventSourceArn", ""):
        return None  # MaximumConcurrency exists for SQS only
    uuid = mapping["UUID"]
    queue = mapping["EventSourceArn"].rsplit(":", 1)[-1]
    function = mapping.get("FunctionArn", "").rsplit(":", 1)[-1]
    if pollers.provisioned(mapping.get("ProvisionedPollerConfig")):
        return _provisioned_finding(mapping, settings, region, f"{queue} -> {function}")
    if (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency"):
        return None
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


def _provisioned_finding(mapping: Mapping[str, Any], settings, region: str, name: str) -> Finding | None:
    """A mapping in provisioned mode takes no MaximumConcurrency: its pollers are its cap
    (holdfast.core.pollers), paused at the floor cap's pollers and resumed to its own."""
    now = pollers.config(mapping["ProvisionedPollerConfig"])
    carries = pollers.cap_of(now[pollers.MAX_KEY])
    if carries < UNCAPPED_BATCHES:
        return None   # its owner's pollers already hold it below a mapping without a cap
    uuid, floor = mapping["UUID"], pollers.floor_pollers(settings.esm_floor)

    def config(low: int, high: int) -> str:
        return f"{pollers.MIN_KEY}={low},{pollers.MAX_KEY}={high}"

    return Finding(
        kind="esm",
        resource=mapping.get("EventSourceMappingArn") or uuid,
        name=name,
        problem=(
            f"provisioned mode with MaximumPollers {now[pollers.MAX_KEY]}: up to {carries:,} concurrent batches "
            f"({pollers.INVOKES_PER_POLLER} a poller) against a dependency that has just come back"
        ),
        pause_command=aws(region, "lambda", "update-event-source-mapping", "--uuid", uuid,
                          "--provisioned-poller-config", config(min(now[pollers.MIN_KEY], floor), floor)),
        resume_command=aws(region, "lambda", "update-event-source-mapping", "--uuid", uuid,
                           "--provisioned-poller-config", config(now[pollers.MIN_KEY], now[pollers.MAX_KEY])),
    )


# Lambda evaluates no aws:ResourceTag on an event source mapping's writes.
ESM = Kind(
    name="esm", label="SQS event source mappings", relaxed_in=DRAIN, service=LAMBDA, audit_rule=esm_finding,
    arn_pattern=_ARN + r"lambda:[^:]+:\d{12}:event-source-mapping:.+",
    sample_arn=_SAMPLE + "lambda:{region}:{account}:event-source-mapping:00000000-0000-0000-0000-000000000000",
    tag_condition_prefixes=(), write_context=(), controlled=True, evidence=DRAIN_EVIDENCE)


# ---- Lambda async invoke configs -----------------------------------------------------

ASYNC_DEFAULT_MAX_AGE = 21600   # 6 hours
ASYNC_DEFAULT_RETRIES = 2


def async_finding(function: Mapping[str, Any], config: Mapping[str, Any] | None, settings, region: str) -> Finding | None:
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


def _async_commands(name, config, age, retries, settings, region: str) -> tuple[str | None, str | None]:
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


ASYNC = Kind(
    name="async", label="async invoke configs", relaxed_in=FRESH_WORK, service=LAMBDA, audit_rule=async_finding,
    arn_pattern=_ARN + r"lambda:[^:]+:\d{12}:function:[^:]+(:[^:]+)?",
    sample_arn=_SAMPLE + "lambda:{region}:{account}:function:holdfast-doctor",
    tag_condition_prefixes=("aws",), write_context=(), controlled=False, evidence=None)


# ---- NLB target groups ---------------------------------------------------------------

DNS_COUNT = "target_group_health.dns_failover.minimum_healthy_targets.count"
DNS_PERCENTAGE = "target_group_health.dns_failover.minimum_healthy_targets.percentage"
ROUTING_COUNT = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count"
ROUTING_PERCENTAGE = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage"
# ELB answers these when the owner never set them (ELBv2 API reference, target group attributes: target_group_health.*).
NLB_HEALTH_DEFAULTS = {DNS_COUNT: "1", DNS_PERCENTAGE: "off", ROUTING_COUNT: "1", ROUTING_PERCENTAGE: "off"}
# Network Load Balancer target group protocols; HTTP(S) belong to ALBs, GENEVE to GWLBs.
NLB_PROTOCOLS = frozenset({"TCP", "TLS", "UDP", "TCP_UDP", "QUIC", "TCP_QUIC"})


def nlb_finding(group: Mapping[str, Any], attributes: Mapping[str, str], settings, region: str) -> Finding | None:
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


NLB = Kind(
    name="nlb", label="NLB target groups", relaxed_in=ROUTING, service=ELB, audit_rule=nlb_finding,
    arn_pattern=_ARN + r"elasticloadbalancing:[^:]+:\d{12}:targetgroup/.+",
    sample_arn=_SAMPLE + "elasticloadbalancing:{region}:{account}:targetgroup/holdfast-doctor/0000000000000000",
    tag_condition_prefixes=("aws",), write_context=(), controlled=False, evidence=ROUTING_EVIDENCE)


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


# RegisterScalableTarget is evaluated with the service namespace, not the target's tags.
SCALABLE_TARGET = Kind(
    name="scalable-target", label="ECS scalable targets", relaxed_in=CAPACITY, service=APPLICATION_AUTOSCALING,
    audit_rule=scalable_target_finding,
    arn_pattern=_ARN + r"application-autoscaling:[^:]+:\d{12}:scalable-target/.+",
    sample_arn=_SAMPLE + "application-autoscaling:{region}:{account}:scalable-target/0000000000000000",
    tag_condition_prefixes=(), write_context=(("application-autoscaling:service-namespace", "ecs"),),
    controlled=False, evidence=None)


# In the order the engine walks them, and the order the tables list them.
ALL: tuple[Kind, ...] = (ASG, ESM, ASYNC, NLB, SCALABLE_TARGET)
BY_NAME = {k.name: k for k in ALL}
KINDS: tuple[str, ...] = tuple(k.name for k in ALL)
RELAXED_IN = {k.name: k.relaxed_in for k in ALL}
LABELS = {k.name: k.label for k in ALL}
# Kinds a drain-stage controller drives (holdfast.stages.drain); every other kind's walk is
# the plain engage or restore of its stage.
CONTROLLED: frozenset[str] = frozenset(k.name for k in ALL if k.controlled)
# Every service a budget paces: each kind's, and the tagging API they share.
SERVICES: tuple[Service, ...] = tuple(dict.fromkeys([*(k.service for k in ALL), TAGGING]))


def held_by_evidence(held: dict[str, set[str]], evidence: str) -> set[str]:
    """The held ARNs (by kind) of the kinds whose resources feed `evidence`."""
    return set().union(*(held.get(k.name, set()) for k in ALL if k.evidence == evidence))


def kind_of(arn: str) -> str:
    """The resource kind an ARN names; ValueError for anything Holdfast does not manage."""
    if not arn.startswith("arn:") or arn.count(":") < 5:
        raise ValueError(f"not an ARN: {arn!r}")
    for kind in ALL:
        if kind.names(arn):
            return kind.name
    raise ValueError(f"{arn} is not a resource kind Holdfast manages ({', '.join(KINDS)})")
