"""cdk-nag AwsSolutions findings Holdfast acknowledges, each with its reason.

Kept in one place so a reviewer sees every exception at once; tests/stack fails on
any finding not acknowledged here.
"""

from __future__ import annotations

from typing import Iterable

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions

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
    reason="Resource wildcards in policies/<role>.json are explained statement by statement in "
    "policies/README.md: every write on account resources is limited to the selector tag by a "
    "condition where the service supports one, and tests/iam enforces that.",
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


def acknowledge(*, functions: Iterable[lambda_.Function], dead_letters: sqs.IQueue, expired_events: sqs.IQueue) -> None:
    """Attach the acknowledged findings to the constructs they are about (the stack passes
    them in, so this module knows nothing of the stack that uses it)."""
    for function in functions:
        NagSuppressions.add_resource_suppressions(function, [RUNTIME])
        NagSuppressions.add_resource_suppressions(function.role, [POLICY_WILDCARDS])
        NagSuppressions.add_resource_suppressions(function.role.node.find_child("DefaultPolicy"), [XRAY], apply_to_children=True)
    NagSuppressions.add_resource_suppressions(dead_letters, [DEAD_LETTERS])
    NagSuppressions.add_resource_suppressions(expired_events, [EXPIRED_EVENTS])
