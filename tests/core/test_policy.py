"""The stage policy, table-driven: advances, gates, regressions and re-impairment at each stage.

Unless a test says otherwise the built-in evidence is read and quiet (no consumer, no
target group to judge): the gates under test are the policy's own. The gates' evidence
is tested as pure functions in test_gates.py and through the policy at the end here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.core import policy
from holdfast.core.evidence import Consumer, DrainEvidence, Evidence, RoutingEvidence
from holdfast.core.model import KINDS
from holdfast.core.policy import (
    CAPACITY,
    CONTROL,
    DRAIN,
    ENGAGE,
    FRESH_WORK,
    HOLD,
    NORMAL,
    REPLAY,
    RESTORE,
    ROUTING,
    Plan,
    posture,
)
from holdfast.settings import Settings

T0 = datetime(2025, 10, 20, 6, 48, tzinfo=timezone.utc)
S = Settings.from_mapping({"gating_alarms": ["backlog-age"], "hold_minutes": 10, "capacity_hold_minutes": 30})


@dataclass(frozen=True)
class V:
    """A verdict as detection.Verdict shapes it (only what the policy reads)."""

    state: str
    since: datetime = T0
    reasons: tuple[str, ...] = ()
    last_capacity_failure: datetime | None = None
    last_successful_launch: datetime | None = T0 + timedelta(minutes=1)
    last_failing: datetime | None = None
    launches_unhealthy_at: datetime | None = None
    last_health_check_terminations: datetime | None = None
    failure_share: float | None = None


QUIET_EVIDENCE = Evidence(drain=DrainEvidence(T0, T0 + timedelta(days=1)), routing=RoutingEvidence(T0, T0 + timedelta(days=1)))


def decide(verdict, plan_, alarms, now, settings, **kw):
    kw.setdefault("evidence", QUIET_EVIDENCE)
    return policy.decide(verdict, plan_, alarms, now, settings, **kw)


OK = {"backlog-age": "OK"}
IMPAIRED = V("impaired", reasons=("3 groups, 2 zones",))
RECOVERING = V("recovering")


def plan(stage, step=0, **kw):
    kw.setdefault("done", frozenset(KINDS) | {REPLAY})
    kw.setdefault("impaired_at", T0)
    return Plan(generation=7, stage=stage, entered_at=T0, drain_step=step, verdict="recovering", **kw)


LATER = T0 + timedelta(hours=1)

# (stage, step, verdict, alarms, now, expected stage, expected step, reason fragment)
ADVANCES = [
    (HOLD, 0, RECOVERING, OK, LATER, DRAIN, 0, "advance to drain"),
    (DRAIN, 0, RECOVERING, OK, LATER, REPLAY, 0, "advance to replay"),
    (REPLAY, 0, RECOVERING, OK, LATER, FRESH_WORK, 0, "advance to fresh-work"),
    (FRESH_WORK, 0, V("normal"), OK, LATER, ROUTING, 0, "advance to routing"),
    (ROUTING, 0, RECOVERING, OK, LATER, CAPACITY, 0, "advance to capacity"),
    (CAPACITY, 0, RECOVERING, OK, LATER, NORMAL, 0, "advance to normal"),
]


@pytest.mark.parametrize("stage,step,verdict,alarms,now,want,want_step,why", ADVANCES)
def test_each_stage_advances_when_every_gate_is_open(stage, step, verdict, alarms, now, want, want_step, why):
    d = decide(verdict, plan(stage, step), alarms, now, S)
    assert d.changed and (d.plan.stage, d.plan.drain_step) == (want, want_step)
    assert d.plan.generation == 8 and d.plan.entered_at == now and d.plan.done == frozenset()
    assert any(why in r for r in d.reasons), d.reasons


STAGED = [(HOLD, 0), (DRAIN, 0), (REPLAY, 0), (FRESH_WORK, 0), (ROUTING, 0), (CAPACITY, 0)]


@pytest.mark.parametrize("stage,step", STAGED + [(NORMAL, 0)])
def test_a_new_impairment_returns_to_hold_from_any_stage(stage, step):
    d = decide(IMPAIRED, plan(stage, step), OK, LATER, S)
    if stage == HOLD:
        assert not d.changed and "verdict is impaired" in d.gates
    else:
        assert d.changed and d.plan.stage == HOLD and d.plan.impaired_at == LATER
        assert policy.starts_hold(d.plan)
        assert any("back to hold" in r for r in d.reasons) and any("3 groups" in r for r in d.reasons)


PREVIOUS = {
    (DRAIN, 0): (HOLD, 0),
    (REPLAY, 0): (DRAIN, 0),
    (FRESH_WORK, 0): (REPLAY, 0),
    (ROUTING, 0): (FRESH_WORK, 0),
    (CAPACITY, 0): (ROUTING, 0),
}


@pytest.mark.parametrize("stage,step", list(PREVIOUS))
def test_an_alarm_during_a_hold_steps_back_one_stage(stage, step):
    d = decide(RECOVERING, plan(stage, step), {"backlog-age": "ALARM"}, T0 + timedelta(minutes=3), S)
    assert d.changed and (d.plan.stage, d.plan.drain_step) == PREVIOUS[(stage, step)]
    assert d.plan.stepped_back and any("step back" in r for r in d.reasons)
    assert not policy.starts_hold(d.plan)   # a step back into hold keeps the drains it had


def test_after_a_step_back_the_next_waits_a_full_hold():
    back = plan(ROUTING, stepped_back=True)
    alarm = {"backlog-age": "ALARM"}
    assert not decide(RECOVERING, back, alarm, T0 + timedelta(minutes=9), S).changed
    assert decide(RECOVERING, back, alarm, T0 + timedelta(minutes=10), S).plan.stage == FRESH_WORK


def test_an_alarm_in_hold_keeps_holding():
    d = decide(RECOVERING, plan(HOLD), {"backlog-age": "ALARM"}, LATER, S)
    assert not d.changed and "alarm backlog-age is ALARM: not OK" in d.gates


@pytest.mark.parametrize(
    "alarms,gate",
    [({}, "alarm backlog-age missing: not OK"), ({"backlog-age": "INSUFFICIENT_DATA"}, "alarm backlog-age is INSUFFICIENT_DATA: not OK")],
)
def test_a_missing_or_insufficient_alarm_blocks_advancing_without_stepping_back(alarms, gate):
    d = decide(RECOVERING, plan(ROUTING), alarms, LATER, S)
    assert not d.changed and gate in d.gates


@pytest.mark.parametrize("stage,step", [x for x in STAGED if x[0] != REPLAY])
def test_the_hold_must_pass(stage, step):
    d = decide(RECOVERING, plan(stage, step), OK, T0 + timedelta(minutes=9), S)
    assert not d.changed and any(g.startswith("hold: 1.0 min left") for g in d.gates), d.gates


def test_the_hold_counts_from_the_verdict_turning_recovering_and_the_last_failure():
    late = V("recovering", since=T0 + timedelta(minutes=20))
    assert not decide(late, plan(HOLD), OK, T0 + timedelta(minutes=25), S).changed
    assert decide(late, plan(HOLD), OK, T0 + timedelta(minutes=30), S).changed
    failed = V("recovering", last_failing=T0 + timedelta(minutes=40), last_successful_launch=T0 + timedelta(minutes=45))
    assert not decide(failed, plan(HOLD), OK, T0 + timedelta(minutes=45), S).changed


def test_a_lone_groups_routine_failures_restart_no_hold():
    # The verdict saw a capacity failure 2 minutes ago, from one sold-out
    # group (not regional: last_failing is the regional criterion's, an hour old).
    lone = V("recovering", last_capacity_failure=T0 + timedelta(minutes=58), last_failing=T0 - timedelta(hours=1))
    for stage, step in STAGED:
        d = decide(lone, plan(stage, step), OK, LATER, S)
        assert d.changed, (stage, d.gates)


def test_an_unfinished_walk_blocks_advancing():
    d = decide(RECOVERING, plan(DRAIN, done=frozenset({"asg", "nlb"})), OK, LATER, S)
    assert not d.changed
    assert {"async walk not finished", "scalable-target walk not finished"} <= set(d.gates)
    assert any(g.startswith("esm drain not finished") for g in d.gates), d.gates


def test_the_drain_in_hold_is_no_gate_of_the_hold():
    """Mappings drain under their controllers from the hold on, on their own evidence; the
    hold does not wait for them (its own gates are the launch verdict and the hold)."""
    d = decide(RECOVERING, plan(HOLD, done=frozenset(KINDS) - {"esm"}), OK, LATER, S)
    assert d.changed and d.plan.stage == DRAIN
    assert any("under its own controller" in r for r in d.reasons), d.reasons
    d = decide(RECOVERING, plan(DRAIN, done=frozenset(KINDS) - {"esm"}), OK, LATER, S)
    assert not d.changed


def test_the_drain_stage_ends_on_the_consumers_health_and_never_steps_back_on_it():
    sick = Evidence(drain=DrainEvidence(T0, LATER, (Consumer(
        mapping="arn:aws:lambda:us-east-1:123456789012:event-source-mapping:m", function="consumer", queue="orders",
        errors=((LATER - timedelta(minutes=5), 50.0),), invocations=((LATER - timedelta(minutes=5), 100.0),),
        throttles=(), age=((LATER - timedelta(minutes=9), 100.0), (LATER - timedelta(minutes=1), 900.0))),)))
    d = decide(RECOVERING, plan(DRAIN), OK, LATER, S, evidence=sick)
    assert not d.changed and any("errors 50.0%" in g for g in d.gates), d.gates   # waits, and does not step back


def test_the_replay_waits_for_its_sources_and_has_no_hold_of_its_own():
    early = T0 + timedelta(minutes=1)
    d = decide(RECOVERING, plan(REPLAY, done=frozenset(KINDS)), OK, early, S)
    assert not d.changed and d.gates == ("replay not finished",)
    d = decide(RECOVERING, plan(REPLAY), OK, early, S)
    assert d.changed and d.plan.stage == FRESH_WORK and "hold skipped" not in d.reasons[0]
    assert not decide(RECOVERING, plan(REPLAY), {"backlog-age": "INSUFFICIENT_DATA"}, early, S).changed   # alarms still gate


def test_capacity_waits_for_launches_normal_for_the_capacity_hold():
    routing = plan(ROUTING, impaired_at=T0)
    recent = V("recovering", launches_unhealthy_at=T0 + timedelta(minutes=10), last_successful_launch=T0 + timedelta(minutes=11))
    d = decide(recent, routing, OK, T0 + timedelta(minutes=35), S)
    assert not d.changed and any(g.startswith("capacity hold: launches healthy 25 of 30 min") for g in d.gates), d.gates
    d = decide(recent, routing, OK, T0 + timedelta(minutes=40), S)
    assert d.plan.stage == CAPACITY
    assert any(r.startswith("evidence: launches healthy for 30 min") for r in d.reasons), d.reasons
    never = V("recovering", last_successful_launch=None)
    assert ("capacity hold: no successful launch since the last regional capacity failures"
            in decide(never, routing, OK, LATER, S).gates)
    # A lone group's routine failures (not regional) do not hold capacity back.
    lone = V("recovering", last_capacity_failure=LATER - timedelta(minutes=1), last_successful_launch=T0 + timedelta(minutes=2))
    assert decide(lone, routing, OK, LATER, S).plan.stage == CAPACITY


def test_operator_advance_skips_the_time_gates_of_this_generation_only():
    early = T0 + timedelta(minutes=1)
    assert not decide(RECOVERING, plan(ROUTING), OK, early, S).changed
    assert not decide(RECOVERING, plan(ROUTING), OK, early, S, advance_generation=6).changed
    d = decide(RECOVERING, plan(ROUTING), OK, early, S, advance_generation=7)
    assert d.plan.stage == CAPACITY and "hold skipped by operator, built-in evidence too" in d.reasons[0]
    # the walk and the alarms still gate
    assert not decide(RECOVERING, plan(ROUTING), {}, early, S, advance_generation=7).changed
    assert not decide(RECOVERING, plan(ROUTING, done=frozenset()), OK, early, S, advance_generation=7).changed


def test_normal_stays_normal_unless_impaired():
    d = decide(RECOVERING, None, {}, T0, S)
    assert not d.changed and d.plan.generation == 0 and d.plan.stage == NORMAL


def test_a_mode_change_walks_again_in_the_same_stage_keeping_its_clock():
    d = decide(RECOVERING, plan(ROUTING, mode="auto"), OK, T0 + timedelta(minutes=1), S)   # S: the default, recommend
    assert d.changed and d.plan.stage == ROUTING and d.plan.generation == 8
    assert d.plan.entered_at == T0 and d.plan.done == frozenset() and d.plan.mode == "recommend"


def test_posture_holds_each_kind_until_its_stage():
    assert posture(plan(NORMAL), S) == {}
    held = {"async": ENGAGE, "nlb": ENGAGE, "asg": ENGAGE, "scalable-target": ENGAGE}
    assert posture(plan(HOLD), S) == {"esm": CONTROL, **held}
    assert posture(plan(DRAIN), S) == {"esm": CONTROL, **held}
    assert posture(plan(REPLAY), S) == {"esm": RESTORE, **held}
    assert posture(plan(ROUTING), S) == {"esm": RESTORE, "async": RESTORE, "nlb": RESTORE, "asg": ENGAGE, "scalable-target": ENGAGE}
    assert set(posture(plan(CAPACITY), S).values()) == {RESTORE}
