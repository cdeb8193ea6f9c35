"""The control loop: one tick reads the world, decides the plan, and moves toward it.

    tick(runtime) -> TickResult

1. Mode `off`: nothing. Kill switch set (CONTROL/PAUSE): nothing but one log line,
   so an operator's pause stops every write within one tick.
2. Observe (holdfast.observation.observe: control, plan, a fresh verdict, the gating
   alarms) and decide (holdfast.core.policy, pure). A changed plan is written as generation current+1, or not
   at all when another controller got there first (this tick then stops; the next
   re-reads). Every new generation is announced on SNS.
3. Walk toward `policy.posture(plan)`, one kind at a time, kinds not yet `done` for
   this generation, through one Engine built for the tick (one ledger, one Lambda
   budget, one actuator per kind): engaging kinds first, with no guard (protection is
   monotone); then
   relaxing kinds, each write guarded by guard(g), checked at the moment of the write.
   The first StalePlan ends all relaxing in this tick. After each kind the pure
   progress decision (holdfast.core.progress) says what to persist: a kind whose walk
   completed without failure is marked done (conditional on g). The deadline from the tick budget
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
from dataclasses import dataclass, field
from typing import Any, Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import policy, progress
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict, StalePlan
from holdfast.core.model import DRIFT_KEPT, ENGAGED, FAILED, PLANNED, RAISED, REFUSED_STALE, RESTORED, Guard, Outcome
from holdfast.core.policy import ENGAGE, Plan
from holdfast.engine import Engine
from holdfast.iam import uses
from holdfast.ledger import leases as ledger_leases
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.observation import Collect, collect as fresh_verdict, observe
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-reconciler")

WRITES = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT)
METRICS_NAMESPACE = "Holdfast"

# (runtime, deadline) -> the tick's engine; tests inject fakes.
EngineFactory = Callable[..., Any]


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


def tick(runtime: Runtime, *, collect: Collect | None = None, engine: EngineFactory | None = None) -> TickResult:
    """One reconcile step. `collect` (the fresh verdict) defaults to
    holdfast.observation.collect and `engine` to holdfast.engine.Engine; tests inject both."""
    settings, clock = runtime.settings, runtime.clock
    if settings.mode == "off":
        logger.info("mode off: nothing to do", extra={"controller": runtime.controller_id})
        return TickResult(None, None, ["off"])
    started = clock.monotonic()
    deadline = lambda: clock.monotonic() - started >= settings.tick_budget_seconds
    make_engine = engine or (lambda rt, deadline: Engine(rt, deadline=deadline))
    run = _Tick(runtime, collect or fresh_verdict, make_engine(runtime, deadline), deadline)
    result = run.go()
    _emit_metrics(result)
    return result


class _Tick:
    def __init__(self, runtime: Runtime, collect: Collect, engine, deadline: Callable[[], bool]):
        self.runtime, self.settings, self.table = runtime, runtime.settings, runtime.table
        self.collect, self.engine, self.deadline = collect, engine, deadline
        self.dynamodb = runtime.clients("dynamodb")
        self.dry_run = self.settings.mode == "recommend"

    def log(self, message: str, plan: Plan | None, **extra: Any) -> None:
        logger.info(message, extra={
            "controller": self.runtime.controller_id,
            "generation": plan.generation if plan else None,
            "stage": plan.label if plan else None,
            "mode": self.settings.mode,
            **extra,
        })

    def go(self) -> TickResult:
        now = self.runtime.clock.now()
        try:
            seen = observe(self.runtime, now, collect=self.collect)
        except LedgerUnavailable as err:
            return self.without_ledger(str(err), now)
        current, control = seen.plan, seen.control
        if control.paused:
            self.log("paused: no action", current, reasons=[f"kill switch set by {control.paused_by} at {control.paused_at}: {control.reason}"])
            return TickResult(current.stage if current else None, current.generation if current else None, ["paused"])

        decision = seen.decide(now, self.settings)
        plan = decision.plan
        result = TickResult(plan.stage, plan.generation, reasons=decision.reasons, gates=decision.gates)
        self.log("decision", plan, changed=decision.changed, verdict=getattr(seen.verdict, "state", None),
                 reasons=list(decision.reasons), gates=list(decision.gates))

        notified = seen.notified
        try:
            if decision.changed:
                try:
                    ledger_plan.write(self.dynamodb, self.table, plan, controller_id=self.runtime.controller_id, now=now)
                except PlanConflict as err:
                    self.log("plan conflict: another controller decided first; re-read next tick", plan, reasons=[str(err)])
                    result.actions.append("conflict")
                    return result
                except Contention as err:
                    self.log("plan contended: another controller's transaction held it; re-read next tick", plan,
                             reasons=[str(err)])
                    result.actions.append("contention")
                    return result
                result.actions.append(f"plan:{plan.generation}")
                notified = False
            if seen.verdict is not None:
                ledger_verdict.write_verdict(self.dynamodb, self.table, seen.verdict.to_dict())
        except LedgerUnavailable as err:
            # Lost between the read and the write: act as a tick that never had the ledger.
            return self.without_ledger(str(err), now)
        try:
            if plan.generation and not notified:
                self.notify(plan)
                result.actions.append("notified")
            self.started = now
            self.walk(plan, result)
        except Contention as err:
            # A progress mark met another controller's transaction: the ledger is fine, the
            # mark did not land; the next tick walks again and skips what is in place.
            self.log("plan contended mid-tick: stopping; the next tick continues", plan, reasons=[str(err)])
            result.actions.append("contention")
            result.complete = False
        except LedgerUnavailable as err:
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
            report = self.engine.engage(kinds=(kind,), dry_run=self.dry_run, after={kind: plan.cursor.get(marker)})
            self.finish_kind(plan, result, marker, report, engaging=True)
        if self.deadline():
            result.complete = False
            return
        guard = _Sticky(ledger_leases.guard_factory(self.dynamodb, self.table, controller_id=self.runtime.controller_id,
                                                    clock=self.runtime.clock)(plan.generation))
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
            report = self.engine.relax(kinds=(kind,), target_for=(lambda _r, p=partial: p), guard=guard)
            self.finish_kind(plan, result, kind, report, engaging=False)
        if guard.refused:
            self.log("stale plan: relaxing stopped; the next tick re-reads", plan, reasons=[guard.refused])
            result.actions.append("stale")
        result.complete = result.complete and not self.deadline() and not guard.refused

    def finish_kind(self, plan: Plan, result: TickResult, marker: str, report, *, engaging: bool) -> None:
        """Carry out the pure progress decision for one kind's walk."""
        result.outcomes.extend(report.outcomes)
        failed = [o for o in report.outcomes if o.action in (FAILED, REFUSED_STALE)]
        self.log("walked", plan, kind=marker, engaging=engaging, complete=report.complete,
                 failed=[f"{o.arn}: {o.error}" for o in failed][:20], refused=report.refused,
                 # Why a resource was skipped or engaged without a destination, with its fix.
                 noted=[{"arn": o.arn, **{k: v for k, v in note.items() if k in ("why", "fix", "command")}}
                        for o in report.outcomes for note in o.notes.values()][:20],
                 api_calls=report.api_calls, written=sum(1 for o in report.outcomes if o.action in WRITES))
        walked = progress.Walked(marker, engaging, report.complete, len(failed), bool(report.refused),
                                 report.cursor.get(marker.split("/")[0]))
        saved = plan.cursor.get(marker)
        older = (progress.needs_relaxers(walked, saved_cursor=saved, dry_run=self.dry_run)
                 and bool(self.stale_relaxers(plan)))
        step = progress.after_walk(walked, saved_cursor=saved, dry_run=self.dry_run, older_relaxers=older)
        if step.note:
            self.log(step.note, plan, kind=marker)
        if step.cursor is not None:
            ledger_plan.set_cursor(self.dynamodb, self.table, plan.generation, marker, step.cursor)
        if step.mark_done:
            self.mark(plan, result, marker)
        result.complete = result.complete and step.complete

    def stale_relaxers(self, plan: Plan) -> list[str]:
        """Controllers of an older generation whose relaxing write may have landed after
        this tick began (the lease is counted from the tick's start, not from now: a
        write guarded shortly before the tick can land on a resource the tick engaged)."""
        return ledger_leases.stale_relaxers(self.dynamodb, self.table, plan.generation, self.started)

    def mark(self, plan: Plan, result: TickResult, marker: str) -> None:
        if ledger_plan.mark_done(self.dynamodb, self.table, plan.generation, marker):
            result.actions.append(marker)

    # ---- around the walk -----------------------------------------------------------

    def notify(self, plan: Plan) -> None:
        if self.runtime.topic_arn:
            try:
                publish_stage(self.runtime, plan)
            except AWS_ERRORS as err:  # invariant 8: the walk goes on; the next tick publishes
                self.log("stage notification failed: the next tick tries again", plan, reasons=[error_text(err)])
                return
        ledger_plan.mark_notified(self.dynamodb, self.table, plan.generation)

    def without_ledger(self, error: str, now) -> TickResult:
        """Invariant 3: engaging proceeds without the ledger; nothing is relaxed."""
        result = TickResult(None, None, ["ledger-unavailable"], reasons=(error,))
        try:
            verdict = self.collect(self.runtime, now, None)
        except Exception:
            logger.exception("ledger and verdict unavailable: no action", extra={"controller": self.runtime.controller_id})
            return result
        self.log("ledger unavailable", None, verdict=verdict.state, reasons=[error])
        if verdict.state == policy.IMPAIRED:
            report = self.engine.engage(dry_run=self.dry_run)
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


@uses("sns:Publish", by=("reconciler",))
def publish_stage(runtime: Runtime, plan: Plan) -> None:
    """Announce a new plan. A failed publish is logged; the plan stays un-notified and
    the next tick tries again."""
    message = {
        "generation": plan.generation,
        "stage": plan.stage,
        "drain_step": plan.drain_step,
        "entered_at": plan.entered_at.isoformat() if plan.entered_at else None,
        "verdict": plan.verdict,
        "reasons": list(plan.reasons),
        "mode": runtime.settings.mode,
        "controller": runtime.controller_id,
    }
    runtime.clients("sns").publish(
        TopicArn=runtime.topic_arn,
        Subject=f"Holdfast: {plan.label} (generation {plan.generation})"[:100],
        Message=json.dumps(message, indent=2),
    )


def _emit_metrics(result: TickResult) -> None:
    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service="holdfast-reconciler")
    if result.stage is not None:
        metrics.add_metric(name="StageIndex", unit=MetricUnit.Count, value=policy.STAGES.index(result.stage))
    metrics.add_metric(name="ResourcesEngaged", unit=MetricUnit.Count, value=result.count(ENGAGED))
    metrics.add_metric(name="WritesDone", unit=MetricUnit.Count, value=result.count(*WRITES))
    metrics.add_metric(name="WritesRefused", unit=MetricUnit.Count, value=result.count(REFUSED_STALE))
    metrics.add_metric(name="WritesFailed", unit=MetricUnit.Count, value=result.count(FAILED))
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int("paused" in result.actions))
    metrics.flush_metrics()
