"""cdk-nag AwsSolutions findings Holdfast acknowledges, each with its reason.

Kept in one place so a reviewer sees every exception at once; tests/stack fails on
any finding not acknowledged here. cdk-nag is optional for users of the construct:
without it installed there is nothing to acknowledge, and this module does nothing.
"""

from __future__ import annotations

from typing import Any, Iterable

try:
    from cdk_nag import NagPackSuppression, NagSuppressions
except ImportError:  # cdk-nag is a check, not a dependency of the construct
    NagSuppressions = None

    def NagPackSuppression(**kwargs: Any) -> dict:  # noqa: N802 - stands in for the class
        return kwargs

RUNTIME = NagPackSuppression(
    id="AwsSolutions-L1",
    reason="Python 3.13 is pinned together with the Powertools layer built for it "
    "(AWSLambdaPowertoolsPythonV3-python313-arm64); both move in one change.",
)
XRAY = NagPackSuppression(
    id="AwsSolutions-IAM5",
    applies_to=["Resource::*"],
    reason="X-Ray's PutTraceSegments and PutTelemetryRecords, added by CDK for active tracing, "
    "support no resource-level permission.",
)
POLICY_WILDCARDS = NagPackSuppression(
    id="AwsSolutions-IAM5",
    applies_to=[{"regex": "/^Resource::.*$/"}],
    reason="Resource wildcards in policies/<role>.json are explained statement by "
    "statement in its README.md: every write on account resources is limited to the selector tag "
    "by a condition where the service supports one, and tests/iam enforces that.",
)
DEAD_LETTERS = NagPackSuppression(
    id="AwsSolutions-SQS3",
    reason="This queue is the dead-letter queue: the rule targets' DLQ and the controllers' "
    "on-failure destination. Its depth is alarmed.",
)
EXPIRED_EVENTS = NagPackSuppression(
    id="AwsSolutions-SQS3",
    reason="This queue is itself a last resort: the on-failure destination for owners' async "
    "events that expired. Nothing consumes it, so nothing can fail to be redriven.",
)


def acknowledge(*, functions: Iterable[Any], dead_letters: Any, expired_events: Any) -> None:
    """Attach the acknowledged findings to the constructs they are about (the construct
    passes them in, so this module knows nothing of the construct that uses it)."""
    if NagSuppressions is None:
        return
    for function in functions:
        NagSuppressions.add_resource_suppressions(function, [RUNTIME])
        NagSuppressions.add_resource_suppressions(function.role, [POLICY_WILDCARDS])
        NagSuppressions.add_resource_suppressions(function.role.node.find_child("DefaultPolicy"), [XRAY], apply_to_children=True)
    NagSuppressions.add_resource_suppressions(dead_letters, [DEAD_LETTERS])
    NagSuppressions.add_resource_suppressions(expired_events, [EXPIRED_EVENTS])


def add(construct: Any, *suppressions: Any, apply_to_children: bool = False) -> None:
    """Acknowledge findings on one construct (for the org, game-day and asset stacks)."""
    if NagSuppressions is not None:
        NagSuppressions.add_resource_suppressions(construct, list(suppressions), apply_to_children=apply_to_children)
