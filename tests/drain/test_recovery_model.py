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


# ---- the smooth physics ------------------------------------------------------------

from holdfast_fixtures.recovery_model import (  # noqa: E402
    LONG, MM1, MMC, NEVER, NOISY, PAIR, SLOW_DB, WALL, SharedRun, noise_factor, response_factor, simulate_shared, smooth,
    smooth_shared,
)


@pytest.mark.parametrize("physics, servers", [(MM1, 1), (MMC, 8)])
def test_smooth_latency_rises_before_the_capacity_and_is_monotone_in_load(physics, servers):
    db = Downstream(capacity=50.0, physics=physics, servers=servers)
    loads = [0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 45.0, 49.0]
    latencies = [db.latency(x / 50.0, 0) for x in loads]
    assert latencies[0] == pytest.approx(0.1)
    assert all(a < b for a, b in zip(latencies, latencies[1:])), latencies
    # Well before the capacity the latency is already up (a queue, not a wall) ...
    assert latencies[loads.index(40.0)] > 0.1 * 1.15
    # ... and it grows without bound towards it.
    assert db.latency(0.999, 0) > 10 * 0.1 and math.isinf(db.latency(1.0, 0))
    # M/M/1's closed form: service time ÷ (1 − ρ).
    assert response_factor(MM1, 1, 0.6) == pytest.approx(1 / 0.4)
    # The wall is flat to its capacity.
    assert Downstream(capacity=50.0).latency(0.99, 0) == pytest.approx(0.1)


def test_m_m_c_is_flatter_than_m_m_1_early_and_one_server_is_m_m_1():
    assert response_factor(MMC, 8, 0.5) < response_factor(MM1, 1, 0.5)
    for rho in (0.1, 0.5, 0.9):
        assert response_factor(MMC, 1, rho) == pytest.approx(response_factor(MM1, 1, rho))


def test_in_the_model_more_consumers_bring_more_throughput_and_more_latency_before_the_capacity():
    twin = smooth(KNEE)
    seen = []
    for cap in (10, 20, 28):
        model = simulate(twin, Fixed(twin, cap))
        i = model.series.index(twin.outage_end + 1800)
        seen.append((model.series.goodput[i], model.series.latency[i]))
    goodputs, latencies = zip(*seen)
    assert all(a < b for a, b in zip(goodputs, goodputs[1:])) and all(a < b for a, b in zip(latencies, latencies[1:]))
    assert goodputs[-1] < twin.downstream.capacity * 0.7   # far below the capacity, and already slower
    assert latencies[0] > twin.downstream.base_latency


def test_the_smooth_twin_reaches_the_slo_at_the_walls_knee_and_fails_past_the_client_timeout():
    twin = smooth(KNEE)
    assert twin.knee_rate() == pytest.approx(30.0) and twin.full_rate(slo=True) == pytest.approx(30.0)
    assert twin.downstream.latency(30.0 / twin.downstream.capacity, 0) == pytest.approx(KNEE.latency_slo)
    # The most within the client timeout is more; the bound at the SLO is the wall's bound.
    assert twin.full_rate() > twin.full_rate(slo=True)
    assert twin.lower_bound_seconds(slo=True) == pytest.approx(KNEE.lower_bound_seconds(), rel=1e-6)
    assert twin.lower_bound_seconds() < twin.lower_bound_seconds(slo=True)
    assert KNEE.lower_bound_seconds(slo=True) == KNEE.lower_bound_seconds()   # the wall: the same
    # The warning sits above the latency at the pre-event load.
    assert twin.latency_warning > twin.downstream.latency(20.0 / twin.downstream.capacity, 0)
    # Far past the timeout the pool fails for good, as on the wall (a metastable failure).
    o = outcome(simulate(twin, Fixed(twin, 100)), "fixed 100")
    assert o.collapsed and o.caught_up_after is None


def test_a_database_slower_after_recovery_answers_without_error_until_the_client_timeout():
    model = simulate(SLOW_DB, Fixed(SLOW_DB, 55))
    s = model.series
    i = s.index(SLOW_DB.outage_end + 1800)
    before = s.index(-600)
    assert max(s.failed[s.index(SLOW_DB.outage_end):]) == 0          # no error at all
    assert s.latency[i] > 2 * s.latency[before]                       # slower at every load
    assert SLOW_DB.latency_slo < s.latency[i] < SLOW_DB.downstream.timeout
    assert SLOW_DB.lower_bound_seconds(slo=True) == pytest.approx(20 * 172 * 60 / (36 - 20), rel=1e-3)
    o = outcome(simulate(SLOW_DB, Fixed(SLOW_DB, 100)), "fixed 100")   # past it every call fails
    assert o.collapsed


# ---- two consumers on one database ---------------------------------------------------


@pytest.mark.parametrize("shared", [PAIR, smooth_shared(PAIR)], ids=lambda s: s.physics)
def test_two_consumers_loads_add_on_their_database(shared):
    # Together past the knee (37.5 + 7.5 msg/s against 40), A alone below it.
    run = SharedRun(shared).run([Fixed(p, cap) for p, cap in zip(shared.parts, (30, 12))], shared.outage_end + 1800)
    a, b = run.models
    start = a.series.index(shared.outage_end)
    for i in range(start, len(a.series.load), 97):
        assert run.db.load[i] == pytest.approx(a.series.load[i] + b.series.load[i])
        assert a.series.latency[i] == b.series.latency[i] == run.db.latency[i] or math.isnan(run.db.latency[i])
    # Consumer A alone on the same database is faster than beside B.
    alone = RecoveryModel(shared.parts[0], cap=None)
    alone.run(Fixed(shared.parts[0], 30), shared.outage_end + 1800)
    i = a.series.index(shared.outage_end + 1200)
    assert alone.series.latency[i] < a.series.latency[i] or alone.series.goodput[i] > a.series.goodput[i]
    # The alarms (and the latency metric) are the database's, one for both.
    assert a.alarms() == b.alarms() and a.datapoint("latency") == b.datapoint("latency")


def test_two_consumers_bound_counts_both_backlogs_and_both_arrivals():
    backlog = (20 + 5) * 172 * 60
    assert PAIR.lower_bound_seconds() == pytest.approx(backlog / (40 - 25))
    assert smooth_shared(PAIR).lower_bound_seconds(slo=True) == pytest.approx(PAIR.lower_bound_seconds(), rel=1e-6)
    with pytest.raises(ValueError, match="downstream"):
        type(PAIR)("bad", (PAIR.parts[0], KNEE))


def test_two_consumers_drain_together():
    run = simulate_shared(PAIR, [Fixed(p, 20) for p in PAIR.parts])
    assert all(caught_up_at(m) is not None for m in run.models)


# ---- noise, partial minutes, a downstream that never recovers ------------------------


def test_noise_is_within_20_percent_deterministic_and_one_factor_a_minute():
    factors = [noise_factor(7, m, 0.2) for m in range(600)]
    assert all(0.8 <= f <= 1.2 for f in factors)
    assert min(factors) < 0.84 and max(factors) > 1.16              # it uses the range
    assert factors == [noise_factor(7, m, 0.2) for m in range(600)]  # the same on every call
    assert factors != [noise_factor(8, m, 0.2) for m in range(600)]
    times = [NOISY.message_seconds_at(t) for t in range(0, 3600)]
    assert all(0.8 * 0.8 - 1e-9 <= x <= 0.8 * 1.2 + 1e-9 for x in times)
    assert len(set(times[:60])) == 1 and len(set(times[::60])) > 50   # constant within a minute, not between
    assert simulate(NOISY, Fixed(NOISY, 20)).series.age == simulate(NOISY, Fixed(NOISY, 20)).series.age
    with pytest.raises(ValueError, match="noise"):
        Consumer(noise=1.5)


def test_a_long_invocations_minute_read_before_they_end_is_partial_and_reads_fast():
    model = RecoveryModel(LONG, cap=80)
    m = (LONG.outage_end + 1800) // 60
    # The first second a reader sees minute m (published, and ended 2 minutes before:
    # holdfast.observation.cloudwatch.COMPLETE_AFTER): no invocation that started in it has
    # ended (full batches take 301 s), so Lambda has no Duration datapoint for it yet.
    model.run(None, max(LONG.published_at(m), (m + 3) * 60))
    assert model.minute_value(m, "duration") is None and model.minute_value(m, "received") is not None
    # Half a minute after its first invocations ended: about half of its Duration is in.
    model.run(None, m * 60 + 301 + 30)
    early_ms = model.minute_value(m, "duration").value
    received = model.minute_value(m, "received").value
    model.run(None, model.t + 1200)   # every invocation of that minute has ended
    late_ms = model.minute_value(m, "duration").value
    assert early_ms / received < 0.9 * late_ms / received   # the time per message reads fast
    assert late_ms / received / 1000 == pytest.approx(LONG.message_seconds, rel=0.02)
    # Short invocations end long before any read: the minute is whole when published.
    short = RecoveryModel(KNEE, cap=20)
    short.run(None, KNEE.outage_end + 1800)
    m = short.t // 60 - 1
    while not short._published(m):
        m -= 1
    first = short.minute_value(m, "duration").value
    short.run(None, short.t + 600)
    assert short.minute_value(m, "duration").value == first


def test_a_downstream_that_never_recovers_has_no_bound_and_never_drains():
    assert math.isinf(NEVER.lower_bound_seconds()) and math.isinf(smooth(NEVER).lower_bound_seconds())
    o = outcome(simulate(NEVER, Fixed(NEVER, 20), horizon_seconds=3600), "fixed 20")
    assert o.caught_up_after is None and o.dead_lettered == 0   # no DLQ: nothing leaves the queue


def test_physics_and_servers_are_checked():
    with pytest.raises(ValueError, match="physics"):
        Downstream(capacity=10.0, physics="queue")
    with pytest.raises(ValueError, match="servers"):
        Downstream(capacity=10.0, physics=MMC, servers=0)
    with pytest.raises(ValueError, match="capacity"):
        Downstream(physics=MM1)
    assert Downstream().physics == WALL
