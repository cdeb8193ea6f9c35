"""The resource kinds Holdfast manages, each declared once (as Cloud Custodian's
`resource_type` declares a resource: c7n/resources/asg.py).

A `Kind` says what the pure core and the operator need to know about a kind: its name,
the ARN shape that names one, the stage in which it is relaxed (before that stage it is
held), its label, and the audit rule (in holdfast.cli.audit_rules) that judges it. The
actuator for a kind names its Kind (`spec = kinds.ASG`); `holdfast.actuators.REGISTRY`
maps each Kind to its actuator, and tests/actuators/test_registry.py fails when a Kind
has no actuator or an actuator no Kind. Everything else — the tuple of kind names, the
stage each is relaxed in, `kind_of(arn)`, the demo's labels — derives from `ALL`.

The declarations live in the core, not on the actuator classes, because the stage
policy is pure and may not import the shell (.importlinter).
Pure: no boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Stage names (holdfast.core.policy.STAGES); repeated here, where the kinds name them.
DRAIN, FRESH_WORK, ROUTING, CAPACITY = "drain", "fresh-work", "routing", "capacity"


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    # The ARN of one resource: partition-agnostic (aws, aws-us-gov, aws-cn).
    arn_pattern: str
    relaxed_in: str
    audit_rule: str

    def names(self, arn: str) -> bool:
        return re.fullmatch(self.arn_pattern, arn) is not None


_ARN = r"arn:aws[a-z-]*:"
ASG = Kind("asg", "Auto Scaling groups", _ARN + r"autoscaling:[^:]+:\d{12}:autoScalingGroup:[^:]+:autoScalingGroupName/.+",
           CAPACITY, "asg_finding")
ESM = Kind("esm", "SQS event source mappings", _ARN + r"lambda:[^:]+:\d{12}:event-source-mapping:.+", DRAIN, "esm_finding")
ASYNC = Kind("async", "async invoke configs", _ARN + r"lambda:[^:]+:\d{12}:function:[^:]+(:[^:]+)?", FRESH_WORK,
             "async_finding")
NLB = Kind("nlb", "NLB target groups", _ARN + r"elasticloadbalancing:[^:]+:\d{12}:targetgroup/.+", ROUTING, "nlb_finding")
SCALABLE_TARGET = Kind("scalable-target", "ECS scalable targets",
                       _ARN + r"application-autoscaling:[^:]+:\d{12}:scalable-target/.+", CAPACITY,
                       "scalable_target_finding")

# In the order the engine walks them, and the order the tables list them.
ALL: tuple[Kind, ...] = (ASG, ESM, ASYNC, NLB, SCALABLE_TARGET)
BY_NAME = {k.name: k for k in ALL}
KINDS: tuple[str, ...] = tuple(k.name for k in ALL)
RELAXED_IN = {k.name: k.relaxed_in for k in ALL}
LABELS = {k.name: k.label for k in ALL}


def kind_of(arn: str) -> str:
    """The resource kind an ARN names; ValueError for anything Holdfast does not manage."""
    if not arn.startswith("arn:") or arn.count(":") < 5:
        raise ValueError(f"not an ARN: {arn!r}")
    for kind in ALL:
        if kind.names(arn):
            return kind.name
    raise ValueError(f"{arn} is not a resource kind Holdfast manages ({', '.join(KINDS)})")
