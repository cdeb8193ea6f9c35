"""The detector: signals in a window + the previous verdict -> normal | impaired | recovering.

Pure: no boto3, no clock; `now` is an argument, and the verdict never depends on the
order in which signals arrive (they are deduplicated by id and read as sets).

One regional criterion, for impairment, recovery and the stages' clocks alike: capacity-
class launch failures are *regional* in a window (the last `detect_window_minutes`) when
they come from at least `detect_min_groups` groups spanning at least `detect_min_zones`
zones. Failures from fewer groups or zones are routine (one group whose instance type is
sold out, even in several zones) and count for nothing: not toward impairment, not
against recovery, not against a stage's hold. Configuration-class and unknown failures
never count, however many. Within a window, the *failure share* is the regional
failures' share of the window's launch outcomes (capacity-class failures and successful
launches); routine failures give a share of 0.

Impaired, when any of these holds at `now`:
- launches: regional capacity failures at a share of at least `detect_failure_share`;
- health-check terminations: instances replaced after failing their ELB health checks
  ("EC2 Instance Terminate Successful", signals.ELB_TERMINATION) from at least
  `detect_min_groups` groups in `detect_min_zones` zones within the window: the October
  pattern, new instances without network state failing their load balancers' checks;
- probes: a probe target (one endpoint's DNS, one service's API) whose results within the
  window fail more often than `probe_failure_ratio`. Each target is judged alone;
- an open AWS Health issue for a service in `health_services` (the latest communication of
  its eventArn says `open`): always when the verdict was normal; while impaired, until
  Holdfast's own launch outcomes show recovery across the region (below); while
  recovering, only an issue opened (or reopened) after recovery began. AWS keeps an
  issue open until every service it covers has recovered — in October until 14:20, hours
  after launches recovered — so an issue that stays open does not hold the region
  impaired against the evidence; it keeps the verdict from `normal`.

Hysteresis — entering is easy, leaving is slow, so a flapping signal cannot flap it:
- impaired -> recovering: quiet for `recover_quiet_minutes`, and evidence of recovery.
  Quiet: no window with a failure share above 1 - `recover_success_share` (a success
  among many failures is not recovery), the window ending now included, no regional
  health-check terminations, no probe target over its ratio. Evidence: a successful launch
  since the quiet began; with an AWS Health issue still open, successful launches from
  `detect_min_groups` groups in `detect_min_zones` zones since then (the only evidence
  that outweighs the issue); else a Health issue closed since the impairment began; else,
  for an impairment no launch or termination was part of, the quiet probes themselves.
- recovering -> normal: no open Health issue, and no regional capacity failure at any
  share, for a further `capacity_hold_minutes` after the quiet.
- recovering -> impaired: whenever the impairment conditions hold again. Failures between
  the two shares (the hysteresis band) do not re-impair; they restart the quiet.

The Verdict carries the last time each criterion held (`last_failing`: a window above the
recovery share, the stages' clock; `launches_unhealthy_at`: regional capacity failures at
any share, the capacity gate; `last_health_check_terminations`: the routing gate), so a
fact older than the window the shell reads is not forgotten. `lookback(settings)` is the
window the shell must pass for the verdict to be exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping

from holdfast.core.classify import CAPACITY
from holdfast.core.signals import (
    ELB_TERMINATION,
    HEALTH,
    HEALTH_CLOSED,
    HEALTH_OPEN,
    LAUNCHED,
    PROBE,
    PROBE_FAILED,
    PROBE_INCONCLUSIVE,
    Signal,
    iso,
    parse_time,
)

NORMAL, IMPAIRED, RECOVERING = "normal", "impaired", "recovering"
STATES = (NORMAL, IMPAIRED, RECOVERING)


@dataclass(frozen=True)
class Verdict:
    state: str
    since: datetime
    reasons: tuple[str, ...]
    last_capacity_failure: datetime | None      # any capacity-class failure, routine ones included
    last_successful_launch: datetime | None
    last_failing: datetime | None = None        # last window above the recovery share (regional)
    launches_unhealthy_at: datetime | None = None   # last regional capacity failure, at any share
    last_health_check_terminations: datetime | None = None  # last regional ELB health-check terminations
    failure_share: float | None = None          # in the window ending now; None: no launch outcome

    def to_dict(self) -> dict[str, Any]:
        opt = lambda t: iso(t) if t else None
        return {
            "state": self.state,
            "since": iso(self.since),
            "reasons": list(self.reasons),
            "last_capacity_failure": opt(self.last_capacity_failure),
            "last_successful_launch": opt(self.last_successful_launch),
            "last_failing": opt(self.last_failing),
            "launches_unhealthy_at": opt(self.launches_unhealthy_at),
            "last_health_check_terminations": opt(self.last_health_check_terminations),
            "failure_share": self.failure_share,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Verdict":
        opt = lambda v: parse_time(v) if v else None
        if raw.get("state") not in STATES:
            raise ValueError(f"verdict state {raw.get('state')!r} is not one of {STATES}")
        share = raw.get("failure_share")
        return cls(
            state=raw["state"],
            since=parse_time(raw["since"]),
            reasons=tuple(raw.get("reasons") or ()),
            last_capacity_failure=opt(raw.get("last_capacity_failure")),
            last_successful_launch=opt(raw.get("last_successful_launch")),
            last_failing=opt(raw.get("last_failing")),
            launches_unhealthy_at=opt(raw.get("launches_unhealthy_at")),
            last_health_check_terminations=opt(raw.get("last_health_check_terminations")),
            failure_share=float(share) if isinstance(share, (int, float)) else None,
        )


def lookback(settings) -> timedelta:
    """How far back the shell must read signals: the probe window before the start of
    the longest quiet the detector waits for."""
    return timedelta(
        minutes=settings.detect_window_minutes + settings.recover_quiet_minutes + settings.capacity_hold_minutes
    )


@dataclass(frozen=True)
class Window:
    """Launch outcomes in one window: who failed for capacity, who launched."""

    failing_groups: frozenset[str]
    failing_zones: frozenset[str]
    failures: int
    successes: int

    def regional(self, settings) -> bool:
        return _regional(len(self.failing_groups), len(self.failing_zones), settings)

    def share(self, settings) -> float:
        """The failure share: regional failures over all outcomes; 0 for routine ones."""
        total = self.failures + self.successes
        return self.failures / total if total and self.regional(settings) else 0.0


def window(outcomes: Iterable[Signal], start: datetime, end: datetime) -> Window:
    """The launch outcomes with start < time <= end."""
    inside = [s for s in outcomes if start < s.time <= end]
    failed = [s for s in inside if s.klass == CAPACITY]
    return Window(
        frozenset(s.group for s in failed if s.group),
        frozenset(s.zone for s in failed if s.zone),
        len(failed),
        sum(1 for s in inside if s.klass == LAUNCHED),
    )


def evaluate(signals: Iterable[Signal], previous: Verdict | None, settings, now: datetime) -> Verdict:
    """The verdict at `now`. Signals later than `now` are not yet seen."""
    seen = _distinct(s for s in signals if s.time <= now)
    span = timedelta(minutes=settings.detect_window_minutes)
    need_quiet = timedelta(minutes=settings.recover_quiet_minutes)
    previous = previous or Verdict(NORMAL, now, (), None, None)

    outcomes = [s for s in seen if s.klass in (CAPACITY, LAUNCHED)]
    terminations = [s for s in seen if s.klass == ELB_TERMINATION]
    probes = [s for s in seen if s.source == PROBE and s.klass != PROBE_INCONCLUSIVE]
    failing_at, regional_at = _scan_launches(outcomes, settings)
    last_failure = _latest(previous.last_capacity_failure, *(s.time for s in outcomes if s.klass == CAPACITY))
    last_launch = _latest(previous.last_successful_launch, *(s.time for s in outcomes if s.klass == LAUNCHED))
    last_failing = _latest(previous.last_failing, failing_at)
    unhealthy_at = _latest(previous.launches_unhealthy_at, regional_at)
    last_terms = _latest(previous.last_health_check_terminations, _scan_regional(terminations, settings))
    now_window = window(outcomes, now - span, now)
    share = now_window.share(settings) if now_window.failures + now_window.successes else None

    def verdict(state: str, reasons: list[str]) -> Verdict:
        since = previous.since if state == previous.state else now
        return Verdict(state, since, tuple(reasons), last_failure, last_launch, last_failing, unhealthy_at, last_terms,
                       None if share is None else round(share, 4))

    issues = _health(seen, settings)
    open_issues = [i for i in issues if i.open]
    # Quiet begins at the last bad fact other than AWS Health's: a window above the
    # recovery share, regional terminations, a probe round over its ratio, or (when
    # impaired) the impairment itself.
    quiet_since = _latest(last_failing, last_terms, _last_probe_failing(probes, settings),
                          previous.since if previous.state == IMPAIRED else None)
    quiet = now - quiet_since if quiet_since else None
    quiet_ok = quiet is None or quiet >= need_quiet
    evidence_since = quiet_since or now - need_quiet
    launch_evidence = _launch_evidence(outcomes, settings, evidence_since, now, regional=True)

    impairing = (
        _capacity_reasons(now_window, settings)
        + _termination_reasons(terminations, settings, now - span)
        + _probe_reasons(probes, settings, now)
    )
    if previous.state == NORMAL or (previous.state == IMPAIRED and not (quiet_ok and launch_evidence)):
        impairing += [f"open AWS Health issue: {i.label}" for i in open_issues]
    elif previous.state == RECOVERING:
        impairing += [f"AWS Health issue opened during recovery: {i.label}" for i in open_issues
                      if i.open_since > previous.since]
    if impairing:
        return verdict(IMPAIRED, impairing)
    if previous.state == NORMAL:
        return verdict(NORMAL, [])

    closings = [i.closed_at for i in issues if i.closed_at is not None]
    quiet_text = f"quiet for {_minutes(quiet)} min" if quiet is not None else "nothing bad seen in the lookback"
    still_open = [f"AWS Health issue still open (not normal until it closes): {i.label}" for i in open_issues]

    if previous.state == IMPAIRED:
        quiet_since = _latest(quiet_since, *closings)
        quiet = now - quiet_since
        waiting = []
        if quiet < need_quiet:
            waiting.append(f"quiet for {_minutes(quiet)} min, recovery needs {settings.recover_quiet_minutes}"
                           + _what_was_bad(now_window, settings, last_failing, quiet_since))
        elif now_window.share(settings) > 1 - settings.recover_success_share:
            # A quiet shorter than the window: the window itself must be below the share too.
            waiting.append(f"capacity-class failures still {now_window.share(settings):.0%} of the window's launches, "
                           f"recovery needs at most {1 - settings.recover_success_share:.0%}")
        evidence = launch_evidence or (None if open_issues else
                                       _launch_evidence(outcomes, settings, evidence_since, now, regional=False))
        if not evidence and not open_issues:
            closed = [i for i in issues if i.closed_at is not None and i.closed_at >= previous.since]
            if closed:
                evidence = f"AWS Health issue closed: {closed[0].label}"
            # Facts up to a window before the verdict turned were part of the impairment.
            elif not _after(unhealthy_at, previous.since - span) and not _after(last_terms, previous.since - span):
                evidence = "probes healthy again (no launch failure or health-check termination was part of it)"
        if not evidence:
            waiting.append(f"no successful launches from {settings.detect_min_groups} groups in "
                           f"{settings.detect_min_zones} zones since the quiet began, while AWS's issue is open"
                           if open_issues else "no successful launch since the quiet began, nor a closed AWS Health issue")
        if waiting:
            return verdict(IMPAIRED, ["holding: " + "; ".join(waiting)])
        return verdict(RECOVERING, [f"quiet for {_minutes(quiet)} min", evidence, *still_open])

    if open_issues:
        return verdict(RECOVERING, still_open)
    normal_since = _latest(quiet_since, unhealthy_at, *closings)
    need_normal = need_quiet + timedelta(minutes=settings.capacity_hold_minutes)
    if normal_since is not None and now - normal_since < need_normal:
        return verdict(RECOVERING, [f"no regional capacity failure, health-check termination or failing probe for "
                                    f"{_minutes(now - normal_since)} min; normal needs {_minutes(need_normal)}"])
    return verdict(NORMAL, [f"{quiet_text}: recovered"])


# ---- the regional criterion --------------------------------------------------------------

def _regional(groups: int, zones: int, settings) -> bool:
    return groups >= settings.detect_min_groups and zones >= settings.detect_min_zones


class _Tally:
    """Groups and zones of the signals in a sliding window, with multiplicity."""

    def __init__(self):
        self.groups: dict[str, int] = {}
        self.zones: dict[str, int] = {}

    def add(self, s: Signal, n: int) -> None:
        for key, table in ((s.group, self.groups), (s.zone, self.zones)):
            if key:
                table[key] = table.get(key, 0) + n
                if table[key] == 0:
                    del table[key]

    def regional(self, settings) -> bool:
        return _regional(len(self.groups), len(self.zones), settings)


def _scan_launches(outcomes: list[Signal], settings) -> tuple[datetime | None, datetime | None]:
    """(the last capacity-class failure whose window was above the recovery share, the last
    one whose window was regional), each failure judged over the window ending at it, so
    quiet counts from a failure, as it does from a probe result. One pass."""
    span = timedelta(minutes=settings.detect_window_minutes)
    threshold = 1 - settings.recover_success_share
    tally, failures, successes, left, i = _Tally(), 0, 0, 0, 0
    failing = regional = None
    while i < len(outcomes):
        t, failed_now = outcomes[i].time, False
        while i < len(outcomes) and outcomes[i].time == t:  # signals at one instant enter together
            s = outcomes[i]
            if s.klass == CAPACITY:
                tally.add(s, 1)
                failures += 1
                failed_now = True
            else:
                successes += 1
            i += 1
        while outcomes[left].time <= t - span:
            s = outcomes[left]
            if s.klass == CAPACITY:
                tally.add(s, -1)
                failures -= 1
            else:
                successes -= 1
            left += 1
        if failed_now and tally.regional(settings):
            regional = t
            if failures / (failures + successes) > threshold:
                failing = t
    return failing, regional


def _scan_regional(signals: list[Signal], settings) -> datetime | None:
    """The last time these signals (in time order) were regional within a window."""
    span = timedelta(minutes=settings.detect_window_minutes)
    tally, left, last = _Tally(), 0, None
    for right, s in enumerate(signals):
        tally.add(s, 1)
        while signals[left].time <= s.time - span:
            tally.add(signals[left], -1)
            left += 1
        if right + 1 == len(signals) or signals[right + 1].time != s.time:
            if tally.regional(settings):
                last = s.time
    return last


def _capacity_reasons(now_window: Window, settings) -> list[str]:
    share = now_window.share(settings)
    if not now_window.regional(settings) or share < settings.detect_failure_share:
        return []
    groups = sorted(now_window.failing_groups)
    return [
        f"capacity-class launch failures from {len(groups)} groups in {len(now_window.failing_zones)} zones "
        f"within {settings.detect_window_minutes} min, {share:.0%} of launch outcomes: "
        f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''} ({', '.join(sorted(now_window.failing_zones))})"
    ]


def _termination_reasons(terminations: list[Signal], settings, start: datetime) -> list[str]:
    recent = [s for s in terminations if s.time > start]
    groups, zones = sorted({s.group for s in recent if s.group}), sorted({s.zone for s in recent if s.zone})
    if not _regional(len(groups), len(zones), settings):
        return []
    return [f"instances replaced after failing ELB health checks in {len(groups)} groups across {len(zones)} zones "
            f"within {settings.detect_window_minutes} min: {', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}"]


def _launch_evidence(outcomes: list[Signal], settings, since: datetime, now: datetime, *, regional: bool) -> str | None:
    """Successful launches since the quiet began: the evidence of recovery; across the
    region (`regional`) when it must outweigh AWS's open issue."""
    ok = [s for s in outcomes if s.klass == LAUNCHED and s.time > since]
    groups, zones = {s.group for s in ok if s.group}, {s.zone for s in ok if s.zone}
    if not ok or (regional and not _regional(len(groups), len(zones), settings)):
        return None
    failed = sum(1 for s in outcomes if s.klass == CAPACITY and s.time > since)
    return (f"successful launches from {len(groups)} groups in {len(zones)} zones in the last "
            f"{_minutes(now - since)} min ({len(ok)} launched, {failed} capacity-class failures, routine ones)")


def _what_was_bad(now_window: Window, settings, last_failing, quiet_since) -> str:
    if last_failing is not None and last_failing == quiet_since and now_window.regional(settings):
        return (f" (capacity-class failures still {now_window.share(settings):.0%} of launches across "
                f"{len(now_window.failing_groups)} groups; recovery needs at most {1 - settings.recover_success_share:.0%})")
    return ""


# ---- the other signals -------------------------------------------------------------------

@dataclass(frozen=True)
class _Issue:
    label: str
    open: bool
    open_since: datetime | None   # the first `open` communication since the issue last closed
    closed_at: datetime | None    # the latest `closed` communication


def _health(seen: list[Signal], settings) -> list[_Issue]:
    """Each in-scope Health issue from its communications. Ties in time resolve to
    `closed`, so that order of arrival cannot matter."""
    comms: dict[str, list[Signal]] = {}
    for s in seen:
        if s.source == HEALTH and s.detail.get("service") in settings.health_services:
            comms.setdefault(s.detail.get("eventArn", s.id), []).append(s)
    issues = []
    for arn in sorted(comms):
        ordered = sorted(comms[arn], key=lambda s: (s.time, s.klass == HEALTH_CLOSED, s.id))
        latest = ordered[-1]
        closed = [s.time for s in ordered if s.klass == HEALTH_CLOSED]
        opened = [s.time for s in ordered if s.klass == HEALTH_OPEN and (not closed or s.time > closed[-1])]
        issues.append(_Issue(_health_label(latest), latest.klass == HEALTH_OPEN, opened[0] if opened else None,
                             closed[-1] if closed else None))
    return issues


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
    span = timedelta(minutes=settings.detect_window_minutes)
    by_target: dict[str, list[Signal]] = {}
    for s in probes:  # already in time order
        by_target.setdefault(s.detail.get("target", s.id), []).append(s)
    last = None
    for results in by_target.values():
        failed, left = 0, 0
        for right, s in enumerate(results):
            failed += s.klass == PROBE_FAILED
            while results[left].time <= s.time - span:
                failed -= results[left].klass == PROBE_FAILED
                left += 1
            if failed / (right - left + 1) > settings.probe_failure_ratio:
                last = _latest(last, s.time)
    return last


# ---- helpers -----------------------------------------------------------------------------

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


def _after(t: datetime | None, since: datetime) -> bool:
    return t is not None and t >= since


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)
