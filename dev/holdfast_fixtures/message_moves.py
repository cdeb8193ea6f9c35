"""SQS message move tasks (dead-letter queue redrive), emulated on moto, which lacks them.

Test-support code, never shipped. `MessageMoves(clock).installed()` adds
StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask to moto's SQS, so
every client inside `mock_aws` (Holdfast's own included) gets them, following the SQS
API Reference (API_StartMessageMoveTask, API_ListMessageMoveTasks,
API_CancelMessageMoveTask) and the request and response shapes of botocore's SQS model:

- StartMessageMoveTask(SourceArn, DestinationArn?, MaxNumberOfMessagesPerSecond?) ->
  TaskHandle. The source must be a dead-letter queue of another SQS queue (some queue's
  RedrivePolicy names it, and the source's RedriveAllowPolicy allows that queue); without DestinationArn messages go back to their source queue.
  MaxNumberOfMessagesPerSecond is at most 500 (and at least 1); without it "the system
  optimizes the rate" — here 500 a second. Only one active task per source queue.
  ApproximateNumberOfMessagesToMove is the source's visible messages when the task starts.
- ListMessageMoveTasks(SourceArn, MaxResults?) -> Results: the most recent tasks, newest
  first, MaxResults 1 (default) to 10. TaskHandle only for a RUNNING task;
  DestinationArn and MaxNumberOfMessagesPerSecond only when the request gave them;
  FailureReason only for FAILED; StartedTimestamp in epoch milliseconds.
- CancelMessageMoveTask(TaskHandle) -> ApproximateNumberOfMessagesMoved. Only a RUNNING
  task can be cancelled; it goes CANCELLING, then CANCELLED; messages already moved stay
  moved.

Error codes and messages are the ones AWS returns, as recorded against AWS in
LocalStack's validated snapshot tests (https://github.com/localstack/localstack/blob/main/tests/aws/services/sqs/test_sqs_move_task.snapshot.json):
a source that is not a DLQ, a second active task, a missing source or destination, a
malformed or unknown task handle, and a task that fails when its destination is deleted
(FailureReason AWS.SimpleQueueService.NonExistentQueue). The task handle has AWS's form,
base64 of {"taskId": ..., "sourceArn": ...}. Where AWS's answer is documented only as a
rule — a rate or MaxResults out of range, cancelling a task that is not RUNNING, a
destination equal to the source — the code is InvalidParameterValue and the message is
ours (marked ASSUMED below). Moto answers every error with HTTP 400 (AWS uses 404 for
ResourceNotFoundException); clients see the same error code either way.

Time is injected: a task moves min(to move, ⌊rate × seconds since it started⌋) messages,
brought up to date on every call and by `advance()`. Moved messages keep their body and
attributes and start with a receive count of 0 in the destination (a redrive to the
source queue would otherwise dead-letter them again on their first receive). Moto does
not record which queue a dead-lettered message came from, so without DestinationArn the
emulation needs the DLQ to have exactly one source queue; with several the task FAILS
with a FailureReason that says so.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator, Protocol
from unittest import mock

from moto.core.responses import ActionResult
from moto.sqs.exceptions import SQSException
from moto.sqs.models import sqs_backends
from moto.sqs.responses import SQSResponse

RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED = "RUNNING", "COMPLETED", "CANCELLING", "CANCELLED", "FAILED"
ACTIVE = (RUNNING, CANCELLING)
MAX_RATE = 500
DEFAULT_RATE = MAX_RATE   # "the system will optimize the rate": the emulation's choice
NAMESPACE = uuid.UUID("5b0f7f0e-4b8e-4a65-9d35-6f5f6b0d7a11")


class Clock(Protocol):
    def now(self) -> datetime: ...


def _invalid(message: str) -> SQSException:
    return SQSException("InvalidParameterValue", message)


def _not_found(message: str) -> SQSException:
    return SQSException("ResourceNotFoundException", message)


def encode_handle(task_id: str, source_arn: str) -> str:
    return base64.b64encode(json.dumps({"taskId": task_id, "sourceArn": source_arn}).encode()).decode()


def decode_handle(handle: str) -> tuple[str, str]:
    try:
        doc = json.loads(base64.b64decode(handle, validate=True))
        return str(doc["taskId"]), str(doc["sourceArn"])
    except (binascii.Error, ValueError, KeyError, TypeError) as err:
        raise _invalid("Value for parameter TaskHandle is invalid.") from err


@dataclass
class Task:
    task_id: str
    source_arn: str
    destination_arn: str | None
    rate: int | None
    started: datetime
    to_move: int
    moved: int = 0
    status: str = RUNNING
    failure: str | None = None
    targets: tuple[str, ...] = field(default=())   # where the messages go
    cancelled_at: datetime | None = None

    @property
    def handle(self) -> str:
        return encode_handle(self.task_id, self.source_arn)

    def entry(self) -> dict:
        out = {
            "Status": self.status,
            "SourceArn": self.source_arn,
            "ApproximateNumberOfMessagesMoved": self.moved,
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": int(self.started.timestamp() * 1000),
        }
        if self.status == RUNNING:
            out["TaskHandle"] = self.handle
        if self.destination_arn is not None:
            out["DestinationArn"] = self.destination_arn
        if self.rate is not None:
            out["MaxNumberOfMessagesPerSecond"] = self.rate
        if self.status == FAILED:
            out["FailureReason"] = self.failure
        return out


def _split(arn: str) -> tuple[str, str, str] | None:
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[5]:
        return None
    return parts[4], parts[3], parts[5]   # account, region, name


def _queue(arn: str | None):
    where = _split(arn) if arn else None
    if where is None:
        return None
    account, region, name = where
    try:
        return sqs_backends[account][region].queues.get(name)
    except KeyError:
        return None


class MessageMoves:
    """The emulator: its tasks, by id, in start order."""

    def __init__(self, clock: Clock, *, denied_keys: frozenset[str] = frozenset()):
        self.clock = clock
        # KMS keys the caller may not use through SQS (moto checks no KMS on SQS). A move
        # task reads and sends with its caller's permissions: kms:Decrypt on the source's
        # customer-managed key, kms:GenerateDataKey on the destination's (SQS Developer
        # Guide, dead-letter queue redrive). A task touching a denied key FAILS when it
        # moves its first message; the FailureReason is ASSUMED (AWS documents none).
        self.denied_keys = frozenset(denied_keys)
        self.tasks: list[Task] = []
        self.calls: list[tuple[str, dict]] = []

    # ---- installation --------------------------------------------------------------

    @contextmanager
    def installed(self) -> Iterator["MessageMoves"]:
        emulator = self

        def start_message_move_task(response: SQSResponse) -> ActionResult:
            return ActionResult(emulator.start(
                response._get_param("SourceArn"),
                response._get_param("DestinationArn"),
                response._get_param("MaxNumberOfMessagesPerSecond"),
            ))

        def list_message_move_tasks(response: SQSResponse) -> ActionResult:
            return ActionResult(emulator.list(response._get_param("SourceArn"), response._get_param("MaxResults")))

        def cancel_message_move_task(response: SQSResponse) -> ActionResult:
            return ActionResult(emulator.cancel(response._get_param("TaskHandle")))

        with mock.patch.object(SQSResponse, "start_message_move_task", start_message_move_task, create=True), \
             mock.patch.object(SQSResponse, "list_message_move_tasks", list_message_move_tasks, create=True), \
             mock.patch.object(SQSResponse, "cancel_message_move_task", cancel_message_move_task, create=True):
            yield self

    # ---- the API -------------------------------------------------------------------

    def start(self, source_arn: str, destination_arn: str | None, rate) -> dict:
        self.calls.append(("StartMessageMoveTask", {"SourceArn": source_arn, "DestinationArn": destination_arn, "MaxNumberOfMessagesPerSecond": rate}))
        self.advance()
        source = _queue(source_arn)
        if source is None:
            raise _not_found("The resource that you specified for the SourceArn parameter doesn't exist.")
        sources = self._redrive_sources(source)
        if not sources:
            raise _invalid("Source queue must be configured as a Dead Letter Queue.")
        if destination_arn is not None and _queue(destination_arn) is None:
            raise _not_found("The resource that you specified for the DestinationArn parameter doesn't exist.")
        if destination_arn is not None and destination_arn == source_arn:   # ASSUMED message
            raise _invalid("Source queue arn and destination queue arn cannot be the same.")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE):   # ASSUMED message
            raise _invalid(f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and {MAX_RATE}.")
        if any(t.source_arn == source_arn and t.status in ACTIVE for t in self.tasks):
            raise _invalid("There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
        task_id = str(uuid.uuid5(NAMESPACE, f"{source_arn}#{len(self.tasks)}"))
        targets = (destination_arn,) if destination_arn is not None else tuple(q.queue_arn for q in sources)
        visible = sum(1 for msg in source._messages if msg.visible)
        task = Task(task_id, source_arn, destination_arn, rate, self.clock.now(), visible, targets=targets)
        if destination_arn is None and len(targets) > 1:
            task.status, task.failure = FAILED, (
                "emulation: the DLQ has several source queues and no DestinationArn was given; "
                "moto does not record which queue a message came from"
            )
        self.tasks.append(task)
        return {"TaskHandle": task.handle}

    def list(self, source_arn: str, max_results) -> dict:
        self.calls.append(("ListMessageMoveTasks", {"SourceArn": source_arn, "MaxResults": max_results}))
        self.advance()
        if _queue(source_arn) is None:
            raise _not_found("The resource that you specified for the SourceArn parameter doesn't exist.")
        n = 1 if max_results is None else max_results
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10:   # ASSUMED message
            raise _invalid(f"Value {max_results} for parameter MaxResults is invalid. Reason: Must be between 1 and 10.")
        mine = [t for t in self.tasks if t.source_arn == source_arn]
        return {"Results": [t.entry() for t in reversed(mine)][:n]}

    def cancel(self, handle: str) -> dict:
        self.calls.append(("CancelMessageMoveTask", {"TaskHandle": handle}))
        self.advance()
        task_id, source_arn = decode_handle(handle)
        if _queue(source_arn) is None:
            raise _not_found("The resource that you specified for the SourceArn parameter doesn't exist.")
        task = next((t for t in self.tasks if t.task_id == task_id and t.source_arn == source_arn), None)
        if task is None:
            raise _not_found("Task does not exist.")
        if task.status != RUNNING:   # ASSUMED message; the rule is documented
            raise _invalid(f"Only a task in RUNNING status can be cancelled; this one is {task.status}.")
        task.status = CANCELLING
        task.cancelled_at = self.clock.now()
        return {"ApproximateNumberOfMessagesMoved": task.moved}

    # ---- progress ------------------------------------------------------------------

    def advance(self) -> None:
        """Bring every task up to the clock: move what its rate allows, finish, fail."""
        now = self.clock.now()
        for task in self.tasks:
            if task.status == CANCELLING:
                if now > task.cancelled_at:
                    task.status = CANCELLED
                continue
            if task.status != RUNNING:
                continue
            source = _queue(task.source_arn)
            targets = [_queue(arn) for arn in task.targets]
            if source is None or any(t is None for t in targets):
                task.status, task.failure = FAILED, "AWS.SimpleQueueService.NonExistentQueue"
                continue
            denied = [k for k in (_key(source), *(_key(t) for t in targets)) if k in self.denied_keys]
            if denied and task.to_move:
                task.status, task.failure = FAILED, f"KMS.AccessDeniedException: {', '.join(denied)}"
                continue
            rate = task.rate or DEFAULT_RATE
            allowed = min(task.to_move, math.floor(rate * max(0.0, (now - task.started).total_seconds())))
            while task.moved < allowed:
                msg = next((m for m in source._messages if m.visible), None)
                if msg is None:
                    break
                source._messages.remove(msg)
                msg.approximate_receive_count = 0
                msg.approximate_first_receive_timestamp = None
                targets[0].add_message(msg)
                task.moved += 1
            if task.moved >= task.to_move or not any(m.visible for m in source._messages):
                task.status = COMPLETED

    def _redrive_sources(self, dlq) -> list:
        """The SQS queues whose RedrivePolicy names `dlq` and that its RedriveAllowPolicy
        lets use it: the API reference's rule that a move task's source is "configured as
        [a] dead-letter queue of other Amazon SQS queues", a Lambda on-failure destination
        or an SNS subscription's DLQ being no such source. RedriveAllowPolicy (SQS
        Developer Guide, "Configuring a dead-letter queue redrive permission"):
        `allowAll` (also when unset), `denyAll`, or `byQueue` with `sourceQueueArns`. AWS
        refuses a RedrivePolicy the DLQ does not allow when it is set; moto stores both
        without the check, so a source the DLQ does not allow is not counted here."""
        account, region, _ = _split(dlq.queue_arn)
        named = [q for q in sqs_backends[account][region].queues.values() if q.dead_letter_queue is dlq]
        allow = _redrive_allow(dlq)
        if allow.get("redrivePermission", "allowAll") == "allowAll":
            return named
        if allow["redrivePermission"] == "byQueue":
            return [q for q in named if q.queue_arn in allow.get("sourceQueueArns", ())]
        return []


def _key(queue) -> str | None:
    """The queue's KmsMasterKeyId, as SetQueueAttributes stored it."""
    return getattr(queue, "kms_master_key_id", None) or None


def _redrive_allow(queue) -> dict:
    raw = getattr(queue, "redrive_allow_policy", None)
    if not raw:
        return {}
    return raw if isinstance(raw, dict) else json.loads(raw)
