"""The detector: signals in a window + the previous verdict -> normal | impaired | recovering.

Pure: no boto3, no clock; `now` is an argument, and the verdict never depends on the
order in which signals arrive (they are deduplicated by id and read as sets).

Impaired, when any of these holds at `now`:
- capacity-class launch failures from at least `detect_min_groups` distinct groups,
  spanning at least `detect_min_zones` zones, within the last `detect_window_minutes`.
  One group whose instance type is sold out, even in several zones, is routine.
  Configuration-class and unknown failures never count, however many.
- an open AWS Health issue for a service in `health_services` (the latest
  communication of its eventArn says `open`). The shell keeps only this region's
  issues (signals.parse_event), so no region is needed here.
- a probe target (one endpoint's DNS, one service's API) whose results within the
  window fail more often than `probe_failure_ratio`. Each target is judged alone, so
  one empty DNS answer among healthy ones is not diluted; the ratio over the window
  absorbs a single blip. Detection by probes alone takes about ratio × window.

Hysteresis — entering is easy, leaving is slow, so a flapping signal cannot flap the
verdict:
- impaired -> recovering: no capacity-class failure at all (from any group), no probe
  target over its ratio, and no open Health issue, for `recover_quiet_minutes`; and
  evidence of recovery since the impairment began: a successful launch or a closed
  Health issue.
- recovering -> normal: the quiet has lasted a further `capacity_hold_minutes`.
- recovering -> impaired: whenever the impairment conditions hold again. A lone
  capacity failure does not re-impair; it restarts the quiet, delaying normal.

The Verdict carries the last capacity failure and the last successful launch, so a
fact older than the window the shell reads is not forgotten. `lookback(settings)` is
the window the shell must pass for the verdict to be exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping

from holdfast.core.classify import CAPACITY
from holdfast.core.signals import HEALTH, HEALTH_CLOSED, HEALTH_OPEN, LAUNCHED, PROBE, PROBE_FAILED, Signal, iso, parse_time

NORMAL, IMPAIRED, RECOVERING = "normal", "impaired", "recovering"
STATES = (NORMAL, IMPAIRED, RECOVERING)


@dataclass(frozen=True)
class Verdict:
    state: str
    since: datetime
    reasons: tuple[str, ...]
    last_capacity_failure: datetime | None
    last_successful_launch: datetime | None

    def to_dict(self) -> dict[str, Any]:
        opt = lambda t: iso(t) if t else None
        return {
            "state": self.state,
            "since": iso(self.since),
            "reasons": list(self.reasons),
            "last_capacity_failure": opt(self.last_capacity_failure),
            "last_successful_launch": opt(self.last_successful_launch),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Verdict":
        opt = lambda v: parse_time(v) if v else None
        if raw.get("state") not in STATES:
            raise ValueError(f"verdict state {raw.get('state')!r} is not one of {STATES}")
        return cls(
            state=raw["state"],
            since=parse_time(raw["since"]),
            reasons=tuple(raw.get("reasons") or ()),
            last_capacity_failure=opt(raw.get("last_capacity_failure")),
            last_successful_launch=opt(raw.get("last_successful_launch")),
        )


def lookback(settings) -> timedelta:
    """How far back the shell must read signals: the probe window before the start of
    the longest quiet the detector waits for."""
    return timedelta(
        minutes=settings.detect_window_minutes + settings.recover_quiet_minutes + settings.capacity_hold_minutes
    )


def evaluate(signals: Iterable[Signal], previous: Verdict | None, settings, now: datetime) -> Verdict:
    """The verdict at `now`. Signals later than `now` are not yet seen."""
    seen = _distinct(s for s in signals if s.time <= now)
    window = timedelta(minutes=settings.detect_window_minutes)
    previous = previous or Verdict(NORMAL, now, (), None, None)

    failures = [s for s in seen if s.klass == CAPACITY]
    launches = [s for s in seen if s.klass == LAUNCHED]
    last_failure = _latest(previous.last_capacity_failure, *(s.time for s in failures))
    last_launch = _latest(previous.last_successful_launch, *(s.time for s in launches))

    health = _health(seen, settings)
    probes = [s for s in seen if s.source == PROBE]
    impairing = (
        _capacity_reasons(failures, settings, now - window)
        + [f"open AWS Health issue: {_health_label(s)}" for s in health if s.klass == HEALTH_OPEN]
        + _probe_reasons(probes, settings, now)
    )

    def verdict(state: str, reasons: list[str]) -> Verdict:
        since = previous.since if state == previous.state else now
        return Verdict(state, since, tuple(reasons), last_failure, last_launch)

    if impairing:
        return verdict(IMPAIRED, impairing)
    if previous.state == NORMAL:
        return verdict(NORMAL, [])

    # Quiet begins at the last bad fact: a capacity failure, a probe round over its
    # ratio, a Health issue's closing, or (when impaired) the impairment itself.
    closings = [s.time for s in health if s.klass == HEALTH_CLOSED]
    quiet_since = _latest(
        last_failure,
        _last_probe_failing(probes, settings),
        *closings,
        previous.since if previous.state == IMPAIRED else None,
    )
    quiet = now - quiet_since if quiet_since else None
    need_quiet = timedelta(minutes=settings.recover_quiet_minutes)
    quiet_text = f"quiet for {_minutes(quiet)} min" if quiet is not None else "nothing bad seen in the lookback"

    if previous.state == IMPAIRED:
        evidence = _recovery_evidence(health, last_launch, previous.since)
        waiting = []
        if quiet < need_quiet:
            waiting.append(f"{quiet_text}, recovery needs {settings.recover_quiet_minutes}")
        if not evidence:
            waiting.append("no successful launch or closed Health issue since the impairment began")
        if waiting:
            return verdict(IMPAIRED, ["holding: " + "; ".join(waiting)])
        return verdict(RECOVERING, [quiet_text, evidence])

    need_normal = need_quiet + timedelta(minutes=settings.capacity_hold_minutes)
    if quiet is not None and quiet < need_normal:
        return verdict(RECOVERING, [f"{quiet_text}, normal needs {_minutes(need_normal)}"])
    return verdict(NORMAL, [f"{quiet_text}: recovered"])


def _distinct(signals: Iterable[Signal]) -> list[Signal]:
    """One signal per id, chosen independently of arrival order, sorted by (time, id)."""
    by_id: dict[str, Signal] = {}
    for s in signals:
        kept = by_id.get(s.id)
        if kept is None or (s.time, s.klass) > (kept.time, kept.klass):
            by_id[s.id] = s
    return sorted(by_id.values(), key=lambda s: (s.time, s.id))


def _latest(*times: datetime | None) -> datetime | None:
    present = [t for t in times if t is not None]
    return max(present) if present else None


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def _capacity_reasons(failures: list[Signal], settings, start: datetime) -> list[str]:
    recent = [s for s in failures if s.time > start]
    groups = sorted({s.group for s in recent if s.group})
    zones = sorted({s.zone for s in recent if s.zone})
    if len(groups) >= settings.detect_min_groups and len(zones) >= settings.detect_min_zones:
        return [
            f"capacity-class launch failures from {len(groups)} groups in {len(zones)} zones "
            f"within {settings.detect_window_minutes} min: {', '.join(groups[:5])}{' …' if len(groups) > 5 else ''} "
            f"({', '.join(zones)})"
        ]
    return []


def _health(seen: list[Signal], settings) -> list[Signal]:
    """The latest communication of each in-scope Health issue. Ties in time resolve to
    `closed`, so that order of arrival cannot matter."""
    latest: dict[str, Signal] = {}
    for s in seen:
        if s.source != HEALTH or s.detail.get("service") not in settings.health_services:
            continue
        arn = s.detail.get("eventArn", s.id)
        kept = latest.get(arn)
        if kept is None or (s.time, s.klass == HEALTH_CLOSED, s.id) > (kept.time, kept.klass == HEALTH_CLOSED, kept.id):
            latest[arn] = s
    return sorted(latest.values(), key=lambda s: s.id)


def _health_label(s: Signal) -> str:
    return f"{s.detail.get('service')} {s.detail.get('eventTypeCode') or ''} ({s.detail.get('eventArn')})".replace("  ", " ")


def _failing_targets(probes: list[Signal], settings, at: datetime) -> dict[str, tuple[int, int]]:
    """target -> (failed, total) within the window ending at `at`, for targets over the ratio."""
    start = at - timedelta(minutes=settings.detect_window_minutes)
    counts: dict[str, list[int]] = {}
    for s in probes:
        if start < s.time <= at:
            c = counts.setdefault(s.detail.get("target", s.id), [0, 0])
            c[0] += s.klass == PROBE_FAILED
            c[1] += 1
    return {t: (f, n) for t, (f, n) in counts.items() if f / n > settings.probe_failure_ratio}


def _probe_reasons(probes: list[Signal], settings, now: datetime) -> list[str]:
    return [
        f"probe {target} failed {failed} of {total} in {settings.detect_window_minutes} min "
        f"(above {settings.probe_failure_ratio:g})"
        for target, (failed, total) in sorted(_failing_targets(probes, settings, now).items())
    ]


def _last_probe_failing(probes: list[Signal], settings) -> datetime | None:
    """The last probe result at which its target was over the ratio: where quiet begins.
    A sliding window per target, so 10,000 results cost one pass, not one per round."""
    window = timedelta(minutes=settings.detect_window_minutes)
    by_target: dict[str, list[Signal]] = {}
    for s in probes:  # already in time order
        by_target.setdefault(s.detail.get("target", s.id), []).append(s)
    last = None
    for results in by_target.values():
        failed, left = 0, 0
        for right, s in enumerate(results):
            failed += s.klass == PROBE_FAILED
            while results[left].time <= s.time - window:
                failed -= results[left].klass == PROBE_FAILED
                left += 1
            if failed / (right - left + 1) > settings.probe_failure_ratio:
                last = _latest(last, s.time)
    return last


def _recovery_evidence(health, last_launch, impaired_since) -> str | None:
    if last_launch and last_launch >= impaired_since:
        return f"successful launch at {iso(last_launch)}"
    closed = [s for s in health if s.klass == HEALTH_CLOSED and s.time >= impaired_since]
    if closed:
        return f"AWS Health issue closed: {_health_label(closed[0])}"
    return None
