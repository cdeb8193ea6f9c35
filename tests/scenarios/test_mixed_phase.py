"""The verdict over launch outcomes in the window, with hysteresis, and one
regional criterion for impairment, recovery and the stages' clocks.

Each story ticks once a minute like the reconciler. Shares use the defaults: a window's
regional capacity failures impair at 50 % of its launch outcomes and hold the impairment
above 10 %; below that, successes steady for the quiet window are recovery.
"""

from datetime import timedelta

import pytest

from holdfast.core.detector import IMPAIRED, NORMAL, RECOVERING, Verdict, evaluate
from holdfast.core.signals import parse_event
from holdfast.settings import Settings
from tests.support.factory import SETTINGS, THROTTLED, capacity, fixture, health, launch, launched, signal, utc

T0 = utc(2025, 10, 20, 12, 28)
MIN = timedelta(minutes=1)
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
GROUPS = [f"svc-{i}" for i in range(12)]
QUIET = SETTINGS.recover_quiet_minutes


def run(signals, minutes, previous=None, start=T0, settings=SETTINGS):
    verdicts = []
    for m in range(minutes + 1):
        previous = evaluate(signals, previous, settings, start + m * MIN)
        verdicts.append(previous)
    return verdicts


def changes(verdicts, first=NORMAL):
    out, last = [], first
    for v in verdicts:
        if v.state != last:
            out.append((v.since, v.state))
            last = v.state
    return out


def impaired_at(t):
    """Impaired since `t` by capacity failures across the region (the last seen at `t`)."""
    return Verdict(IMPAIRED, t, ("3 groups",), t, None, last_failing=t, launches_unhealthy_at=t)


def mixed(start, minutes, *, failures_per_minute, successes_per_minute, seed=0):
    """Launch outcomes once a minute across many groups and all zones: throttled failures
    ("request limit exceeded", capacity-class) and successful launches."""
    out = []
    for m in range(minutes):
        at = start + m * MIN
        for k in range(failures_per_minute):
            i = seed + m * 7 + k
            out.append(capacity(GROUPS[i % len(GROUPS)], ZONES[i % 3], at + timedelta(seconds=k), message=THROTTLED, n=i))
        for k in range(successes_per_minute):
            i = seed + m * 5 + k
            out.append(launched(GROUPS[(i + 3) % len(GROUPS)], ZONES[(i + 1) % 3], at + timedelta(seconds=20 + k)))
    return out


def test_a_success_among_many_capacity_failures_does_not_flip_the_verdict():
    # Launches resume into request limit exceeded: one success for every two throttled failures.
    signals = mixed(T0, 60, failures_per_minute=2, successes_per_minute=1)
    verdicts = run(signals, 60, previous=impaired_at(T0 - MIN))
    assert {v.state for v in verdicts} == {IMPAIRED}
    assert verdicts[-1].failure_share == pytest.approx(2 / 3, abs=0.05)
    assert verdicts[-1].last_failing > T0 + 58 * MIN


def test_a_steady_success_share_above_the_threshold_recovers_after_the_quiet_window():
    # 30 min of the mixed phase, then throttles relax: failures still come from many groups
    # in every zone, but at 1 in 20 outcomes, below the 10 % recovery share.
    relax = T0 + 30 * MIN
    signals = mixed(T0, 30, failures_per_minute=2, successes_per_minute=1)
    signals += mixed(relax, 60, failures_per_minute=1, successes_per_minute=19, seed=1000)
    verdicts = run(signals, 90, previous=impaired_at(T0 - MIN))
    # Quiet counts from the last failure whose window was above the recovery share: a
    # brute-force reference of the criterion.
    outcomes = [s for s in signals if s.klass in ("capacity", "launch")]

    def above(t):
        inside = [s for s in outcomes if t - 10 * MIN < s.time <= t]
        failed = [s for s in inside if s.klass == "capacity"]
        return len(failed) / len(inside) > 0.1

    last_failing = max(s.time for s in outcomes if s.klass == "capacity" and above(s.time))
    assert relax < last_failing < relax + 10 * MIN  # the heavy minutes were still in its window
    recovered_at = next(T0 + m * MIN for m in range(90) if T0 + m * MIN >= last_failing + QUIET * MIN)
    assert changes(verdicts, IMPAIRED) == [(recovered_at, RECOVERING)]
    assert verdicts[-1].last_failing == last_failing
    # Recovering, not normal: the failures are still regional, so launches are not healthy.
    assert verdicts[-1].launches_unhealthy_at > T0 + 88 * MIN
    turned = next(v for v in verdicts if v.state == RECOVERING)
    assert "successful launches from" in turned.reasons[1]


def test_the_hysteresis_band_neither_impairs_from_normal_nor_recovers_from_impaired():
    # One regional failure in four outcomes: 25 %, between 10 % (hold) and 50 % (impair).
    signals = mixed(T0, 40, failures_per_minute=1, successes_per_minute=3)
    assert {v.state for v in run(signals, 40)} == {NORMAL}
    held = run(signals, 40, previous=impaired_at(T0 - MIN))
    assert {v.state for v in held} == {IMPAIRED}
    assert "recovery needs at most 10%" in held[-1].reasons[0]


def test_recovering_is_not_re_impaired_by_failures_in_the_band():
    signals = mixed(T0, 30, failures_per_minute=1, successes_per_minute=3)
    previous = Verdict(RECOVERING, T0 - 5 * MIN, (), T0 - 20 * MIN, T0 - 5 * MIN,
                       last_failing=T0 - 20 * MIN, launches_unhealthy_at=T0 - 6 * MIN)
    verdicts = run(signals, 30, previous=previous)
    assert {v.state for v in verdicts} == {RECOVERING}
    # ... but they restart its quiet: no normal while they last.
    assert verdicts[-1].last_failing > T0 + 28 * MIN


def test_the_shares_are_settings():
    strict = Settings.from_mapping({"detect_failure_share": 0.2, "recover_success_share": 0.95})
    signals = mixed(T0, 20, failures_per_minute=1, successes_per_minute=3)
    assert run(signals, 20, settings=strict)[-1].state == IMPAIRED
    assert run(signals, 20)[-1].state == NORMAL


# ---- one chronically sold-out group ---------------------------------

def test_one_sold_out_group_failing_every_ten_minutes_does_not_keep_the_region_impaired():
    # A p5 group fails every 10 minutes for a day; the region recovered at T0.
    p5 = [capacity("train-p5", ZONES[k % 3], T0 + k * 10 * MIN, n=k) for k in range(144)]
    burst = [capacity(g, z, T0 - 2 * MIN, n=i) for i, (g, z) in enumerate(zip(GROUPS[:3], ZONES))]
    ok = [launched(g, z, T0 + 3 * MIN) for g, z in zip(GROUPS[3:6], ZONES)]
    verdicts = run(p5 + burst + ok, 24 * 60, previous=impaired_at(T0 - 5 * MIN))
    # Its failure at T0 fell in the burst's window, so it was part of the regional failures;
    # from T0 + 10 min on it fails alone, which is routine.
    assert changes(verdicts, IMPAIRED) == [
        (T0 + QUIET * MIN, RECOVERING),
        (T0 + (QUIET + SETTINGS.capacity_hold_minutes) * MIN, NORMAL),
    ]
    last = verdicts[-1]
    # The stage clock and the capacity gate read these: the p5 group moves neither.
    assert last.last_failing == last.launches_unhealthy_at == T0
    assert last.last_capacity_failure == T0 + 143 * 10 * MIN
    assert all(v.failure_share in (None, 0.0) for v in verdicts[10:])


# ---- health-check terminations ------------------------------------------------------------

def terminated(group, zone, at, n=0):
    event = fixture("terminate_elb_health_check")
    event["id"] = f"term-{group}-{zone}-{at.isoformat()}-{n}"
    d = event["detail"]
    d.update(AutoScalingGroupName=group, ActivityId=event["id"], EndTime=at.isoformat(), StartTime=at.isoformat())
    d["Details"]["Availability Zone"] = zone
    return signal(event)


def test_health_check_terminations_across_groups_and_zones_impair():
    signals = [terminated(g, z, T0 + i * 20 * timedelta(seconds=1)) for i, (g, z) in enumerate(zip(GROUPS[:3], ZONES))]
    verdicts = run(signals, 5)
    assert verdicts[1].state == IMPAIRED
    assert "failing ELB health checks in 3 groups across 3 zones" in verdicts[1].reasons[0]
    assert verdicts[-1].last_health_check_terminations == T0 + 40 * timedelta(seconds=1)


def test_one_groups_health_check_replacements_are_routine():
    signals = [terminated("web", ZONES[i % 3], T0 + i * MIN, n=i) for i in range(20)]
    verdicts = run(signals, 20)
    assert {v.state for v in verdicts} == {NORMAL}
    assert verdicts[-1].last_health_check_terminations is None


def test_terminations_hold_the_impairment_and_restart_the_quiet():
    ok = [launched(g, z, T0 + m * MIN) for m in range(40) for g, z in [(GROUPS[m % 6], ZONES[m % 3])]]
    terms = [terminated(GROUPS[i], ZONES[i % 3], T0 + (10 + i) * MIN, n=i) for i in range(3)]
    verdicts = run(ok + terms, 40, previous=impaired_at(T0 - MIN))
    assert changes(verdicts, IMPAIRED) == [(T0 + (12 + QUIET) * MIN, RECOVERING)]


# ---- AWS Health's issue, open for hours after launches recover ------------------------------

def test_an_issue_left_open_does_not_outweigh_launches_recovering_but_keeps_normal_away():
    opened = signal(health("open", T0 - 60 * MIN))
    ok = [launched(GROUPS[m % 6], ZONES[m % 3], T0 + m * MIN) for m in range(200)]
    verdicts = run([opened] + ok, 180, previous=impaired_at(T0 - MIN))
    assert changes(verdicts, IMPAIRED) == [(T0 + (QUIET - 1) * MIN, RECOVERING)]
    assert any("still open" in r for r in verdicts[-1].reasons)

    closed = signal(health("closed", T0 + 100 * MIN, communication="comm-9"))
    verdicts = run([opened, closed] + ok, 180, previous=impaired_at(T0 - MIN))
    normal_at = T0 + (100 + QUIET + SETTINGS.capacity_hold_minutes) * MIN
    assert changes(verdicts, IMPAIRED) == [(T0 + (QUIET - 1) * MIN, RECOVERING), (normal_at, NORMAL)]


def test_without_launch_evidence_an_open_issue_holds_the_impairment():
    opened = signal(health("open", T0 - 60 * MIN))
    one_group = [launched("web", "us-east-1a", T0 + m * MIN) for m in range(60)]
    verdicts = run([opened] + one_group, 60, previous=impaired_at(T0 - MIN))
    assert {v.state for v in verdicts} == {IMPAIRED}
    assert any("open AWS Health issue" in r for r in verdicts[-1].reasons)


def test_an_issue_opened_during_recovery_impairs_again():
    known = signal(health("open", T0 - 60 * MIN))
    fresh = health("open", T0 + 20 * MIN, communication="comm-new")
    fresh["detail"]["eventArn"] = fresh["detail"]["eventArn"].replace("X1", "X2")
    previous = Verdict(RECOVERING, T0, (), None, T0)
    verdicts = run([known, signal(fresh)], 30, previous=previous)
    assert changes(verdicts, RECOVERING) == [(T0 + 20 * MIN, IMPAIRED)]
    assert "opened during recovery" in verdicts[20].reasons[0] and "X2" in verdicts[20].reasons[0]
    # An update to the issue already open when recovery began does not.
    update = signal(health("open", T0 + 20 * MIN, communication="comm-2"))
    assert {v.state for v in run([known, update], 30, previous=previous)} == {RECOVERING}


def test_a_probe_only_impairment_recovers_on_quiet_probes():
    from tests.support.factory import probe

    dns = "dns:dynamodb.us-east-1.amazonaws.com"
    probes = [probe(dns, ok=not (0 <= m < 20), at=T0 + m * MIN) for m in range(90)]
    states = changes(run(probes, 90))
    assert [s for _, s in states] == [IMPAIRED, RECOVERING, NORMAL]


def test_verdict_round_trips_with_its_new_facts():
    signals = mixed(T0, 20, failures_per_minute=2, successes_per_minute=1)
    v = run(signals, 20, previous=impaired_at(T0 - MIN))[-1]
    assert v.last_failing and v.launches_unhealthy_at and v.failure_share
    assert Verdict.from_dict(v.to_dict()) == v
    # A verdict written before these facts existed still reads.
    old = {k: val for k, val in v.to_dict().items()
           if k not in ("last_failing", "launches_unhealthy_at", "last_health_check_terminations", "failure_share")}
    assert Verdict.from_dict(old).last_failing is None


def test_a_termination_event_goes_through_the_real_parser():
    parsed = parse_event(launch("web", "us-east-1a", T0, ok=True), region="us-east-1", settings=SETTINGS)
    assert parsed.signal.klass == "launch"
