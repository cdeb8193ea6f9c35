"""Drain strategies for the recovery model, each driven by Holdfast's real code.

- `Ladder`: the drain as shipped before the per-mapping controller: the real stage policy's hold (holdfast
  .core.policy with default Settings, fed a synthetic launch verdict: impaired through the
  outage, recovering `recover_quiet_minutes` after the last capacity-class failure, with a
  successful launch a minute after it; every walk done within its tick), then the old
  fixed ladder (floor, 5, 20, 100, 300, one per hold, then the owner's value), reproduced
  here since the shipped policy no longer has it. No gating alarms (the default).
- `Controller`: holdfast.core.drain.advance, the entry point the reconciler's
  drain stage calls. Held at the floor from the start of the event; the drain starts when
  the consumer's own evidence says its dependency is back; then `decide` every tick; on
  `restore` the owner's original comes back.
- `Fixed`: one cap from the end of the outage (the floor before it).

Each reads only what the model publishes as CloudWatch would, lagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from holdfast.core import drain as dc
from holdfast.core import policy
from holdfast.core.detector import IMPAIRED, RECOVERING, Verdict
from holdfast.observation.cloudwatch import COMPLETE_AFTER
from holdfast.settings import Settings

from .recovery_model import RecoveryModel, Scenario, at, outcome, seconds, simulate


def engaged_cap(owner_cap: int | None, floor: int) -> int:
    """The ESM actuator's engage: the floor, or an owner cap at or below it."""
    return owner_cap if owner_cap is not None and owner_cap <= floor else floor


def partial_cap(owner_cap: int | None, n: int) -> int:
    """The ESM actuator's partial relax: n, never above the owner's original."""
    return n if owner_cap is None else min(n, owner_cap)


# The fixed ladder Holdfast shipped before the per-mapping controller: settings.esm_cap_steps, one step per hold.
LADDER_STEPS = (5, 20, 100, 300)


class Ladder:
    """The drain as Holdfast ran it before the per-mapping controller: the stage policy's hold (the real
    holdfast.core.policy, which still gates hold -> drain on the launch verdict and the
    hold), then the old fixed ladder — floor, 5, 20, 100, 300, one step per hold, then the
    owner's value — which is no longer in the shipped policy and is reproduced here."""

    name = "fixed ladder (before the controller)"

    def __init__(self, scenario: Scenario, settings: Settings | None = None, steps: tuple[int, ...] = LADDER_STEPS):
        self.scenario = scenario
        self.settings = settings or Settings()
        self.steps = steps
        self.plan: policy.Plan | None = None
        self.drain_from: int | None = None
        self.labels: list[tuple[int, str]] = []

    def verdict(self, t: int) -> Verdict:
        end = self.scenario.outage_end
        quiet = self.settings.recover_quiet_minutes * 60
        if t < end + quiet:
            return Verdict(IMPAIRED, at(0), ("capacity-class launch failures",), at(min(t, end)), at(end + 60) if t >= end + 60 else None)
        return Verdict(RECOVERING, at(end + quiet), (), at(end), at(end + 60))

    def tick(self, model: RecoveryModel) -> None:
        t = model.t
        owner = self.scenario.consumer.owner_cap
        if t < 0:
            model.cap = owner
            return
        floor = engaged_cap(owner, self.settings.esm_floor)
        if self.drain_from is None:
            d = policy.decide(self.verdict(t), self.plan, {}, model.now(), self.settings)
            target = policy.posture(d.plan, self.settings)
            self.plan = replace(d.plan, done=frozenset(target))   # every walk done within the tick
            if d.changed:
                self.labels.append((t, d.plan.label))
            if d.plan.stage == policy.DRAIN:
                self.drain_from = t
            model.cap = floor if d.plan.stage != policy.NORMAL else owner
            if self.drain_from is None:
                return
        step = (t - self.drain_from) // (self.settings.hold_minutes * 60)
        model.cap = partial_cap(owner, self.steps[step]) if step < len(self.steps) else owner


def first_readable(scenario: Scenario) -> int:
    """Seconds after the outage until its first minute's datapoints are readable by the
    shell (published, and complete by holdfast.observation.cloudwatch.COMPLETE_AFTER), at
    a tick a minute: no drain that waits for evidence of the dependency starts earlier."""
    first = scenario.outage_end // 60
    t = scenario.outage_end
    while t < scenario.published_at(first) or (t - int(COMPLETE_AFTER.total_seconds())) // 60 - 1 < first:
        t += 60
    return t - scenario.outage_end


def complete_minute(model: RecoveryModel) -> int:
    """The newest minute a reader asks CloudWatch for: the one that ended CloudWatch's lag
    ago (holdfast.observation.cloudwatch.COMPLETE_AFTER), as the shell's readers do."""
    return (model.t - int(COMPLETE_AFTER.total_seconds())) // 60 - 1


MINUTE_METRICS = ("errors", "invocations", "duration", "received", "deleted", "concurrency")


def reading(model: RecoveryModel, *, alarms: bool = True, wanted=None) -> dc.Reading:
    """What the shell reads for the mapping this tick: every metric's newest published
    datapoint of a complete minute; the downstream alarms only when they are named. The
    consumer's own evidence is of `wanted` (a probe's minute) once it is published with
    receives and Duration, as holdfast.observation.drain_inputs.readings picks it."""
    newest = complete_minute(model)
    # The judged minute's metrics are whole minutes only, as the shell reads them
    # (holdfast.core.drain.inputs.whole_minute): Lambda stamps an invocation's metrics at
    # its start, so their minute waits for the function's timeout as well as the lag.
    timeout = model.scenario.consumer.timeout_seconds or 0.0
    whole = min(newest, int(model.t - COMPLETE_AFTER.total_seconds() - timeout) // 60 - 1)
    m = None if wanted is None else int(seconds(wanted)) // 60
    use = (m is not None and m <= whole and m in model.published_minutes(m, m)
           and model.minute_value(m, "received") is not None and model.minute_value(m, "duration") is not None)

    def point(metric):
        if use and metric in MINUTE_METRICS:
            dp = model.minute_value(m, metric)
        else:
            dp = model.datapoint(metric, newest_minute=whole if metric in MINUTE_METRICS else newest)
        return None if dp is None else dc.Datapoint(dp.at, dp.value)

    return dc.Reading(
        oldest_age=point("age"),
        visible=point("visible"),
        errors=point("errors"),
        throttles=point("throttles"),
        downstream=tuple(dc.Alarm(a.name, a.state, a.measured_at, a.severity, a.breached,
                                    tuple(dc.Datapoint(p.at, p.value) for p in a.levels)) for a in model.alarms())
        if alarms else (),
        sent=point("sent"),
        deleted=point("deleted"),
        invocations=point("invocations"),
        duration=point("duration"),
        received=point("received"),
        concurrency=point("concurrency"),
    )


def pre_event_minutes(model: RecoveryModel, until_minute: int, lookback: int) -> list[dc.Minute]:
    """The published minutes before `until_minute` (exclusive), as the shell reads them."""
    out = []
    for m in model.published_minutes(until_minute - lookback, until_minute - 1):
        value = lambda metric: (lambda dp: None if dp is None else dp.value)(model.minute_value(m, metric))
        out.append(dc.Minute(at(m * 60), concurrency=value("concurrency"), age=value("age"), visible=value("visible"),
                             sent=value("sent"), deleted=value("deleted"), received=value("received"),
                             duration=value("duration"), invocations=value("invocations"), errors=value("errors")))
    return out


@dataclass
class ForecastCheck:
    started_at: int                 # model second the drain started
    forecast_seconds: float | None
    reason: str


class Controller:
    """The shipped controller, through the same pure entry point the reconciler's drain
    stage calls (holdfast.core.drain.advance): wait for the dependency, start,
    decide, restore."""

    def __init__(self, scenario: Scenario, constants: dc.Constants = dc.DEFAULTS, settings: Settings | None = None,
                 *, alarms: bool = False):
        self.scenario = scenario
        self.constants = constants
        self.settings = settings or Settings()
        self.alarms = alarms   # the owner named the database's latency alarms for the mapping
        self.name = "controller, owner's alarms" if alarms else "controller, defaults (no alarm)"
        self.drain: dc.Drain | None = None
        self.restored_at: int | None = None
        self.decisions: list[tuple[int, dc.Step]] = []
        self.forecast: ForecastCheck | None = None   # at the start of the drain
        self.later: ForecastCheck | None = None      # 30 min in, on measured throughput
        self.measured: list[tuple[int, float | None]] = []   # (second, measured forecast) every tick of the drain
        self.stalled_at: int | None = None   # the first tick at which the drain reported the mapping stalled
        self.stalled_why: str | None = None

    @property
    def state(self) -> dc.CapState | None:
        return None if self.drain is None else self.drain.state

    def _pre_event(self, model: RecoveryModel) -> dc.Facts:
        """What the shell reads about the mapping when the hold begins (t = 0): the
        baseline from the minutes before the earliest of the first impairment signal (the
        detector's window before the hold), the hold itself and the consumer's own first
        anomaly (holdfast.core.drain.baseline)."""
        con = self.scenario.consumer
        minutes = self.settings.drain_pre_event_minutes
        until, why = dc.baseline_end({
            "the first impairment signal": at(-60 * self.scenario.detect_window_minutes),
            "the plan's engagement": at(0),
        })
        history = pre_event_minutes(model, int(seconds(until)) // 60, 2 * minutes)
        fields = dc.baseline(history, until, why, minutes, self.constants)
        # The redrive policy is the queue's own attribute (the shell reads it); the client's
        # timeout on the database call is declared by the owner, as their alarms are named.
        declared = self.scenario.downstream.timeout if self.alarms else None
        return dc.Facts(reserved_concurrency=con.reserved_concurrency, owner_cap=con.owner_cap,
                        timeout_seconds=con.timeout_seconds, has_dlq=con.max_receive_count is not None,
                        client_timeout_seconds=declared, **fields)

    def tick(self, model: RecoveryModel) -> None:
        t = model.t
        owner = self.scenario.consumer.owner_cap
        if t < 0:
            model.cap = owner
            return
        if self.drain is None:
            self.drain = dc.Drain(since=at(0), facts=self._pre_event(model))
        floor = engaged_cap(owner, self.settings.esm_floor)
        r = reading(model, alarms=self.alarms, wanted=self.drain.wanted_minute(self.constants))
        current = floor if self.drain.state is None else self.drain.state.cap
        s = dc.advance(self.drain, r, current, model.now(), self.constants)
        self.drain = s.drain
        stalled = getattr(s, "stalled", None)
        if stalled and self.stalled_at is None:
            self.stalled_at, self.stalled_why = t, stalled
        if s.action == dc.WAIT:
            model.cap = floor
            return
        self.decisions.append((t, s))
        if s.action == dc.START:
            f = s.drain.forecast
            self.forecast = ForecastCheck(t, f.seconds, f.reason)
        else:
            m = s.drain.measured
            self.measured.append((t, m.seconds))
            if self.later is None and t >= self.forecast.started_at + 1800:
                self.later = ForecastCheck(t, m.seconds, m.reason)
        if s.restore:
            if self.restored_at is None:
                self.restored_at = t
            model.cap = owner
        else:
            model.cap = s.cap


class Fixed:
    def __init__(self, scenario: Scenario, cap: int | None, settings: Settings | None = None):
        self.scenario = scenario
        self.fixed = cap
        self.settings = settings or Settings()
        self.name = f"fixed cap {cap if cap is not None else 'none'}"

    def tick(self, model: RecoveryModel) -> None:
        owner = self.scenario.consumer.owner_cap
        if model.t < 0:
            model.cap = owner
        elif model.t < self.scenario.outage_end:
            model.cap = engaged_cap(owner, self.settings.esm_floor)
        else:
            model.cap = self.fixed


def ideal_cap(scenario: Scenario) -> tuple[int, RecoveryModel]:
    """The fixed cap that drains fastest with no time over the SLO, found by running the
    model around the hidden knee (which no real controller knows)."""
    knee = scenario.knee_concurrency()
    top = scenario.consumer_limit()
    candidates = sorted({max(2, min(top, round(knee) + d)) for d in (-1, 0, 1, 2)})
    best = None
    for cap in candidates:
        model = simulate(scenario, Fixed(scenario, cap))
        o = outcome(model, f"fixed {cap}")
        key = (o.collapsed, o.seconds_over_slo > 0, math.inf if o.caught_up_after is None else o.caught_up_after, cap)
        if best is None or key < best[0]:
            best = (key, cap, model)
    return best[1], best[2]
