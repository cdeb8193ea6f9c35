"""Holdfast's two SQS queues.

- `expired_events`: the on-failure destination Holdfast gives owners' async functions
  that have none while engaged, so an event that ages out is kept (14 days) instead of
  dropped. Lambda sends these records with the *owner function's* execution role, so
  the queue policy lets any principal of this account send; no other account can.
  SSE-SQS by default rather than a KMS key, so those roles need no kms permission; with
  a key of yours, each such role also needs kms:GenerateDataKey and kms:Decrypt on it
  (`Holdfast.grant_expired_events_destination` grants both).
- `dead_letters`: where Holdfast's own undelivered work lands: rule-target DLQs and the
  controllers' async on-failure destination. Its depth is alarmed.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

RETENTION = Duration.days(14)


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, expired_events_key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        self.expired_events_key = expired_events_key
        self.expired_events = self._queue("ExpiredEvents", key=expired_events_key)
        self.expired_events.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OwnFunctionsSendExpiredEvents",
                principals=[iam.AnyPrincipal()],
                actions=["sqs:SendMessage"],
                resources=[self.expired_events.queue_arn],
                conditions={"StringEquals": {"aws:PrincipalAccount": Stack.of(self).account}},
            )
        )
        self.dead_letters = self._queue("DeadLetters")

    def _queue(self, construct_id: str, *, key: kms.IKey | None = None) -> sqs.Queue:
        return sqs.Queue(
            self,
            construct_id,
            retention_period=RETENTION,
            encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
        )
