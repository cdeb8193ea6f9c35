"""The drain's readers: whole minutes only, a mapping's own metrics when it publishes them,
shared metrics apportioned, and why a mapping's evidence can never be read.

GetMetricData is the emulation of tests/core/drain (AWS's documented window and order); the
Lambda and SQS reads a tick makes besides are answered by `Clients`, which records them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from botocore.exceptions import ClientError

from holdfast.core import drain as dc
from holdfast.core.drain import share
from holdfast.core.drain.inputs import whole_minute
from holdfast.observation import drain_inputs
from tests.core.drain.test_drain_evidence import FakeCloudWatch

T0 = datetime(2025, 10, 20, 9, 40, tzinfo=timezone.utc)
HERE = "123456789012"


def m(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def series(values: dict[int, float]) -> dict[datetime, float]:
    return {m(k): v for k, v in values.items()}


def consumer(*, timeout=None, event_counts=False, queue_account=HERE, uuid="u1", function="consumer"):
    return drain_inputs.Consumer(f"arn:aws:lambda:us-east-1:{HERE}:event-source-mapping:{uuid}", uuid,
                                 f"arn:aws:lambda:us-east-1:{HERE}:function:{function}",
                                 f"arn:aws:sqs:us-east-1:{queue_account}:orders", timeout=timeout,
                                 event_counts=event_counts)


class Clients:
    """CloudWatch from the emulation; Lambda's GetFunction and SQS's reads answered as
    scripted (an error code, or a success), every call recorded."""

    def __init__(self, cw, *, function_error=None, sqs_error=None, visible=0):
        self.cw, self.function_error, self.sqs_error, self.visible = cw, function_error, sqs_error, visible
        self.calls: list[str] = []

    def __call__(self, service):
        return {"cloudwatch": self.cw, "lambda": self, "sqs": self}[service]

    def _fail(self, code, op):
        raise ClientError({"Error": {"Code": code, "Message": code}}, op)

    def get_function(self, FunctionName):
        self.calls.append(f"GetFunction {FunctionName}")
        if self.function_error:
            self._fail(self.function_error, "GetFunction")
        return {"Configuration": {"Timeout": 3}}

    def get_queue_url(self, QueueName, QueueOwnerAWSAccountId):
        self.calls.append(f"GetQueueUrl {QueueOwnerAWSAccountId}:{QueueName}")
        if self.sqs_error:
            self._fail(self.sqs_error, "GetQueueUrl")
        return {"QueueUrl": f"https://sqs/{QueueName}"}

    def get_queue_attributes(self, QueueUrl, AttributeNames):
        self.calls.append("GetQueueAttributes")
        return {"Attributes": {"ApproximateNumberOfMessages": str(self.visible)}}


def test_a_minute_is_whole_once_its_invocations_ended_and_were_published():
    assert not whole_minute(m(0), 300, m(7), 120)          # 5-minute invocations may still run at 6:00
    assert whole_minute(m(0), 300, m(8), 120)              # 0:00 + 1 + 5 + 2 minutes
    assert whole_minute(m(0), None, m(3), 120) and not whole_minute(m(0), None, m(2.9), 120)


def test_a_long_consumers_partial_minute_is_not_judged():
    """Lambda stamps Duration at an invocation's start: minute 4 of a consumer whose
    invocations take up to five minutes holds only the invocations that have ended, and
    reads fast. At 9:30 the judged minute is 1 (whole: 1 + 1 + 5 + 2 minutes), not 4
    (published, partial)."""
    cw = FakeCloudWatch({
        ("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"): series({1: 600, 2: 600, 3: 600, 4: 600}),
        ("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"): series({1: 600, 2: 600, 3: 600, 4: 600}),
        ("AWS/Lambda", "Duration", "Sum", "consumer"): series({1: 6_000_000, 2: 6_000_000, 3: 3_000_000,
                                                              4: 600_000}),
        ("AWS/Lambda", "Invocations", "Sum", "consumer"): series({1: 60, 4: 6}),
    })
    now = m(9.5)
    long = consumer(timeout=300)
    got = drain_inputs.readings(Clients(cw), [long], now, stale_seconds=600, live_for=())[long.arn]
    assert got.duration.at == m(1) and got.received.at == m(1) and got.duration.value == 6_000_000
    assert got.invocations.at == m(1)
    # Without a timeout (unknown) the lag alone: minute 4 is whole (4 + 1 + 2 minutes).
    short = consumer(timeout=None)
    got = drain_inputs.readings(Clients(cw), [short], now, stale_seconds=600, live_for=())[short.arn]
    assert got.duration.at == m(4)


def test_a_mappings_own_metrics_are_read_when_it_publishes_them():
    cw = FakeCloudWatch({
        ("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"): series({3: 2000}),
        ("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"): series({3: 2000}),
        ("AWS/Lambda", "PolledEventCount", "Sum", "u1"): series({3: 500}),
        ("AWS/Lambda", "DeletedEventCount", "Sum", "u1"): series({3: 450}),
        ("AWS/Lambda", "Duration", "Sum", "consumer"): series({3: 400_000}),
    })
    own = consumer(event_counts=True)
    got = drain_inputs.readings(Clients(cw), [own], m(7), stale_seconds=600, live_for=())[own.arn]
    assert (got.received.value, got.deleted.value, got.per_mapping) == (500, 450, True)
    queue = consumer(event_counts=False)
    got = drain_inputs.readings(Clients(cw), [queue], m(7), stale_seconds=600, live_for=())[queue.arn]
    assert (got.received.value, got.deleted.value, got.per_mapping) == (2000, 2000, False)


def test_the_event_count_setting_is_read_from_the_listing():
    class Paged:
        def get_paginator(self, _):
            return self

        def paginate(self):
            fn = f"arn:aws:lambda:us-east-1:{HERE}:function:consumer"
            return [{"EventSourceMappings": [
                {"UUID": "u1", "FunctionArn": fn, "EventSourceArn": f"arn:aws:sqs:us-east-1:{HERE}:a",
                 "MetricsConfig": {"Metrics": ["EventCount"]}},
                {"UUID": "u2", "FunctionArn": fn, "EventSourceArn": f"arn:aws:sqs:us-east-1:{HERE}:b"},
            ]}]

    listed = drain_inputs.mappings(lambda _: Paged())
    assert sorted((m.uuid, m.event_counts) for m in listed.values()) == [("u1", True), ("u2", False)]


def test_shared_sums_are_apportioned_unless_the_mapping_has_its_own():
    members = {"a": share.Member("a", "fn", "q1", 10), "b": share.Member("b", "fn", "q2", 30),
               "c": share.Member("c", "other", "q2", None)}
    got = share.shares(members)
    assert got["a"].function == 0.25 and got["b"].function == 0.75 and got["a"].queue == 1.0
    assert got["b"].queue == 0.5 and got["c"].queue == 0.5      # an uncapped reader: equal shares
    point = lambda v: dc.Datapoint(m(0), v)
    r = dc.Reading(None, point(100), None, None, received=point(40), deleted=point(40), duration=point(8000),
                   invocations=point(20))
    cut = share.apportion(r, got["b"])
    assert (cut.duration.value, cut.invocations.value, cut.received.value, cut.visible.value) == (6000, 15, 20, 50)
    own = share.apportion(replace(r, per_mapping=True), got["b"])
    assert (own.received.value, own.deleted.value, own.visible.value) == (40, 40, 50)


def test_one_functions_caps_together_stay_within_its_budget():
    """20 carried before the event, a step of 2: two mappings that each want 41 share 22."""
    got = share.allot(22, [share.Want("a", 2, 41), share.Want("b", 2, 41)])
    assert got == {"a": 11, "b": 11}
    # A cut is never limited; the room it leaves goes to the raise.
    assert share.allot(22, [share.Want("a", 20, 14), share.Want("b", 2, 41)]) == {"b": 8}
    assert share.allot(100, [share.Want("a", 2, 41), share.Want("b", 2, 41)]) == {}


def test_a_queue_in_another_account_is_unreachable_and_never_read():
    cw = FakeCloudWatch({})
    c = consumer(queue_account="210987654321")
    clients = Clients(cw)
    got = drain_inputs.readings(clients, [c], m(7), stale_seconds=600)[c.arn]
    assert got.unreachable and "in account 210987654321" in got.unreachable
    assert not [call for call in clients.calls if call.startswith("GetQueue")]   # our policy would deny it


def test_a_denied_live_read_and_a_deleted_function_say_why():
    cw = FakeCloudWatch({})
    c = consumer()
    denied = drain_inputs.readings(Clients(cw, sqs_error="AccessDenied"), [c], m(7), stale_seconds=600)[c.arn]
    assert denied.unreachable and "was denied" in denied.unreachable and denied.visible_now is None
    gone = Clients(cw, function_error="ResourceNotFoundException")
    got = drain_inputs.readings(gone, [c], m(7), stale_seconds=600)[c.arn]
    assert got.unreachable and "no longer exists" in got.unreachable
    # A function that still shows Invocations is not asked for.
    busy = FakeCloudWatch({("AWS/Lambda", "Invocations", "Sum", "consumer"): series({3: 10})})
    clients = Clients(busy, function_error="ResourceNotFoundException")
    assert drain_inputs.readings(clients, [c], m(7), stale_seconds=600)[c.arn].unreachable is None
    assert not [call for call in clients.calls if call.startswith("GetFunction")]


def test_the_redrive_policy_says_whether_the_queue_has_a_dead_letter_queue():
    class Sqs(Clients):
        def __init__(self, policy):
            super().__init__(None)
            self.policy = policy

        def get_queue_attributes(self, QueueUrl, AttributeNames):
            return {"Attributes": {} if self.policy is None else {"RedrivePolicy": self.policy}}

    queue = f"arn:aws:sqs:us-east-1:{HERE}:orders"
    assert drain_inputs.redrive(Sqs('{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:1:dlq", "maxReceiveCount": 5}'),
                                queue) == (True, None)
    assert drain_inputs.redrive(Sqs(None), queue) == (False, None)
    has, note = drain_inputs.redrive(Sqs("not json"), queue)
    assert has is None and "not JSON" in note


def test_plan_warns_of_mappings_that_share_a_function_or_a_queue():
    fn = f"arn:aws:lambda:us-east-1:{HERE}:function:consumer"
    q = lambda name: f"arn:aws:sqs:us-east-1:{HERE}:{name}"
    arn = lambda u: f"arn:aws:lambda:us-east-1:{HERE}:event-source-mapping:{u}"
    listed = {arn("u1"): drain_inputs.Listed(arn("u1"), "u1", fn, q("a"), 10),
              arn("u2"): drain_inputs.Listed(arn("u2"), "u2", fn, q("b"), None),
              arn("u3"): drain_inputs.Listed(arn("u3"), "u3", f"{fn}-other", q("b"), None, event_counts=True),
              arn("u4"): drain_inputs.Listed(arn("u4"), "u4", f"{fn}-alone", q("c"), None)}
    got = drain_inputs.sharing(listed, [arn("u1")])
    assert len(got) == 1 and "share the function consumer (u1, u2)" in got[0] and "EventCount for u1, u2" in got[0]
    got = drain_inputs.sharing(listed, [arn("u2")])
    assert any("share the queue b (u2, u3)" in w and "EventCount for u2" in w for w in got) and len(got) == 2
    assert drain_inputs.sharing(listed, [arn("u4")]) == []


@pytest.mark.parametrize("comparison, threshold, expected", [
    ("GreaterThanThreshold", 0.25, [1]),
    ("GreaterThanOrEqualToThreshold", 0.25, [1, 2]),
    ("LessThanThreshold", 0.25, [0]),
    ("LessThanOrEqualToThreshold", 0.25, [0, 2]),
    # An anomaly band has no static threshold: nothing can be said of a minute.
    ("LessThanLowerOrGreaterThanUpperThreshold", None, []),
])
def test_an_alarms_breached_minutes_follow_its_comparison_operator(comparison, threshold, expected):
    points = [dc.Datapoint(m(0), 0.1), dc.Datapoint(m(1), 0.5), dc.Datapoint(m(2), 0.25)]
    info = drain_inputs.AlarmInfo("db-slo", "OK", metric={"Namespace": "App"}, threshold=threshold,
                                  comparison=comparison)
    assert drain_inputs.breached(info, points) == tuple(m(k) for k in expected)


@pytest.mark.parametrize("comparison, threshold, expected", [
    ("GreaterThanThreshold", 0.25, (0.4, 2.0, 1.0)),
    ("GreaterThanOrEqualToThreshold", 0.5, (0.2, 1.0, 0.5)),
    # A lower limit, an anomaly band, a threshold of 0: no share of a limit to report.
    ("LessThanThreshold", 0.25, ()),
    ("LessThanLowerOrGreaterThanUpperThreshold", None, ()),
    ("GreaterThanThreshold", 0.0, ()),
])
def test_an_alarms_levels_are_its_metric_as_shares_of_an_upper_threshold(comparison, threshold, expected):
    points = [dc.Datapoint(m(0), 0.1), dc.Datapoint(m(1), 0.5), dc.Datapoint(m(2), 0.25)]
    info = drain_inputs.AlarmInfo("db-slo", "OK", metric={"Namespace": "App"}, threshold=threshold,
                                  comparison=comparison)
    got = drain_inputs.levels(info, points)
    assert tuple(round(p.value, 6) for p in got) == expected
    assert all(p.at == m(k) for k, p in enumerate(got))
