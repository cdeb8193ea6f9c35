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
- its audit rule (a function of holdfast.cli.audit_rules) and reader (a function of
  holdfast.cli.account_audit that lists the kind's resources and hands each to the rule).

The actuator for a kind names its Kind (`spec = kinds.ASG`); `holdfast.actuators.REGISTRY`
finds every actuator module and maps each Kind to its actuator. tests/actuators/test_registry.py
fails when a Kind has no actuator, an actuator no Kind, or a kind leaves any of the
above undeclared or unresolvable.

The declarations live in the core, not on the actuator classes, because the stage
policy is pure and may not import the shell (.importlinter).
Pure: no boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    # The ARN of one resource: partition-agnostic (aws, aws-us-gov, aws-cn).
    arn_pattern: str
    relaxed_in: str
    audit_rule: str
    audit_reader: str
    service: Service
    # One resource's ARN with {partition}, {region} and {account} to fill in.
    sample_arn: str
    # Condition-key prefixes whose `<prefix>:ResourceTag/<key>` the service sets from the
    # resource's tags on the kind's writes (empty: the service sets none for them).
    tag_condition_prefixes: tuple[str, ...] = ("aws",)
    # Fixed condition keys the kind's writes (other than its tag writes) carry.
    write_context: tuple[tuple[str, str], ...] = ()
    controlled: bool = False
    evidence: str | None = None

    def names(self, arn: str) -> bool:
        return re.fullmatch(self.arn_pattern, arn) is not None


_ARN = r"arn:aws[a-z-]*:"
_SAMPLE = "arn:{partition}:"
ASG = Kind("asg", "Auto Scaling groups", _ARN + r"autoscaling:[^:]+:\d{12}:autoScalingGroup:[^:]+:autoScalingGroupName/.+",
           CAPACITY, "asg_finding", "_asgs", AUTOSCALING,
           _SAMPLE + "autoscaling:{region}:{account}:autoScalingGroup:00000000-0000-0000-0000-000000000000"
                     ":autoScalingGroupName/holdfast-doctor",
           tag_condition_prefixes=("aws", "autoscaling"))
# Lambda evaluates no aws:ResourceTag on an event source mapping's writes.
ESM = Kind("esm", "SQS event source mappings", _ARN + r"lambda:[^:]+:\d{12}:event-source-mapping:.+", DRAIN,
           "esm_finding", "_mappings", LAMBDA,
           _SAMPLE + "lambda:{region}:{account}:event-source-mapping:00000000-0000-0000-0000-000000000000",
           tag_condition_prefixes=(), controlled=True, evidence=DRAIN_EVIDENCE)
ASYNC = Kind("async", "async invoke configs", _ARN + r"lambda:[^:]+:\d{12}:function:[^:]+(:[^:]+)?", FRESH_WORK,
             "async_finding", "_functions", LAMBDA, _SAMPLE + "lambda:{region}:{account}:function:holdfast-doctor")
NLB = Kind("nlb", "NLB target groups", _ARN + r"elasticloadbalancing:[^:]+:\d{12}:targetgroup/.+", ROUTING,
           "nlb_finding", "_target_groups", ELB,
           _SAMPLE + "elasticloadbalancing:{region}:{account}:targetgroup/holdfast-doctor/0000000000000000",
           evidence=ROUTING_EVIDENCE)
# RegisterScalableTarget is evaluated with the service namespace, not the target's tags.
SCALABLE_TARGET = Kind("scalable-target", "ECS scalable targets",
                       _ARN + r"application-autoscaling:[^:]+:\d{12}:scalable-target/.+", CAPACITY,
                       "scalable_target_finding", "_scalable_targets", APPLICATION_AUTOSCALING,
                       _SAMPLE + "application-autoscaling:{region}:{account}:scalable-target/0000000000000000",
                       tag_condition_prefixes=(), write_context=(("application-autoscaling:service-namespace", "ecs"),))

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
