"""NLB target groups: the declaration, the audit rule and the words (the actuator is
holdfast.actuators.nlb). Pure: no boto3."""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core.audit import Finding, aws
from holdfast.core.kinds.kind import ARN, ELB, ROUTING, ROUTING_EVIDENCE, SAMPLE, Kind, Words

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


def _healthy(value: Any, unit: str = "") -> str:
    return "off" if value in (None, "off") else f"{value}{unit}"


def _change(key: str, old: Any, new: Any) -> str:
    if key == "dns_count":
        return ("DNS failover off" if _healthy(new) == "off" else f"DNS failover below {new} healthy targets") \
            + f" (was {'off' if _healthy(old) == 'off' else f'below {old}'})"
    if key == "dns_pct":
        return ("DNS failover by share off" if _healthy(new) == "off" else f"DNS failover below {new}% healthy") \
            + f" (was {_healthy(old, '%')})"
    if key == "routing_count":
        return f"traffic to all targets below {new} healthy (was {old})"
    if key == "routing_pct":
        return ("traffic to all targets by share off" if _healthy(new) == "off"
                else f"traffic to all targets below {new}% healthy") + f" (was {_healthy(old, '%')})"
    return ""


# The keys the actuator records (holdfast.actuators.nlb.ATTRIBUTES), by name.
SETTINGS = {
    "dns_count": "DNS failover: minimum healthy targets",
    "dns_pct": "DNS failover: minimum healthy targets %",
    "routing_count": "unhealthy state routing: minimum healthy targets",
    "routing_pct": "unhealthy state routing: minimum healthy targets %",
}


def _value(key: str, v: Any) -> str | None:
    if key in SETTINGS:
        return _healthy(v, "%" if key.endswith("_pct") else "")
    return None


NLB = Kind(
    name="nlb", label="NLB target groups", relaxed_in=ROUTING, service=ELB, audit_rule=nlb_finding,
    arn_pattern=ARN + r"elasticloadbalancing:[^:]+:\d{12}:targetgroup/.+",
    sample_arn=SAMPLE + "elasticloadbalancing:{region}:{account}:targetgroup/holdfast-doctor/0000000000000000",
    tag_condition_prefixes=("aws",), write_context=(), controlled=False, evidence=ROUTING_EVIDENCE,
    words=Words(keys=tuple(SETTINGS), change=_change, setting=SETTINGS.get, value=_value))
