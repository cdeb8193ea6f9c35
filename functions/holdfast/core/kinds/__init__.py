"""The resource kinds Holdfast manages, each declared once (as Cloud Custodian's
`resource_type` declares a resource: c7n/resources/asg.py).

A kind is two files: its module here (`core/kinds/<kind>.py`: the `Kind`, its pure audit
rule and its words) and its actuator beside it under the same name
(`actuators/<kind>.py`: discovery, engage, relax and the audit's reader). Why two and
not one kind module holding both halves:

- The stage policy, the gates, the walk order and the CLI's words are pure and read
  every kind's declaration (holdfast.core.policy needs `relaxed_in` and `controlled`),
  but the core may import no SDK and nothing of the shell (.importlinter's pure-core
  contract). A declaration on the actuator class would make the policy import boto3
  through it; the split is what keeps the core testable in microseconds.
- What stays in the core is what can be judged without AWS: the declaration, the audit
  rule (one resource, as the AWS API describes it, in; a Finding or None out) and the
  words. Each is tested without moto; the actuator's tests are the ones that need it.
- The same module name on both sides (`core/kinds/esm.py`, `actuators/esm.py`) is how a
  reader finds the other half; `holdfast.actuators.REGISTRY` maps each Kind to its
  actuator and fails at import when either half is missing.

A `Kind` (holdfast.core.kinds.kind) carries everything the rest of Holdfast derives for
a kind:

- its name, label and the ARN shape that names one (`kind_of(arn)`; the kinds' shapes are
  disjoint), and a sample ARN `holdfast doctor` simulates the kind's writes on when no
  resource of it is selected;
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
  @uses (holdfast.readiness.kind_requests) in that context;
- its audit rule (`audit_rule`, written beside the declaration): which settings of one
  resource, as the AWS API describes it, make recovery worse (holdfast.core.audit). The
  reader that lists the account's resources and hands each to the rule is the actuator's
  `audit` method, the half that calls AWS;
- its words (`words`): how the CLI says the keys its actuator records (holdfast.cli.words).

Every property is a required keyword, so a declaration that leaves one out fails at
import; tests/actuators/test_registry.py fails when a Kind has no actuator, an actuator
no Kind, a property's value is one the rest cannot use, or two kinds' ARN shapes overlap.
A new kind is its module here, added to `ALL` below, and its actuator module.
Pure: no boto3.
"""

from __future__ import annotations

from holdfast.core.kinds.asg import ASG, asg_finding  # noqa: F401
from holdfast.core.kinds.async_config import (  # noqa: F401
    ASYNC,
    ASYNC_DEFAULT_MAX_AGE,
    ASYNC_DEFAULT_RETRIES,
    async_finding,
)
from holdfast.core.kinds.esm import ESM, UNCAPPED_BATCHES, esm_finding  # noqa: F401
from holdfast.core.kinds.kind import (  # noqa: F401  (the names the rest reads from holdfast.core.kinds)
    APPLICATION_AUTOSCALING,
    AUTOSCALING,
    CAPACITY,
    DRAIN,
    DRAIN_EVIDENCE,
    ELB,
    FRESH_WORK,
    LAMBDA,
    ROUTING,
    ROUTING_EVIDENCE,
    TAGGING,
    Kind,
    Service,
    Words,
)
from holdfast.core.kinds.nlb import (  # noqa: F401
    DNS_COUNT,
    DNS_PERCENTAGE,
    NLB,
    NLB_HEALTH_DEFAULTS,
    NLB_PROTOCOLS,
    ROUTING_COUNT,
    ROUTING_PERCENTAGE,
    nlb_finding,
)
from holdfast.core.kinds.scalable_target import SCALABLE_TARGET, SUSPENDED_FLAGS, scalable_target_finding  # noqa: F401

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
