"""Each stage's built-in gate as a pure function over the evidence, table-tested; then the
same gates through the stage policy (what waits, what steps back, what the advance says).

Times are one hold around NOW; a series is one datapoint a minute, as GetMetricData
returns a 60-second period."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.core import policy
from holdfast.core.evidence import Consumer, DrainEvidence, Evidence, RoutingEvidence, TargetHealth
from holdfast.core.gates import capacity_gate, drain_gate, routing_gate
from holdfast.core.model import KINDS
from holdfast.core.policy import ADVANCE, DRAIN, FRESH_WORK, HOLD, ROUTING, DrainMove, Plan
from holdfast.settings import Settings

NOW = datetime(2025, 10, 20, 21, 0, tzinfo=timezone.utc)
MIN = timedelta(minutes=1)
S = Settings()   # hold 10 min, capacity hold 30 min, error and throttle shares 5 %
START = NOW - 2 * S.hold_minutes * MIN
TG = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/orders/0123456789abcdef"
LB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/orders/fedcba9876543210"


def series(values, end=NOW):
    """One value a minute, the last one a minute before `end`."""
    return tuple((end - (len(values) - i) * MIN, float(v)) for i, v in enumerate(values))


def consumer(name="orders", *, age=(), invocations=(), errors=(), throttles=()):
    return Consumer(f"arn:aws:lambda:us-east-1:123456789012:event-source-mapping:{name}", f"{name}-queue", f"{name}-fn",
                    series(age), series(invocations), series(errors), series(throttles))


@dataclass(frozen=True)
class V:
    state: str = "recovering"
    since: datetime = NOW - 3 * 60 * MIN
    reasons: tuple = ()
    last_capacity_failure: datetime | None = None
    last_successful_launch: datetime | None = NOW - MIN
    last_failing: datetime | None = None
    launches_unhealthy_at: datetime | None = None
    last_health_check_terminations: datetime | None = None
    failure_share: float | None = 0.0


HEALTHY = [100] * 20
FALLING = list(range(4000, 2000, -100))     # the oldest message 4000 s -> 2100 s old
RISING = list(range(2000, 4000, 100))

# (case, consumers, blocked?, back?, fragment of what it says)
DRAIN_TABLE = [
    ("healthy and draining", [consumer(age=FALLING, invocations=HEALTHY, errors=[1] * 20)], False, False,
     "errors at most 1.0%"),
    ("healthy, backlog rising: the cap is the limit", [consumer(age=RISING, invocations=HEALTHY)], False, False,
     "the cap is the limit"),
    ("errors above the share, backlog falling: wait", [consumer(age=FALLING, invocations=HEALTHY, errors=[8] * 20)],
     True, False, "errors 8.0% of 1,000 invocations"),
    ("errors above the share, backlog rising: back", [consumer(age=RISING, invocations=HEALTHY, errors=[8] * 20)],
     True, True, "the step made it worse"),
    ("throttles above the share, backlog rising: back", [consumer(age=RISING, invocations=HEALTHY, throttles=[10] * 20)],
     True, True, "throttles 9.1%"),
    ("errors only before the hold do not count", [consumer(age=FALLING, invocations=HEALTHY, errors=[50] * 10 + [0] * 10)],
     False, False, "errors at most 0.0%"),
    ("no invocation, no data: nothing against it", [consumer()], False, False, "no data on 1"),
    ("one sick consumer among healthy ones", [consumer("a", age=FALLING, invocations=HEALTHY),
                                              consumer("b", age=FALLING, invocations=HEALTHY, errors=[30] * 20)],
     True, False, "consumer b-fn (b-queue)"),
    ("age within a minute of itself is flat, not rising", [consumer(age=[600] * 10 + [650] * 10, invocations=HEALTHY,
                                                                    errors=[9] * 20)], True, False, "errors 9.0%"),
]


@pytest.mark.parametrize("case, consumers, blocked, back, says", DRAIN_TABLE, ids=[c[0] for c in DRAIN_TABLE])
def test_drain_gate(case, consumers, blocked, back, says):
    j = drain_gate(DrainEvidence(START, NOW, tuple(consumers)), NOW, S)
    assert (bool(j.blocking), j.back) == (blocked, back), j
    assert any(says in line for line in j.blocking + j.evidence), j


@pytest.mark.parametrize("evidence, says", [
    (None, "drain evidence not read"),
    (DrainEvidence(START, NOW, error="ThrottlingException: Rate exceeded"), "unreadable: ThrottlingException"),
])
def test_drain_gate_without_evidence_stays_closed(evidence, says):
    j = drain_gate(evidence, NOW, S)
    assert j.blocking == (says,) or says in j.blocking[0]
    assert not j.back


def test_drain_gate_with_nothing_to_watch_is_open():
    assert drain_gate(DrainEvidence(START, NOW), NOW, S).open


def tg(values, *, balancers=(LB,), name=TG):
    return TargetHealth(name, tuple(balancers), series(values))


# (case, target groups, verdict, blocked?, fragment)
ROUTING_TABLE = [
    ("stable after the flapping ended", [tg([0, 3, 1, 4, 0, 2, 0] + [0] * 13)], V(), False, "no unhealthy-host rise since"),
    ("a flap within the hold", [tg([0] * 15 + [2, 0, 0, 0, 0])], V(), True, "unhealthy hosts rose 0 -> 2"),
    ("constantly unhealthy is not a flap", [tg([1] * 20)], V(), False, "target health stable"),
    ("recovering from unhealthy is not a flap", [tg([4, 4, 3, 2, 1] + [0] * 15)], V(), False, "target health stable"),
    ("no load balancer: not judged", [tg([0, 5, 0, 5] * 5, balancers=())], V(), False, "not judged"),
    ("nothing judged is no evidence, not a stable pass", [tg([0, 5, 0, 5] * 5, balancers=())], V(), False,
     "no evidence: 0 target groups judged"),
    ("no datapoint in the hold: not judged", [tg([0, 5, 0, 5, 0, 5] + [None] * 0)], V(), False, "not judged"),
    ("health-check terminations within the hold", [tg([0] * 20)],
     V(last_health_check_terminations=NOW - 4 * MIN), True, "failing ELB health checks across groups"),
    ("terminations before the hold", [tg([0] * 20)], V(last_health_check_terminations=NOW - 11 * MIN), False,
     "no ELB health-check terminations across groups since"),
    ("launches not healthy for a hold", [tg([0] * 20)], V(launches_unhealthy_at=NOW - 3 * MIN), True,
     "launches healthy 3 of 10 min"),
    ("no success since the last regional failures", [tg([0] * 20)],
     V(launches_unhealthy_at=NOW - 30 * MIN, last_successful_launch=NOW - 40 * MIN), True, "no successful launch"),
]


@pytest.mark.parametrize("case, groups, verdict, blocked, says", ROUTING_TABLE, ids=[c[0] for c in ROUTING_TABLE])
def test_routing_gate(case, groups, verdict, blocked, says):
    if case.startswith("no datapoint"):  # its datapoints all end before the hold began
        groups = [TargetHealth(TG, (LB,), series([0, 5, 0, 5, 0, 5], end=NOW - 12 * MIN))]
    j = routing_gate(RoutingEvidence(START, NOW, tuple(groups)), verdict, NOW, S)
    assert bool(j.blocking) == blocked, j
    assert any(says in line for line in j.blocking + j.evidence), j


@pytest.mark.parametrize("evidence, says", [
    (None, "target health not read"),
    (RoutingEvidence(START, NOW, error="InternalServiceError: x"), "target health unreadable"),
])
def test_routing_gate_without_evidence_stays_closed(evidence, says):
    j = routing_gate(evidence, V(), NOW, S)
    assert any(says in b for b in j.blocking)


# (case, verdict, impaired_at, blocked?, fragment)
CAPACITY_TABLE = [
    ("healthy for the capacity hold", V(launches_unhealthy_at=NOW - 31 * MIN), NOW - 5 * 60 * MIN, False,
     "launches healthy for 31 min"),
    ("regional failures 20 min ago", V(launches_unhealthy_at=NOW - 20 * MIN), NOW - 5 * 60 * MIN, True,
     "launches healthy 20 of 30 min"),
    ("no regional failure, hold counted from the impairment", V(), NOW - 10 * MIN, True, "launches healthy 10 of 30"),
    ("a lone group's failure (not regional) is routine", V(last_capacity_failure=NOW - MIN), NOW - 60 * MIN, False,
     "no regional capacity failure"),
    ("no successful launch at all", V(last_successful_launch=None), NOW - 60 * MIN, True, "no successful launch"),
]


@pytest.mark.parametrize("case, verdict, impaired_at, blocked, says", CAPACITY_TABLE, ids=[c[0] for c in CAPACITY_TABLE])
def test_capacity_gate(case, verdict, impaired_at, blocked, says):
    j = capacity_gate(verdict, impaired_at, NOW, S)
    assert bool(j.blocking) == blocked, j
    assert any(says in line for line in j.blocking + j.evidence), j


# ---- through the policy ----------------------------------------------------------------

def plan(stage, step=0, **kw):
    kw.setdefault("done", frozenset(KINDS))
    return Plan(generation=3, stage=stage, entered_at=NOW - 60 * MIN, drain_step=step, verdict="recovering",
                impaired_at=NOW - 10 * 60 * MIN, **kw)


def evidence(*consumers, groups=()):
    return Evidence(drain=DrainEvidence(START, NOW, tuple(consumers)), routing=RoutingEvidence(START, NOW, tuple(groups)))


def test_routing_waits_for_target_health_to_be_stable_and_says_what_allowed_it():
    flapping = evidence(groups=[tg([0] * 15 + [3, 0, 2, 0, 0])])
    d = policy.decide(V(), plan(FRESH_WORK), {}, NOW, S, evidence=flapping)
    assert not d.changed and any("unhealthy hosts rose" in g for g in d.gates)
    d = policy.decide(V(), plan(FRESH_WORK), {}, NOW, S, evidence=evidence(groups=[tg([0, 3, 0, 2] + [0] * 16)]))
    assert d.changed and d.plan.stage == ROUTING
    said = [r for r in d.reasons if r.startswith("evidence: ")]
    assert any("target health stable for 10 min: 1 target groups" in r for r in said), said
    assert any("launches healthy" in r for r in said) and d.evidence


def test_the_drain_stage_waits_on_the_consumers_errors_and_never_steps_back_on_them():
    """Each mapping's controller sets and cuts its own cap (holdfast.core.drain); the
    drain stage's exit waits for the consumers' errors and throttles to be healthy, and a
    rising backlog age with sick consumers is no step back: the caps are not the stage's."""
    sick = consumer(age=FALLING, invocations=HEALTHY, errors=[20] * 20)
    d = policy.decide(V(), plan(DRAIN), {}, NOW, S, evidence=evidence(sick))
    assert not d.changed and any("errors 20.0%" in g for g in d.gates)
    worse = consumer(age=RISING, invocations=HEALTHY, errors=[20] * 20)
    d = policy.decide(V(), plan(DRAIN), {}, NOW, S, evidence=evidence(worse))
    assert not d.changed and not d.plan.stepped_back and d.plan.stage == DRAIN


def test_hold_to_drain_is_not_gated_on_the_drain_evidence():
    """The mappings drain from the hold on, each on its own evidence; the stage moves on the
    launch verdict and the hold."""
    worse = consumer(age=RISING, invocations=HEALTHY, errors=[20] * 20)
    d = policy.decide(V(), plan(HOLD), {}, NOW, S, evidence=evidence(worse))
    assert d.changed and d.plan.stage == DRAIN
    assert any("under its own controller" in r for r in d.reasons), d.reasons


def test_leaving_the_drain_reports_the_drain_evidence():
    ok = consumer(age=FALLING, invocations=HEALTHY)
    d = policy.decide(V(), plan(DRAIN), {}, NOW, S, evidence=evidence(ok))
    assert d.plan.stage == policy.REPLAY
    assert any(r.startswith("evidence: 1 consumers over 10 min") for r in d.reasons), d.reasons


def test_a_drain_gate_slots_in():
    seen = []

    def gate(plan_, drain_evidence, now, settings):
        seen.append((plan_.stage, drain_evidence))
        return DrainMove(ADVANCE if len(seen) > 1 else policy.WAIT, ("forecast: too long",), ("forecast: 40 min",))

    d = policy.decide(V(), plan(DRAIN), {}, NOW, S, evidence=evidence(), drain=gate)
    assert not d.changed and "forecast: too long" in d.gates
    d = policy.decide(V(), plan(DRAIN), {}, NOW, S, evidence=evidence(), drain=gate)
    assert d.plan.stage == policy.REPLAY and "evidence: forecast: 40 min" in d.reasons
    assert [stage for stage, _ in seen] == [DRAIN, DRAIN]


def test_operator_advance_skips_the_built_in_evidence():
    flapping = evidence(groups=[tg([0] * 15 + [3, 0, 2, 0, 0])])
    d = policy.decide(V(), plan(FRESH_WORK), {}, NOW, S, evidence=flapping, advance_generation=3)
    assert d.plan.stage == ROUTING


@pytest.mark.parametrize("stage, state, needed", [
    (HOLD, "impaired", set()), (HOLD, "recovering", set()), (DRAIN, "normal", {"drain"}),
    (FRESH_WORK, "recovering", {"routing"}), (ROUTING, "recovering", set()), ("capacity", "normal", set()),
])
def test_evidence_needed_by_stage(stage, state, needed):
    assert policy.evidence_needed(plan(stage), V(state=state)) == needed
    assert policy.evidence_needed(None, V(state=state)) == set()
