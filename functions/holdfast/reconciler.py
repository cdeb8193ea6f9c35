"""The control loop: one tick reads the world, decides the plan, and moves toward it.

    tick(clients, settings, ledger_table, clock, *, controller_id) -> TickResult

1. Mode `off`: nothing. Kill switch set (CONTROL/PAUSE): nothing but one log line,
   so an operator's pause stops every write within one tick.
2. Read the plan, the verdict (detection.collect), the gating alarms; decide
   (holdfast.policy, pure). A changed plan is written as generation current+1, or not
   at all when another controller got there first (this tick then stops; the next
   re-reads). Every new generation is announced on SNS.
3. Walk toward `policy.posture(plan)`, one kind at a time, kinds not yet `done` for
   this generation: engaging kinds first, with no guard (protection is monotone); then
   relaxing kinds, each write guarded by guard(g), checked at the moment of the write.
   The first StalePlan ends all relaxing in this tick. A kind whose walk completed
   without failure is marked done (conditional on g). The deadline from the tick budget
   stops the walk cleanly; the next tick continues from the `done` marks, and since
   engage and relax skip what is already in place, nothing is written twice.
   An unfinished engage walk also persists its cursor (conditional on g): the next tick
   resumes after it instead of re-reading every resource, so a fleet too large for one
   tick's budget still finishes. The cursor never passes a failed resource, and is not
   moved while an older generation may still be relaxing (see `keep_cursor`).

Mode `recommend` decides, writes the plan (the decision record) and reports what the
walk would change, but writes nothing to any resource.

Crash points, and how the next tick recovers (tests/reconciler/test_crashes.py):
- before the plan write: nothing was persisted; the next tick decides again.
- after the plan write, before the notification: the plan item says `notified` false;
  the next tick publishes (at least once) and marks it.
- during an engage walk (after the tag, before the ledger, before the AWS write): the
  actuator wrote ahead (tag, then ledger) before changing anything; the kind is not
  done, so the next tick walks it again and engage skips what is in posture.
- during a relax (after the AWS write, before untag / forgetting the ledger record):
  the record is still there; the next tick's relax finds current == original and only
  cleans up, each step guarded again.
- after a guard's lease write, before the AWS write it guarded: nothing changed; the
  lease only delays other controllers' `done` marks for LEASE_SECONDS.
- after a walk, before `mark_done`: the next tick walks the kind again; no writes.
- the ledger unreachable: engaging still proceeds when the verdict is impaired
  (tag-only write-ahead); nothing is relaxed, since no plan can be confirmed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from . import policy
from .actuators.base import (
    DRIFT_KEPT,
    ENGAGED,
    FAILED,
    PLANNED,
    RAISED,
    REFUSED_STALE,
    RESTORED,
    Guard,
    Outcome,
    StalePlan,
)
from .detection.detector import Verdict
from .iam import uses
from .ledger import plan as ledger_plan
from .policy import ENGAGE, Plan

logger = Logger(service="holdfast-reconciler")

TOPIC_ENV = "HOLDFAST_TOPIC_ARN"
WRITES = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT)
ALARM_NAMES_PER_CALL = 100


@dataclass
class TickResult:
    stage: str | None
    generation: int | None
    actions: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    reasons: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    complete: bool = True

    def count(self, *actions: str) -> int:
        return sum(1 for o in self.outcomes if o.action in actions)


def tick(
    clients,
    settings,
    ledger_table: str,
    clock,
    *,
    controller_id: str,
    collect: Callable | None = None,
    engine=None,
    topic_arn: str | None = None,
) -> TickResult:
    """One reconcile step. `collect` and `engine` default to holdfast.detection.collect
    and holdfast.engine (injected by tests); `topic_arn` to HOLDFAST_TOPIC_ARN."""
    if settings.mode == "off":
        logger.info("mode off: nothing to do", extra={"controller": controller_id})
        return TickResult(None, None, ["off"])
    started = clock.monotonic()
    deadline = lambda: clock.monotonic() - started >= settings.tick_budget_seconds
    if engine is None:
        from . import engine
    if collect is None:
        from .detection import collect
    run = _Tick(clients, settings, ledger_table, clock, controller_id, collect, engine, deadline,
                topic_arn if topic_arn is not None else os.environ.get(TOPIC_ENV))
    result = run.go()
    _emit_metrics(result, settings)
    return result


class _Tick:
    def __init__(self, clients, settings, table, clock, controller_id, collect, engine, deadline, topic_arn):
        self.clients, self.settings, self.table, self.clock = clients, settings, table, clock
        self.controller_id, self.collect, self.engine, self.deadline = controller_id, collect, engine, deadline
        self.topic_arn = topic_arn
        self.dynamodb = clients("dynamodb")
        self.dry_run = settings.mode == "recommend"

    def log(self, message: str, plan: Plan | None, **extra: Any) -> None:
        logger.info(message, extra={
            "controller": self.controller_id,
            "generation": plan.generation if plan else None,
            "stage": plan.label if plan else None,
            "mode": self.settings.mode,
            **extra,
        })

    def go(self) -> TickResult:
        now = self.clock.now()
        try:
            control = ledger_plan.read_control(self.dynamodb, self.table)
            item = ledger_plan.read_item(self.dynamodb, self.table)
        except ledger_plan.LedgerUnavailable as err:
            return self.without_ledger(str(err), now)
        current = ledger_plan.from_item(item) if item else None
        if control.paused:
            self.log("paused: no action", current, reasons=[f"kill switch set by {control.paused_by} at {control.paused_at}: {control.reason}"])
            return TickResult(current.stage if current else None, current.generation if current else None, ["paused"])

        try:
            previous = ledger_plan.read_verdict(self.dynamodb, self.table)
            previous = Verdict.from_dict(previous) if previous else None
            verdict = self.collect(self.clients, self.settings, self.table, now, previous)
        except Exception as err:  # detection failing must not stop the walk (invariant 8)
            logger.exception("verdict unavailable: keeping the plan", extra={"controller": self.controller_id})
            verdict, decision = None, policy.Decision(current or Plan(mode=self.settings.mode), False, (f"no verdict: {err}",), ("no verdict",))
        if verdict is not None:
            alarms = gating_alarms(self.clients, self.settings.gating_alarms)
            decision = policy.decide(verdict, current, alarms, now, self.settings, advance_generation=control.advance_generation)
        plan = decision.plan
        result = TickResult(plan.stage, plan.generation, reasons=decision.reasons, gates=decision.gates)
        self.log("decision", plan, changed=decision.changed, verdict=getattr(verdict, "state", None),
                 reasons=list(decision.reasons), gates=list(decision.gates))

        try:
            if decision.changed:
                try:
                    ledger_plan.write(self.dynamodb, self.table, plan, controller_id=self.controller_id, now=now)
                except ledger_plan.PlanConflict as err:
                    self.log("plan conflict: another controller decided first; re-read next tick", plan, reasons=[str(err)])
                    result.actions.append("conflict")
                    return result
                result.actions.append(f"plan:{plan.generation}")
                item = None
            if verdict is not None:
                ledger_plan.write_verdict(self.dynamodb, self.table, verdict.to_dict())
        except ledger_plan.LedgerUnavailable as err:
            # Lost between the read and the write: act as a tick that never had the ledger.
            return self.without_ledger(str(err), now)
        try:
            if plan.generation and not (item or {}).get("notified", {}).get("BOOL", False):
                self.notify(plan)
                result.actions.append("notified")
            self.started = now
            self.walk(plan, result)
        except ledger_plan.LedgerUnavailable as err:
            # Lost mid-walk: what was written stays (write-ahead came first); progress marks
            # were not, so the next tick walks again and skips what is in place.
            self.log("ledger lost mid-tick: stopping; the next tick continues", plan, reasons=[str(err)])
            result.actions.append("ledger-unavailable")
            result.complete = False
        return result

    # ---- the walk ------------------------------------------------------------------

    def walk(self, plan: Plan, result: TickResult) -> None:
        target = policy.posture(plan, self.settings)
        todo = [k for k in target if k not in plan.done]
        engaging = [k for k in todo if target[k] == ENGAGE]
        relaxing = [k for k in todo if target[k] != ENGAGE]
        # After a step back in drain the caps must come down before they go up to the new step.
        lower_first = [k for k in relaxing if plan.stepped_back and isinstance(target[k], dict) and f"{k}/engaged" not in plan.done]
        for kind in engaging + lower_first:
            if self.deadline():
                break
            marker = kind if kind in engaging else f"{kind}/engaged"
            report = self.engine.engage_all(self.clients, self.settings, self.table, kinds=(kind,),
                                            dry_run=self.dry_run, deadline=self.deadline,
                                            after={kind: plan.cursor.get(marker)})
            self.finish_kind(plan, result, marker, report, engaging=True)
        if self.deadline():
            result.complete = False
            return
        guard = _Sticky(ledger_plan.guard_factory(self.dynamodb, self.table, controller_id=self.controller_id, clock=self.clock)(plan.generation))
        for kind in relaxing:
            if self.deadline() or guard.refused:
                break
            if kind in lower_first and f"{kind}/engaged" not in result.actions:
                continue  # its lowering did not finish this tick
            if self.dry_run:
                result.outcomes.append(Outcome(kind, f"kind:{kind}", PLANNED, changes={"posture": {"to": target[kind]}}))
                self.mark(plan, result, kind)
                continue
            partial = target[kind] if isinstance(target[kind], dict) else None
            report = self.engine.relax_all(self.clients, self.settings, self.table, kinds=(kind,),
                                           target_for=(lambda _r, p=partial: p), guard=guard, deadline=self.deadline)
            self.finish_kind(plan, result, kind, report, engaging=False)
        if guard.refused:
            self.log("stale plan: relaxing stopped; the next tick re-reads", plan, reasons=[guard.refused])
            result.actions.append("stale")
        result.complete = result.complete and not self.deadline() and not guard.refused

    def finish_kind(self, plan: Plan, result: TickResult, marker: str, report, *, engaging: bool) -> None:
        result.outcomes.extend(report.outcomes)
        failed = [o for o in report.outcomes if o.action in (FAILED, REFUSED_STALE)]
        self.log("walked", plan, kind=marker, engaging=engaging, complete=report.complete,
                 failed=[f"{o.arn}: {o.error}" for o in failed][:20], refused=report.refused,
                 api_calls=report.api_calls, written=sum(1 for o in report.outcomes if o.action in WRITES))
        if not report.complete or failed or report.refused:
            result.complete = False
            if engaging and not report.refused:
                self.keep_cursor(plan, marker, report.cursor.get(marker.split("/")[0]))
            return
        if engaging and not self.dry_run:
            others = self.stale_relaxers(plan)
            if others:
                self.log("engage walk not recorded: an older generation relaxed moments ago; walking again next tick",
                         plan, kind=marker, controllers=others)
                result.complete = False
                return
        self.mark(plan, result, marker)

    def stale_relaxers(self, plan: Plan) -> list[str]:
        """Controllers of an older generation whose relaxing write may have landed after
        this tick began (the lease is counted from the tick's start, not from now: a
        write guarded shortly before the tick can land on a resource the tick engaged)."""
        return ledger_plan.stale_relaxers(self.dynamodb, self.table, plan.generation, self.started)

    def keep_cursor(self, plan: Plan, marker: str, cursor: str | None) -> None:
        """Persist where `marker`'s walk resumes. Not while an older generation may still be
        relaxing: the next walk must then see again what this tick engaged."""
        if cursor is None or cursor == plan.cursor.get(marker):
            return
        if not self.dry_run and self.stale_relaxers(plan):
            self.log("cursor not moved: an older generation relaxed moments ago", plan, kind=marker)
            return
        ledger_plan.set_cursor(self.dynamodb, self.table, plan.generation, marker, cursor)

    def mark(self, plan: Plan, result: TickResult, marker: str) -> None:
        if ledger_plan.mark_done(self.dynamodb, self.table, plan.generation, marker):
            result.actions.append(marker)

    # ---- around the walk -----------------------------------------------------------

    def notify(self, plan: Plan) -> None:
        if self.topic_arn:
            publish_stage(self.clients, self.topic_arn, plan, controller_id=self.controller_id, mode=self.settings.mode)
        ledger_plan.mark_notified(self.dynamodb, self.table, plan.generation)

    def without_ledger(self, error: str, now) -> TickResult:
        """Invariant 3: engaging proceeds without the ledger; nothing is relaxed."""
        result = TickResult(None, None, ["ledger-unavailable"], reasons=(error,))
        try:
            verdict = self.collect(self.clients, self.settings, self.table, now, None)
        except Exception:
            logger.exception("ledger and verdict unavailable: no action", extra={"controller": self.controller_id})
            return result
        self.log("ledger unavailable", None, verdict=verdict.state, reasons=[error])
        if verdict.state == policy.IMPAIRED:
            report = self.engine.engage_all(self.clients, self.settings, self.table, dry_run=self.dry_run, deadline=self.deadline)
            result.outcomes.extend(report.outcomes)
            result.actions.append("engaged-without-ledger")
            result.complete = report.complete
        return result


class _Sticky:
    """A guard that, once refused, refuses every later write of this tick without asking
    again: the tick stops relaxing at the first sign the plan moved on."""

    def __init__(self, guard: Guard):
        self._guard = guard
        self.refused: str | None = None

    def __call__(self) -> None:
        if self.refused:
            raise StalePlan(self.refused)
        try:
            self._guard()
        except StalePlan as err:
            self.refused = str(err)
            raise


@uses("cloudwatch:DescribeAlarms", by=("reconciler", "cli"))
def gating_alarms(clients, names: Iterable[str]) -> dict[str, str | None]:
    """Alarm name -> state (OK, ALARM, INSUFFICIENT_DATA); None for a missing alarm.
    An unreadable alarm counts as missing: it gates, it never crashes the tick."""
    names = list(names)
    states: dict[str, str | None] = {n: None for n in names}
    cloudwatch = clients("cloudwatch") if names else None
    for i in range(0, len(names), ALARM_NAMES_PER_CALL):
        try:
            page = cloudwatch.describe_alarms(
                AlarmNames=names[i:i + ALARM_NAMES_PER_CALL],
                AlarmTypes=["MetricAlarm", "CompositeAlarm"],
                MaxRecords=ALARM_NAMES_PER_CALL,
            )
        except (ClientError, BotoCoreError):
            logger.exception("gating alarms unreadable: treated as not OK")
            continue
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            states[alarm["AlarmName"]] = alarm["StateValue"]
    return states


@uses("sns:Publish", by=("reconciler",))
def publish_stage(clients, topic_arn: str, plan: Plan, *, controller_id: str, mode: str) -> None:
    """Announce a new plan. A failed publish is logged; the plan stays un-notified and
    the next tick tries again."""
    message = {
        "generation": plan.generation,
        "stage": plan.stage,
        "drain_step": plan.drain_step,
        "entered_at": plan.entered_at.isoformat() if plan.entered_at else None,
        "verdict": plan.verdict,
        "reasons": list(plan.reasons),
        "mode": mode,
        "controller": controller_id,
    }
    clients("sns").publish(
        TopicArn=topic_arn,
        Subject=f"Holdfast: {plan.label} (generation {plan.generation})"[:100],
        Message=json.dumps(message, indent=2),
    )


def _emit_metrics(result: TickResult, settings) -> None:
    metrics = EphemeralMetrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Holdfast"), service="holdfast-reconciler")
    if result.stage is not None:
        metrics.add_metric(name="StageIndex", unit=MetricUnit.Count, value=policy.STAGES.index(result.stage))
    metrics.add_metric(name="ResourcesEngaged", unit=MetricUnit.Count, value=result.count(ENGAGED))
    metrics.add_metric(name="WritesDone", unit=MetricUnit.Count, value=result.count(*WRITES))
    metrics.add_metric(name="WritesRefused", unit=MetricUnit.Count, value=result.count(REFUSED_STALE))
    metrics.add_metric(name="WritesFailed", unit=MetricUnit.Count, value=result.count(FAILED))
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int("paused" in result.actions))
    metrics.flush_metrics()
