"""Auto Scaling groups: the declaration, the audit rule and the words (the actuator is
holdfast.actuators.asg). Pure: no boto3."""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core.audit import Finding, aws, selected
from holdfast.core.kinds.kind import ARN, AUTOSCALING, CAPACITY, SAMPLE, Kind, Words

# The Auto Scaling processes (EC2 Auto Scaling API reference, SuspendProcesses): the keys
# the actuator records, one per process, true while suspended.
PROCESSES = (
    "Launch",
    "Terminate",
    "AddToLoadBalancer",
    "AlarmNotification",
    "AZRebalance",
    "HealthCheck",
    "InstanceRefresh",
    "ReplaceUnhealthy",
    "ScheduledActions",
)


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


def _change(key: str, old: Any, new: Any) -> str:
    return f"{key} {'suspended' if new else 'resumed'}"


def _setting(key: str) -> str:
    return f"process {key}"


def _value(key: str, v: Any) -> str:
    return "suspended" if v else ("not suspended" if v is not None else "-")


ASG = Kind(
    name="asg", label="Auto Scaling groups", relaxed_in=CAPACITY, service=AUTOSCALING, audit_rule=asg_finding,
    arn_pattern=ARN + r"autoscaling:[^:]+:\d{12}:autoScalingGroup:[^:]+:autoScalingGroupName/.+",
    sample_arn=SAMPLE + "autoscaling:{region}:{account}:autoScalingGroup:00000000-0000-0000-0000-000000000000"
                        ":autoScalingGroupName/holdfast-doctor",
    tag_condition_prefixes=("aws", "autoscaling"), write_context=(), controlled=False, evidence=None,
    words=Words(keys=PROCESSES, change=_change, setting=_setting, value=_value))
