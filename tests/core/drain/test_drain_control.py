"""The drain's cap controller as a table of pure decisions (holdfast.core.drain)."""

from __future__ import annotations

import ast
import math
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from holdfast.core import drain as dc
from holdfast.core.drain import ALARM, CRITICAL, CUT, HOLD, INSUFFICIENT_DATA, OK, RAISE, RESTORE, START, WARNING
from tests.core.drain.clock import T0, dp, m

# 16 batches before the event, 0.8 s a message, nothing failing; 20 messages a second.
FACTS = dc.Facts(pre_event_concurrency=16, baseline_age_seconds=2, seconds_per_message=0.8, baseline_failure_share=0.0)




def alarms(state_slo=OK, state_warn=OK, at=0, at_warn=None):
    return (
        dc.Alarm("db-latency-slo", state_slo, None if at is None else m(at), CRITICAL),
        dc.Alarm("db-latency-warning", state_warn, None if (at_warn if at_warn is not None else at) is None else m(at_warn if at_warn is not None else at), WARNING),
    )


def own(minute=1, *, received=600.0, deleted=None, ms_per_message=800.0, duration=True):
    """The consumer's own metrics of one minute: receives, deletes (all of them by default)
    and Duration's sum at `ms_per_message`."""
    return dict(received=dp(minute, received), deleted=dp(minute, received if deleted is None else deleted),
                duration=dp(minute, received * ms_per_message) if duration else None)


def reading(*, age=(0, 9000.0), downstream=None, errors=(0, 0.0), throttles=(0, 0.0), visible=(0, 180000.0), consumer=None):
    """`consumer`: the built-in evidence (`own(...)`); by default a minute at baseline
    measured with the newest alarm datapoint (or at minute 1)."""
    def point(x):
        return None if x is None else dp(*x)

    downstream = alarms() if downstream is None else downstream
    if consumer is None:
        times = [a.measured_at for a in downstream if a.measured_at is not None]
        consumer = own((max(times) - T0).total_seconds() / 60 if times else 1)
    return dc.Reading(point(age), point(visible), point(errors), point(throttles), downstream, **consumer)


def state(cap=16, *, history=None, prior=2, step=2, additive=True, **kw):
    """A drain past its slow start (additive) unless said otherwise."""
    return dc.CapState(cap=cap, step=step, history=history or ((m(0), cap),), prior_cap=prior, additive=additive, **kw)


# ---- start -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "facts, current, probe_from, cap, step, why",
    [
        # Not the floor: the pre-event concurrency, one step (1/8 of it) above it; no probe
        # until that cap has a whole minute measured (a probe is judged against it).
        (FACTS, 2, None, 18, 2, "pre-event concurrency (16), 1 step(s) of 2 above it"),
        (dc.Facts(pre_event_concurrency=15.2), 2, None, 18, 2, "pre-event concurrency"),               # whole batches, up
        (dc.Facts(pre_event_concurrency=40, reserved_concurrency=24), 2, None, 24, 5, "reserved"),      # never above reserved
        (dc.Facts(pre_event_concurrency=40, owner_cap=10), 2, None, 10, 5, "owner's own cap"),          # nor the owner's cap
        (dc.Facts(pre_event_concurrency=None), 2, None, 2, 1, "no pre-event ConcurrentExecutions"),     # missing: no probe
        (dc.Facts(pre_event_concurrency=1), 2, None, 2, 1, "pre-event concurrency"),                 # never below the cap in force
        (dc.Facts(pre_event_concurrency=2000), 2, None, 1000, 250, "Lambda's ceiling"),
    ],
)
def test_start(facts, current, probe_from, cap, step, why):
    d = dc.start(facts, current, m(0))
    assert (d.action, d.cap, d.state.step, d.restore) == (START, cap, step, False)
    assert d.state.history == ((m(0), cap),) and d.state.prior_cap == current
    assert d.state.probe_from == probe_from and (d.state.probe_at is None) == (probe_from is None)
    assert any(why in r for r in d.reasons), d.reasons


def test_start_keeps_an_owner_cap_below_the_floor():
    d = dc.start(dc.Facts(pre_event_concurrency=16, owner_cap=3), 3, m(0), dc.Constants(floor=5))
    assert d.cap == 3 and d.ceiling == 3


# ---- raise and hold ----------------------------------------------------------------


def test_raise_on_fresh_ok_with_the_queue_behind():
    d = dc.decide(state(16), FACTS, reading(downstream=alarms(at=1)), m(3))
    assert (d.action, d.cap) == (RAISE, 18)
    assert d.state.history == ((m(0), 16), (m(3), 18))
    assert "probing 18" in d.reasons[-1]


def test_hold_until_a_datapoint_measured_at_the_current_cap():
    # The newest datapoints began before the cap took effect (CloudWatch lag): no evidence yet.
    d = dc.decide(state(16), FACTS, reading(downstream=alarms(at=-1)), m(2))
    assert (d.action, d.cap) == (HOLD, 16)
    assert any("measured at cap 16" in r for r in d.reasons) and d.waiting_on


def test_an_owners_warning_ends_the_slow_start_only_where_it_is_their_only_limit_named():
    # A warning set below the SLO is passed long before the SLO's throughput: where the
    # critical alarm is named (and OK), it is the limit, and the slow start goes on.
    d = dc.decide(state(16, additive=False), FACTS, reading(downstream=alarms(state_warn=ALARM, at=1)), m(3))
    assert d.action == RAISE and not d.state.additive and d.state.probe_from == 16, d.reasons
    assert d.cap == math.ceil(16 * dc.DEFAULTS.slow_start_factor)
    assert any("warning db-latency-warning in ALARM" in r for r in d.reasons)
    # The warning alone named: it ends the slow start, raises go on additively, each a
    # one-minute probe.
    warning_only = alarms(state_warn=ALARM, at=1)[1:]
    d = dc.decide(state(16, additive=False), FACTS, reading(downstream=warning_only), m(3))
    assert d.action == RAISE and d.state.additive and d.state.probe_from == 16, d.reasons
    assert d.cap < math.ceil(16 * dc.DEFAULTS.slow_start_factor)


@pytest.mark.parametrize(
    "errors, throttles, why",
    [((1, 3.0), (1, 0.0), "Errors 3 above the pre-event 0"), ((1, 0.0), (1, 12.0), "throttled (12)")],
)
def test_hold_on_errors_or_throttles(errors, throttles, why):
    d = dc.decide(state(16), FACTS, reading(downstream=alarms(at=1), errors=errors, throttles=throttles), m(3))
    assert (d.action, d.cap) == (HOLD, 16) and any(why in r for r in d.reasons), d.reasons


def test_errors_at_their_pre_event_level_do_not_hold():
    facts = replace(FACTS, baseline_errors=3.0)
    d = dc.decide(state(16), facts, reading(downstream=alarms(at=1), errors=(1, 3.0)), m(3))
    assert d.action == RAISE


# ---- cut ---------------------------------------------------------------------------


def test_cut_multiplicatively_on_an_alarm():
    d = dc.decide(state(24), FACTS, reading(downstream=alarms(state_slo=ALARM, state_warn=ALARM, at=1)), m(3))
    assert (d.action, d.cap) == (CUT, 16)            # int(24 × 0.7)
    assert d.state.acted_through == m(1) and d.state.alarmed_cap == 24
    assert "measured at cap 24: cut to 16" in d.reasons[0]


def test_cut_once_per_datapoint():
    s = dc.decide(state(24), FACTS, reading(downstream=alarms(state_slo=ALARM, at=1)), m(3)).state
    for minute in (4, 5, 6):   # the same datapoint, tick after tick
        d = dc.decide(s, FACTS, reading(downstream=alarms(state_slo=ALARM, at=1)), m(minute))
        assert (d.action, d.cap) == (HOLD, 16), d.reasons
        assert "already acted on" in d.reasons[0]
        s = d.state


def test_two_alarms_on_one_datapoint_cut_once():
    both = (dc.Alarm("latency", ALARM, m(1)), dc.Alarm("errors", ALARM, m(1)))
    d = dc.decide(state(30), FACTS, reading(downstream=both), m(3))
    assert (d.action, d.cap) == (CUT, 21)
    assert dc.decide(d.state, FACTS, reading(downstream=both), m(4)).cap == 21


def test_a_period_that_straddles_a_cut_is_blamed_on_the_higher_cap():
    s = state(16, history=((m(0), 24), (m(5.5), 16)))
    d = dc.decide(s, FACTS, reading(downstream=alarms(state_slo=ALARM, at=5)), m(8))
    assert (d.action, d.cap) == (HOLD, 16) and "measured at cap 24" in d.reasons[0]


# ---- ceilings and the owner's cap --------------------------------------------------


@pytest.mark.parametrize(
    "facts, cap, action, new, why",
    [
        (dc.Facts(16, reserved_concurrency=24), 24, HOLD, 24, "at the function's reserved concurrency (24)"),
        (dc.Facts(16, reserved_concurrency=24), 23, RAISE, 24, "probing 24"),
        (dc.Facts(16), 999, RAISE, 1000, "probing 1000"),
        (dc.Facts(16), 1000, HOLD, 1000, "at the Lambda's ceiling (1000)"),
        (dc.Facts(16, owner_cap=10), 10, HOLD, 10, "at the owner's own cap (10)"),
        (dc.Facts(16, owner_cap=10), 9, RAISE, 10, "probing 10"),
        (dc.Facts(16, reserved_concurrency=12), 20, CUT, 12, "above the function's reserved concurrency (12)"),   # lowered since
        (dc.Facts(16, owner_cap=8), 20, CUT, 8, "above the owner's own cap (8)"),
        (dc.Facts(16, reserved_concurrency=0), 16, CUT, 2, "Lambda's minimum cap"),
    ],
)
def test_ceilings(facts, cap, action, new, why):
    d = dc.decide(state(cap), facts, reading(downstream=alarms(at=1)), m(3))
    assert (d.action, d.cap) == (action, new), d.reasons
    assert any(why in r for r in d.reasons), d.reasons
    assert d.cap <= d.ceiling


def test_an_alarm_with_a_lowered_ceiling_takes_the_lower_of_both():
    d = dc.decide(state(30), dc.Facts(16, reserved_concurrency=25), reading(downstream=alarms(state_slo=ALARM, at=1)), m(3))
    assert (d.action, d.cap) == (CUT, 21)   # int(30 × 0.7) < 25


# ---- restore -----------------------------------------------------------------------


def caught_up(minute, age=5.0, **kw):
    return reading(age=(minute, age), visible=(minute, 3.0), downstream=alarms(at=minute), **kw)


def test_restore_only_after_the_age_is_at_baseline_for_the_period():
    s = state(26)
    for minute in range(1, 15):   # 14 datapoints, 14 minutes at baseline: not yet
        d = dc.decide(s, FACTS, caught_up(minute), m(minute + 2))
        assert (d.action, d.restore) == (HOLD, False), d.reasons
        assert "caught up" in d.reasons[-1]
        s = d.state
    d = dc.decide(s, FACTS, caught_up(15), m(17))
    assert (d.action, d.restore) == (RESTORE, True)
    assert d.state.restored
    # Sticky: the drain of this mapping is over.
    d = dc.decide(d.state, FACTS, reading(age=(16, 9000.0)), m(18))
    assert (d.action, d.restore) == (RESTORE, True)


def test_a_datapoint_behind_restarts_the_restore_period():
    s = state(26)
    for minute in range(1, 11):
        s = dc.decide(s, FACTS, caught_up(minute), m(minute + 2)).state
    s = dc.decide(s, FACTS, caught_up(11, age=300.0), m(13)).state   # behind again
    assert s.caught_up_since is None
    for minute in range(12, 26):
        d = dc.decide(s, FACTS, caught_up(minute), m(minute + 2))
        assert not d.restore
        s = d.state
    assert dc.decide(s, FACTS, caught_up(26), m(28)).restore


@pytest.mark.parametrize("age, restores", [(2 + 10, True), (2 + 10.5, False), (60, False)])
def test_caught_up_means_within_the_slack_of_the_baseline(age, restores):
    s = state(26)
    for minute in range(1, 17):
        d = dc.decide(s, FACTS, caught_up(minute, age=age), m(minute + 2))
        s = d.state
    assert d.restore is restores


def test_a_warning_blocks_the_restore():
    s = state(26)
    for minute in range(1, 20):
        d = dc.decide(s, FACTS, reading(age=(minute, 3.0), downstream=alarms(state_warn=ALARM, at=minute)), m(minute + 2))
        assert not d.restore and d.action in (HOLD, CUT)   # caught up, the owner's original waits for the warning
        s = d.state


def test_an_alarm_without_data_for_long_is_ignored_a_fresh_one_holds():
    """INSUFFICIENT_DATA since (measured_at) longer than a late datapoint: its metric is not
    published, and holding for it would deadlock the drain."""
    fresh = (dc.Alarm("db-latency-slo", INSUFFICIENT_DATA, m(1)),)
    d = dc.decide(state(16), FACTS, reading(downstream=fresh, errors=(1, 0.0)), m(3))
    assert d.action == HOLD and any("INSUFFICIENT_DATA: not raising" in r for r in d.reasons)
    old = (dc.Alarm("db-latency-slo", INSUFFICIENT_DATA, m(-20)),)
    d = dc.decide(state(16), FACTS, reading(downstream=old, errors=(1, 0.0), consumer=own(1)), m(3))
    assert (d.action, d.cap) == (RAISE, 18) and any("its metric is not published; ignored" in r for r in d.reasons)


# ---- missing and bad input ---------------------------------------------------------


@pytest.mark.parametrize(
    "r, why",
    [
        (reading(age=None), "ApproximateAgeOfOldestMessage is missing"),
        (reading(age=(-20, 9000.0)), "ApproximateAgeOfOldestMessage is stale"),
        (reading(downstream=alarms(state_slo=INSUFFICIENT_DATA, at=1)), "db-latency-slo has INSUFFICIENT_DATA"),
        (reading(downstream=(dc.Alarm("db-latency-slo", ALARM, None),)), "no datapoint time"),
    ],
)
def test_a_missing_metric_holds_with_its_reason(r, why):
    d = dc.decide(state(16), FACTS, r, m(3))
    assert (d.action, d.cap, d.restore) == (HOLD, 16, False)
    assert any(why in x for x in d.reasons), d.reasons
    assert d.waiting_on


def test_missing_inputs_never_stall_the_drain_once_they_return():
    s = state(16)
    for minute in range(1, 6):
        s = dc.decide(s, FACTS, reading(age=None), m(minute)).state
    d = dc.decide(s, FACTS, reading(downstream=alarms(at=5)), m(7))
    assert (d.action, d.cap) == (RAISE, 18)


def test_missing_baseline_age_means_within_the_slack_of_zero():
    facts = replace(FACTS, baseline_age_seconds=None)
    s = state(16)
    for minute in range(1, 17):
        d = dc.decide(s, facts, caught_up(minute, age=10.0), m(minute + 2))
        s = d.state
    assert d.restore


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: dc.Facts(pre_event_concurrency=-1), "pre_event_concurrency"),
        (lambda: dc.Facts(16, reserved_concurrency=-2), "reserved_concurrency"),
        (lambda: dc.Facts(16, owner_cap=1), "owner_cap"),
        (lambda: dc.Facts(16, owner_cap=1001), "owner_cap"),
        (lambda: dc.Alarm("x", "ALARMING"), "is not one of"),
        (lambda: dc.Alarm("x", OK, severity="critical"), "severity"),
        (lambda: dc.Datapoint(T0, float("nan")), "finite"),
        (lambda: dc.Constants(cut_factor=1.0), "cut_factor"),
        (lambda: dc.Constants(floor=1), "floor"),
        (lambda: dc.Constants(raise_fraction=0), "raise_fraction"),
        (lambda: dc.CapState(cap=5, step=1, history=((T0, 4),), prior_cap=2), "not the last"),
        (lambda: dc.CapState(cap=5, step=1, history=(), prior_cap=2), "at least"),
        (lambda: dc.CapState(cap=5, step=1, history=((m(1), 4), (m(0), 5)), prior_cap=2), "time order"),
        (lambda: dc.start(FACTS, 0, T0), "current cap"),
        (lambda: dc.CapState.from_dict({"cap": 3}), "malformed"),
    ],
)
def test_bad_input_is_a_clear_error(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_state_round_trips_as_plain_data():
    s = dc.decide(state(24, history=((m(0), 20), (m(5), 24))), FACTS, reading(downstream=alarms(state_slo=ALARM, at=5)), m(8)).state
    raw = s.to_dict()
    import json

    assert dc.CapState.from_dict(json.loads(json.dumps(raw))) == s


# ---- the drain's start on the consumer's own evidence -------------------------------


@pytest.mark.parametrize(
    "r, back, why",
    [
        (reading(downstream=alarms(at=1), errors=(1, 0.0)), True, "dependency back"),
        (reading(downstream=alarms(at=-5), errors=(1, 0.0)), False, "from before the hold"),
        (reading(downstream=alarms(state_slo=ALARM, at=1), errors=(1, 0.0)), False, "is ALARM"),
        (reading(downstream=alarms(state_slo=INSUFFICIENT_DATA, at=1)), False, "INSUFFICIENT_DATA"),
        (reading(downstream=alarms(at=1), errors=(1, 7.0)), False, "Errors 7 above"),
        (reading(downstream=alarms(at=1), errors=None, consumer={}), True, "judged on the downstream alarms"),
        (reading(downstream=(), errors=(1, 0.0), consumer={}), True, "function Errors at the pre-event level"),
        (reading(downstream=(), errors=None), True, "the consumer's own evidence at its baseline"),
        (reading(downstream=(), errors=None, consumer={}), False, "no evidence"),
        (reading(downstream=(), errors=None, consumer=own(1, received=0)), False, "no evidence"),
        (reading(downstream=(dc.Alarm("db", None),), errors=(1, 0.0)), True, "does not exist: ignored"),
        (reading(downstream=(dc.Alarm("db", None),), errors=None, consumer={}), False, "no evidence"),
        # ReportBatchItemFailures: Errors 0, every message received and none deleted.
        (reading(downstream=(), errors=(1, 0.0), consumer=own(1, deleted=0)), False, "100.0% of 600 messages received not deleted"),
        # Slow at the floor, with no failures: answering (how fast is the goodput rule's to judge).
        (reading(downstream=(), errors=(1, 0.0), consumer=own(1, ms_per_message=2000)), True, "2.50× its baseline"),
    ],
)
def test_dependency_back(r, back, why):
    ok, reasons = dc.dependency_back(FACTS, r, since=m(0), now=m(3))
    assert ok is back and any(why in x for x in reasons), reasons


@pytest.mark.parametrize(
    "r, back, why",
    [
        # Missing evidence: started with the plan's drain stage, and said so.
        (reading(downstream=alarms(state_slo=INSUFFICIENT_DATA, at=1)), True, "without the consumer's own evidence"),
        (reading(downstream=alarms(at=-5), errors=None), True, "from before the hold"),
        (reading(downstream=(), errors=None, consumer={}), True, "no evidence the dependency is back"),
        # Evidence that it is not back still holds it at the floor.
        (reading(downstream=alarms(state_slo=ALARM, at=1)), False, "is ALARM"),
        (reading(downstream=(), errors=(1, 7.0)), False, "Errors 7 above"),
    ],
)
def test_dependency_back_falls_back_to_the_drain_stage_only_on_missing_evidence(r, back, why):
    ok, reasons = dc.dependency_back(FACTS, r, since=m(0), now=m(3), fallback=True)
    assert ok is back and any(why in x for x in reasons), reasons


# ---- invariants over arbitrary readings ---------------------------------------------

states = st.sampled_from([OK, ALARM, INSUFFICIENT_DATA, None])
minutes = st.integers(min_value=-30, max_value=40)


@st.composite
def readings(draw):
    def maybe(value_strategy):
        return draw(st.one_of(st.none(), st.tuples(minutes, value_strategy)))

    downstream = tuple(
        dc.Alarm(name, draw(states), draw(st.one_of(st.none(), minutes.map(m))), severity)
        for name, severity in (("slo", CRITICAL), ("warn", WARNING))[: draw(st.integers(0, 2))]
    )
    return reading(
        age=maybe(st.floats(0, 20000)),
        downstream=downstream,
        errors=maybe(st.floats(0, 10)),
        throttles=maybe(st.floats(0, 10)),
        visible=maybe(st.floats(0, 1e6)),
    )


@hsettings(max_examples=300, deadline=None)
@given(st.lists(readings(), min_size=1, max_size=12), st.sampled_from([None, 12, 40]), st.sampled_from([None, 5, 30]))
def test_invariants(seq, reserved, owner):
    facts = dc.Facts(16, reserved_concurrency=reserved, owner_cap=owner, baseline_age_seconds=2)
    d = dc.start(facts, 2, m(0))
    cut_for: set[datetime] = set()
    for i, r in enumerate(seq):
        now = m(3 * (i + 1))
        before = d.state
        d = dc.decide(before, facts, r, now)
        top, _ = dc.ceiling(facts)
        assert dc.LAMBDA_MIN_CAP <= d.cap <= top or (owner is not None and d.cap == owner)
        assert d.reasons
        if d.cap > before.cap:
            # A raise only on OK evidence measured at the cap before it (or at a probe's cap,
            # on the probe's minute); or a slow-start probe ended by its own minute's
            # evidence, between the cap returned to and the probe's.
            counted = [a for a in r.downstream if dc.counts(a, now)]
            since = before.in_force_since if before.probe_at is None else dc.probe_minute(before.probe_at)
            raised = d.action == RAISE and all(a.state == OK and a.measured_at >= since for a in counted)
            ended = (before.probe_at is not None and d.state.probe_at is None and d.cap < before.probe_cap
                     and d.state.additive)
            assert raised or ended, d.reasons
            assert not d.restore
        if d.action == CUT and d.cap < min(before.cap, top):
            # A cut is for a critical datapoint (an alarm's or the consumer's own evidence) not
            # acted on before, or a persisting warning's step back.
            if d.state.acted_through != before.acted_through:
                stamp = d.state.acted_through
                assert stamp not in cut_for   # never twice for one datapoint
                cut_for.add(stamp)
            else:
                assert any("stepped back" in reason for reason in d.reasons), d.reasons
        assert dc.CapState.from_dict(d.state.to_dict()) == d.state


def test_the_package_is_pure():
    for module in sorted(Path(dc.__file__).parent.glob("*.py")):
        tree = ast.parse(module.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
        ours = {m for m in imported if m.startswith("holdfast.")}
        assert imported - ours <= {"__future__", "dataclasses", "datetime", "math", "typing"}, (module.name, imported)
        assert all(m == "holdfast.core" or m.startswith("holdfast.core.drain") for m in ours), (module.name, ours)
        assert ".now(" not in module.read_text(), module.name


def test_the_settings_defaults_are_the_controllers():
    from holdfast.settings import Settings

    assert dc.constants_from(Settings()) == dc.DEFAULTS
    tuned = Settings.from_mapping({"drain_raise_fraction": 0.25, "drain_start_steps_above": 0, "esm_floor": 5,
                                   "drain_restore_after_minutes": 20})
    c = dc.constants_from(tuned)
    assert (c.raise_fraction, c.start_steps_above, c.floor, c.restore_after_seconds) == (0.25, 0, 5, 1200)


@pytest.mark.parametrize("errors, invocations, action", [
    (3, 600, RAISE),     # 0.5 %: the pre-event 0.4 % at three times the throughput
    (30, 600, HOLD),     # 5 %: the dependency is failing
    (3, None, HOLD),     # no Invocations: the count, above the pre-event 1 a minute
])
def test_errors_are_judged_as_a_share_of_invocations_when_known(errors, invocations, action):
    facts = dc.Facts(16, baseline_age_seconds=2, baseline_errors=1.0, baseline_error_share=0.004)
    r = reading(errors=(1, float(errors)), downstream=())
    if invocations is not None:
        r = replace(r, invocations=dp(1, float(invocations)))
    d = dc.decide(state(16), facts, r, m(3))
    assert d.action == action, d.reasons
    if action == HOLD:
        assert any("Errors" in x and ("above the pre-event" in x or "invocations (baseline" in x) for x in d.reasons)

