"""The replay's decision per source (holdfast.core.replay), as a table of pure decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.core import replay as rp

SINCE = datetime(2025, 10, 20, 9, 0, tzinfo=timezone.utc)
NOW = SINCE + timedelta(hours=3)
LIMITS = rp.Limits(rate=10, max_attempts=3, clear_seconds=600)
DLQ = "arn:aws:sqs:us-east-1:123456789012:orders-dlq"


def fresh(**kw) -> rp.Replay:
    return rp.Replay(DLQ, rp.DLQ, SINCE, **kw)


def seen(**kw) -> rp.Seen:
    base = dict(exists=True, visible=100, redrive_sources=("arn:aws:sqs:us-east-1:123456789012:orders",),
                caught_up=True, caught_up_reason="at baseline")
    return rp.Seen(**{**base, **kw})


def task(status, minutes=1, moved=0, handle=None, **kw):
    return rp.Task(status, NOW - timedelta(minutes=minutes), moved, 100, handle, **kw)


@pytest.mark.parametrize("r, s, action, status, why", [
    (fresh(), seen(), rp.START, rp.RUNNING, "starting to move 100 messages to their source queue at 10/s"),
    (fresh(), seen(caught_up=False, caught_up_reason="orders: oldest message 900 s old"), rp.NOTHING, rp.WAITING,
     "waiting for the live queue to catch up"),
    (fresh(), seen(alarming=("db-slo",)), rp.NOTHING, rp.WAITING, "db-slo in ALARM"),
    (fresh(), seen(visible=0), rp.NOTHING, rp.DONE, "nothing to replay"),
    (fresh(), seen(exists=False), rp.NOTHING, rp.SKIPPED, "does not exist"),
    (fresh(), seen(redrive_sources=()), rp.NOTHING, rp.SKIPPED, "not a dead-letter queue of any SQS queue"),
    (fresh(), seen(caught_up=None, caught_up_reason="no datapoint"), rp.NOTHING, rp.SKIPPED, "cannot tell"),
    (fresh(), seen(problem="no destination"), rp.NOTHING, rp.SKIPPED, "no destination"),
    # running: watched, cancelled on an alarm
    (fresh(status=rp.RUNNING, rate=10, attempts=1), seen(tasks=(task("RUNNING", moved=40, handle="h"),)),
     rp.NOTHING, rp.RUNNING, "40 of 100 moved"),
    (fresh(status=rp.RUNNING, rate=10, attempts=1), seen(tasks=(task("RUNNING", moved=40, handle="h"),), alarming=("db-slo",)),
     rp.CANCEL, rp.CANCELLED, "db-slo in ALARM: move task cancelled after 40"),
    # finished tasks
    (fresh(status=rp.RUNNING, rate=10, attempts=1, task_started=NOW - timedelta(minutes=1)),
     seen(tasks=(task("COMPLETED", moved=100),), visible=0), rp.NOTHING, rp.DONE, "replayed: 100 messages moved"),
    (fresh(status=rp.RUNNING, rate=10, attempts=1, task_started=NOW - timedelta(minutes=1)),
     seen(tasks=(task("FAILED", moved=3, failure="AWS.SimpleQueueService.NonExistentQueue"),)), rp.NOTHING, rp.SKIPPED,
     "the move task failed (AWS.SimpleQueueService.NonExistentQueue)"),
    # a task the owner ran before the hold is not this replay's
    (fresh(), seen(tasks=(rp.Task("RUNNING", SINCE - timedelta(hours=1), 5, 100, "old"),)), rp.START, rp.RUNNING, "starting"),
    # cancelled: waits for the alarms to be OK a while, then half the rate; gives up after the attempts
    (fresh(status=rp.CANCELLED, rate=10, attempts=1, cancelled_at=NOW - timedelta(minutes=5)), seen(), rp.NOTHING,
     rp.CANCELLED, "starting again in 5 min"),
    (fresh(status=rp.CANCELLED, rate=10, attempts=1, cancelled_at=NOW - timedelta(minutes=11)), seen(), rp.START,
     rp.RUNNING, "at 5/s"),
    (fresh(status=rp.CANCELLED, rate=10, attempts=3, cancelled_at=NOW - timedelta(minutes=11)), seen(), rp.NOTHING,
     rp.GAVE_UP, "gave up after 3 starts"),
])
def test_decide(r, s, action, status, why):
    a = rp.decide(r, s, NOW, LIMITS)
    assert (a.action, a.replay.status) == (action, status), a.replay.reason
    assert why in a.replay.reason, a.replay.reason
    if action == rp.START:
        assert a.rate == a.replay.rate and a.replay.attempts == r.attempts + 1
    if action == rp.CANCEL:
        assert a.handle == "h"


def test_a_task_started_by_a_crashed_tick_is_adopted_never_started_twice():
    """The tick that started it died before writing it down: the record still says WAITING."""
    a = rp.decide(fresh(), seen(tasks=(task("RUNNING", moved=10, handle="h"),)), NOW, LIMITS)
    assert a.action == rp.NOTHING and a.replay.status == rp.RUNNING and a.replay.handle == "h"
    done = rp.decide(fresh(), seen(tasks=(task("COMPLETED", moved=100),), visible=0), NOW, LIMITS)
    assert done.action == rp.NOTHING and done.replay.status == rp.DONE and done.replay.moved == 100


def test_a_finished_replay_is_never_started_again():
    for status in rp.TERMINAL:
        a = rp.decide(fresh(status=status), seen(visible=500), NOW, LIMITS)
        assert a.action == rp.NOTHING and a.replay.status == status


def test_a_refused_start_is_a_clear_end_or_is_watched_when_a_task_already_runs():
    a = rp.decide(fresh(), seen(), NOW, LIMITS)
    ended = rp.start_refused(a, "InvalidParameterValue: Source queue must be configured as a Dead Letter Queue.", NOW,
                             already_running=False)
    assert ended.status == rp.SKIPPED and "Dead Letter Queue" in ended.reason
    running = rp.start_refused(a, "There is already a task running.", NOW, already_running=True)
    assert running.status == rp.WAITING and running.attempts == 0


def test_records_round_trip_and_bad_ones_are_clear_errors():
    r = replace(fresh(), status=rp.RUNNING, handle="h", task_started=NOW, history=("09:00 started at 10/s",))
    assert rp.Replay.from_dict(r.to_dict()) == r
    with pytest.raises(ValueError, match="replay status 'lost'"):
        rp.Replay(DLQ, rp.DLQ, SINCE, status="lost")
    with pytest.raises(ValueError, match="replay record is malformed"):
        rp.Replay.from_dict({"kind": rp.DLQ})
    with pytest.raises(ValueError, match="replay rate 501"):
        rp.Limits(rate=501, max_attempts=1)
