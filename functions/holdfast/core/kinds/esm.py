"""SQS event source mappings: the declaration, the audit rule and the words (the actuator
is holdfast.actuators.esm). Pure: no boto3."""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core import pollers
from holdfast.core.audit import Finding, aws
from holdfast.core.kinds.kind import ARN, DRAIN, DRAIN_EVIDENCE, LAMBDA, SAMPLE, Kind, Words

# An SQS mapping without a cap scales to about 1,000 concurrent batches.
UNCAPPED_BATCHES = 1000
# The keys the actuator records: the cap, or in provisioned mode the pollers.
CAP_KEY = "MaximumConcurrency"


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


def _change(key: str, old: Any, new: Any) -> str:
    if key == pollers.MAX_KEY:   # provisioned mode
        carries = f" (up to {pollers.cap_of(new)} concurrent batches)" if isinstance(new, int) else ""
        return f"pollers at most {old} -> {new}{carries}"
    if key == pollers.MIN_KEY:
        return f"pollers at least {old} -> {new}"
    if key != CAP_KEY:
        return ""
    if new is None:
        return f"concurrency cap removed (was {old})"
    if old is None:
        return f"concurrency capped at {new} (was uncapped)"
    return f"concurrency cap {old} -> {new}"


SETTINGS = {
    CAP_KEY: "maximum concurrency (cap)",
    pollers.MAX_KEY: "maximum pollers (provisioned mode)",
    pollers.MIN_KEY: "minimum pollers (provisioned mode)",
}


def _value(key: str, v: Any) -> str | None:
    if key == CAP_KEY:
        return "uncapped" if v is None else str(v)
    return None


# Lambda evaluates no aws:ResourceTag on an event source mapping's writes.
ESM = Kind(
    name="esm", label="SQS event source mappings", relaxed_in=DRAIN, service=LAMBDA, audit_rule=esm_finding,
    arn_pattern=ARN + r"lambda:[^:]+:\d{12}:event-source-mapping:.+",
    sample_arn=SAMPLE + "lambda:{region}:{account}:event-source-mapping:00000000-0000-0000-0000-000000000000",
    tag_condition_prefixes=(), write_context=(), controlled=True, evidence=DRAIN_EVIDENCE,
    words=Words(keys=tuple(SETTINGS), change=_change, setting=SETTINGS.get, value=_value))
