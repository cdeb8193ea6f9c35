"""The reconciler's drain through the controller, on moto with the real engine: the cap
moves as the controller decides (start from the pre-event concurrency, raise on a fresh
OK datapoint, hold until one, cut once per alarming datapoint, the owner's original back
once caught up), every step recorded in the ledger under the plan generation; a stale plan
refuses the raise; bad input (a missing metric, a deleted queue, a misnamed alarm) gives a
clear reason and never stalls the drain.

Moto publishes no SQS or Lambda metrics: `Cloud` puts the datapoints those services would
publish (AWS/SQS by QueueName, AWS/Lambda by FunctionName) and the downstream's latency,
the services' with `publish_service_metrics` (real CloudWatch refuses PutMetricData into an
AWS/ namespace, and so does the fixtures' patch), the downstream's with PutMetricData."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.clock import FakeClock
from holdfast.core import drain as dc
from holdfast.core.model import REFUSED_STALE
from holdfast.core.policy import DRAIN, HOLD, Plan
from holdfast.ledger import Ledger
from holdfast.ledger import drain as records
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast.stages import drain as stage
from holdfast_fixtures.moto_patches import publish_service_metrics
from tests.support.fakes import Script
from tests.support.fleet import aws_semantics, make_function, make_mapping  # noqa: F401  (a fixture)

T0 = datetime(2025, 10, 20, 9, 0, tzinfo=timezone.utc)
ACCOUNT, REGION = "123456789012", "us-east-1"
SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "lambda_writes_per_second": 15})

pytestmark = pytest.mark.usefixtures("aws_semantics")


def minute(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


class Cloud:
    """The datapoints SQS, Lambda and the downstream would publish for one consumer."""

    def __init__(self, clients, queue="orders", function="consumer"):
        self.cw, self.queue, self.function = clients("cloudwatch"), queue, function

    def put(self, at: datetime, *, age=None, visible=None, sent=None, deleted=None, errors=None, throttles=None,
            concurrency=None, latency=None, received=None, ms_per_message=800.0):
        """`received` defaults to `deleted` (nothing failing), Duration's sum to
        `ms_per_message` for each message received (the consumer's baseline speed)."""
        data = []
        received = deleted if received is None else received
        duration = None if received is None or ms_per_message is None else received * ms_per_message

        def add(namespace, name, dim, value, metric):
            if metric is not None:
                data.append((namespace, {"MetricName": name, "Dimensions": [{"Name": dim, "Value": value}],
                                         "Timestamp": at, "Value": float(metric)}))

        add("AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", self.queue, age)
        add("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", self.queue, visible)
        add("AWS/SQS", "NumberOfMessagesSent", "QueueName", self.queue, sent)
        add("AWS/SQS", "NumberOfMessagesDeleted", "QueueName", self.queue, deleted)
        add("AWS/SQS", "NumberOfMessagesReceived", "QueueName", self.queue, received)
        add("AWS/Lambda", "Duration", "FunctionName", self.function, duration)
        add("AWS/Lambda", "Errors", "FunctionName", self.function, errors)
        add("AWS/Lambda", "Throttles", "FunctionName", self.function, throttles)
        add("AWS/Lambda", "ConcurrentExecutions", "FunctionName", self.function, concurrency)
        add("App", "Latency", "Database", "orders-db", latency)
        for namespace in ("AWS/SQS", "AWS/Lambda", "App"):
            batch = [d for ns, d in data if ns == namespace]
            if batch and namespace.startswith("AWS/"):
                publish_service_metrics(ACCOUNT, REGION, namespace, batch)
            elif batch:
                self.cw.put_metric_data(Namespace=namespace, MetricData=batch)

    def alarm(self, state: str) -> None:
        self.cw.set_alarm_state(AlarmName="db-slo", StateValue=state, StateReason=f"test: {state}")


def make_consumer(clients, *, pre_event_until: int = 0):
    """One selected consumer without a cap of its own, its downstream alarm named by tag, and
    pre-event metrics from half an hour before the hold: 16 concurrent, 20 msg/s in and out,
    oldest 2 s. The mapping is disabled: moto would otherwise try to run the function (in
    Docker) for every message; the drain caps a disabled mapping all the same."""
    fn = make_function(clients, "consumer", tags={"holdfast:downstream-alarms": "db-slo"})
    mapping = make_mapping(clients, fn, "orders", enabled=False)
    cloud = Cloud(clients)
    clients("cloudwatch").put_metric_alarm(
        AlarmName="db-slo", Namespace="App", MetricName="Latency", Dimensions=[{"Name": "Database", "Value": "orders-db"}],
        Statistic="Average", Period=60, EvaluationPeriods=1, Threshold=0.25, ComparisonOperator="GreaterThanThreshold")
    cloud.alarm("OK")
    for m in range(-30, pre_event_until):
        cloud.put(minute(m), age=2, visible=40, sent=1200, deleted=1200, errors=0, throttles=0, concurrency=16, latency=0.1)
    return mapping, cloud


@pytest.fixture
def consumer(clients):
    return make_consumer(clients)


class Controller:
    def __init__(self, clients, table, settings=SETTINGS):
        self.clients, self.table = clients, table
        self.clock, self.script = FakeClock(T0), Script()
        self.runtime = Runtime(clients, settings, table, self.clock, controller_id="solo")

    def at(self, n: float, verdict: str = "impaired"):
        self.clock.set(minute(n))
        self.script.set(verdict, self.clock.now())
        return tick(self.runtime, collect=self.script.collect)

    def cap(self, mapping) -> int | None:
        got = self.clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])
        return (got.get("ScalingConfig") or {}).get("MaximumConcurrency")

    def drain(self, mapping) -> tuple[dc.Drain, records.Item]:
        item = records.read_all(Ledger(self.clients("dynamodb"), self.table), records.DRAIN)[mapping["EventSourceMappingArn"]]
        return dc.Drain.from_dict(item.doc["drain"]), item


def test_the_cap_moves_as_the_controller_decides(clients, ledger_table, consumer):
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)

    first = c.at(0)
    assert first.stage == HOLD and c.cap(mapping) == 2          # engaged at the floor
    d, item = c.drain(mapping)
    assert d.last.action == dc.WAIT and d.since == minute(0) and item.generation == 1
    assert d.facts.pre_event_concurrency == 16 and d.facts.baseline_age_seconds == 2
    assert any("OK only on a datapoint from before the hold" in r for r in d.last.reasons), d.last.reasons

    # The dependency is back on the consumer's own evidence, the launch verdict still impaired.
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    assert c.at(3).stage == HOLD
    d, _ = c.drain(mapping)
    # 16 and one step above it, 18; no probe until 18 has a whole minute measured.
    assert d.last.action == dc.START and c.cap(mapping) == 18 and d.state.step == 2 and d.state.probe_at is None
    assert d.forecast is not None and d.forecast.seconds is not None and "if the downstream keeps up" in d.forecast.reason

    c.at(4)   # minute 3, wholly at 18, is not published yet
    assert (c.drain(mapping)[0].last.action, c.cap(mapping)) == (dc.HOLD, 18)

    # Minute 3 at 18, read once whole (its invocations ended, the function's 3 s timeout after
    # it, and published two minutes after that), delivered ten times what minute 0 did at the
    # floor (2): the raise paid, and the slow start probes 18 × 1.75 = 32 for one minute.
    cloud.put(minute(3), age=700, visible=11_000, sent=1200, deleted=1200, errors=0, latency=0.1)
    c.at(6.1)
    d, _ = c.drain(mapping)
    assert (d.last.action, c.cap(mapping), d.state.probe_from) == (dc.RAISE, 32, 18), d.last.reasons
    assert any("probing 32" in r for r in d.last.reasons), d.last.reasons

    c.at(8.1)   # the probe's minute (7, the first whole one after its write) had: back to 18
    d, _ = c.drain(mapping)
    assert (d.last.action, c.cap(mapping)) == (dc.HOLD, 18)
    assert any("waiting for the probe's minute" in r for r in d.last.reasons)

    cloud.put(minute(7), age=700, visible=10_000, sent=1200, deleted=1300, errors=0, latency=0.5)
    cloud.alarm("ALARM")
    c.at(10.1)
    d, _ = c.drain(mapping)
    # The probe's minute crossed the owner's limit: the slow start ends at the cap the probe
    # started from (18, measured within it); nothing between is guessed.
    assert (d.last.action, c.cap(mapping)) == (dc.CUT, 18), d.last.reasons
    assert d.state.additive and d.state.probe_at is None          # after a cut, raises are additive
    assert d.state.alarmed_cap is not None and d.state.alarmed_cap <= 32
    c.at(11)
    assert (c.drain(mapping)[0].last.action, c.cap(mapping)) == (dc.HOLD, 18)   # never twice for one datapoint


def test_caught_up_for_the_restore_period_the_owners_original_comes_back(clients, ledger_table, consumer):
    mapping, cloud = consumer
    c = Controller(clients, ledger_table, Settings.from_mapping({**SETTINGS.to_mapping(), "drain_restore_after_minutes": 5}))
    c.at(0)
    cloud.put(minute(0), age=30, visible=500, sent=1200, deleted=1500, errors=0, latency=0.1)
    c.at(3)
    assert c.cap(mapping) == 18   # the start: one step above the pre-event concurrency
    for m in range(4, 14):
        cloud.put(minute(m - 2), age=3, visible=40, sent=1200, deleted=1200, errors=0, latency=0.1)
        result = c.at(m, "recovering")
        if c.cap(mapping) is None:
            break
    d, _ = c.drain(mapping)
    assert d.restored and d.last.action == dc.RESTORE and c.cap(mapping) is None   # the owner had no cap
    assert "esm" in ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done
    assert result.stage in (HOLD, DRAIN)


def test_a_stale_plan_refuses_the_raise(clients, ledger_table, consumer):
    """Another controller writes generation g+1 while this tick's raise is in flight: the
    guard before the cap write refuses it, the cap stays."""
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3)
    assert c.cap(mapping) == 18   # the start
    cloud.put(minute(3), age=700, visible=11_000, sent=1200, deleted=1200, errors=0, latency=0.1)

    def newer_plan(**_):
        events.unregister("before-call.lambda.TagResource", newer_plan)
        plan = ledger_plan.read(Ledger(clients("dynamodb"), ledger_table))
        ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), Plan(generation=plan.generation + 1, stage=HOLD,
                          entered_at=plan.entered_at, impaired_at=plan.impaired_at), controller_id="other", now=c.clock.now())

    events = clients("lambda").meta.events
    events.register("before-call.lambda.TagResource", newer_plan)
    c.clock.set(minute(6.1))   # minute 3 is whole (its invocations ended and published)
    result = tick(c.runtime, collect=c.script.collect)
    assert "stale" in result.actions and [o.action for o in result.outcomes if o.kind == "esm"] == [REFUSED_STALE]
    assert c.cap(mapping) == 18
    # The record of the raise (the probe, 32) was written under g: the next tick, under
    # g+1, writes it, and the probe's minute is the first whole one after that write.
    c.at(7)
    d, _ = c.drain(mapping)
    assert c.cap(mapping) == 32 and d.state.probe_at == minute(7) and d.state.history[-1] == (minute(7), 32)


def test_a_drain_record_write_under_a_stale_plan_is_refused(clients, ledger_table, consumer):
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)   # a start is due
    plan = ledger_plan.read(Ledger(clients("dynamodb"), ledger_table))
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), Plan(generation=plan.generation + 1, stage=HOLD,
                      entered_at=plan.entered_at, impaired_at=plan.impaired_at), controller_id="other", now=minute(1))
    from holdfast.core.errors import StalePlan

    with pytest.raises(StalePlan):
        stage.decide(c.runtime, plan, minute(4))
    d, item = c.drain(mapping)
    assert d.last.action == dc.WAIT and item.generation == 1 and c.cap(mapping) == 2   # nothing moved


def test_a_queue_without_metrics_is_held_with_its_reasons_never_raised(clients, ledger_table):
    """SQS stops publishing for a queue idle six hours, and CloudWatch may lag: with no age
    datapoint the queue's depth, read live, says behind (or caught up when empty); with no
    NumberOfMessagesReceived the downstream cannot be judged, so the cap holds where the
    drain started (at the pre-event concurrency, which drains what arrives), never rises."""
    mapping, cloud = make_consumer(clients, pre_event_until=-15)   # nothing fresh by minute 6
    c = Controller(clients, ledger_table)
    sqs = clients("sqs")
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="waiting")
    c.at(0)
    cloud.put(minute(0), errors=0, latency=0.1)                        # no queue metrics at all
    c.at(3)
    cloud.put(minute(3), errors=0, latency=0.1)
    c.at(6)
    d, _ = c.drain(mapping)
    assert (d.last.action, c.cap(mapping)) == (dc.HOLD, 18), d.last.reasons
    assert any("1 messages visible (GetQueueAttributes): behind" in r for r in d.last.reasons)
    assert any("no NumberOfMessagesReceived datapoint" in r and "not raising" in r for r in d.last.reasons)


def test_a_probes_minute_past_the_alarms_threshold_ends_the_slow_start_though_the_alarm_says_ok(
        clients, ledger_table, consumer):
    # The owner's alarm evaluates its newest minute and says OK; its metric's datapoint of
    # the probe's minute (0.5 s against the 0.25 s threshold) says the probe crossed it.
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3)
    c.at(4)
    cloud.put(minute(3), age=700, visible=11_000, sent=1200, deleted=1200, errors=0, latency=0.1)
    c.at(6.1)
    assert c.cap(mapping) == 32
    c.at(8.1)
    cloud.put(minute(7), age=700, visible=10_000, sent=1200, deleted=1300, errors=0, latency=0.5)
    cloud.put(minute(8), age=700, visible=10_000, sent=1200, latency=0.1)
    cloud.alarm("OK")
    c.at(10.1)
    d, _ = c.drain(mapping)
    assert (d.last.action, c.cap(mapping)) == (dc.CUT, 18), d.last.reasons
    assert d.state.probe_at is None and any("db-slo critical" in r for r in d.last.reasons), d.last.reasons


def test_a_deleted_queue_ends_its_drain_and_a_misnamed_alarm_is_ignored(clients, ledger_table):
    mapping, cloud = make_consumer(clients, pre_event_until=-15)
    clients("lambda").tag_resource(Resource=mapping["FunctionArn"], Tags={"holdfast:downstream-alarms": "db-slo db-typo"})
    c = Controller(clients, ledger_table)
    c.at(0)
    cloud.put(minute(0), errors=0, latency=0.1)
    c.at(3)
    d, _ = c.drain(mapping)
    assert d.last.action == dc.START
    clients("sqs").delete_queue(QueueUrl=clients("sqs").get_queue_url(QueueName="orders")["QueueUrl"])
    cloud.put(minute(4), errors=0, latency=0.1)
    assert any("db-typo does not exist: ignored" in r for r in d.last.reasons), d.last.reasons
    result = c.at(6)
    d, _ = c.drain(mapping)
    # Nothing left to drain: the owner's original (no cap) back at once, and the kind is done.
    assert (d.last.action, c.cap(mapping)) == (dc.RESTORE, None) and result.complete
    assert any("the queue does not exist" in r for r in d.last.reasons), d.last.reasons
    assert "esm" in ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done


def test_holdfast_stage_shows_each_drain_its_forecast_and_elapsed(clients, ledger_table, consumer, capsys, monkeypatch):
    import json

    from holdfast.cli import main

    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: c.clock)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3)
    cloud.put(minute(3), age=700, visible=11_000, sent=1200, deleted=1500, errors=0, latency=0.1)
    c.at(6.1)   # minute 3 whole: the 3 s timeout and the lag after it
    c.clock.set(minute(8))
    capsys.readouterr()
    assert main(["--json", "stage"]) == 0
    [row] = json.loads(capsys.readouterr().out)["drain"]
    assert row["arn"] == mapping["EventSourceMappingArn"] and row["name"] == "consumer<-orders"
    assert (row["action"], row["cap"], row["ceiling"]) == (dc.RAISE, 32, 1000)   # 18 paid: the first probe
    assert row["elapsed_minutes"] == 5.0 and row["started_at"] == minute(3).isoformat()
    assert row["forecast_minutes"] > 0 and "if the downstream keeps up" in row["forecast"]
    # On the newest datapoint: 11,000 visible at (1,500 − 1,200) / 60 s = 5/s spare.
    assert row["measured_minutes"] == pytest.approx(11_000 / 5 / 60, abs=0.1)
    assert main(["stage"]) == 0
    text = capsys.readouterr().out
    assert "drain       1 mapping(s): 1 raise" in text and "consumer<-orders" in text and "forecast min (at start)" in text


def test_batch_item_failures_keep_the_mapping_at_the_floor_though_errors_are_zero(clients, ledger_table, consumer):
    """ReportBatchItemFailures: every message received, none deleted, Errors 0 and the
    downstream alarm OK. The consumer's own failure share says the dependency is not back."""
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=0, received=1200, errors=0, latency=0.1)
    c.at(3.1)   # minute 0 whole
    d, _ = c.drain(mapping)
    assert (d.last.action, c.cap(mapping)) == (dc.WAIT, 2)
    assert any("100.0% of 1,200 messages received not deleted" in r for r in d.last.reasons), d.last.reasons
    cloud.put(minute(1), age=660, visible=12_500, sent=1200, deleted=1200, errors=0, latency=0.1)   # back
    c.at(4.1)
    assert (c.drain(mapping)[0].last.action, c.cap(mapping)) == (dc.START, 18)   # one step above 16


def stall_from(monkeypatch, at: datetime, why: str):
    """The controller's stall rule, from `at` on (its own tests are the controller's): the
    shell is what is tested here — what it does with a drain reported stalled."""
    real = stage.dc.advance

    def advance(drain, reading, cap, now, *args, **kwargs):
        step = real(drain, reading, cap, now, *args, **kwargs)
        if now < at or step.drain.state is None:
            return step
        since = drain.stalled_since or now
        return dc.Step(step.action, step.cap, step.reasons, step.waiting_on,
                       replace(step.drain, stalled_since=since, stalled_why=why))

    monkeypatch.setattr(stage.dc, "advance", advance)


def test_a_stalled_drain_is_reported_once_and_stops_gating_the_stage(clients, ledger_table, consumer, monkeypatch,
                                                                      capsys):
    import json

    from holdfast.cli import main

    mapping, cloud = consumer
    sns, sqs = clients("sns"), clients("sqs")
    topic = sns.create_topic(Name="holdfast")["TopicArn"]
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
    c = Controller(clients, ledger_table)
    c.runtime = Runtime(clients, SETTINGS, ledger_table, c.clock, controller_id="solo", topic_arn=topic)
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: c.clock)
    stall_from(monkeypatch, minute(8), "the oldest message's age has not fallen for 30 min")
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3.1)
    assert c.cap(mapping) == 18   # the start, one step above the pre-event 16
    done = ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done
    assert "esm" not in done                      # a drain under way holds the stage

    def stalls() -> list[dict]:
        got = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
        bodies = [json.loads(m["Body"]) for m in got]
        return [b for b in bodies if b.get("event") == "drain-stalled"]

    stalls()                                        # the stage announcements so far
    first = c.at(8.1)
    d, item = c.drain(mapping)
    assert d.stalled_since == minute(8.1) and item.doc["stall_announced"] == minute(8.1).isoformat()
    [said] = stalls()
    assert said["mapping"] == mapping["EventSourceMappingArn"] and "has not fallen" in said["why"]
    assert said["cap_kept"] == c.cap(mapping) and "holdfast release" in said["what_to_do"]
    # It no longer holds the stage back: the controlled kind is done, with the mapping capped.
    assert "esm" in ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done
    assert c.cap(mapping) is not None and first.stalled == 1
    c.at(9.1)
    assert stalls() == []                           # once per stall
    capsys.readouterr()
    assert main(["--json", "stage"]) == 0
    [row] = json.loads(capsys.readouterr().out)["drain"]
    assert row["stalled_since"] == minute(8.1).isoformat() and "has not fallen" in row["stalled_why"]
    assert main(["stage"]) == 0
    assert "stalled   consumer<-orders since" in capsys.readouterr().out


def test_two_mappings_of_one_function_stay_within_its_share_together(clients, ledger_table, consumer):
    """One function (16 concurrent before the event, for both queues together) reads two
    queues. Alone, each drain would start at 18 and probe 32 — 64 for a function that
    carried 16. Together they stay within 16 plus the search's step, and each reads half
    the function's Duration and concurrency."""
    mapping, cloud = consumer
    fn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:consumer"
    second = make_mapping(clients, fn, "refunds", enabled=False)
    refunds = Cloud(clients, queue="refunds")
    for m in range(-30, 0):
        refunds.put(minute(m), age=2, visible=40, sent=1200, deleted=1200, ms_per_message=None)
    c = Controller(clients, ledger_table)
    c.at(0)
    for d, _ in (c.drain(mapping), c.drain(second)):
        assert d.facts.share == 0.5 and d.facts.pre_event_concurrency == 8   # half of the function's 16
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    refunds.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, ms_per_message=None)
    c.at(3.1)
    (a, _), (b, _) = c.drain(mapping), c.drain(second)
    step = max(a.state.step, b.state.step)
    assert c.cap(mapping) + c.cap(second) <= 16 + step
    assert a.state.cap == c.cap(mapping) and b.state.cap == c.cap(second)   # the records say what is in force
    assert any("together stay within" in r for r in a.last.reasons + b.last.reasons)
