"""Each stage's built-in gate: a pure judgement over the evidence that matters to it.

Pure: no boto3, no clock. The stage policy (holdfast.core.policy) asks the gate of the
stage it would advance to; each answers a Judgement: what blocks the advance (nothing:
the gate is open), what it saw either way (the "evidence" a lifted stage reports), and,
for the drain, whether the last step made things worse (step back).

- drain (each ESM cap step, and leaving the drain): over the last hold, every watched
  consumer function's Errors at most `drain_max_error_share` of its Invocations and its
  Throttles at most `drain_max_throttle_share` of its invocation attempts. A function over
  either share whose queue's oldest message is also getting older (the last datapoint
  more than a minute above the first) is a regression: the step goes back. Over a share
  with the backlog still falling: wait. The backlog rising with healthy functions means
  the cap is what limits the drain: raising it is the remedy, so it advances.
- routing (NLB thresholds): target health stable for a hold — no selected target group
  behind a load balancer whose UnHealthyHostCount rose from one minute to the next — and
  no regional ELB health-check terminations, and launches healthy for a hold (no
  regional capacity failure). Re-enabling DNS failover while instances cannot be
  replaced fails capacity out of DNS that cannot come back: in October AWS re-enabled
  its own NLB failover only after EC2 had recovered.
- capacity (ASG processes, scale-in): launches healthy — no regional capacity-class
  failure, a successful launch since the last one — for `capacity_hold_minutes`.

A target group with no load balancer, or with no datapoint in the hold (ELB reports only
while traffic flows), is listed and not judged: an absence of data must not pin a stage
forever. Evidence that could not be read closes the gate until a tick reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from holdfast.core.evidence import DrainEvidence, RoutingEvidence, name_of, rises, total, within

AGE_TOLERANCE_SECONDS = 60.0   # one period of the age metric: noise, not a trend


@dataclass(frozen=True)
class Judgement:
    blocking: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    back: bool = False            # drain only: the last step made it worse

    @property
    def open(self) -> bool:
        return not self.blocking


def drain_gate(evidence: DrainEvidence | None, now: datetime, settings) -> Judgement:
    if evidence is None:
        return Judgement(("drain evidence not read",))
    if evidence.error:
        return Judgement((f"drain evidence unreadable: {evidence.error}",))
    if not evidence.consumers:
        return Judgement((), ("no SQS event source mapping to watch",))
    start = now - timedelta(minutes=settings.hold_minutes)
    blocking, back, rising, falling, quiet = [], False, [], [], []
    worst_errors = worst_throttles = 0.0
    for c in evidence.consumers:
        invoked, errors, throttled = (total(p, start, now) for p in (c.invocations, c.errors, c.throttles))
        error_share = errors / invoked if invoked else 0.0
        throttle_share = throttled / (invoked + throttled) if invoked + throttled else 0.0
        worst_errors, worst_throttles = max(worst_errors, error_share), max(worst_throttles, throttle_share)
        ages = within(c.age, start, now)
        trend = ages[-1][1] - ages[0][1] if len(ages) >= 2 else None
        (quiet if trend is None else rising if trend > AGE_TOLERANCE_SECONDS else falling).append(c.queue)
        sick = []
        if error_share > settings.drain_max_error_share:
            sick.append(f"errors {error_share:.1%} of {invoked:,.0f} invocations (above {settings.drain_max_error_share:.0%})")
        if throttle_share > settings.drain_max_throttle_share:
            sick.append(f"throttles {throttle_share:.1%} (above {settings.drain_max_throttle_share:.0%})")
        if sick:
            worse = trend is not None and trend > AGE_TOLERANCE_SECONDS
            back = back or worse
            blocking.append(f"consumer {c.function} ({c.queue}): {', '.join(sick)} over {settings.hold_minutes} min"
                            + (f", backlog age up {trend:,.0f} s: the step made it worse" if worse else ""))
    seen = [f"{len(evidence.consumers)} consumers over {settings.hold_minutes} min: errors at most {worst_errors:.1%}, "
            f"throttles at most {worst_throttles:.1%}",
            f"backlog age falling on {len(falling)}, rising on {len(rising)}"
            + (" (healthy consumers: the cap is the limit)" if rising and not blocking else "")
            + (f", no data on {len(quiet)}" if quiet else "")]
    return Judgement(tuple(blocking), tuple(seen), back)


def routing_gate(evidence: RoutingEvidence | None, verdict, now: datetime, settings) -> Judgement:
    hold = timedelta(minutes=settings.hold_minutes)
    start = now - hold
    blocking, seen = [], []
    if evidence is None:
        blocking.append("target health not read")
    elif evidence.error:
        blocking.append(f"target health unreadable: {evidence.error}")
    else:
        judged, unjudged, last_rise = 0, [], None
        for tg in evidence.target_groups:
            points = within(tg.unhealthy, evidence.start, now)
            if not tg.load_balancers or not within(points, start, now):
                unjudged.append(name_of(tg.target_group))
                continue
            judged += 1
            flaps = rises(points, start)
            every = rises(points, evidence.start)
            if every:
                last_rise = max(last_rise or every[-1][0], every[-1][0])
            if flaps:
                t, before, after = flaps[-1]
                blocking.append(f"target group {name_of(tg.target_group)}: unhealthy hosts rose {before:g} -> {after:g} "
                                f"at {_hm(t)} ({len(flaps)} rises in {settings.hold_minutes} min)")
        if not blocking and judged == 0:
            # Not a pass on evidence: nothing was there to judge. Said so, for the stage's
            # record and the drill report; the gate still rests on its other checks.
            seen.append(f"no evidence: 0 target groups judged in {settings.hold_minutes} min (no target health "
                        "datapoints); target health not confirmed stable")
        elif not blocking:
            seen.append(f"target health stable for {settings.hold_minutes} min: {judged} target groups, no unhealthy-host "
                        f"rise" + (f" since {_hm(last_rise)}" if last_rise else ""))
        if unjudged:
            seen.append(f"not judged (no load balancer, or no datapoint while no traffic flowed): {', '.join(unjudged[:5])}"
                        + (" …" if len(unjudged) > 5 else ""))
    terminations = verdict.last_health_check_terminations
    if terminations is not None and now - terminations < hold:
        blocking.append(f"instances replaced after failing ELB health checks across groups at {_hm(terminations)}")
    else:
        seen.append("no ELB health-check terminations across groups"
                    + (f" since {_hm(terminations)}" if terminations else ""))
    launches = _launches(verdict, None, now, hold, "")
    return Judgement(tuple(blocking) + launches.blocking, tuple(seen) + launches.evidence)


def capacity_gate(verdict, impaired_at: datetime | None, now: datetime, settings) -> Judgement:
    return _launches(verdict, impaired_at, now, timedelta(minutes=settings.capacity_hold_minutes), "capacity hold: ")


def _launches(verdict, impaired_at, now, hold: timedelta, prefix: str) -> Judgement:
    """Launches healthy for `hold`: no regional capacity failure, a success since the last."""
    unhealthy, success = verdict.launches_unhealthy_at, verdict.last_successful_launch
    blocking = []
    if success is None or (unhealthy is not None and success <= unhealthy):
        blocking.append(f"{prefix}no successful launch since the last regional capacity failures")
    healthy_since = max((t for t in (impaired_at, unhealthy) if t is not None), default=None)
    if healthy_since is not None and now - healthy_since < hold:
        blocking.append(f"{prefix}launches healthy {_minutes(now - healthy_since)} of {_minutes(hold)} min"
                        + (f" (regional capacity failures until {_hm(unhealthy)})" if unhealthy else ""))
    share = getattr(verdict, "failure_share", None)
    seen = [f"launches healthy for {_minutes(now - healthy_since) if healthy_since else 'all'} min: no regional "
            f"capacity failure" + (f" since {_hm(unhealthy)}" if unhealthy else "")
            + (f", last successful launch {_hm(success)}" if success else "")
            + (f", capacity-failure share now {share:.0%}" if share is not None else "")]
    return Judgement(tuple(blocking), tuple(seen))


def _hm(t: datetime) -> str:
    return t.strftime("%H:%MZ")


def _minutes(delta: timedelta) -> str:
    return f"{max(delta.total_seconds(), 0) / 60:.0f}"
