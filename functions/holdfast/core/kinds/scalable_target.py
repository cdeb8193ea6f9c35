"""Application Auto Scaling targets (ECS services): the declaration, the audit rule and the
words (the actuator is holdfast.actuators.scalable_target). Pure: no boto3."""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core.audit import Finding, aws
from holdfast.core.kinds.kind import APPLICATION_AUTOSCALING, ARN, CAPACITY, SAMPLE, Kind, Words

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


# The key the actuator records.
SCALE_IN = "DynamicScalingInSuspended"


def _change(key: str, old: Any, new: Any) -> str:
    if key == SCALE_IN:
        return f"dynamic scale-in {'suspended' if new else 'resumed'}"
    return ""


def _setting(key: str) -> str | None:
    return "dynamic scale-in" if key == SCALE_IN else None


def _value(key: str, v: Any) -> str | None:
    if key == SCALE_IN:
        return "suspended" if v else ("not suspended" if v is not None else "-")
    return None


# RegisterScalableTarget is evaluated with the service namespace, not the target's tags.
SCALABLE_TARGET = Kind(
    name="scalable-target", label="ECS scalable targets", relaxed_in=CAPACITY, service=APPLICATION_AUTOSCALING,
    audit_rule=scalable_target_finding,
    arn_pattern=ARN + r"application-autoscaling:[^:]+:\d{12}:scalable-target/.+",
    sample_arn=SAMPLE + "application-autoscaling:{region}:{account}:scalable-target/0000000000000000",
    tag_condition_prefixes=(), write_context=(("application-autoscaling:service-namespace", "ecs"),),
    controlled=False, evidence=None,
    words=Words(keys=(SCALE_IN,), change=_change, setting=_setting, value=_value))
