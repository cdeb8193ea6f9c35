"""The SQS message-move-task emulation answers the documented shapes and errors."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import botocore.session
import pytest
from botocore.exceptions import ClientError

from holdfast.clock import FakeClock
from holdfast_fixtures.message_moves import MessageMoves, encode_handle

T0 = datetime(2025, 10, 20, 9, 0, tzinfo=timezone.utc)
MODEL = botocore.session.get_session().get_service_model("sqs")


@pytest.fixture
def clock():
    return FakeClock(T0)


@pytest.fixture
def moves(aws, clock):
    with MessageMoves(clock).installed() as emulator:
        yield emulator


@pytest.fixture
def sqs(clients):
    return clients("sqs")


def arn(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def pipe(sqs, name="work", n=0):
    """work -> work-dlq (maxReceiveCount 1), with n messages dead-lettered."""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    queue = sqs.create_queue(
        QueueName=name,
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn(sqs, dlq), "maxReceiveCount": 1})},
    )["QueueUrl"]
    for i in range(n):
        sqs.send_message(QueueUrl=queue, MessageBody=f"m{i}")
    for _ in range(2 * n):   # a first receive, then the one that dead-letters it
        sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0, MaxNumberOfMessages=10)
    return queue, dlq


def count(sqs, url):
    return int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"])


def error(call):
    with pytest.raises(ClientError) as err:
        call()
    return err.value.response["Error"]["Code"], err.value.response["Error"]["Message"]


def shape_keys(operation):
    out = MODEL.operation_model(operation).output_shape
    return set(out.members)


def test_start_list_and_complete_at_the_rate(moves, sqs, clock):
    queue, dlq = pipe(sqs, n=10)
    work = sqs.create_queue(QueueName="replay")["QueueUrl"]
    assert count(sqs, dlq) == 10
    handle = sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, work), MaxNumberOfMessagesPerSecond=2)["TaskHandle"]
    doc = json.loads(base64.b64decode(handle))   # AWS's handle: base64 of taskId and sourceArn
    assert doc["sourceArn"] == arn(sqs, dlq) and doc["taskId"]

    clock.advance(3)
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert set(task) <= set(MODEL.operation_model("ListMessageMoveTasks").output_shape.members["Results"].member.members)
    assert task == {
        "Status": "RUNNING",
        "TaskHandle": handle,
        "SourceArn": arn(sqs, dlq),
        "DestinationArn": arn(sqs, work),
        "MaxNumberOfMessagesPerSecond": 2,
        "ApproximateNumberOfMessagesMoved": 6,
        "ApproximateNumberOfMessagesToMove": 10,
        "StartedTimestamp": int(T0.timestamp() * 1000),
    }
    assert count(sqs, work) == 6 and count(sqs, dlq) == 4

    clock.advance(10)
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert task["Status"] == "COMPLETED" and task["ApproximateNumberOfMessagesMoved"] == 10
    assert "TaskHandle" not in task   # only while RUNNING
    bodies = {m["Body"] for m in sqs.receive_message(QueueUrl=work, MaxNumberOfMessages=10)["Messages"]}
    assert bodies == {f"m{i}" for i in range(10)}


def test_without_a_destination_messages_go_back_to_their_source_queue(moves, sqs, clock):
    queue, dlq = pipe(sqs, n=3)
    sqs.start_message_move_task(SourceArn=arn(sqs, dlq))
    clock.advance(1)
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert task["Status"] == "COMPLETED" and "DestinationArn" not in task and "MaxNumberOfMessagesPerSecond" not in task
    # Back with a fresh receive count: a first receive does not dead-letter them again.
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert len(got) == 3 and {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {"1"}


def test_cancel_stops_the_move_and_keeps_what_moved(moves, sqs, clock):
    queue, dlq = pipe(sqs, n=10)
    handle = sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, queue), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    clock.advance(2)
    assert shape_keys("CancelMessageMoveTask") == {"ApproximateNumberOfMessagesMoved"}
    assert sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"] == 2
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert task["Status"] == "CANCELLING"
    clock.advance(5)
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert task["Status"] == "CANCELLED" and task["ApproximateNumberOfMessagesMoved"] == 2
    assert count(sqs, dlq) == 8
    # A cancelled task frees the source: a new one may start.
    sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, queue))
    results = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq), MaxResults=10)["Results"]
    assert [r["Status"] for r in results] == ["RUNNING", "CANCELLED"]   # newest first
    assert len(sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]) == 1   # MaxResults defaults to 1


def test_a_task_fails_when_its_destination_is_deleted(moves, sqs, clock):
    queue, dlq = pipe(sqs, n=5)
    work = sqs.create_queue(QueueName="replay")["QueueUrl"]
    sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, work), MaxNumberOfMessagesPerSecond=1)
    clock.advance(2)
    sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))
    sqs.delete_queue(QueueUrl=work)
    clock.advance(2)
    [task] = sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))["Results"]
    assert task["Status"] == "FAILED" and task["FailureReason"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert task["ApproximateNumberOfMessagesMoved"] == 2 and count(sqs, dlq) == 3


# ---- errors, as AWS answers them -----------------------------------------------------


def test_the_source_must_be_a_dead_letter_queue(moves, sqs):
    plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    assert error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, plain), DestinationArn=arn(sqs, other))) == (
        "InvalidParameterValue",
        "Source queue must be configured as a Dead Letter Queue.",
    )


def anchored(sqs, allow=None):
    """Holdfast's expired-events queue as its stack makes it: a Lambda on-failure
    destination, made a redrive source by an anchor queue whose RedrivePolicy names it and
    that its RedriveAllowPolicy names alone (holdfast_cdk.constructs.queues)."""
    expired = sqs.create_queue(QueueName="holdfast-expired")["QueueUrl"]
    anchor_arn = arn(sqs, expired).replace("holdfast-expired", "holdfast-anchor")
    policy = allow or {"redrivePermission": "byQueue", "sourceQueueArns": [anchor_arn]}
    sqs.set_queue_attributes(QueueUrl=expired, Attributes={"RedriveAllowPolicy": json.dumps(policy)})
    sqs.create_queue(QueueName="holdfast-anchor", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn(sqs, expired), "maxReceiveCount": 1000})})
    for i in range(3):   # what Lambda delivers: on-failure records, straight into the queue
        sqs.send_message(QueueUrl=expired, MessageBody=json.dumps({"requestPayload": {"order": i}}))
    return expired


def test_an_on_failure_destination_alone_is_no_source_and_with_its_anchor_it_is(moves, sqs, clock):
    lone = sqs.create_queue(QueueName="lambda-destination")["QueueUrl"]
    sqs.send_message(QueueUrl=lone, MessageBody="{}")
    work = sqs.create_queue(QueueName="work")["QueueUrl"]
    assert error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, lone), DestinationArn=arn(sqs, work))) == (
        "InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
    expired = anchored(sqs)
    sqs.start_message_move_task(SourceArn=arn(sqs, expired), DestinationArn=arn(sqs, work), MaxNumberOfMessagesPerSecond=1)
    clock.advance(5)
    moves.advance()
    assert count(sqs, work) == 3 and count(sqs, expired) == 0


def test_a_source_the_redrive_allow_policy_excludes_does_not_make_a_dead_letter_queue(moves, sqs):
    work = sqs.create_queue(QueueName="work")["QueueUrl"]
    for allow in ({"redrivePermission": "denyAll"},
                  {"redrivePermission": "byQueue", "sourceQueueArns": [arn(sqs, work)]}):
        expired = anchored(sqs, allow)
        assert error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, expired), DestinationArn=arn(sqs, work))) == (
            "InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
        for url in (expired, sqs.get_queue_url(QueueName="holdfast-anchor")["QueueUrl"]):
            sqs.delete_queue(QueueUrl=url)


def test_missing_queues(moves, sqs):
    queue, dlq = pipe(sqs)
    gone = arn(sqs, dlq).replace("work-dlq", "nothing")
    assert error(lambda: sqs.start_message_move_task(SourceArn=gone)) == (
        "ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.")
    assert error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=gone)) == (
        "ResourceNotFoundException", "The resource that you specified for the DestinationArn parameter doesn't exist.")
    assert error(lambda: sqs.list_message_move_tasks(SourceArn=gone))[0] == "ResourceNotFoundException"


def test_only_one_active_task_per_source(moves, sqs):
    queue, dlq = pipe(sqs, n=5)
    sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, queue), MaxNumberOfMessagesPerSecond=1)
    assert error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, queue))) == (
        "InvalidParameterValue",
        "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
    )


@pytest.mark.parametrize("rate", [0, 501, 1000])
def test_the_rate_is_1_to_500(moves, sqs, rate):
    queue, dlq = pipe(sqs)
    code, message = error(lambda: sqs.start_message_move_task(SourceArn=arn(sqs, dlq), MaxNumberOfMessagesPerSecond=rate))
    assert code == "InvalidParameterValue" and "MaxNumberOfMessagesPerSecond" in message


@pytest.mark.parametrize("rate", [1, 500])
def test_rates_at_the_limits_are_accepted(moves, sqs, rate):
    queue, dlq = pipe(sqs)
    assert sqs.start_message_move_task(SourceArn=arn(sqs, dlq), MaxNumberOfMessagesPerSecond=rate)["TaskHandle"]


@pytest.mark.parametrize("n", [0, 11])
def test_max_results_is_1_to_10(moves, sqs, n):
    queue, dlq = pipe(sqs)
    assert error(lambda: sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq), MaxResults=n))[0] == "InvalidParameterValue"


def test_cancel_errors(moves, sqs, clock):
    queue, dlq = pipe(sqs, n=2)
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle="foobared")) == (
        "InvalidParameterValue", "Value for parameter TaskHandle is invalid.")
    missing_queue = encode_handle("10f57157-fc38-4da9-a113-4de7e12d05dd", arn(sqs, dlq).replace("work-dlq", "nothing"))
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle=missing_queue)) == (
        "ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.")
    missing_task = encode_handle("10f57157-fc38-4da9-a113-4de7e12d05aa", arn(sqs, dlq))
    assert error(lambda: sqs.cancel_message_move_task(TaskHandle=missing_task)) == ("ResourceNotFoundException", "Task does not exist.")
    handle = sqs.start_message_move_task(SourceArn=arn(sqs, dlq), DestinationArn=arn(sqs, queue))["TaskHandle"]
    clock.advance(1)
    sqs.list_message_move_tasks(SourceArn=arn(sqs, dlq))   # completed
    code, message = error(lambda: sqs.cancel_message_move_task(TaskHandle=handle))
    assert code == "InvalidParameterValue" and "RUNNING" in message


def test_botocore_validates_the_request_shape_before_the_emulation(moves, sqs):
    from botocore.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        sqs.start_message_move_task()   # SourceArn is required
    with pytest.raises(ParamValidationError):
        sqs.cancel_message_move_task()


def test_without_the_emulation_moto_has_no_move_tasks(aws, sqs):
    queue, dlq = pipe(sqs)
    with pytest.raises(NotImplementedError, match="start_message_move_task"):
        sqs.start_message_move_task(SourceArn=arn(sqs, dlq))
