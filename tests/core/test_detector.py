"""Detector scenarios: each one a story, ticked minute by minute like the reconciler."""

from datetime import timedelta

import pytest

from holdfast.core.detector import IMPAIRED, NORMAL, RECOVERING, Verdict, evaluate
from holdfast.core.signals import IGNORED, parse_event
from holdfast.settings import Settings
from tests.support.factory import (
    REGION,
    SETTINGS,
    THROTTLED,
    capacity,
    config,
    health,
    launch,
    launched,
    probe,
    signal,
    utc,
)

T0 = utc(2025, 10, 20, 6, 0)
MIN = timedelta(minutes=1)
DNS = "dns:dynamodb.us-east-1.amazonaws.com"


def run(signals, minutes, settings=SETTINGS, start=T0, previous=None):
    """Tick once a minute from `start` for `minutes`; each tick sees every signal up to it.
    Returns the verdict of every tick."""
    verdicts = []
    for m in range(minutes + 1):
        now = start + m * MIN
        previous = evaluate(signals, previous, settings, now)
        verdicts.append(previous)
    return verdicts


def changes(verdicts):
    out, last = [], NORMAL
    for v in verdicts:
        if v.state != last:
            out.append((v.since, v.state))
            last = v.state
    return out


def test_fifty_configuration_failures_from_one_group_stay_normal():
    signals = [config("web", zone, T0 + timedelta(seconds=10 * i), n=i)
               for i, zone in zip(range(50), ["us-east-1a", "us-east-1b", "us-east-1c"] * 20)]
    assert {v.state for v in run(signals, 15)} == {NORMAL}


def test_configuration_failures_from_many_groups_never_count():
    signals = [config(f"team-{g}", zone, T0 + timedelta(seconds=g)) for g in range(10) for zone in ("us-east-1a", "us-east-1b")]
    assert {v.state for v in run(signals, 5)} == {NORMAL}


def test_capacity_failures_from_one_group_in_two_zones_are_routine():
    signals = [capacity("web", zone, T0 + timedelta(seconds=30 * i)) for i, zone in enumerate(["us-east-1a", "us-east-1b"] * 10)]
    assert {v.state for v in run(signals, 15)} == {NORMAL}


@pytest.mark.parametrize("groups, zones", [(2, 2), (3, 1)])
def test_below_either_threshold_stays_normal(groups, zones):
    z = ["us-east-1a", "us-east-1b"][:zones]
    signals = [capacity(f"g{i}", z[i % zones], T0 + timedelta(seconds=i)) for i in range(groups)]
    assert {v.state for v in run(signals, 5)} == {NORMAL}


def test_three_groups_in_two_zones_are_impaired_on_the_next_tick():
    # The third qualifying failure arrives at 06:00:40; the 06:01 tick is the first to see it.
    signals = [capacity("web", "us-east-1a", T0 + timedelta(seconds=10)),
               capacity("api", "us-east-1b", T0 + timedelta(seconds=25)),
               capacity("batch", "us-east-1a", T0 + timedelta(seconds=40))]
    verdicts = run(signals, 3)
    assert verdicts[0].state == NORMAL
    assert verdicts[1].state == IMPAIRED and verdicts[1].since == T0 + MIN
    assert "3 groups in 2 zones" in verdicts[1].reasons[0]
    assert verdicts[1].last_capacity_failure == T0 + timedelta(seconds=40)


def test_unknown_failures_never_count():
    signals = [signal(launch(g, z, T0, message="An internal error occurred.")) for g, z in
               [("a", "us-east-1a"), ("b", "us-east-1b"), ("c", "us-east-1c")]]
    assert {s.klass for s in signals} == {"unknown"}
    assert {v.state for v in run(signals, 3)} == {NORMAL}


def test_failures_older_than_the_window_do_not_add_up():
    w = SETTINGS.detect_window_minutes
    signals = [capacity("web", "us-east-1a", T0), capacity("api", "us-east-1b", T0 + (w + 1) * MIN),
               capacity("batch", "us-east-1c", T0 + (2 * w + 2) * MIN)]
    assert {v.state for v in run(signals, 3 * w)} == {NORMAL}


def burst(at, n=0):
    """Capacity failures from three groups in three zones, in the 15 s before `at`."""
    return [capacity(g, z, at - timedelta(seconds=15 - 5 * i), n=n) for i, (g, z) in
            enumerate([("web", "us-east-1a"), ("api", "us-east-1b"), ("batch", "us-east-1c")])]


def test_a_flapping_signal_does_not_flap_the_verdict():
    # Bursts every 12 minutes: the window condition switches on and off, and launches
    # succeed in between; probes flap between failing and healthy every few minutes.
    signals = []
    for k in range(10):
        signals += burst(T0 + k * 12 * MIN, n=k)
        signals.append(launched("web", "us-east-1a", T0 + (k * 12 + 6) * MIN))
    for m in range(120):
        signals.append(probe(DNS, ok=(m // 3) % 2 == 0, at=T0 + m * MIN))
    verdicts = run(signals, 125)
    assert changes(verdicts) == [(T0, IMPAIRED)]
    assert any(v.reasons[0].startswith("holding:") for v in verdicts), "the window condition did switch off"


def recovered(at):
    """Successful launches from three groups in three zones, in the 15 s before `at`: the
    regional evidence recovery needs."""
    return [launched(g, z, at - timedelta(seconds=15 - 5 * i)) for i, (g, z) in
            enumerate([("web", "us-east-1a"), ("api", "us-east-1b"), ("batch", "us-east-1c")])]


def test_a_lone_group_failing_after_recovery_does_not_flap_recovering():
    signals = burst(T0) + recovered(T0 + 5 * MIN)
    # After recovery, one group keeps failing now and then: routine, not an impairment, and
    # it does not hold the region back from normal either.
    signals += [capacity("web", "us-east-1a", T0 + m * MIN) for m in range(30, 120, 7)]
    verdicts = run(signals, 120)
    last_regional = T0 - 5 * timedelta(seconds=1)  # the burst's last failure
    assert changes(verdicts) == [
        (T0, IMPAIRED),
        (T0 + SETTINGS.recover_quiet_minutes * MIN, RECOVERING),
        (T0 + (SETTINGS.recover_quiet_minutes + SETTINGS.capacity_hold_minutes) * MIN, NORMAL),
    ]
    assert verdicts[-1].launches_unhealthy_at == verdicts[-1].last_failing == last_regional
    assert verdicts[-1].last_capacity_failure > T0 + 100 * MIN  # seen, and routine


def test_recovery_needs_a_quiet_window_and_evidence_then_normal_after_the_capacity_hold():
    quiet, hold = SETTINGS.recover_quiet_minutes, SETTINGS.capacity_hold_minutes
    last_failure = T0 + 20 * MIN
    signals = burst(T0) + burst(last_failure - 2 * MIN) + [capacity("web", "us-east-1a", last_failure)]
    # No successful launch yet: quiet alone is not recovery.
    verdicts = run(signals, 60)
    assert changes(verdicts) == [(T0, IMPAIRED)]
    assert "no successful launch" in verdicts[-1].reasons[0]

    # With AWS's issue open, one group's success is not the region's recovery ...
    issue = signal(health("open", T0 - 5 * MIN))
    signals.append(launched("api", "us-east-1b", T0 + 25 * MIN))
    verdicts = run(signals + [issue], 60)
    assert changes(verdicts) == [(T0, IMPAIRED)]
    assert verdicts[-1].reasons[0].startswith("open AWS Health issue")   # it still holds the region impaired
    assert changes(run(signals + [issue] + recovered(T0 + 26 * MIN), 60))[1:] == [(last_failure + quiet * MIN, RECOVERING)]

    # ... without it, a successful launch after the quiet began is.
    verdicts = run(signals, 90)
    assert changes(verdicts) == [
        (T0, IMPAIRED),
        (last_failure + quiet * MIN, RECOVERING),
        (last_failure + (quiet + hold) * MIN, NORMAL),
    ]


def test_recovering_returns_to_impaired_when_the_impairment_returns():
    signals = burst(T0) + recovered(T0 + 2 * MIN) + burst(T0 + 40 * MIN, n=1)
    assert [s for _, s in changes(run(signals, 45))] == [IMPAIRED, RECOVERING, IMPAIRED]


def test_health_issue_for_another_region_is_ignored():
    other = health("open", T0, region="us-west-2")
    parsed = parse_event(other, region=REGION, settings=SETTINGS)
    assert parsed.klass == IGNORED and parsed.signal is None
    # The same issue for this region does impair: the region, not the event, was the difference.
    mine = signal(health("open", T0))
    assert evaluate([mine], None, SETTINGS, T0 + MIN).state == IMPAIRED


def test_health_issue_from_the_backup_region_is_counted_once():
    opened = T0 + 2 * MIN
    home = signal(health("open", opened, delivered_in="us-east-1"))
    backup = signal(health("open", opened, delivered_in="us-west-2", delivered_at=opened + 40 * MIN))
    closed = signal(health("closed", T0 + 30 * MIN, communication="comm-9"))
    v = evaluate([home, backup], None, SETTINGS, T0 + 5 * MIN)
    assert v.state == IMPAIRED
    assert len([r for r in v.reasons if "AWS Health" in r]) == 1
    # The backup copy, delivered after the closing communication, does not reopen the issue.
    after = evaluate([home, closed, backup], v, SETTINGS, T0 + 31 * MIN)
    assert not any("AWS Health" in r for r in after.reasons)


def test_closed_health_issue_is_recovery_evidence():
    signals = [signal(health("open", T0)), signal(health("closed", T0 + 10 * MIN, communication="comm-2"))]
    quiet = SETTINGS.recover_quiet_minutes
    assert changes(run(signals, 30))[:2] == [(T0, IMPAIRED), (T0 + (10 + quiet) * MIN, RECOVERING)]


def test_health_issue_for_a_configured_service():
    settings = Settings.from_mapping({"health_services": ["EC2", "DYNAMODB"]})
    s = signal(health("open", T0, service="DYNAMODB"), settings=settings)
    assert evaluate([s], None, settings, T0).state == IMPAIRED
    assert evaluate([s], None, SETTINGS, T0).state == NORMAL  # not configured: not in scope


def test_probe_dns_failure_for_the_configured_endpoint_is_impaired():
    # An empty answer for the regional DynamoDB endpoint, as in October, from 06:10.
    signals = [probe(DNS, ok=m < 10, at=T0 + m * MIN) for m in range(30)]
    signals += [probe("dns:ec2.us-east-1.amazonaws.com", ok=True, at=T0 + m * MIN) for m in range(30)]
    verdicts = run(signals, 29)
    (since, state), = changes(verdicts)
    assert state == IMPAIRED
    # Judged per target over the window: about ratio x window after the first failure.
    assert T0 + 10 * MIN < since <= T0 + (10 + SETTINGS.detect_window_minutes) * MIN
    assert DNS in verdicts[-1].reasons[0]


def test_one_probe_blip_is_absorbed():
    signals = [probe(DNS, ok=m != 12, at=T0 + m * MIN) for m in range(30)]
    assert {v.state for v in run(signals, 29)} == {NORMAL}


def test_throttled_launches_are_capacity_class():
    signals = [capacity(g, z, T0, message=THROTTLED) for g, z in [("a", "us-east-1a"), ("b", "us-east-1b"), ("c", "us-east-1a")]]
    assert evaluate(signals, None, SETTINGS, T0).state == IMPAIRED


def test_thresholds_are_settings():
    settings = Settings.from_mapping({"detect_min_groups": 2, "detect_min_zones": 1})
    signals = [capacity("a", "us-east-1a", T0), capacity("b", "us-east-1a", T0)]
    assert evaluate(signals, None, settings, T0).state == IMPAIRED
    assert evaluate(signals, None, SETTINGS, T0).state == NORMAL


def test_verdict_round_trips_through_a_dict_and_carries_history():
    signals = burst(T0)
    v = evaluate(signals, None, SETTINGS, T0 + MIN)
    assert Verdict.from_dict(v.to_dict()) == v
    # The last capacity failure is remembered when the shell no longer passes it.
    later = evaluate([], v, SETTINGS, T0 + 60 * MIN)
    assert later.last_capacity_failure == v.last_capacity_failure
    with pytest.raises(ValueError, match="state"):
        Verdict.from_dict({**v.to_dict(), "state": "sideways"})


def test_signals_later_than_now_are_not_seen():
    assert evaluate(burst(T0 + 5 * MIN), None, SETTINGS, T0).state == NORMAL
