"""Drain strategies for the recovery model, each driven by Holdfast's real code.

- `Ladder`: the stage policy as shipped (holdfast.core.policy.decide and posture, default
  Settings), fed a synthetic launch verdict: impaired through the outage, recovering
  `recover_quiet_minutes` after the last capacity-class failure (its end), with a
  successful launch a minute after it. Every walk finishes within its tick, so the plan
  advances as fast as the policy allows. No gating alarms (the default).
- `Controller`: holdfast.core.drain_control. Held at the floor from the start of the
  event; the drain starts when `dependency_back` says so on the consumer's own evidence;
  then `decide` every tick; on `restore` the owner's original comes back.
- `Fixed`: one cap from the end of the outage (the floor before it).

Each reads only what the model publishes as CloudWatch would, lagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from holdfast.core import policy
from holdfast.core import drain_control as dc
from holdfast.core.detector import IMPAIRED, RECOVERING, Verdict
from holdfast.settings import Settings

from .recovery_model import RecoveryModel, Scenario, at, outcome, seconds, simulate


def engaged_cap(owner_cap: int | None, floor: int) -> int:
    """The ESM actuator's engage: the floor, or an owner cap at or below it."""
    return owner_cap if owner_cap is not None and owner_cap <= floor else floor


def partial_cap(owner_cap: int | None, n: int) -> int:
    """The ESM actuator's partial relax: n, never above the owner's original."""
    return n if owner_cap is None else min(n, owner_cap)


class Ladder:
    name = "fixed ladder (stage policy)"

    def __init__(self, scenario: Scenario, settings: Settings | None = None):
        self.scenario = scenario
        self.settings = settings or Settings()
        self.plan: policy.Plan | None = None
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
        d = policy.decide(self.verdict(t), self.plan, {}, model.now(), self.settings)
        plan = d.plan
        target = policy.posture(plan, self.settings)
        self.plan = replace(plan, done=frozenset(target))   # every walk done within the tick
        if d.changed:
            self.labels.append((t, plan.label))
        esm = target.get("esm")
        if esm == policy.ENGAGE:
            model.cap = engaged_cap(owner, self.settings.esm_floor)
        elif isinstance(esm, dict):
            model.cap = partial_cap(owner, esm["MaximumConcurrency"])
        else:   # RESTORE, or nothing engaged
            model.cap = owner


def reading(model: RecoveryModel) -> dc.Reading:
    def point(metric):
        dp = model.datapoint(metric)
        return None if dp is None else dc.Datapoint(dp.at, dp.value)

    return dc.Reading(
        oldest_age=point("age"),
        visible=point("visible"),
        errors=point("errors"),
        throttles=point("throttles"),
        downstream=tuple(dc.Alarm(a.name, a.state, a.measured_at, a.severity) for a in model.alarms()),
    )


@dataclass
class ForecastCheck:
    started_at: int                 # model second the drain started
    forecast_seconds: float | None
    reason: str


class Controller:
    name = "controller"

    def __init__(self, scenario: Scenario, constants: dc.Constants = dc.DEFAULTS, settings: Settings | None = None):
        self.scenario = scenario
        self.constants = constants
        self.settings = settings or Settings()
        self.facts: dc.Facts | None = None
        self.state: dc.CapState | None = None
        self.restored_at: int | None = None
        self.decisions: list[tuple[int, dc.CapDecision]] = []
        self.forecast: ForecastCheck | None = None   # at the start of the drain
        self.later: ForecastCheck | None = None      # 30 min in, on measured throughput
        self._pre: dict[str, float | None] = {}

    def _pre_event(self, model: RecoveryModel) -> dc.Facts:
        """What the shell reads about the mapping when the event begins."""
        con = self.scenario.consumer

        def value(metric):
            dp = model.datapoint(metric)
            return None if dp is None else dp.value

        self._pre = {"deleted": value("deleted"), "concurrency": value("concurrency"), "sent": value("sent")}
        return dc.Facts(
            pre_event_concurrency=value("concurrency"),
            reserved_concurrency=con.reserved_concurrency,
            owner_cap=con.owner_cap,
            baseline_age_seconds=value("age"),
            baseline_errors=value("errors") or 0.0,
        )

    def tick(self, model: RecoveryModel) -> None:
        t = model.t
        owner = self.scenario.consumer.owner_cap
        if t < 0:
            model.cap = owner
            return
        if self.facts is None:
            self.facts = self._pre_event(model)
        now = model.now()
        r = reading(model)
        if self.state is None:
            floor = engaged_cap(owner, self.settings.esm_floor)
            model.cap = floor
            back, _ = dc.dependency_back(self.facts, r, at(0), now, self.constants)
            if not back:
                return
            d = dc.start(self.facts, floor, now, self.constants)
            self._forecast(model, r, d.ceiling)
        else:
            d = dc.decide(self.state, self.facts, r, now, self.constants)
            if self.forecast is not None and self.later is None and t >= self.forecast.started_at + 1800:
                self._measured_forecast(model, r)
        self.state = d.state
        self.decisions.append((t, d))
        if d.restore:
            if self.restored_at is None:
                self.restored_at = t
            model.cap = owner
        else:
            model.cap = d.cap

    def _forecast(self, model: RecoveryModel, r: dc.Reading, top: int) -> None:
        per_batch = dc.per_batch_rate(
            None if self._pre.get("deleted") is None else self._pre["deleted"] / 60, self._pre.get("concurrency")
        )
        consumers = None if per_batch is None else per_batch * top
        arrivals = None if self._pre.get("sent") is None else self._pre["sent"] / 60
        f = dc.forecast(None if r.visible is None else r.visible.value, arrivals, consumers)
        self.forecast = ForecastCheck(model.t, f.seconds, f.reason)


    def _measured_forecast(self, model: RecoveryModel, r: dc.Reading) -> None:
        deleted, sent = model.datapoint("deleted"), model.datapoint("sent")
        f = dc.forecast(
            None if r.visible is None else r.visible.value,
            None if sent is None else sent.value / 60,
            None if deleted is None else deleted.value / 60,
        )
        self.later = ForecastCheck(model.t, f.seconds, f.reason)


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
