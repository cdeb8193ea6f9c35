"""Holdfast's SQS queues.

- `expired_events`: the on-failure destination Holdfast gives owners' async functions
  that have none while engaged, so an event that ages out is kept (14 days) instead of
  dropped. Lambda sends these records with the *owner function's* execution role, so
  the queue policy lets any principal of this account send; no other account can.
  SSE-SQS by default rather than a KMS key, so those roles need no kms permission; with
  a key of yours, each such role also needs kms:GenerateDataKey and kms:Decrypt on it
  (`Holdfast.grant_expired_events_destination` grants both).
- `expired_events_anchor`: a queue nothing sends to or reads, whose RedrivePolicy names
  the expired-events queue. SQS's StartMessageMoveTask accepts as a source only a queue
  that is the dead-letter queue of another SQS queue (API reference,
  StartMessageMoveTask: "Non-SQS queue sources of dead-letter queues, such as AWS Lambda
  [...] are currently not supported"); a Lambda on-failure destination is not one. The
  anchor makes it one, so the replay stage can move expired events back
  (`replay_expired_events_to`). The expired-events queue's RedriveAllowPolicy names the
  anchor alone (`byQueue`), so no other queue can dead-letter into it.
- A key of yours for the expired-events queue (`expired_events_key`) is tagged
  `holdfast:component=expired-events` (where it is a key CDK defines; an imported key
  cannot be tagged from here), and the reconciler may use it for `kms:Decrypt` through
  SQS only (`kms:ViaService`, `grant_replay`): the replay moves expired events out of
  the queue with the reconciler's role, and a move task reads its source with the
  caller's permissions, which needs Decrypt on the source's key (SQS Developer Guide,
  dead-letter queue redrive). The reconciler's statement for keys tagged
  `holdfast:replay=true` (policies/reconciler.json) does not cover a key no one tagged.
- `dead_letters`: where Holdfast's own undelivered work lands: rule-target DLQs and the
  controllers' async on-failure destination. Its depth is alarmed.

The anchor's name is the only one Holdfast sets: `holdfast-anchor-<stack UUID>`. The
expired-events queue's RedriveAllowPolicy must name the anchor's ARN and the anchor's
RedrivePolicy the expired-events queue's, and two generated names would make each wait
for the other (a circular dependency). The stack id's UUID is new on every create of a
stack, so the name never clashes (two stacks, or a stack deleted and deployed again),
and at 52 characters it is inside SQS's 80.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration, Fn, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

RETENTION = Duration.days(14)
# The tag on a key of yours that encrypts the expired-events queue.
KEY_COMPONENT_TAG = ("holdfast:component", "expired-events")
ANCHOR_PREFIX = "holdfast-anchor-"
# SQS's RedrivePolicy maxReceiveCount is 1 to 1,000; nothing receives from the anchor.
ANCHOR_MAX_RECEIVE_COUNT = 1000


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, expired_events_key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.expired_events_key = expired_events_key
        if isinstance(expired_events_key, kms.Key):
            Tags.of(expired_events_key).add(*KEY_COMPONENT_TAG)
        self.anchor_name = Fn.join("", [ANCHOR_PREFIX, Fn.select(2, Fn.split("/", Aws.STACK_ID))])
        self.anchor_arn = stack.format_arn(service="sqs", resource=self.anchor_name)
        anchor_ref = sqs.Queue.from_queue_attributes(self, "AnchorRef", queue_arn=self.anchor_arn,
                                                     queue_name=self.anchor_name)
        self.expired_events = self._queue(
            "ExpiredEvents",
            key=expired_events_key,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE, source_queues=[anchor_ref]
            ),
        )
        self.expired_events.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OwnFunctionsSendExpiredEvents",
                principals=[iam.AnyPrincipal()],
                actions=["sqs:SendMessage"],
                resources=[self.expired_events.queue_arn],
                conditions={"StringEquals": {"aws:PrincipalAccount": stack.account}},
            )
        )
        self.expired_events_anchor = sqs.Queue(
            self,
            "RedriveAnchor",
            queue_name=self.anchor_name,
            retention_period=Duration.minutes(1),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.expired_events, max_receive_count=ANCHOR_MAX_RECEIVE_COUNT),
        )
        self.dead_letters = self._queue("DeadLetters")

    def grant_replay(self, grantee: iam.IGrantable) -> None:
        """What moving expired events out of the queue adds with a key of yours: kms:Decrypt
        on it, through SQS in this region only. Nothing with SSE-SQS (the default)."""
        key = self.expired_events_key
        if key is None:
            return
        grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            sid="ReplayExpiredEventsKeyDecrypt",
            actions=["kms:Decrypt"],
            resources=[key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"sqs.{Stack.of(self).region}.amazonaws.com"}},
        ))

    def _queue(self, construct_id: str, *, key: kms.IKey | None = None, **extra) -> sqs.Queue:
        return sqs.Queue(
            self,
            construct_id,
            retention_period=RETENTION,
            encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
            **extra,
        )
