"""The October 2025 us-east-1 sequence, from shared/data/oct2025-timeline.csv, replayed as
signals through the real tick loop (detection.replay.verdict_changes).

The fleet: six groups over three zones. The signals follow the published timeline:
- 23:48 the DynamoDB endpoint's DNS record empties: its DNS and API probes fail until
  "All DNS information restored"; EC2 leases expire and every group's launches fail
  with insufficient capacity, a third of the groups every few minutes;
- "launches begin to succeed (many hit request limit exceeded)": successful launches,
  mixed with RequestLimitExceeded failures from several groups until "EC2 request
  throttles begin to relax";
- throughout, one team's group fails on a bad AMI (configuration noise);
- optionally, an AWS Health issue for EC2 that closes when "All EC2 APIs and new
  instance launches normal".
"""

import csv
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from holdfast.core.detector import IMPAIRED, NORMAL, RECOVERING
from holdfast.core.signals import iso
from holdfast.observation.replay import verdict_changes
from tests.support.factory import SETTINGS, THROTTLED, capacity, config, health, launched, probe, signal

TIMELINE = Path("/work/shared/data/oct2025-timeline.csv")
if not TIMELINE.exists():  # a fresh clone keeps the shared data next to the repository
    TIMELINE = Path(__file__).resolve().parents[3] / "shared/data/oct2025-timeline.csv"
PDT = timezone(timedelta(hours=-7))
MIN = timedelta(minutes=1)
GROUPS = [(f"svc-{i}", f"us-east-1{'abc'[i % 3]}") for i in range(6)]


def milestone(text: str) -> datetime:
    with TIMELINE.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if text in r["event"]]
    assert len(rows) == 1, f"timeline has no single row mentioning {text!r}"
    return datetime.fromisoformat(rows[0]["time_pdt"]).replace(tzinfo=PDT)


IMPAIRMENT = milestone("Empty DNS record")
DNS_RESTORED = milestone("All DNS information restored")
LAUNCHES_RESUME = milestone("launches begin to succeed")
THROTTLES_RELAX = milestone("throttles begin to relax")
EC2_NORMAL = milestone("All EC2 APIs and new instance launches normal")


def october(with_health: bool):
    start, end = IMPAIRMENT - 20 * MIN, EC2_NORMAL + 90 * MIN
    signals = []
    t, wave = IMPAIRMENT, 0
    while t < LAUNCHES_RESUME:  # insufficient capacity, a rotating half of the groups
        signals += [capacity(g, z, t, n=wave) for i, (g, z) in enumerate(GROUPS) if i % 2 == wave % 2]
        t, wave = t + 4 * MIN, wave + 1
    t = LAUNCHES_RESUME
    while t < end:  # launches succeed again
        g, z = GROUPS[wave % len(GROUPS)]
        signals.append(launched(g, z, t))
        t, wave = t + 3 * MIN, wave + 1
    t = LAUNCHES_RESUME + 2 * MIN
    while t < THROTTLES_RELAX:  # ... many hitting request limit exceeded
        signals += [capacity(g, z, t, message=THROTTLED, n=wave) for g, z in GROUPS[wave % 2::2]]
        t, wave = t + 7 * MIN, wave + 1
    for k, t in enumerate(_every(start, end, 40 * MIN)):  # one team's bad AMI, all night
        signals.append(config("reports", "us-east-1a", t, n=k))
    for t in _every(start, end, MIN):
        ddb_ok = not (IMPAIRMENT <= t < DNS_RESTORED)
        signals += [probe("dns:dynamodb.us-east-1.amazonaws.com", ddb_ok, t), probe("api:dynamodb", ddb_ok, t),
                    probe("dns:ec2.us-east-1.amazonaws.com", True, t), probe("api:ec2", True, t)]
    if with_health:
        signals.append(signal(health("open", IMPAIRMENT + 23 * MIN)))
        signals.append(signal(health("closed", EC2_NORMAL, communication="comm-closed")))
    return signals


def _every(start, end, step):
    t = start
    while t < end:
        yield t
        t += step


@pytest.mark.parametrize("with_health", [False, True], ids=["signals-only", "with-health-issue"])
def test_october_impaired_from_2348_and_recovering_only_after_launches_succeed(with_health):
    signals = october(with_health)
    changes = [(datetime.fromisoformat(c["time"]), c["verdict"]) for c in verdict_changes(signals, SETTINGS)]
    states = [s for _, s in changes]
    assert states == [IMPAIRED, RECOVERING, NORMAL], changes

    (impaired_at, _), (recovering_at, _), (normal_at, _) = changes
    assert impaired_at == IMPAIRMENT, f"impaired from {iso(impaired_at)}"
    last_capacity_failure = max(s.time for s in signals if s.klass == "capacity")
    assert recovering_at >= THROTTLES_RELAX, "the mixed phase (launches succeed, many throttled) is not recovery"
    # Quiet runs from the last throttled launch, whether or not AWS's issue is still open:
    # launches succeeding across the region outweigh it ...
    assert recovering_at == last_capacity_failure + SETTINGS.recover_quiet_minutes * MIN
    # ... but normal waits for AWS to close it.
    normal_from = EC2_NORMAL if with_health else recovering_at - SETTINGS.recover_quiet_minutes * MIN
    assert normal_at == normal_from + (SETTINGS.recover_quiet_minutes + SETTINGS.capacity_hold_minutes) * MIN
