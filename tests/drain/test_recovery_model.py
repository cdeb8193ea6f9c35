"""The recovery model reproduces its published anchors, measured from its own output."""

from __future__ import annotations

import math

import pytest

from holdfast_fixtures.recovery_model import (
    ARITHMETIC,
    KNEE,
    LAMBDA_RAMP_PER_SECOND,
    LAMBDA_START_BATCHES,
    Consumer,
    Downstream,
    RecoveryModel,
    Scenario,
    bronson,
    caught_up_at,
    outcome,
    recovers_below,
    simulate,
)
from holdfast_fixtures.drain_strategies import Fixed

# ---- the seeds' arithmetic ---------------------------------------------------------


@pytest.fixture(scope="module")
def arithmetic():
    """Consumers at full speed from the end of the outage."""
    return simulate(ARITHMETIC, None)


def test_the_outage_leaves_206400_messages(arithmetic):
    backlog = arithmetic.backlog_at(ARITHMETIC.outage_end)
    # 172 min × 1,200/min, give or take the one second of arrivals that ends the outage.
    assert abs(backlog - 206_400) <= ARITHMETIC.arrival_per_second


def test_consumers_run_at_1800_a_minute(arithmetic):
    s = arithmetic.series
    i = s.index(ARITHMETIC.outage_end + 600)
    assert sum(s.goodput[i : i + 600]) / 10 == pytest.approx(1800, rel=1e-6)


def test_the_backlog_drains_in_344_minutes(arithmetic):
    caught = caught_up_at(arithmetic) - ARITHMETIC.outage_end
    assert caught / 60 == pytest.approx(344, rel=0.01)
    assert ARITHMETIC.lower_bound_seconds() / 60 == pytest.approx(344)


def test_a_drain_is_deterministic(arithmetic):
    again = simulate(ARITHMETIC, None)
    assert again.series.age == arithmetic.series.age and again.dead_lettered == arithmetic.dead_lettered


# ---- Lambda's scaling --------------------------------------------------------------


def test_lambda_starts_at_five_batches_and_adds_300_a_minute():
    model = RecoveryModel(KNEE).run(None, KNEE.outage_end + 300)
    s = model.series
    first = s.pollers[s.index(KNEE.outage_end)]
    assert first == LAMBDA_START_BATCHES
    after_a_minute = s.pollers[s.index(KNEE.outage_end + 60)]
    assert after_a_minute == pytest.approx(LAMBDA_START_BATCHES + 60 * LAMBDA_RAMP_PER_SECOND)
    assert max(s.pollers) == 1000   # and no further


def test_a_cap_is_never_exceeded_and_takes_effect_at_once():
    model = RecoveryModel(KNEE, cap=20).run(None, KNEE.outage_end + 300)
    start = model.series.index(KNEE.outage_end)
    assert max(model.series.pollers[start:]) == 20
    model.cap = 7
    model.run(None, model.t + 2)
    assert model.series.pollers[-1] == 7


def test_reserved_concurrency_throttles_and_lambda_backs_off():
    model = RecoveryModel(ARITHMETIC).run(None, ARITHMETIC.outage_end + 900)   # no cap, 24 reserved
    s = model.series
    start = s.index(ARITHMETIC.outage_end)
    assert max(s.pollers[start:]) < 24 + 2 * LAMBDA_RAMP_PER_SECOND    # stops adding once throttled
    assert model.datapoint("throttles").value > 0


# ---- the database's knee, timeouts and retries ---------------------------------------


def test_below_the_knee_latency_is_the_base_and_above_it_rises():
    below = simulate(KNEE, Fixed(KNEE, 24))
    above = simulate(KNEE, Fixed(KNEE, 40))
    i = below.series.index(KNEE.outage_end + 1800)
    assert below.series.latency[i] == pytest.approx(0.1)
    assert above.series.latency[i] == pytest.approx(40 / 30 - 0.7, rel=0.01)   # c/μ − compute
    # Both deliver the knee's throughput: the extra concurrency only adds latency.
    assert below.series.goodput[i] == pytest.approx(30, rel=1e-3)
    assert above.series.goodput[i] == pytest.approx(30, rel=1e-3)


def test_past_the_timeout_the_pool_collapses_with_no_goodput_and_dead_letters():
    o = outcome(simulate(KNEE, Fixed(KNEE, 100)), "fixed 100")
    assert o.collapsed and o.caught_up_after is None and o.dead_lettered > 100_000
    assert o.peak_load_over_knee > 2


def test_a_capped_pool_rides_out_a_blip_that_tips_a_larger_one_into_collapse():
    """Bronson's point for a pool of consumers: at 45 batches the database is over its knee
    but stable (latency under the timeout); a 10 s outage of the database tips it into a
    sustained failure (45 batches × 2 requests / 2.7 s > 30/s), while a pool capped at the
    knee recovers from the same blip."""
    blip = ((KNEE.outage_end + 3600, 10),)
    scenario = Scenario("blip", Consumer(), Downstream(capacity=30.0, blips=blip))
    stable = outcome(simulate(KNEE, Fixed(KNEE, 45)), "45 without the blip")
    tipped = outcome(simulate(scenario, Fixed(scenario, 45)), "45 with the blip")
    capped = outcome(simulate(scenario, Fixed(scenario, 24)), "24 with the blip")
    assert not stable.collapsed and stable.caught_up_after is not None
    assert tipped.collapsed and tipped.caught_up_after is None
    assert not capped.collapsed and capped.ratio < 1.01


def test_messages_go_to_the_dlq_after_max_receive_count_receives():
    dead = Scenario("dead", Consumer(max_receive_count=5, visibility_timeout=60), Downstream(capacity=30.0, blips=((0, 10**6),)), outage_seconds=600)
    model = RecoveryModel(dead, cap=2).run(None, 600 + 4 * 60 + 59)
    assert model.dead_lettered == 0   # four failed receives so far
    model.run(None, 600 + 5 * 60 + 60)
    assert model.dead_lettered > 0
    unredriven = Scenario("dead", Consumer(max_receive_count=None), dead.downstream, outage_seconds=600)
    assert RecoveryModel(unredriven, cap=2).run(None, 3600).dead_lettered == 0


# ---- CloudWatch as the strategies see it ---------------------------------------------


def test_datapoints_are_published_late_and_alarms_name_their_datapoint():
    model = RecoveryModel(KNEE, cap=40).run(None, KNEE.outage_end + 1200)
    now = model.t
    for metric in ("age", "visible", "latency", "concurrency", "deleted"):
        dp = model.datapoint(metric)
        lag = (model.now() - dp.at).total_seconds()
        assert 120 <= lag <= 240, (metric, lag)   # one minute of period, 1–3 minutes late
    states = {a.name: a for a in model.alarms()}
    assert states["db-latency-slo"].state == "ALARM" and states["db-latency-warning"].state == "ALARM"
    assert states["db-latency-slo"].measured_at == model.datapoint("latency").at
    assert model.t == now
    # During the outage nothing is sent to the database: no datapoint, INSUFFICIENT_DATA.
    quiet = RecoveryModel(KNEE).run(None, 3600)
    assert quiet.datapoint("latency") is None
    assert {a.state for a in quiet.alarms()} == {"INSUFFICIENT_DATA"}


# ---- Bronson et al.'s example --------------------------------------------------------


def test_bronson_280_qps_below_300_is_healthy():
    run = bronson(lambda t: 280.0, seconds=600)
    assert run.goodput[-1] == 280 and run.latency[-1] == pytest.approx(0.1)


def test_bronson_a_10s_outage_tips_it_into_sustained_failure_at_560_qps():
    run = bronson(lambda t: 280.0, seconds=1800, outage=(60, 10))
    later = slice(300, 1800)
    assert min(run.load[later]) == pytest.approx(560, rel=0.01)
    assert max(run.goodput[later]) == 0
    # Below half the capacity the same outage passes: retries alone cannot overload it.
    assert bronson(lambda t: 140.0, seconds=600, outage=(60, 10)).goodput[-1] == 140


def test_bronson_recovers_only_when_load_falls_below_about_150_qps():
    threshold = recovers_below(range(100, 201, 2))
    assert 140 <= threshold <= 160
    stuck = bronson(lambda t: 280.0 if t < 600 else 160.0, seconds=2400, outage=(60, 10))
    assert stuck.goodput[-1] == 0 and stuck.load[-1] == pytest.approx(320)
    recovered = bronson(lambda t: 280.0 if t < 600 else 140.0, seconds=2400, outage=(60, 10))
    assert recovered.goodput[-1] == pytest.approx(140) and recovered.load[-1] == pytest.approx(140)


def test_scenarios_know_their_bounds():
    assert KNEE.lower_bound_seconds() / 60 == pytest.approx(344)   # knee 1,800/min, as the consumers above
    assert math.isinf(Scenario("never", Consumer(), Downstream(capacity=20.0)).lower_bound_seconds())


def test_each_scenario_class_states_its_lower_bound():
    from holdfast_fixtures.recovery_model import ARRIVALS_DOUBLE, FAR_KNEE, KNEE_DROP, LATE, RBIF, STORM

    backlog = 20 * 172 * 60
    # The database back 20 minutes after the pollers: nothing drains then, arrivals go on.
    assert RBIF.lower_bound_seconds() == pytest.approx(1200 + (backlog + 20 * 1200) / (30 - 20))
    assert STORM.lower_bound_seconds() == pytest.approx(300 + (backlog + 20 * 300) / (30 - 20))
    assert FAR_KNEE.lower_bound_seconds() == pytest.approx(backlog / (80 - 20))
    # An hour at 40 req/s, then the rest at 24.
    assert KNEE_DROP.lower_bound_seconds() == pytest.approx(3600 + (backlog - 3600 * 20) / (24 - 20))
    assert ARRIVALS_DOUBLE.lower_bound_seconds() == pytest.approx(backlog / (60 - 40))
    assert LATE.lower_bound_seconds() == KNEE.lower_bound_seconds()   # late metrics change no rate


def test_late_metrics_are_published_later_and_the_dependency_can_fail_before_the_hold():
    from holdfast_fixtures.recovery_model import LATE, STORM

    late, usual = RecoveryModel(LATE), RecoveryModel(KNEE)
    late.run(None, 600)
    usual.run(None, 600)
    assert usual.datapoint("age").at > late.datapoint("age").at
    storm = RecoveryModel(STORM).run(None, 0)
    assert storm.series.failed[storm.series.index(-60)] > 0 and storm.series.failed[storm.series.index(-1500)] == 0
