"""The replay stage against the emulated SQS message-move API (holdfast_fixtures.message_moves):
start at the bounded rate, progress, cancel on a downstream alarm, idempotent across ticks
and across a crash between the start and its record, and bad input with a clear outcome
that never stalls the plan."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.clock import FakeClock
from holdfast.core import replay as rp
from holdfast.core.errors import StalePlan
from holdfast.core.model import no_guard
from holdfast.core.policy import REPLAY, Plan
from holdfast.ledger import Ledger
from holdfast.ledger import drain as records
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.leases import guard_factory
from holdfast.observation.cloudwatch import PERIOD, complete_until
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast.stages import replay as stage
from holdfast_fixtures.message_moves import MessageMoves

T0 = datetime(2025, 10, 20, 9, 0, tzinfo=timezone.utc)   # the hold began
NOW = T0 + timedelta(hours=3)
TAG = {"holdfast:replay": "true"}
SETTINGS = Settings.from_mapping({"mode": "auto", "replay_messages_per_second": 4, "drain_downstream_alarms": {"work": ["db-slo"]}})


class Crash(BaseException):
    """The Lambda died here."""


@pytest.fixture
def clock():
    return FakeClock(NOW)


@pytest.fixture
def moves(aws, clock):
    with MessageMoves(clock).installed() as emulator:
        yield emulator


def arn(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def depth(sqs, url):
    return int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"])


def pipe(sqs, name="work", n=20, *, tag_dlq=True, tag_source=True):
    """name -> name-dlq (maxReceiveCount 1), with n messages dead-lettered; tags as asked."""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq", tags=TAG if tag_dlq else {})["QueueUrl"]
    queue = sqs.create_queue(QueueName=name, tags=TAG if tag_source else {}, Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn(sqs, dlq), "maxReceiveCount": 1})})["QueueUrl"]
    for i in range(0, n, 10):
        sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(j), "MessageBody": f"m{i + j}"} for j in range(min(10, n - i))])
    while depth(sqs, queue):
        sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0, MaxNumberOfMessages=10)
    sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0, MaxNumberOfMessages=10)   # the receive that dead-letters
    return queue, dlq


def publish_age(clients, queue_name, when, seconds=2.0):
    """The queue's ApproximateAgeOfOldestMessage as SQS publishes it (moto publishes no SQS
    metrics; real CloudWatch refuses PutMetricData into AWS/, moto accepts it). Redriven
    messages are new messages (new enqueue time), so a queue fed by a replay stays young.
    Stamped at the newest minute a reader at `when` sees complete (observation.cloudwatch)."""
    clients("cloudwatch").put_metric_data(Namespace="AWS/SQS", MetricData=[{
        "MetricName": "ApproximateAgeOfOldestMessage", "Dimensions": [{"Name": "QueueName", "Value": queue_name}],
        "Timestamp": complete_until(when) - PERIOD, "Value": seconds}])


def in_replay(clients, table, generation=1):
    plan = Plan(generation=generation, stage=REPLAY, entered_at=NOW - timedelta(minutes=5), impaired_at=T0)
    ledger_plan.write(Ledger(clients("dynamodb"), table), plan, controller_id="test", now=NOW)
    return plan


def runtime(clients, table, clock, settings=SETTINGS, **kw):
    return Runtime(clients, settings, table, clock, controller_id="test", **kw)


def guard(clients, table, clock, generation=1):
    return guard_factory(Ledger(clients("dynamodb"), table), controller_id="test", clock=clock)(generation)


def record(clients, table, source):
    return rp.Replay.from_dict(records.read_all(Ledger(clients("dynamodb"), table), records.REPLAY)[source].doc["replay"])


def test_a_dlq_replays_to_its_source_at_the_rate_then_is_done(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    queue, dlq = pipe(sqs)
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock)

    done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert not done.finished
    [(name, call)] = [c for c in moves.calls if c[0] == "StartMessageMoveTask"]
    assert call == {"SourceArn": arn(sqs, dlq), "DestinationArn": None, "MaxNumberOfMessagesPerSecond": 4}
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert (r.status, r.attempts, r.rate) == (rp.RUNNING, 1, 4) and r.handle

    clock.advance(3)   # 12 of 20 at 4/s
    publish_age(clients, "work", clock.now())
    done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert "12 of 20 moved" in record(clients, ledger_table, arn(sqs, dlq)).reason
    assert depth(sqs, queue) == 12 and depth(sqs, dlq) == 8

    clock.advance(5)
    done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert done.finished and r.status == rp.DONE and r.moved == 20, r
    assert depth(sqs, queue) == 20 and depth(sqs, dlq) == 0
    # Idempotent: more ticks start nothing.
    clock.advance(60)
    stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert sum(1 for c in moves.calls if c[0] == "StartMessageMoveTask") == 1


def test_a_downstream_alarm_cancels_the_move_and_it_restarts_at_half_the_rate(clients, ledger_table, moves, clock):
    sqs, cw = clients("sqs"), clients("cloudwatch")
    queue, dlq = pipe(sqs, n=40)
    cw.put_metric_alarm(AlarmName="db-slo", MetricName="Latency", Namespace="App", Statistic="Average", Period=60,
                        EvaluationPeriods=1, Threshold=0.25, ComparisonOperator="GreaterThanThreshold")
    cw.set_alarm_state(AlarmName="db-slo", StateValue="OK", StateReason="fine")
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock)
    g = lambda: guard(clients, ledger_table, clock)

    stage.step(rt, plan, clock.now(), guard=g())
    clock.advance(2)
    cw.set_alarm_state(AlarmName="db-slo", StateValue="ALARM", StateReason="latency over the SLO")
    publish_age(clients, "work", clock.now())
    stage.step(rt, plan, clock.now(), guard=g())
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert r.status == rp.CANCELLED and "db-slo in ALARM" in r.reason and r.moved == 8
    assert [c[0] for c in moves.calls].count("CancelMessageMoveTask") == 1
    clock.advance(2)
    moved = depth(sqs, queue)
    stage.step(rt, plan, clock.now(), guard=g())   # still in ALARM: waits, no second cancel, no start
    assert [c[0] for c in moves.calls].count("StartMessageMoveTask") == 1 and depth(sqs, queue) == moved

    cw.set_alarm_state(AlarmName="db-slo", StateValue="OK", StateReason="fine again")
    publish_age(clients, "work", clock.now())
    stage.step(rt, plan, clock.now(), guard=g())
    assert "starting again in" in record(clients, ledger_table, arn(sqs, dlq)).reason   # OK for a hold first
    clock.advance(SETTINGS.hold_minutes * 60)
    publish_age(clients, "work", clock.now())
    stage.step(rt, plan, clock.now(), guard=g())
    starts = [c[1] for c in moves.calls if c[0] == "StartMessageMoveTask"]
    assert [s["MaxNumberOfMessagesPerSecond"] for s in starts] == [4, 2]
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert (r.status, r.attempts, r.rate) == (rp.RUNNING, 2, 2)


def test_a_kms_encrypted_dlq_says_what_its_key_needs_and_a_denied_key_ends_the_replay_with_the_statement(
        clients, ledger_table, aws, clock):
    """A move task reads and sends with the reconciler's permissions: a customer-managed key
    must let it (the tag its IAM statement is scoped to, and the key policy). The outcome an
    operator reads names the key and carries the key-policy statement to add."""
    sqs = clients("sqs")
    key = clients("kms").create_key(Description="orders DLQ")["KeyMetadata"]["Arn"]
    queue, dlq = pipe(sqs)
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"KmsMasterKeyId": key})
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock)
    with MessageMoves(clock, denied_keys=frozenset({key})).installed():
        stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
        r = record(clients, ledger_table, arn(sqs, dlq))
        assert r.status == rp.RUNNING and f"the move uses the KMS key(s) {key}" in r.reason
        assert "holdfast:replay=true" in r.reason
        clock.advance(2)
        publish_age(clients, "work", clock.now())
        done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    r = done.replays[arn(sqs, dlq)]
    assert r.status == rp.SKIPPED and "KMS.AccessDeniedException" in r.reason and key in r.reason, r
    statement = json.loads(r.reason.split("in its key policy, ", 1)[1])
    assert statement == rp.key_policy_statement(arn(sqs, dlq))
    assert statement["Condition"]["StringEquals"]["kms:ViaService"] == "sqs.us-east-1.amazonaws.com"
    assert statement["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert depth(sqs, dlq) == 20 and depth(sqs, queue) == 0   # nothing moved


def test_a_dlq_with_the_aws_managed_key_needs_no_key_grant(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    queue, dlq = pipe(sqs)
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    stage.step(runtime(clients, ledger_table, clock), in_replay(clients, ledger_table), clock.now(),
               guard=guard(clients, ledger_table, clock))
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert r.status == rp.RUNNING and "KMS" not in r.reason


def test_a_crash_between_the_start_and_its_record_is_adopted_not_started_twice(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    queue, dlq = pipe(sqs)
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock)

    def die(**_):
        raise Crash("died before the record")

    events = clients("dynamodb").meta.events
    events.register_first("before-call.dynamodb.TransactWriteItems", die)
    try:
        with pytest.raises(Crash):
            stage.step(rt, plan, clock.now(), guard=no_guard)
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", die)
    assert [c[0] for c in moves.calls].count("StartMessageMoveTask") == 1
    assert arn(sqs, dlq) not in records.read_all(Ledger(clients("dynamodb"), ledger_table), records.REPLAY)

    clock.advance(2)
    stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert [c[0] for c in moves.calls].count("StartMessageMoveTask") == 1   # adopted
    r = record(clients, ledger_table, arn(sqs, dlq))
    assert r.status == rp.RUNNING and r.handle and "8 of 20 moved" in r.reason
    clock.advance(10)
    assert stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock)).finished
    assert record(clients, ledger_table, arn(sqs, dlq)).status == rp.DONE and depth(sqs, queue) == 20


def test_a_stale_plan_starts_nothing(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    pipe(sqs)
    plan = in_replay(clients, ledger_table)
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), Plan(generation=2, stage=REPLAY, entered_at=NOW, impaired_at=T0),
                      controller_id="other", now=NOW)
    with pytest.raises(StalePlan):
        stage.step(runtime(clients, ledger_table, clock), plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert not [c for c in moves.calls if c[0] == "StartMessageMoveTask"]


@pytest.mark.parametrize("case, why", [
    ("not a dlq", "not a dead-letter queue of any SQS queue"),
    ("untagged source", "lack the tag holdfast:replay=true"),
    ("deleted", "does not exist"),
    ("live queue without a metric", "cannot tell whether the live queue caught up"),
])
def test_bad_input_gives_a_clear_outcome_and_never_stalls(clients, ledger_table, moves, clock, case, why):
    sqs = clients("sqs")
    if case == "not a dlq":
        lone = sqs.create_queue(QueueName="lone", tags=TAG)["QueueUrl"]
        sqs.send_message(QueueUrl=lone, MessageBody="x")
        source = arn(sqs, lone)
    elif case == "untagged source":
        _, dlq = pipe(sqs, tag_source=False)
        source = arn(sqs, dlq)
    elif case == "deleted":
        # The expired-events queue is a source whatever its tags: here it was deleted.
        gone = sqs.create_queue(QueueName="holdfast-expired")["QueueUrl"]
        source = arn(sqs, gone)
        sqs.delete_queue(QueueUrl=gone)
    else:
        queue, dlq = pipe(sqs)
        sqs.send_message(QueueUrl=queue, MessageBody="live and waiting")   # no age datapoint, not empty
        source = arn(sqs, dlq)
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock, expired_queue_arn=source if case == "deleted" else None)
    done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    r = done.replays[source]
    assert done.finished and r.status == rp.SKIPPED and why in r.reason, r
    assert not [c for c in moves.calls if c[0] == "StartMessageMoveTask"]


def test_the_expired_events_queue_needs_a_destination_and_a_redrive_source(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    expired = sqs.create_queue(QueueName="holdfast-expired")["QueueUrl"]
    sqs.send_message(QueueUrl=expired, MessageBody=json.dumps({"requestPayload": {"order": 1}}))
    plan = in_replay(clients, ledger_table)
    # No destination set: reported, kept.
    done = stage.step(runtime(clients, ledger_table, clock, expired_queue_arn=arn(sqs, expired)), plan, clock.now(),
                      guard=guard(clients, ledger_table, clock))
    r = done.replays[arn(sqs, expired)]
    assert done.finished and r.status == rp.SKIPPED and "set replay_expired_events_to" in r.reason


def test_the_expired_events_queue_replays_to_its_destination(clients, ledger_table, moves, clock):
    sqs = clients("sqs")
    expired = sqs.create_queue(QueueName="holdfast-expired")["QueueUrl"]
    # An SQS queue whose RedrivePolicy names it: StartMessageMoveTask moves only from DLQs of SQS queues.
    sqs.create_queue(QueueName="holdfast-expired-source", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn(sqs, expired), "maxReceiveCount": 1})})
    target = sqs.create_queue(QueueName="orders-replay", tags=TAG)["QueueUrl"]
    for i in range(5):
        sqs.send_message(QueueUrl=expired, MessageBody=json.dumps({"requestPayload": {"order": i}}))
    settings = Settings.from_mapping({"mode": "auto", "replay_expired_events_to": arn(sqs, target), "replay_messages_per_second": 5})
    plan = in_replay(clients, ledger_table)
    rt = runtime(clients, ledger_table, clock, settings, expired_queue_arn=arn(sqs, expired))
    stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    clock.advance(2)
    done = stage.step(rt, plan, clock.now(), guard=guard(clients, ledger_table, clock))
    assert done.finished and done.replays[arn(sqs, expired)].status == rp.DONE
    assert depth(sqs, target) == 5 and depth(sqs, expired) == 0


def test_the_reconciler_runs_the_replay_and_marks_it_done(clients, ledger_table, moves, clock):
    """Through the tick: the replay stage's walk, then `replay` done; the next decision advances."""
    from tests.support.fakes import Script

    sqs = clients("sqs")
    queue, dlq = pipe(sqs, n=8)
    in_replay(clients, ledger_table)
    script = Script(state="recovering", since=T0, last_successful_launch=T0)
    rt = runtime(clients, ledger_table, clock)
    first = tick(rt, collect=script.collect)
    assert first.stage == REPLAY and "replay" not in first.actions
    assert any(o.kind == "replay" and o.action == "replay-running" for o in first.outcomes)
    clock.advance(60)
    second = tick(rt, collect=script.collect)
    assert "replay" in second.actions and depth(sqs, queue) == 8
    clock.advance(60)
    assert tick(rt, collect=script.collect).stage == "fresh-work"


def test_holdfast_stage_shows_each_replay(clients, ledger_table, moves, clock, capsys, monkeypatch):
    from holdfast.cli import main

    sqs = clients("sqs")
    _, dlq = pipe(sqs, n=8)
    plan = in_replay(clients, ledger_table)
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: clock)
    stage.step(runtime(clients, ledger_table, clock), plan, clock.now(), guard=guard(clients, ledger_table, clock))
    capsys.readouterr()
    assert main(["--json", "stage"]) == 0
    [row] = json.loads(capsys.readouterr().out)["replay"]
    assert (row["source"], row["kind"], row["status"], row["rate"], row["attempts"]) == (arn(sqs, dlq), rp.DLQ, rp.RUNNING, 4, 1)
    assert main(["stage"]) == 0
    assert "replay      1 source(s)" in capsys.readouterr().out


def test_a_dlq_whose_owner_removed_the_opt_in_is_not_moved_while_the_tag_index_still_lists_it(
        clients, ledger_table, moves, clock):
    """The tagging index that finds the opted-in queues lags behind the queues' own tags:
    the opt-in is confirmed with ListQueueTags just before a move."""
    from holdfast_fixtures.moto_patches import lagging_tag_index
    from tests.support.fakes import Script

    sqs = clients("sqs")
    queue, dlq = pipe(sqs, n=8)
    in_replay(clients, ledger_table)
    script = Script(state="recovering", since=T0, last_successful_launch=T0)
    with lagging_tag_index(clients("resourcegroupstaggingapi")):
        assert arn(sqs, dlq) in stage.tagged_queues(clients)       # the index as it was
        sqs.untag_queue(QueueUrl=dlq, TagKeys=["holdfast:replay"])   # the owner opts out
        assert arn(sqs, dlq) in stage.tagged_queues(clients)       # the index has not caught up

        result = tick(runtime(clients, ledger_table, clock), collect=script.collect)

    assert [c for c in moves.calls if c[0] == "StartMessageMoveTask"] == []
    assert depth(sqs, dlq) == 8 and depth(sqs, queue) == 0
    [outcome] = [o for o in result.outcomes if o.kind == "replay"]
    assert outcome.action == "replay-skipped" and "no longer tagged holdfast:replay=true" in outcome.changes["replay"]["why"]
    assert record(clients, ledger_table, arn(sqs, dlq)).finished
