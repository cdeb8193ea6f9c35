"""What a kind declares (`Kind`), the AWS services its calls go to (`Service`), and how the
CLI says its recorded keys (`Words`). Pure: no boto3."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from holdfast.core.audit import Finding

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


def _no_value(key: str, value: Any) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True)
class Words:
    """How `holdfast plan`, `engage`, `resume` and `status` say the keys a kind's actuator
    records (holdfast.cli.words): the way the AWS console says them, not the actuator's
    own keys (`ReplaceUnhealthy: false -> true` reads as "turned on" when it means
    suspended; `dns_count` is no name an operator knows).

    `keys` are every key the kind's actuator records; each has a phrase and a setting
    name (tests/actuators/test_registry.py), and every key an engaged resource of each
    kind records is one of them (tests/cli/test_status_words.py), so a new kind, or a new
    key, cannot print its raw keys unnoticed.
    """

    keys: tuple[str, ...]
    # One change in words (`ReplaceUnhealthy suspended`); "" for a key it has no phrase for
    # (printed as `key: from -> to`).
    change: Callable[[str, Any, Any], str]
    # A recorded key's name for `status` (`process ReplaceUnhealthy`); None: the key itself.
    setting: Callable[[str], str | None]
    # A recorded value for `status` (`suspended`, `uncapped`); None: the value as recorded.
    value: Callable[[str, Any], str | None] = _no_value


@dataclass(frozen=True, kw_only=True)
class Kind:
    name: str
    label: str
    # The ARN of one resource: partition-agnostic (aws, aws-us-gov, aws-cn). The kinds'
    # patterns are disjoint: an ARN names at most one kind (kind_of takes the first that
    # matches, so an overlap would silently hand one kind's resources to another's
    # actuator; tests/actuators/test_registry.py checks it over the registry). A variant
    # of a resource a kind already names is that kind, widened: a Kinesis or DynamoDB
    # stream's event source mapping is an `event-source-mapping` ARN like an SQS one, so
    # it widens the mapping kind (its actuator, audit rule and words), it is not a new kind.
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
    # How the CLI says the keys its actuator records.
    words: Words

    def names(self, arn: str) -> bool:
        return re.fullmatch(self.arn_pattern, arn) is not None


ARN = r"arn:aws[a-z-]*:"
SAMPLE = "arn:{partition}:"
