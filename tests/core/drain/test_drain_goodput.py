"""The drain judges by what the downstream delivers (holdfast.core.drain: `paid`, the
rungs of `decide`, and the stall), as tables of decisions on the pure code."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from holdfast.core import drain as dc
from holdfast.core.drain import CUT, HOLD, RAISE
from tests.core.drain.clock import FACTS, dp, m


def measure(minute, cap, deleted, ms, failures=0.0) -> dc.Measure:
    return dc.Measure(m(minute), cap, deleted, ms / 1000.0, failures)


def reading(minute, *, deleted, ms, received=None, sent=1200.0, age=9000.0, downstream=(), invocations=None):
    received = deleted if received is None else received
    return dc.Reading(dp(minute, age), dp(minute, 100_000.0), None, dp(minute, 0.0), downstream, sent=dp(minute, sent),
                      received=dp(minute, received), deleted=dp(minute, deleted), duration=dp(minute, received * ms),
                      invocations=None if invocations is None else dp(minute, invocations))


def raised(lower_cap, cap, *, since, measures=(), **kw) -> dc.CapState:
    """A drain that raised from `lower_cap` to `cap` at minute `since`, past its slow start."""
    return dc.CapState(cap=cap, step=2, history=((m(0), lower_cap), (m(since), cap)), prior_cap=2, additive=True,
                       measures=tuple(measures), **kw)


# ---- the rule, once ----------------------------------------------------------------


@pytest.mark.parametrize("lower, higher, outcome", [
    # 20 -> 24 (×1.2) with deletions ×1.2: in proportion, whatever the time per message.
    ([measure(1, 20, 1500, 800)], [measure(5, 24, 1800, 800)], dc.PAID),
    # Deletions ×1.1 of a ×1.2 raise: half the proportion, Kleinrock's power at its top.
    ([measure(1, 20, 1500, 800)], [measure(5, 24, 1650, 870)], dc.PAID),
    # Flat deletions, each message 20 % longer: the plateau.
    ([measure(1, 20, 1500, 800)], [measure(5, 24, 1500, 960)], dc.PLATEAU),
    # Flat deletions, more failures: past the capacity too.
    ([measure(1, 20, 1500, 800)], [measure(5, 24, 1500, 800, failures=0.05)], dc.PLATEAU),
    # Flat deletions at the same speed: a queue too short to fill the cap, not a knee.
    ([measure(1, 20, 1500, 800)], [measure(5, 24, 1500, 800)], dc.UNSURE),
])
def test_paid(lower, higher, outcome):
    assert dc.paid(lower, higher, FACTS).outcome == outcome


def test_the_plateaus_knee_is_the_concurrency_that_carries_its_goodput_at_the_lower_caps_speed():
    v = dc.paid([measure(1, 20, 1500, 800)], [measure(5, 30, 1800, 1000)], FACTS)
    assert v.outcome == dc.PLATEAU and v.knee == 24      # 1,800 a minute × 0.8 s ÷ 60


# ---- decisions -----------------------------------------------------------------------


def test_a_raise_that_raised_deletions_in_proportion_leads_to_the_next_even_at_three_times_the_baseline_time():
    # The database is busier and slower (2.4 s a message, 3× the baseline), but 24 batches
    # deliver 1.2× what 20 did: healthy; the search goes on, under the ceilings.
    state = raised(20, 24, since=4, measures=[measure(2, 20, 500, 2400)])
    d = dc.decide(state, FACTS, reading(5, deleted=600, ms=2400), m(8))
    assert d.action == RAISE and d.cap > 24 and d.state.probe_from == 24, d.reasons
    assert any("the raise paid" in r for r in d.reasons)
    top = dc.decide(state, replace(FACTS, reserved_concurrency=25), reading(5, deleted=600, ms=2400), m(8))
    assert top.cap <= 25


def test_a_raise_with_flat_deletions_and_rising_time_steps_back_to_the_last_cap_that_paid():
    state = raised(20, 24, since=4, measures=[measure(2, 20, 1500, 800)])
    d = dc.decide(state, FACTS, reading(5, deleted=1500, ms=960), m(8))
    assert d.action == CUT and 20 <= d.cap < 24, d.reasons
    assert d.state.alarmed_cap == 24 and any("did not pay" in r for r in d.reasons)


def test_ok_alarms_and_a_consumer_at_twice_its_baseline_raise():
    ok = (dc.Alarm("db-latency-slo", dc.OK, m(5)), dc.Alarm("db-latency-warning", dc.OK, m(5), dc.WARNING))
    state = raised(20, 24, since=4, measures=[measure(2, 20, 750, 1600)])
    d = dc.decide(state, FACTS, reading(5, deleted=900, ms=1600, downstream=ok), m(8))
    assert d.action == RAISE and d.cap > 24, d.reasons


def test_a_database_slowing_without_errors_keeps_the_cap_at_what_the_arrivals_need_until_failures_are_critical():
    # 1,200 arrive a minute; at 24 batches the database delivers 1,200 (50 a batch-minute):
    # the arrivals need 24. It slows (no failures): a plateau never steps back below 24.
    state = raised(22, 24, since=4, measures=[measure(2, 22, 1200, 1100)])
    d = dc.decide(state, FACTS, reading(5, deleted=1200, ms=1200), m(8))
    assert d.cap >= 22 and d.action in (HOLD, CUT), d.reasons
    need = dc.arrivals_need(reading(5, deleted=1200, ms=1200), d.state.measures)
    assert d.cap >= min(24, need)
    # Failures critical (half the messages received are not deleted): now it cuts below.
    failing = dc.decide(state, FACTS, reading(5, deleted=600, received=1200, ms=1200), m(8))
    assert failing.action == CUT and failing.cap < 22, failing.reasons


def test_a_hold_below_what_the_arrivals_need_raises_towards_the_need():
    # Deletions flat at the same speed (unsure) but the arrivals need more than the cap.
    state = raised(10, 12, since=4, measures=[measure(2, 10, 600, 800)])
    d = dc.decide(state, FACTS, reading(5, deleted=600, ms=800, sent=1200), m(8))
    assert d.action == RAISE and d.cap > 12 and any("below what the arrivals need" in r for r in d.reasons), d.reasons


def _slow_start_probe(probe_ms, deleted=2000):
    # In slow start at 16 (measured at 800 ms a message), probing 28 over minute 10.
    state = dc.CapState(cap=16, step=2, history=((m(0), 16), (m(9.5), 28), (m(11), 16)), prior_cap=2,
                        probe_at=m(9.5), probe_from=16, measures=(measure(5, 16, 1200, 800),))
    return dc.decide(state, FACTS, reading(10, deleted=deleted, ms=probe_ms), m(14))


def test_a_paid_probe_whose_messages_take_an_eighth_longer_than_the_fastest_ends_the_slow_start():
    # 16 -> 28 delivered 1,200 -> 2,000 a minute (paid) but each message took 1,000 ms
    # against 800: the downstream queues. The slow start ends at the concurrency that
    # carries 2,000 a minute at 800 ms (26, Little's law: the batches above it only queue),
    # no further probe now, and the search goes on from there in additive steps.
    slowed = _slow_start_probe(1000)
    assert slowed.action == RAISE and slowed.cap == 26 and slowed.state.additive, slowed.reasons
    assert slowed.state.probe_at is None and slowed.state.probe_from is None
    assert any("slow start ends at 26" in r for r in slowed.reasons)
    # Where that concurrency is the probe's own cap or above, the probe is kept and the
    # next one is additive, not × 1.75 (49).
    faster = _slow_start_probe(1000, deleted=2100)
    assert faster.action == RAISE and faster.state.probe_from == 28 and faster.state.additive, faster.reasons
    assert faster.cap < math.ceil(28 * dc.DEFAULTS.slow_start_factor)
    # The same goodput at the same speed: the slow start goes on (× 1.75).
    flat = _slow_start_probe(800)
    assert flat.cap == math.ceil(28 * dc.DEFAULTS.slow_start_factor) and not flat.state.additive, flat.reasons


def test_invocations_longer_than_a_minute_raise_in_additive_steps_never_by_the_slow_starts_factor():
    # 10 messages of 30 s a batch: each invocation runs 5 minutes, so a "one-minute" probe
    # holds its batches on the downstream for five. The slow start is off.
    long = replace(FACTS, seconds_per_message=30.0, timeout_seconds=900.0, arrival_per_second=2.0)
    state = dc.CapState(cap=60, step=8, history=((m(0), 60),), prior_cap=2, measures=(measure(-5, 30, 60, 30000),))
    # The queue's own metrics are of minute 3; the judged minute (1) is whole.
    r = replace(reading(1, deleted=120, ms=30000, sent=120.0), invocations=dp(1, 12.0), oldest_age=dp(3, 9000.0),
                visible=dp(3, 20_000.0))
    d = dc.decide(state, long, r, m(5))
    assert d.action == RAISE and d.state.additive and d.cap < math.ceil(60 * dc.DEFAULTS.slow_start_factor), d.reasons
    assert any("no slow start" in n for n in d.reasons)
    # The same consumer with invocations of 30 s (one message a batch) keeps its slow start.
    short = dc.decide(state, long, replace(r, invocations=dp(1, 120.0)), m(5))
    assert short.cap == math.ceil(60 * dc.DEFAULTS.slow_start_factor) and not short.state.additive, short.reasons


def test_a_long_consumers_late_minute_holds_and_never_raises():
    # A 15-minute timeout: the newest whole minute is 18 minutes old. It is judged (the drain
    # holds, and would cut), but a raise waits: what it does would be seen 18 minutes late.
    long = replace(FACTS, seconds_per_message=30.0, timeout_seconds=900.0, arrival_per_second=2.0)
    state = dc.CapState(cap=66, step=8, history=((m(-60), 60), (m(-30), 66)), prior_cap=2, additive=True,
                        measures=(measure(-40, 60, 120, 30000),))
    r = replace(reading(-10, deleted=132, ms=30000, sent=120.0), invocations=dp(-10, 13.2), oldest_age=dp(6, 9000.0),
                visible=dp(6, 20_000.0))
    d = dc.decide(state, long, r, m(8))
    assert d.action == HOLD and d.cap == 66, d.reasons
    assert any("no raise on evidence that late" in x for x in d.reasons), d.reasons
    # The same minute read within the stale limit raises.
    fresh = dc.decide(state, long, r, m(-1))
    assert fresh.action == RAISE and fresh.cap > 66, fresh.reasons


def test_a_long_consumers_judged_minute_is_not_stale_while_it_waits_for_its_timeout():
    # A 15-minute timeout: the judged minute is read 18 minutes after it began, and judged.
    long = replace(FACTS, seconds_per_message=30.0, timeout_seconds=900.0)
    health = dc.consumer_health(long, reading(0, deleted=120, ms=30000), m(19))
    assert health.level != dc.UNKNOWN, health.reasons
    assert dc.consumer_health(FACTS, reading(0, deleted=120, ms=800), m(19)).level == dc.UNKNOWN


def test_a_noisy_consumers_one_slow_minute_at_a_cap_that_has_not_moved_is_not_a_downstream_that_slowed():
    # Minute-to-minute spread 8 %: one minute 20 % slower and 17 % emptier than the first at
    # the same cap is within what two single minutes of this consumer differ by.
    noisy = replace(FACTS, spread=0.08)
    measures = [measure(2, 16, 1000, 800), measure(5, 19, 1425, 800)]
    state = raised(16, 19, since=4, measures=measures)
    held = dc.decide(state, noisy, reading(6, deleted=1180, ms=960), m(9))
    assert held.action != CUT, held.reasons
    # Two slower minutes against two at the first speed: now it has moved.
    state2 = raised(16, 19, since=4, measures=measures + [measure(6, 19, 1425, 800), measure(7, 19, 1150, 990)])
    cut = dc.decide(state2, noisy, reading(8, deleted=1160, ms=990), m(11))
    assert cut.action == CUT and cut.cap < 19 and any("slowed" in r for r in cut.reasons), cut.reasons


def test_a_plateau_found_again_within_its_memory_narrows_it_and_one_found_after_it_doubles_it():
    state = raised(20, 24, since=4, measures=[measure(2, 20, 1500, 800)], alarmed_cap=28, alarmed_at=m(-5))
    within = dc.decide(state, FACTS, reading(5, deleted=1500, ms=960), m(8))
    assert within.action == CUT and within.state.alarmed_cap == 24 and within.state.plateaus == 0, within.reasons
    after = dc.decide(replace(state, alarmed_at=m(-40)), FACTS, reading(5, deleted=1500, ms=960), m(8))
    assert after.action == CUT and after.state.plateaus == 1, after.reasons


# ---- the owner's limit: crossed once, not every half hour ----------------------------


SLO, WARN = "db-latency-slo", "db-latency-warning"


def test_a_limit_found_again_on_its_re_probe_is_remembered_twice_as_long_each_time():
    state = raised(20, 24, since=4, measures=[measure(2, 20, 1500, 800)], alarmed_cap=26, alarmed_at=m(-40))
    # The memory of 26 (30 min) ran out; the re-probe's minute at 24 alarms again.
    d = dc.decide(state, FACTS, reading(5, deleted=1700, ms=800, downstream=(dc.Alarm(SLO, dc.ALARM, m(5)),)), m(8))
    assert d.action == CUT and d.state.alarmed_cap == 24 and d.state.plateaus == 1, d.reasons
    assert dc.remembered_for(d.state, dc.DEFAULTS) == 2 * dc.DEFAULTS.remember_alarm_seconds
    # ... at most `remember_doublings` times.
    many = replace(d.state, plateaus=10)
    assert dc.remembered_for(many, dc.DEFAULTS) == 2 ** dc.DEFAULTS.remember_doublings * dc.DEFAULTS.remember_alarm_seconds
    # A first cut (no limit found before) is remembered for the plain period.
    first = dc.decide(replace(state, alarmed_cap=None, alarmed_at=None), FACTS,
                      reading(5, deleted=1700, ms=800, downstream=(dc.Alarm(SLO, dc.ALARM, m(5)),)), m(8))
    assert first.state.plateaus == 0


def test_the_owners_warning_in_alarm_at_the_cap_in_force_keeps_a_spent_limit_from_being_probed_again():
    # 28 went past the owner's SLO 40 minutes ago (its memory spent); the drain holds 27,
    # measured paid. The warning is in ALARM on a minute at 27: the database is still
    # near the owner's limit there, so 28 is not tried again.
    measures = [measure(2, 25, 1500, 800), measure(5, 27, 1620, 800)]
    state = raised(25, 27, since=4, measures=measures, alarmed_cap=28, alarmed_at=m(-40))
    warned = (dc.Alarm(SLO, dc.OK, m(5)), dc.Alarm(WARN, dc.ALARM, m(5), dc.WARNING))
    d = dc.decide(state, FACTS, reading(5, deleted=1620, ms=800, downstream=warned), m(8))
    assert d.action == HOLD and d.cap == 27, d.reasons
    # The warning back to OK at 27: the database has room again, the limit is probed once more.
    calm = (dc.Alarm(SLO, dc.OK, m(5)), dc.Alarm(WARN, dc.OK, m(5), dc.WARNING))
    again = dc.decide(state, FACTS, reading(5, deleted=1620, ms=800, downstream=calm), m(8))
    assert again.action == RAISE and again.cap > 27, again.reasons


def _probing(downstream, *, alarmed_cap=None):
    # A slow-start-ended drain at 20 that probed 23 over minute 10 and is back at 20.
    state = dc.CapState(cap=20, step=2, history=((m(0), 20), (m(9.5), 23), (m(11), 20)), prior_cap=2, additive=True,
                        probe_at=m(9.5), probe_from=20, alarmed_cap=alarmed_cap,
                        alarmed_at=None if alarmed_cap is None else m(-60),
                        measures=(measure(5, 20, 1500, 800), measure(10, 23, 1720, 810)))
    return dc.decide(state, FACTS, reading(10, deleted=1720, ms=810, downstream=downstream), m(14))


def test_a_probe_the_owners_critical_alarm_judged_ok_is_judged_by_goodput_though_their_warning_is_in_alarm():
    d = _probing((dc.Alarm(SLO, dc.OK, m(10)), dc.Alarm(WARN, dc.ALARM, m(10), dc.WARNING)))
    assert d.action == RAISE and d.cap > 23 and d.state.probe_from == 23, d.reasons


def test_a_probe_warned_before_the_owners_critical_alarm_judged_its_minute_keeps_nothing_above_where_it_started():
    d = _probing((dc.Alarm(SLO, dc.OK, m(9)), dc.Alarm(WARN, dc.ALARM, m(10), dc.WARNING)))
    assert d.cap == 20 and d.state.probe_at is None, d.reasons


def test_a_warned_probe_ends_below_a_limit_found_before_even_when_its_memory_is_spent():
    d = _probing((dc.Alarm(WARN, dc.ALARM, m(10), dc.WARNING),), alarmed_cap=21)
    assert d.cap == 20 and d.state.probe_at is None, d.reasons


def test_a_minute_beyond_the_owners_critical_threshold_cuts_though_the_alarm_is_back_to_ok():
    # The probe's minute (10) crossed the SLO; by the time it is read the alarm evaluates
    # minute 11 (back at 20) and says OK. Its metric's datapoint of minute 10 still says it.
    d = _probing((dc.Alarm(SLO, dc.OK, m(11), breached=(m(10),)),))
    assert d.action == CUT and d.cap == 20 and d.state.alarmed_cap == 23, d.reasons
    assert d.state.probe_at is None and d.state.acted_through == m(10)
    # Without the breached minute the same reading keeps the probe (it paid).
    kept = _probing((dc.Alarm(SLO, dc.OK, m(11)),))
    assert kept.action == RAISE and kept.cap > 23, kept.reasons


def test_a_minute_beyond_the_threshold_from_before_the_drain_started_is_not_the_drains():
    # The database came back slow at minute -2, while the mapping sat at the floor; the drain
    # started at minute 0 on the consumer's evidence. That minute cuts nothing.
    state = dc.CapState(cap=21, step=3, history=((m(0), 21),), prior_cap=2)
    d = dc.decide(state, FACTS, reading(1, deleted=1400, ms=900, downstream=(
        dc.Alarm(SLO, dc.OK, m(1), breached=(m(-2),)),)), m(4))
    assert d.action != CUT and d.state.alarmed_cap is None, d.reasons


def test_a_probe_past_the_owners_limit_keeps_nothing_above_the_cap_it_started_from():
    # Slow start from 62 probed 109; the owner's SLO alarm is in ALARM on the probe's minute.
    state = dc.CapState(cap=62, step=8, history=((m(0), 62), (m(9.5), 109), (m(11), 62)), prior_cap=2,
                        probe_at=m(9.5), probe_from=62, measures=(measure(5, 62, 4400, 850),))
    d = dc.decide(state, FACTS, reading(10, deleted=6000, ms=1100, downstream=(dc.Alarm(SLO, dc.ALARM, m(10)),)), m(14))
    assert d.action == CUT and d.cap == 62 and d.state.additive, d.reasons


def test_a_probe_is_judged_against_the_cap_it_started_from_not_a_step_back_just_below_it():
    # 67 was measured during an earlier step back; the probe 62 -> 68 is judged against 62.
    state = dc.CapState(cap=62, step=3, history=((m(0), 62), (m(9.5), 68), (m(11), 62)), prior_cap=2, additive=True,
                        probe_at=m(9.5), probe_from=62,
                        measures=(measure(-10, 67, 4580, 878), measure(5, 62, 4382, 849)))
    d = dc.decide(state, FACTS, reading(10, deleted=4609, ms=884), m(14))
    assert any("cap 62 -> 68" in r for r in d.reasons), d.reasons
    assert d.state.probe_from == 68 and d.cap > 68, d.reasons


# ---- stalls ------------------------------------------------------------------------


def _drain(state) -> dc.Drain:
    return dc.Drain(since=m(-180), facts=FACTS, state=state, started_at=m(0))


def test_a_drain_whose_oldest_message_does_not_get_younger_is_reported_stalled_after_the_set_time():
    drain = _drain(raised(20, 20, since=0, measures=[measure(1, 20, 1200, 800)]))
    for minute in range(0, 45):
        step = dc.advance(drain, reading(minute, deleted=1200, ms=800, age=9000 + minute), 20, m(minute + 2))
        drain = step.drain
        if minute < 29:
            assert step.stalled is None, (minute, step.reasons)
    assert step.stalled is not None and "has not got younger for" in step.stalled
    assert drain.stalled_since == m(2 + 30)
    # The oldest message gets younger again: the report clears itself.
    later = dc.advance(drain, reading(46, deleted=1200, ms=800, age=8000), 20, m(48))
    assert later.stalled is None


def test_an_unprocessable_backlog_on_a_queue_without_a_dlq_says_so():
    facts = replace(FACTS, has_dlq=False)
    drain = dc.Drain(since=m(-180), facts=facts, state=raised(2, 2, since=0), started_at=m(0))
    for minute in range(0, 35):
        step = dc.advance(drain, reading(minute, deleted=0, received=100, ms=800, age=9000 + 60 * minute), 2, m(minute + 2))
        drain = step.drain
    assert step.stalled is not None and "no dead-letter queue" in step.stalled


@pytest.mark.parametrize("why", ["the queue is in account 210987654321, not this one: no metrics here and the live read "
                                 "is denied", "the function does not exist (deleted)"])
def test_a_mapping_whose_evidence_cannot_be_read_is_stalled_at_once_with_its_reason_never_raised(why):
    drain = _drain(raised(20, 20, since=0))
    step = dc.advance(drain, replace(dc.Reading(None, None, None, None), unreachable=why), 20, m(5))
    assert step.stalled == why and step.action != RAISE


def test_a_metric_that_never_arrives_is_a_stall_not_a_wait():
    drain = _drain(raised(20, 20, since=0))
    for minute in range(0, 32):
        step = dc.advance(drain, dc.Reading(None, None, None, None), 20, m(minute))
        drain = step.drain
        assert step.action == HOLD
    assert step.stalled is not None and "no ApproximateAgeOfOldestMessage" in step.stalled


def test_a_queue_with_no_traffic_is_caught_up_not_stalled():
    drain = _drain(raised(20, 20, since=0))
    step = dc.advance(drain, replace(dc.Reading(None, None, None, None), visible_now=0), 20, m(5))
    assert step.stalled is None and step.action in (HOLD, dc.RESTORE)


def _back_from(measures) -> dc.CapDecision:
    """A drain past its slow start, at cap 10 since minute 20 after a cut, with a whole
    minute measured there at the drain's best speed."""
    state = dc.CapState(cap=10, step=2, history=((m(0), 32), (m(20), 10)), prior_cap=2, additive=True,
                        measures=tuple(measures) + (measure(21, 10, 750, 800),))
    return dc.decide(state, FACTS, reading(21, deleted=750, ms=800), m(25))


def test_below_a_cap_the_downstream_carried_at_its_best_the_climb_back_is_by_slow_start_probes():
    # Cap 32 ran at 800 ms a message and 75 deletions a batch; the downstream failed, the
    # cap was cut to 10, and it is back at its best speed there: the next probe is
    # × 1.75 (18), not an additive step (12), and never past 32.
    back = _back_from([measure(5, 32, 2400, 800)])
    assert back.action == RAISE and back.cap == math.ceil(10 * dc.DEFAULTS.slow_start_factor), back.reasons
    assert back.state.probe_from == 10
    assert dc.known_good(back.state.measures, FACTS) == 32
    assert dc.climb(28, 2, True, 1000, 32) == 32 and dc.climb(32, 2, True, 1000, 32) == dc.raise_to(32, 2, True, 1000)
    # The newest minute at 32 was slow (its capacity dropped there): nothing above 10 is
    # known good, and the raise is the additive step.
    dropped = _back_from([measure(5, 32, 2400, 800), measure(15, 32, 1500, 1300)])
    assert dropped.action == RAISE and dropped.cap == 12, dropped.reasons
    assert dc.known_good(dropped.state.measures, FACTS) == 10


def test_a_downstream_still_down_after_a_cut_keeps_the_limit_found_before():
    # Cut from 32 at minute 20 (raises stop below 32); at 16 the next whole minute delivers
    # nothing at all, every message failing: the database is down. The cut goes on, but
    # 16 is not a limit of the database's: raises still stop below 32, not below 16.
    state = dc.CapState(cap=16, step=2, history=((m(0), 32), (m(20), 16)), prior_cap=2, additive=True,
                        measures=(measure(5, 32, 2400, 800),), alarmed_cap=32, alarmed_at=m(20),
                        acted_through=m(19))
    down = dc.decide(state, FACTS, reading(21, deleted=0, ms=30000, received=1200), m(25))
    assert down.action == CUT and down.cap < 16, down.reasons
    assert down.state.alarmed_cap == 32, down.reasons
    # A minute that still delivered, slowly, at 16 is a limit there: remembered.
    slow = dc.decide(state, FACTS, reading(21, deleted=600, ms=29000, received=1200), m(25))
    assert slow.action == CUT and slow.state.alarmed_cap == 16, slow.reasons


def test_a_paid_probe_judged_on_a_late_minute_is_kept_and_no_further_probe_follows_in_additive_steps_either():
    # Past the slow start, probing 18 from 16 over minute 10. With a 15-minute timeout its
    # minute is whole, and judged, only at minute 28, older than the stale limit: the probe
    # is kept, and what a further raise does would be seen that late, so none is made.
    state = dc.CapState(cap=16, step=2, history=((m(0), 16), (m(9.5), 18), (m(11), 16)), prior_cap=2, additive=True,
                        probe_at=m(9.5), probe_from=16, measures=(measure(5, 16, 1200, 800),))
    late = replace(reading(10, deleted=1350, ms=800), oldest_age=dp(27, 9000.0), visible=dp(27, 100_000.0))
    d = dc.decide(state, replace(FACTS, timeout_seconds=900.0), late, m(28))
    assert d.action == RAISE and d.cap == 18 and d.state.probe_at is None, d.reasons


def test_past_the_owners_limit_at_a_cap_whose_messages_got_slower_the_cut_is_multiplicative_not_down_the_old_ladder():
    # 30 and 34 paid; 38 ran within the SLO at 900 ms a message (minute 5). At minute 19 the
    # same 38 takes 1,100 ms and the SLO alarms on minute 20: the downstream itself shrank (a
    # failover to a smaller replica), and 34, measured in the old downstream, says nothing
    # of the new one. × 0.7, not back to 34.
    ran = (measure(-20, 30, 1900, 880), measure(-10, 34, 2150, 890), measure(5, 38, 2400, 900))
    alarm = (dc.Alarm(SLO, dc.ALARM, m(20)),)
    slower = raised(34, 38, since=0, measures=ran + (measure(19, 38, 2000, 1100),))
    d = dc.decide(slower, FACTS, reading(20, deleted=2000, ms=1100, downstream=alarm), m(23))
    assert d.action == CUT and d.cap == 26 and "× 0.7" in " ".join(d.reasons), d.reasons
    # The same crossing at the same speed (a noisy minute, a neighbour's burst) steps back to
    # the cap measured below it, as a crossing at a cap newly set does.
    same = raised(34, 38, since=0, measures=ran + (measure(19, 38, 2380, 910),))
    d = dc.decide(same, FACTS, reading(20, deleted=2380, ms=910, downstream=alarm), m(23))
    assert d.action == CUT and d.cap == 34 and "the last cap measured below it" in " ".join(d.reasons), d.reasons


# ---- the owner's limit from their alarm's metric ------------------------------------------


def _queueing(cap, seconds=0.1, capacity=50.0, work=0.7):
    """A minute at `cap` on one queueing server (latency = seconds ÷ (1 − utilisation)), its
    latency as a share of a 0.25 s SLO: (deleted a minute, seconds a message, level)."""
    lo, hi = 0.0, capacity
    for _ in range(60):                      # the throughput x at which cap = x × (work + latency)
        x = (lo + hi) / 2
        lo, hi = (x, hi) if x * (work + seconds / (1 - x / capacity)) < cap else (lo, x)
    latency = seconds / (1 - x / capacity)
    return x * 60, work + latency, latency / 0.25


def test_the_owners_limit_is_where_their_metrics_rise_with_the_goodput_reaches_the_target():
    measures = []
    for minute, cap in ((1, 10), (5, 16), (9, 21)):
        deleted, spm, level = _queueing(cap)
        measures.append(dc.Measure(m(minute), cap, deleted, spm, 0.0, level))
    cap, why = dc.owners_limit(measures)
    # The SLO (level 1) is at 28.5 batches on this server; 90 % of it near 25.
    assert 23 <= cap <= 26 and "90%" in why, why
    # A downstream flat up to a wall warns of nothing: no limit.
    flat = [dc.Measure(m(k), c, c * 75.0, 0.8, 0.0, 0.4) for k, c in ((1, 10), (5, 16), (9, 21))]
    assert dc.owners_limit(flat) is None
    # One cap measured, or none with a level: nothing to extrapolate.
    assert dc.owners_limit(measures[:1]) is None
    assert dc.owners_limit([replace(x, level=None) for x in measures]) is None


def test_the_slow_start_ends_where_the_owners_metric_puts_their_limit_not_on_a_probe_past_it():
    levels, measures = [], []
    for minute, cap in ((-8, 2), (1, 21)):
        deleted, spm, level = _queueing(cap)
        measures.append(dc.Measure(m(minute), cap, deleted, spm, 0.0))
        levels.append(dc.Datapoint(m(minute), level))
    state = dc.CapState(cap=21, step=3, history=((m(-10), 2), (m(0), 21)), prior_cap=2, measures=tuple(measures[:1]))
    deleted, spm, _ = _queueing(21)
    slo = dc.Alarm(SLO, dc.OK, m(1), levels=tuple(levels))
    d = dc.decide(state, FACTS, reading(1, deleted=deleted, ms=spm * 1000, downstream=(slo,)), m(4))
    # × 1.75 would probe 37, past the SLO at 28.5; the owner's metric ends the slow start lower.
    assert d.action == RAISE and 22 <= d.cap <= 26 and d.state.additive, d.reasons
    assert any("the slow start ends" in r for r in d.reasons), d.reasons
    # Without the levels the same reading probes × 1.75.
    blind = dc.decide(state, FACTS, reading(1, deleted=deleted, ms=spm * 1000, downstream=(dc.Alarm(SLO, dc.OK, m(1)),)),
                      m(4))
    assert blind.action == RAISE and blind.cap == 37 and not blind.state.additive, blind.reasons


def test_a_measure_keeps_its_level_in_the_record_and_reads_one_written_before_levels():
    x = dc.Measure(m(1), 21, 1400.0, 0.9, 0.0, 0.75)
    assert dc.Measure.from_list(x.to_list()) == x
    assert dc.Measure.from_list(x.to_list()[:5]) == replace(x, level=None)
    with pytest.raises(ValueError):
        dc.Measure.from_list(x.to_list() + [1])
    with pytest.raises(ValueError, match="levels"):
        dc.Alarm(SLO, dc.OK, m(1), levels=((m(1), 0.5),))

