"""The drain's built-in downstream evidence, its baseline and its raise rule, as pure
decisions (holdfast.core.drain), and the shell's reads of them against an
emulation of GetMetricData (holdfast.observation.drain_inputs)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.core import drain as dc
from holdfast.core.drain import CRITICAL, CUT, HOLD, RAISE, START, WARNING
from holdfast.observation import drain_inputs
from holdfast.observation import evidence as gate_evidence
from holdfast.observation.cloudwatch import COMPLETE_AFTER, complete_until
from tests.core.drain.clock import FACTS, dp, m


def reading(minute=1, *, received=600.0, deleted=None, ms=800.0, duration=True, invocations=None, errors=None,
            downstream=(), age=9000.0):
    return dc.Reading(dp(minute, age), dp(minute, 100000.0), None if errors is None else dp(minute, errors), dp(minute, 0.0),
                      downstream, received=dp(minute, received), deleted=dp(minute, received if deleted is None else deleted),
                      duration=dp(minute, received * ms) if duration else None,
                      invocations=None if invocations is None else dp(minute, invocations))


def state(cap=16, *, additive=False, since=0, **kw):
    return dc.CapState(cap=cap, step=2, history=((m(since), cap),), prior_cap=2, additive=additive, **kw)


# ---- the consumer's own evidence ------------------------------------------------------


@pytest.mark.parametrize("r, level, why", [
    (reading(), dc.GOOD, "800 ms per message, 1.00×"),
    # A full batch takes ten times as long as a partial one: per message it is the same.
    (reading(received=600, invocations=60), dc.GOOD, "1.00×"),
    # Slower than the baseline is not a warning by itself: a database's latency rises with
    # load long before its capacity; whether that still pays is the controller's goodput rule.
    (reading(ms=900), dc.GOOD, "1.12× its baseline"),
    (reading(ms=2400), dc.GOOD, "3.00× its baseline"),
    # ReportBatchItemFailures: every message fails, the invocations succeed (Errors 0).
    (reading(deleted=0, errors=0, invocations=60), CRITICAL, "100.0% of 600 messages received not deleted"),
    (reading(deleted=588), WARNING, "2.0% of 600"),
    (reading(errors=6, invocations=60), CRITICAL, "function Errors 10.0% of 60 invocations"),
    # Whole batches near the function's timeout (30 s) at the baseline speed: 600 × 0.8 s
    # over 20 invocations = 24 s, 80 % of it — how the owner sized it (no cap changes a
    # batch's length).
    (reading(ms=800, invocations=20), dc.GOOD, "as the owner sized them"),
    # A slowdown that eats the headroom the baseline speed left: 1.25× of a batch taking
    # 70 % of the timeout is 88 %, 58 % of the headroom: a warning; at 1.35× (95 %, 82 %
    # of it) critical.
    (reading(ms=1000, invocations=22.857), WARNING, "88% of the function's 30 s timeout"),
    (reading(ms=1080, invocations=22.857), CRITICAL, "95% of the function's 30 s timeout"),
    # A function without Duration data: judged on the failure share alone, said so.
    (reading(duration=False), dc.GOOD, "no Duration datapoint for the minute"),
    (reading(received=0), dc.UNKNOWN, "no messages received"),
])
def test_consumer_health(r, level, why):
    h = dc.consumer_health(FACTS, r, m(4))
    assert h.level == level and any(why in x for x in h.reasons), h.reasons


def test_health_is_unknown_without_receives_or_when_stale_and_incomplete_without_duration():
    assert dc.consumer_health(FACTS, dc.Reading(None, None, None, None), m(4)).level == dc.UNKNOWN
    assert dc.consumer_health(FACTS, reading(-30), m(4)).level == dc.UNKNOWN
    assert not dc.consumer_health(FACTS, reading(duration=False), m(4)).complete
    assert dc.consumer_health(FACTS, reading(), m(4)).complete


# ---- the controller, as a table of decisions ------------------------------------------


def test_a_probe_whose_minute_is_skipped_or_incomplete_is_tried_again_never_kept():
    back = dc.decide(dc.decide(state(16), FACTS, reading(1), m(3)).state, FACTS, reading(2), m(4)).state
    # Minute 4 (at 16, after the probe) published before minute 3: nothing is known of 28.
    again = dc.decide(back, FACTS, reading(4), m(8))
    assert again.state.probe_from == 16 and again.cap == 28 and again.state.probe_at == m(8)
    assert any("could not be judged on its own minute" in r for r in again.reasons)
    # The probe's minute without Duration (judged on failures alone): additive from 16, never 28.
    partial = dc.decide(back, FACTS, reading(3, duration=False), m(6))
    assert partial.cap < 28 and partial.state.probe_at is None


def test_a_probe_whose_write_or_return_did_not_land():
    d = dc.Drain(since=m(0), facts=FACTS, state=dc.decide(state(16), FACTS, reading(1), m(3)).state)   # probe 28 at 3
    # The probe's write was refused: the mapping still shows 16 at minute 4. The probe
    # starts with the write this tick makes, and its minute is the next whole one.
    late = dc.advance(d, reading(2), 16, m(4))
    assert (late.cap, late.drain.state.probe_at) == (28, m(4)) and late.drain.state.history[-1] == (m(4), 28)
    # Its return to 16 did not land (the mapping shows 28 at minute 5): the probe's minute
    # stays minute 3, already had; 16 is written again.
    back = dc.advance(d, reading(2), 28, m(4))
    assert back.cap == 16 and back.drain.state.probe_at == m(3)
    again = dc.advance(back.drain, reading(2), 28, m(5))
    assert again.cap == 16 and again.drain.state.probe_at == m(3) and again.drain.state.probe_cap == 28




def test_a_cap_the_mapping_never_shows_is_given_up_for_the_one_it_shows():
    d = dc.Drain(since=m(0), facts=FACTS, state=dc.decide(state(16), FACTS, reading(1), m(3)).state)   # probe 28 at 3
    # The walk clamps the mapping to a reserved concurrency lowered to 20 meanwhile.
    first = dc.advance(d, reading(2), 20, m(4))
    assert first.cap == 28 and first.drain.state.unseen_since == m(4)       # written again, from now
    second = dc.advance(first.drain, reading(3), 20, m(5))
    assert second.drain.state.cap == 20 and second.drain.state.probe_at is None and second.drain.state.unseen_since is None
    assert "has shown 20 since" in second.reasons[0] and second.drain.state.history[-1][1] == 20
    # Shown as recorded again: nothing is said.
    third = dc.advance(second.drain, reading(4), 20, m(6))
    assert not any("has shown" in r for r in third.reasons)


def test_the_shell_reads_a_probes_minute_though_a_later_one_is_published():
    now = m(8)
    cw = FakeCloudWatch({
        ("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"): series({3: 900, 4: 600}),
        ("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"): series({3: 900, 4: 600}),
        ("AWS/Lambda", "Duration", "Sum", "consumer"): series({3: 720_000, 4: 480_000}),
    })
    c = consumer_of()
    newest = drain_inputs.readings(lambda _: cw, [c], now, stale_seconds=600, live_for=())[c.arn]
    probed = drain_inputs.readings(lambda _: cw, [c], now, stale_seconds=600, live_for=(), minutes={c.arn: m(3)})[c.arn]
    assert (newest.received.at, newest.received.value) == (m(4), 600)
    assert (probed.received.at, probed.received.value, probed.duration.at) == (m(3), 900, m(3))
    # A probe's minute not yet published: the newest, as always.
    early = drain_inputs.readings(lambda _: cw, [c], now, stale_seconds=600, live_for=(), minutes={c.arn: m(5)})[c.arn]
    assert early.received.at == m(4)
    drain = dc.Drain(since=m(0), facts=FACTS, state=dc.decide(state(16), FACTS, reading(1), m(3)).state)
    assert drain.wanted_minute() == m(3) and dc.Drain(since=m(0), facts=FACTS).wanted_minute() is None
    off_minute = replace(drain.state, probe_at=m(3) + timedelta(seconds=20))
    assert dc.probe_minute(off_minute.probe_at) == m(4)   # a tick mid-minute: the first whole minute after it


def test_after_the_slow_start_raises_are_additive():
    d = dc.decide(state(40, additive=True), FACTS, reading(1), m(3))
    assert (d.action, d.cap) == (RAISE, 44) and "additive" in d.reasons[-1]   # max(2, 11 % of 40)


def test_a_step_is_judged_only_on_a_datapoint_measured_wholly_at_it():
    # The cap took effect at minute 2: the minute-1 datapoint measured the cap before it.
    d = dc.decide(state(24, since=2), FACTS, reading(1), m(4))
    assert d.action == HOLD and any("measured at cap 24" in r for r in d.reasons)
    # However late the minute-2 datapoint comes, the step waits for it (the slowest input's lag).
    d = dc.decide(d.state, FACTS, reading(1), m(9))
    assert d.action == HOLD
    assert dc.decide(d.state, FACTS, reading(2), m(10)).action == RAISE


def test_batch_item_failures_cut_though_errors_are_zero():
    d = dc.decide(state(30), FACTS, reading(1, deleted=0, errors=0, invocations=60), m(3))
    assert d.action == CUT and d.cap == 15 and "not deleted" in d.reasons[0]   # no goodput: half, at most


@pytest.mark.parametrize("r, why", [
    (dc.Reading(dp(1, 9000), None, None, None), "no NumberOfMessagesReceived datapoint"),    # a metric that never arrives
    (reading(received=0), "no messages received"),                                          # a queue with no traffic
    (dc.Reading(dp(1, 9000), None, None, None, received=dp(1, 600), deleted=dp(1, 600)), "Duration"),  # a deleted function
])
def test_bad_input_holds_with_a_clear_reason_never_raises(r, why):
    d = dc.decide(state(16), FACTS, r, m(3))
    assert d.action in (HOLD, RAISE) and not d.restore
    if d.action == RAISE:   # no Duration, the failure share at baseline: additive only, never slow start
        assert d.cap == 18 and "additive" in d.reasons[-1]
    else:
        assert any(why in x for x in d.reasons), d.reasons


def test_a_queue_with_no_traffic_still_restores():
    s = state(16)
    for minute in range(1, 17):
        d = dc.decide(s, FACTS, reading(minute, received=0, age=0), m(minute + 2))
        s = d.state
        if d.restore:
            break
    assert d.restore, d.reasons


# ---- one raise rule --------------------------------------------------------------------


def test_the_forecast_raises_by_the_rule_decide_uses():
    c = dc.DEFAULTS
    f = dc.ramp_forecast(50_000, 20.0, 1.25, 18, 2, 200, c)
    # The same drain, stepped with raise_to: one raise every raise interval.
    left, t, cap = 50_000.0, 0.0, 18
    while left > 0:
        spare = 1.25 * cap - 20.0
        if spare > 0 and left <= spare * 60:
            t += left / spare
            break
        left -= spare * 60
        t += 60
        if t % c.raise_interval_seconds == 0:
            cap = dc.raise_to(cap, 2, False, 200, c)
    assert f.seconds == pytest.approx(t)
    assert dc.describe_raises(2, 200, c) in f.reason
    d = dc.decide(state(18), FACTS, reading(1), m(3))
    assert d.cap == dc.raise_to(18, 2, False, 1000, c)
    assert dc.describe_raises(d.state.step, 1000, c) in dc.start(FACTS, 2, m(0)).reasons[-1]


# ---- the baseline ----------------------------------------------------------------------


def minutes(n_before, *, storm_from=None, until=m(0), concurrency=16.0, storm_concurrency=900.0):
    out = []
    for i in range(n_before, 0, -1):
        at = until - timedelta(minutes=i)
        storm = storm_from is not None and at >= storm_from
        out.append(dc.Minute(at, concurrency=storm_concurrency if storm else concurrency, age=2.0, visible=20.0,
                             sent=1200.0, deleted=0.0 if storm else 1200.0, received=1200.0,
                             duration=1200 * (2700.0 if storm else 800.0), invocations=240.0, errors=0.0))
    return out


def test_a_baseline_ends_at_the_first_signal_when_the_consumer_was_fine_until_then():
    b = dc.baseline(minutes(60), m(-10), "the first impairment signal", 30)
    assert b["pre_event_concurrency"] == 16 and b["seconds_per_message"] == pytest.approx(0.8)
    assert "ending at the first impairment signal" in b["baseline_note"] and "20 minutes" not in b["baseline_note"]


def test_a_baseline_ends_at_the_consumers_own_anomaly_when_it_came_first():
    b = dc.baseline(minutes(60, storm_from=m(-20)), m(-10), "the first impairment signal", 30)
    assert b["pre_event_concurrency"] == 16 and b["baseline_failure_share"] == 0.0
    assert "ending at the consumer's own first anomaly" in b["baseline_note"]
    assert dc.first_anomaly(minutes(60, storm_from=m(-20))) == m(-20)
    assert dc.first_anomaly(minutes(60)) is None


def test_a_storm_in_part_of_the_window_moves_no_median():
    # The anomaly is not found (a storm in the middle, ended): the median ignores it.
    ms = minutes(60)
    ms = [dc.Minute(x.at, concurrency=900.0, age=x.age, visible=x.visible, sent=x.sent, deleted=x.deleted,
                    received=x.received, duration=x.duration, invocations=x.invocations, errors=x.errors)
          if m(-30) <= x.at < m(-22) else x for x in ms]
    b = dc.baseline(ms, m(-10), "signal", 30)
    assert b["pre_event_concurrency"] == 16


def test_no_data_gives_no_figures_and_the_drain_starts_low_and_searches():
    b = dc.baseline([], m(-10), "signal", 30)
    assert b["pre_event_concurrency"] is None and b["seconds_per_message"] is None
    d = dc.start(dc.Facts(**b), 2, m(0))
    assert d.cap == 2 and any("searching" in r for r in d.reasons)


def test_an_implausible_baseline_starts_from_what_the_arrivals_need_never_at_the_ceiling():
    storm = dc.Facts(pre_event_concurrency=909, seconds_per_message=0.8, arrival_per_second=20.0)
    d = dc.start(storm, 2, m(0))
    assert d.action == START and d.cap == 18 and any("implausible" in r for r in d.reasons)
    capped = dc.Facts(pre_event_concurrency=None, seconds_per_message=0.8, arrival_per_second=100.0, reserved_concurrency=60)
    d = dc.start(capped, 2, m(0))
    assert d.cap == 30 and any("never at the ceiling" in r for r in d.reasons)


def test_baseline_end_is_the_earliest_named_time():
    assert dc.baseline_end({"signal": m(-10), "engagement": m(0), "unknown": None}) == (m(-10), "signal")
    with pytest.raises(ValueError):
        dc.baseline_end({"x": None})


# ---- the shell's reads against an emulation of GetMetricData ------------------------------


class FakeCloudWatch:
    """GetMetricData as AWS documents it: datapoints with StartTime <= Timestamp < EndTime,
    one result per query (empty Timestamps/Values for a metric with no data), newest first
    with ScanBy=TimestampDescending. Records every call's window."""

    def __init__(self, data):
        self.data = data   # (namespace, metric, stat, dimension value) -> {time: value}
        self.windows = []

    def get_paginator(self, name):
        assert name == "get_metric_data"
        return self

    def paginate(self, MetricDataQueries, StartTime, EndTime, ScanBy):
        self.windows.append((StartTime, EndTime))
        results = []
        for q in MetricDataQueries:
            stat = q["MetricStat"]
            metric = stat["Metric"]
            key = (metric["Namespace"], metric["MetricName"], stat["Stat"], metric["Dimensions"][0]["Value"])
            points = sorted(((t, v) for t, v in self.data.get(key, {}).items() if StartTime <= t < EndTime),
                            reverse=ScanBy == "TimestampDescending")
            results.append({"Id": q["Id"], "Label": metric["MetricName"], "Timestamps": [t for t, _ in points],
                            "Values": [v for _, v in points], "StatusCode": "Complete"})
        return [{"MetricDataResults": results}]


def consumer_of(queue="orders", function="consumer"):
    arn = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:u1"
    return drain_inputs.Consumer(arn, "u1", f"arn:aws:lambda:us-east-1:123456789012:function:{function}",
                                 f"arn:aws:sqs:us-east-1:123456789012:{queue}")


def series(values: dict[int, float]) -> dict[datetime, float]:
    return {m(k): v for k, v in values.items()}


def test_readings_end_where_datapoints_are_complete_and_judge_one_minute():
    now = m(6) + timedelta(seconds=30)
    cw = FakeCloudWatch({
        ("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"): series({2: 600, 3: 600, 5: 40}),   # 5: partial
        ("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"): series({2: 600, 3: 600, 5: 40}),
        ("AWS/Lambda", "Duration", "Sum", "consumer"): series({2: 480_000, 5: 1_000}),               # none for 3 yet
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum", "orders"): series({3: 900, 5: 10}),
    })
    r = drain_inputs.readings(lambda _: cw, [consumer_of()], now, stale_seconds=600, live_for=())
    [(start, end)] = cw.windows
    assert end == complete_until(now) == m(4) and now - end >= COMPLETE_AFTER
    got = r[consumer_of().arn]
    # The newest minute with both receives and Duration: 2, all of its figures from it.
    assert (got.received.at, got.duration.at, got.deleted.at) == (m(2), m(2), m(2))
    assert got.oldest_age == dc.Datapoint(m(3), 900.0)   # the partial minute 5 is not read
    assert got.invocations is None and got.errors is None   # missing metrics: None, not zero


def test_readings_of_a_function_without_duration_and_a_queue_without_receives():
    now = m(10)
    cw = FakeCloudWatch({
        ("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"): series({6: 600, 7: 600}),
        ("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"): series({7: 600}),
    })
    got = drain_inputs.readings(lambda _: cw, [consumer_of(), consumer_of("idle", "idle-fn")], now,
                                stale_seconds=600, live_for=())
    a = got[consumer_of().arn]
    assert (a.received.at, a.duration) == (m(7), None)
    h = dc.consumer_health(FACTS, a, now)
    assert h.level == dc.GOOD and not h.complete and any("no Duration datapoint" in x for x in h.reasons)


def test_pre_event_reads_twice_the_window_before_the_earliest_signal():
    until = m(-10)
    data = {}
    for k in range(-70, -10):
        storm = k >= -20
        for key, v in ((("AWS/Lambda", "ConcurrentExecutions", "Maximum", "consumer"), 900.0 if storm else 16.0),
                       (("AWS/SQS", "NumberOfMessagesReceived", "Sum", "orders"), 1200.0),
                       (("AWS/SQS", "NumberOfMessagesDeleted", "Sum", "orders"), 0.0 if storm else 1200.0),
                       (("AWS/Lambda", "Duration", "Sum", "consumer"), 1200 * (2700.0 if storm else 800.0)),
                       (("AWS/SQS", "NumberOfMessagesSent", "Sum", "orders"), 1200.0)):
            data.setdefault(key, {})[m(k)] = v
    cw = FakeCloudWatch(data)
    facts = drain_inputs.pre_event(lambda _: cw, [consumer_of()], until, "the first impairment signal", 30, {})
    [(start, end)] = cw.windows
    assert (start, end) == (until - timedelta(minutes=60), until)
    f = facts[consumer_of().arn]
    assert f.pre_event_concurrency == 16 and f.seconds_per_message == pytest.approx(0.8)
    assert "the consumer's own first anomaly" in f.baseline_note
    assert dc.start(f, 2, m(0)).cap == 18


def test_one_cloudwatch_lag_for_every_evidence_reader():
    """The drain's inputs and the stage gates' evidence use the same window end."""
    import inspect

    assert "complete_until" in inspect.getsource(gate_evidence.read)
    assert not hasattr(drain_inputs, "CLOUDWATCH_LAG") and not hasattr(gate_evidence, "LAG")
    assert complete_until(datetime(2025, 1, 1, 10, 5, 0, tzinfo=timezone.utc)) == datetime(2025, 1, 1, 10, 3, tzinfo=timezone.utc)
    assert complete_until(datetime(2025, 1, 1, 10, 5, 59, tzinfo=timezone.utc)) == datetime(2025, 1, 1, 10, 3, tzinfo=timezone.utc)


# ---- invariants over arbitrary consumer evidence ---------------------------------------

from hypothesis import strategies as st  # noqa: E402


@st.composite
def own_readings(draw):
    minute = draw(st.integers(-20, 40))
    received = draw(st.sampled_from([0.0, 60.0, 600.0]))
    deleted = draw(st.sampled_from([0.0, 0.5, 0.97, 1.0])) * received
    ms = draw(st.sampled_from([700.0, 800.0, 816.0, 840.0, 860.0, 900.0, 1000.0, 2000.0]))   # 816, 840: the raise band
    duration = draw(st.booleans())
    return reading(minute, received=received, deleted=deleted, ms=ms, duration=duration, age=draw(st.sampled_from([1.0, 9000.0])))


