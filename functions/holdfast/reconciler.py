"""The control loop: one tick reads the world, decides the plan, and moves toward it.

    tick(runtime) -> TickResult

As controller-runtime's Reconcile, one tick is a few named steps, each a function of
what the step before returned (`reconcile`): observe (holdfast.observation.observe) ->
decide (the plan, persisted) -> notify (a new generation, before any walk) ->
engage walk -> relax walk -> finish (the stuck resources, in the result), returning a
TickResult. The engine they drive is typed (holdfast.engine.TickEngine, WalkReport);
a walk's progress is kept under its marker (holdfast.core.progress.Marker).

1. Mode `off`: nothing. Kill switch set (CONTROL/PAUSE): nothing but one log line,
   so an operator's pause stops every write within one tick.
2. Observe (holdfast.observation.observe: control, plan, a fresh verdict, the gating
   alarms) and decide (holdfast.core.policy, pure). A changed plan is written as generation current+1, or not
   at all when another controller got there first (this tick then stops; the next
   re-reads). Every new generation is announced on SNS.
3. Walk toward `policy.posture(plan)`, kinds not yet `done` for this generation,
   through one Engine built for the tick (one ledger, the rate budgets, one actuator per
   kind): first every engaging kind (and the re-walks of held kinds, step 5) in ONE
   engine call, with no guard (protection is monotone), so kinds of different services
   are walked at once (Auto Scaling, ELB and Application Auto Scaling beside Lambda) and
   each kind's part of the report is finished on its own marker; then relaxing kinds,
   one at a time, each write guarded by guard(g), checked at the moment of the write.
   The engaging walk has the long budget when the handler gives one (`engage_seconds`:
   the invocation's remaining time): it goes on while there is engage work and Lambda
   time, is claimed in the ledger (holdfast.ledger.claims: a lease of about one schedule
   period, renewed every PLAN_CHECK_SECONDS while the walk makes calls) so the schedule's
   overlapping ticks leave it to its holder, and stops once the plan's generation moved
   on (re-read at each renewal) or another controller took the claim over. A holder
   killed outright costs at most one scheduled tick. Relaxing keeps `tick_budget_seconds`.
   The first StalePlan ends all relaxing in this tick. After each kind the pure
   progress decision (holdfast.core.progress) says what to persist: a kind whose walk
   completed without failure is marked done (conditional on g). The deadline stops the
   walk cleanly (the engine says which kinds it cut: Report.unfinished); the next tick continues from the `done` marks, and since
   engage and relax skip what is already in place, nothing is written twice.
   An unfinished engage walk also persists its cursor (conditional on g): the next tick
   resumes after it instead of re-reading every resource, so a fleet too large for one
   tick's budget still finishes. The cursor never passes a failed resource (unless it is
   stuck), and is not moved while an older generation may still be relaxing.
4. Resources that keep failing: every FAILED outcome is counted in the ledger
   (holdfast.ledger.failures, per resource, per generation and operation), a success
   clears the count, and a resource that failed on `stuck_after_failures` walks is stuck:
   it no longer holds its kind back (holdfast.core.progress), it is counted in the
   ResourcesStuck metric (alarmed on: stacks/holdfast_cdk/constructs/monitoring.py) and listed by
   `holdfast status`. A stuck restore is retried every `rewalk_minutes` once its kind is
   done (in `normal` too), so it is restored without a human once its cause is gone.
5. Kinds done and still held in posture are walked again every `rewalk_minutes`
   (holdfast.ledger.walks): the bulk listings again, per-resource reads only for the
   candidates whose listing changed since a finished walk saw them, so groups created or
   opted in during a long hold, or processes an IaC apply resumed, are protected.
6. Kinds under a controller (the CONTROL posture: SQS event source mappings in hold and
   drain) are engaged when a hold begins (marker `<kind>/engaged`; a walk of it again
   leaves alone the mappings a drain already drives), then every tick the drain
   (holdfast.stages.drain) decides each mapping's cap and keeps its record (conditional
   on g) before a guarded relax walk of the mappings that move writes it; the kind is
   done when every mapping is back at its owner's value. In the replay stage the replay
   (holdfast.stages.replay) starts, watches and cancels message moves; `replay` is done
   when every source has finished.

7. Release requests (CONTROL/RELEASE#<arn>: `holdfast release ARN --all-accounts`,
   written through the org operator role, which may write nothing else): before the
   walks, so a walk that takes the whole tick never keeps them waiting, each is claimed,
   checked and acted on once, as `holdfast release` would, and its outcome recorded on it
   (`release`, holdfast.core.release); this tick's walks leave what it released alone.
   A restore that may not write yet (`refused-stale`: the mapping's last cap write may
   still land, or its record moved on since this tick read it) is not an outcome: the
   request is requested again and the next tick acts on it (core.release.waits).

Mode `recommend` decides, writes the plan (the decision record) and reports what the
walk would change, but writes nothing to any resource.

Crash points, and how the next tick recovers (tests/scenarios/test_crashes.py):
- before the plan write: nothing was persisted; the next tick decides again.
- after the plan write, before the notification: the plan item says `notified` false;
  the next tick publishes (at least once) and marks it.
- during an engage walk (after the tag, before the ledger, before the AWS write): the
  actuator wrote ahead (tag, then ledger) before changing anything; the kind is not
  done, so the next tick walks it again and engage skips what is in posture.
- during an engage walk, after a mapping's ledger record and cap, before its deferred
  record tag (mappings write ahead to the ledger while it answers, their tags last in the
  Lambda walk): the original is durable in the ledger, so a restore works from it alone;
  the kind is not done, so the next tick walks it again, finds the mapping in posture with
  the ledger's record only, and writes the tag (no cap is written twice).
- during a relax (after the AWS write, before untag / forgetting the ledger record):
  the record is still there; the next tick's relax finds current == original and only
  cleans up, each step guarded again.
- after a guard's lease write, before the AWS write it guarded: nothing changed; the
  lease only delays other controllers' `done` marks for LEASE_SECONDS.
- a mapping's cap write (a drain step, or its final restore): the record and the write's
  target and time are written first, over the record version the write was decided on
  (ledger.conditions.RECORD_VERSION_IS: another controller's write since makes it
  refused-stale, for the next tick). Killed after that record, before or during the
  UpdateEventSourceMapping: the target is in the applied set, so whenever it lands it is
  Holdfast's. A write sent but not applied yet (throttled and retried, re-sent after a
  read timeout) is waited for: the next tick leaves the mapping alone (refused-stale)
  while its last write is not seen and younger than LEASE_SECONDS, and keeps that
  write's target in the applied set until it is seen, so a late cap is never read as
  the owner's, nor left on a mapping whose record a restore forgot. Killed after AWS
  answered the write, before its claim is settled: a write applied shows on the mapping,
  so nothing waits for it; one AWS refused holds the mapping back LEASE_SECONDS at most.
- after a walk, before `mark_done`: the next tick walks the kind again; no writes.
- the ledger unreachable: engaging still proceeds when the verdict is impaired
  (tag-only write-ahead); nothing is relaxed, since no plan can be confirmed.
- a release during a hold (a request, or `holdfast release`): its mark
  (CONTROL/RELEASED#<arn>) is written before the restore. Killed after the mark, before
  or during the restore: the resource is still engaged and marked; the walks leave it
  alone, and the request's takeover (or the command run again) restores it. Killed after
  the restore, before the outcome: the takeover finds it restored and records
  `restored-unconfirmed`; the mark is already there, so no re-walk engages it again. A
  walk that read the marks before the mark landed is refused at its write-ahead
  (conditions.NOT_RELEASED_IN), and takes its record tag off again. A request whose
  restore meets a cap write still in flight writes nothing and is requested again
  (ledger.control.postpone_release), its mark kept: the next tick restores it.
"""

from __future__ import annotations

import contextvars
import json
import threading
from datetime import timedelta
from dataclasses import dataclass, field
from typing import Any, Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from holdfast.aws import AWS_ERRORS, CALL_HOOK, error_text
from holdfast.core import announce, policy, progress
from holdfast.core import release as release_requests
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict, StalePlan
from holdfast.core.model import (ALREADY, DRIFT_KEPT, ENGAGED, FAILED, LEAVE, PLANNED, RAISED, REFUSED_STALE,
                                 RESTORED, SKIPPED, VANISHED, Guard, Outcome)
from holdfast.core.kinds import CONTROLLED as CONTROLLED_KINDS, kind_of
from holdfast.core.policy import CONTROL, ENGAGE, NORMAL, REPLAY, RESTORE, Plan
from holdfast.core.progress import Marker, held_marker
from holdfast.engine import Engine, TickEngine, WalkReport
from holdfast.iam import uses
from holdfast.ledger import Ledger
from holdfast.ledger import failures as ledger_failures
from holdfast.ledger import leases as ledger_leases
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import control as ledger_control
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger import walks as ledger_walks
from holdfast.observation import Collect, collect as fresh_verdict, observe
from holdfast.runtime import Runtime, Telemetry
from holdfast.stages import capacity as capacity_stage
from holdfast.stages import drain as drain_stage
from holdfast.stages import replay as replay_stage

logger = Logger(service="holdfast-reconciler")

WRITES = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT)
# Outcomes that end a resource's run of failures.
SUCCEEDED = (ENGAGED, ALREADY, RAISED, RESTORED, DRIFT_KEPT, VANISHED, SKIPPED)
LEFTOVERS = "stuck-restores"   # the walk marker of the retries of stuck restores
METRICS_NAMESPACE = "Holdfast"

# (runtime, deadline) -> the tick's engine; tests inject fakes (holdfast.engine.TickEngine).
EngineFactory = Callable[..., TickEngine]
CONTROLLED_DONE = (RESTORED, DRIFT_KEPT, VANISHED)


class Stages:
    """The drain's and the replay's per-tick work (holdfast.stages), reading the resource
    records and the drain's records through the tick's ledger; tests of the plan and its guards, whose resources
    are in-memory fakes, inject their own."""

    def __init__(self, ledger: Ledger | None = None):
        self.ledger = ledger

    def drain(self, runtime: Runtime, plan: Plan, now, *, dry_run: bool):
        return drain_stage.decide(runtime, plan, now, dry_run=dry_run, ledger=self.ledger)

    def in_drain(self, runtime: Runtime, plan: Plan) -> frozenset[str]:
        return drain_stage.in_drain(self.ledger or runtime.ledger(), plan)

    def replay(self, runtime: Runtime, plan: Plan, now, *, guard: Guard, dry_run: bool):
        return replay_stage.step(runtime, plan, now, guard=guard, dry_run=dry_run, ledger=self.ledger)

    def capacity(self, runtime: Runtime, plan: Plan, now, *, engine: TickEngine, guard: Guard,
                 stuck: frozenset[str] = frozenset()):
        return capacity_stage.step(runtime, plan, now, engine=engine, guard=guard,
                                   ledger=self.ledger or runtime.ledger(), stuck=stuck)


@dataclass
class TickResult:
    stage: str | None
    generation: int | None
    actions: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    reasons: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    complete: bool = True
    # Resources that failed on `stuck_after_failures` walks and no longer gate their stage;
    # None when this tick did not walk (paused, off, a plan conflict): not known.
    stuck: list[ledger_failures.Failure] | None = None
    # Drains reported stalled (they keep their cap and no longer gate the stages); None:
    # this tick did not drive the drain.
    stalled: int | None = None

    def count(self, *actions: str) -> int:
        return sum(1 for o in self.outcomes if o.action in actions)


def tick(runtime: Runtime, *, collect: Collect | None = None, engine: EngineFactory | None = None,
         stages: Stages | None = None, engage_seconds: float | None = None) -> TickResult:
    """One reconcile step. `collect` (the fresh verdict) defaults to
    holdfast.observation.collect, `engine` to holdfast.engine.Engine and `stages` to
    Stages (the drain and the replay); tests inject them.

    `engage_seconds`: how long this tick may keep walking while it engages (the Lambda
    handler passes its remaining time less a margin). None: the tick budget
    (`settings.tick_budget_seconds`) for everything, and no claim on the engage walk."""
    settings = runtime.settings
    if settings.mode == "off":
        if runtime.telemetry.decisions:
            logger.info("mode off: nothing to do", extra={"controller": runtime.controller_id})
        return TickResult(None, None, ["off"])
    # One ledger a tick: the walks, the evidence and the stages share its one Query of the
    # resource records and of the drain's records.
    ledger = runtime.ledger()
    deadline = TickDeadline(runtime, engage_seconds, ledger=ledger)
    make_engine = engine or (lambda rt, deadline: Engine(rt, deadline=deadline, ledger=ledger))
    run = _Tick(runtime, collect or fresh_verdict, make_engine(runtime, deadline), deadline, stages or Stages(ledger),
                ledger)
    result = reconcile(run)
    _emit_metrics(result, runtime.telemetry)
    return result


# While a long engage walk runs, its claim is renewed and the plan read again this often:
# a walk whose plan moved on stops within this time (its engage is no longer what the
# plan wants), and so does one whose claim another controller took over.
PLAN_CHECK_SECONDS = ledger_claims.RENEW_SECONDS


class TickDeadline:
    """When the tick stops walking: `deadline()` True.

    Short by default: `settings.tick_budget_seconds` from the tick's start, for every
    stage. While the tick engages (`with deadline.engaging(plan)`), and the handler gave it
    `engage_seconds` longer than that, it keeps walking until `engage_seconds` from the
    tick's start, or until the plan's generation is no longer the one it engages for
    (read at most every PLAN_CHECK_SECONDS), whichever comes first. That long walk is
    claimed in the ledger (holdfast.ledger.claims): the ticks the schedule starts meanwhile
    leave the engage to it instead of splitting the rate budgets with it over the same
    resources. The claim is a short lease, renewed with each plan read; the read is made
    from every deadline check and every AWS call of the walk (aws.CALL_HOOK), so a walk
    busy listing a large fleet keeps it, and a walk that makes no calls at all (a killed
    holder) loses it within `claims.lease_seconds`. A renewal that finds the claim taken
    over stops the walk as a moved plan does. After the engage, relaxing gets the short
    budget again, counted from the end of the engage and never past `engage_seconds`."""

    def __init__(self, runtime: Runtime, engage_seconds: float | None, *, ledger: Ledger | None = None):
        self.runtime, self.clock = runtime, runtime.clock
        self.ledger = ledger or runtime.ledger()   # the tick's: the claim and the plan reads go through it
        short = float(runtime.settings.tick_budget_seconds)
        self.started = self.clock.monotonic()
        self.short = short
        self.total = short if engage_seconds is None else max(1.0, float(engage_seconds))
        self.long = engage_seconds is not None and self.total > short
        self.limit = min(short, self.total)   # seconds from the start
        self.watch: Callable[[], bool] | None = None   # True once the plan moved on
        self.checked = self.started
        self.moved = False
        self._checking = threading.Lock()

    def elapsed(self) -> float:
        return self.clock.monotonic() - self.started

    def __call__(self) -> bool:
        if self.elapsed() >= self.limit:
            return True
        watch = self.watch
        # Called by every writer thread of the walk: one of them reads the plan, the others go on.
        if watch is not None and self.clock.monotonic() - self.checked >= PLAN_CHECK_SECONDS \
                and self._checking.acquire(blocking=False):
            try:
                self.checked = self.clock.monotonic()
                # In a context of its own: the read is not counted as the walked kind's call.
                if contextvars.Context().run(watch):
                    self.moved, self.limit = True, self.elapsed()   # from now on, and for the rest of the tick
                    return True
            finally:
                self._checking.release()
        return False

    def engaging(self, plan: Plan | None) -> "_Engaging":
        return _Engaging(self, plan)


class _Engaging:
    def __init__(self, deadline: TickDeadline, plan: Plan | None):
        self.deadline, self.plan = deadline, plan
        self.taken, self.holder, self.claimed = True, None, False
        self._hook: contextvars.Token | None = None

    def __bool__(self) -> bool:
        return self.taken

    def __enter__(self) -> "_Engaging":
        d, rt = self.deadline, self.deadline.runtime
        if not d.long:
            return self
        if self.plan is None or not self.plan.generation:   # no ledger, no plan: walk, unclaimed
            d.limit = d.total
            return self
        ledger = d.ledger
        generation = self.plan.generation
        lease = ledger_claims.lease_seconds(rt.settings.schedule_minutes)

        def take() -> ledger_claims.Claim:
            now = rt.clock.now()
            until = now + timedelta(seconds=max(0.0, min(lease, d.total - d.elapsed())))
            return ledger_claims.take_engage_walk(ledger, generation=generation,
                                                  controller_id=rt.controller_id, now=now, until=until)

        try:
            claim = take()
        except LedgerUnavailable:
            claim = ledger_claims.Claim(True)   # engaging needs no ledger: walk, unclaimed
        else:
            self.claimed = bool(claim)
        self.taken, self.holder = claim.taken, claim.holder
        if self.taken:
            d.limit = d.total

            def moved_on() -> bool:
                """Renew the claim, then read the plan: True when the walk must stop."""
                try:
                    if self.claimed:
                        renewed = take()
                        if not renewed:
                            logger.info("engage walk taken over: leaving it to its new holder",
                                        extra={"controller": rt.controller_id, "generation": generation,
                                               "holder": renewed.holder})
                            self.claimed = False
                            return True
                    current = ledger_plan.read(ledger)
                except LedgerUnavailable:
                    return False   # engaging goes on without the ledger
                return current is not None and current.generation != generation

            d.watch, d.checked = moved_on, d.clock.monotonic()
            # Every AWS call of the walk checks the deadline too (at most one read and one
            # renewal a PLAN_CHECK_SECONDS): a long listing keeps the claim.
            self._hook = CALL_HOOK.set(d)
        return self

    def __exit__(self, *exc) -> None:
        d, rt = self.deadline, self.deadline.runtime
        if self._hook is not None:
            CALL_HOOK.reset(self._hook)
            self._hook = None
        if d.long and self.taken:
            d.watch = None
            if not d.moved:   # the plan moved on: the rest of the tick stops too
                d.limit = min(d.total, d.elapsed() + d.short)
            if self.claimed:
                ledger_claims.release_engage_walk(d.ledger, controller_id=rt.controller_id)


@dataclass
class _KindReport:
    """One kind's part of an engage walk of several kinds: what finish_kind reads."""

    outcomes: list[Outcome]
    complete: bool
    refused: str | None
    api_calls: dict[str, int]
    cursor: dict[str, str | None]
    seen: dict[str, set[str]]

    @classmethod
    def of(cls, report: WalkReport, kind: str) -> "_KindReport":
        # The deadline cut the walk: the kinds it names are unfinished, the others complete.
        complete = report.complete or kind not in report.unfinished
        refused = report.refused if not report.refused_kinds or kind in report.refused_kinds else None
        return cls([o for o in report.outcomes if o.kind == kind], complete, refused,
                   {kind: report.api_calls[kind]} if kind in report.api_calls else {},
                   {kind: report.cursor[kind]} if kind in report.cursor else {},
                   {kind: report.seen[kind]} if kind in report.seen else {})


class _Tick:
    """One tick's inputs and what it has learnt so far; the steps below read and fill it."""

    def __init__(self, runtime: Runtime, collect: Collect, engine: TickEngine, deadline: "TickDeadline",
                 stages: Stages, ledger: Ledger):
        self.runtime, self.settings, self.table = runtime, runtime.settings, runtime.table
        self.ledger = ledger
        self.collect, self.engine, self.deadline = collect, engine, deadline
        self.stages = stages
        self.dry_run = self.settings.mode == "recommend"
        self.started = runtime.clock.now()
        self.failing: dict[str, ledger_failures.Failure] = {}   # loaded by the walk

    def log(self, message: str, plan: Plan | None, **extra: Any) -> None:
        if not self.runtime.telemetry.decisions:
            return
        logger.info(message, extra={
            "controller": self.runtime.controller_id,
            "generation": plan.generation if plan else None,
            "stage": plan.label if plan else None,
            "mode": self.settings.mode,
            **extra,
        })


@dataclass(frozen=True)
class _Todo:
    """What the walk has to do for a plan: the decide step's output, the walks' input."""

    target: dict[str, str]          # kind -> posture
    engaging: list[str]             # kinds whose posture is ENGAGE, not done
    controlled: list[str]           # kinds under a controller (CONTROL), not done
    relaxing: list[str]             # kinds relaxed by a plain walk, not done
    engage_first: list[str]         # controlled kinds whose hold engage is still to walk
    rewalking: list[str]            # markers of held kinds due for a walk again
    walks: dict[str, Any]           # marker -> its last walk (holdfast.ledger.walks)


# ---- the steps: observe -> decide -> engage walk -> relax walk -> finish -> notify ---------

def reconcile(t: _Tick) -> TickResult:
    """The tick's steps, in order; each returns what the next needs, or the tick's result."""
    now = t.runtime.clock.now()
    try:
        seen = observe(t.runtime, now, collect=t.collect, ledger=t.ledger)
    except LedgerUnavailable as err:
        return without_ledger(t, str(err), now)
    if seen.control.problems:   # an operator wrote a control item by hand: say what was not read
        logger.warning("control items not read as written", extra={"controller": t.runtime.controller_id,
                                                                   "reasons": list(seen.control.problems)})
    if seen.control.paused:
        return _paused(t, seen)
    decided = decide(t, seen, now)
    if isinstance(decided, TickResult):
        return decided
    plan, result, notified = decided
    try:
        if plan.generation and not notified:
            notify(t, plan)
            result.actions.append("notified")
        t.started = now
        # The operators' release requests first (a few a tick), so a walk that takes the
        # whole tick never keeps them waiting; what they release, this tick's walks leave alone.
        released = release(t, plan, seen.control, result)
        # Marks written after the control read (by `holdfast release` while this tick walks)
        # are checked again at each engage's write-ahead (holdfast.ledger.control.not_released).
        t.ledger.engagement = release_requests.marked_engagement(plan)
        walk(t, plan, result, release_requests.left_released(seen.control.released, plan) | released)
    except Contention as err:
        # A progress mark met another controller's transaction: the ledger is fine, the
        # mark did not land; the next tick walks again and skips what is in place.
        t.log("plan contended mid-tick: stopping; the next tick continues", plan, reasons=[str(err)])
        result.actions.append("contention")
        result.complete = False
    except LedgerUnavailable as err:
        # Lost mid-walk: what was written stays (write-ahead came first); progress marks
        # were not, so the next tick walks again and skips what is in place.
        t.log("ledger lost mid-tick: stopping; the next tick continues", plan, reasons=[str(err)])
        result.actions.append("ledger-unavailable")
        result.complete = False
    return result


def _paused(t: _Tick, seen) -> TickResult:
    current, control = seen.plan, seen.control
    t.log("paused: no action", current,
          reasons=[f"kill switch set by {control.paused_by} at {control.paused_at}: {control.reason}"])
    return TickResult(current.stage if current else None, current.generation if current else None, ["paused"])


def decide(t: _Tick, seen, now) -> tuple[Plan, TickResult, bool] | TickResult:
    """The pure decision, persisted: a changed plan as the next generation, the verdict.
    Returns (plan, the tick's result so far, whether the plan was announced), or the
    tick's final result when another controller decided first or the ledger went away."""
    decision = seen.decide(now, t.settings)
    plan = decision.plan
    result = TickResult(plan.stage, plan.generation, reasons=decision.reasons, gates=decision.gates)
    t.log("decision", plan, changed=decision.changed, verdict=seen.verdict.state if seen.verdict is not None else None,
          reasons=list(decision.reasons), gates=list(decision.gates))
    notified = seen.notified
    try:
        if decision.changed:
            try:
                ledger_plan.write(t.ledger, plan, controller_id=t.runtime.controller_id, now=now)
            except PlanConflict as err:
                t.log("plan conflict: another controller decided first; re-read next tick", plan, reasons=[str(err)])
                result.actions.append("conflict")
                return result
            except Contention as err:
                t.log("plan contended: another controller's transaction held it; re-read next tick", plan,
                      reasons=[str(err)])
                result.actions.append("contention")
                return result
            result.actions.append(f"plan:{plan.generation}")
            notified = False
        if seen.verdict is not None:
            ledger_verdict.write_verdict(t.ledger, seen.verdict.to_dict())
    except LedgerUnavailable as err:
        # Lost between the read and the write: act as a tick that never had the ledger.
        return without_ledger(t, str(err), now)
    return plan, result, notified


def todo(t: _Tick, plan: Plan, now) -> _Todo:
    """What is left to walk for this plan: the kinds not done, by posture, and the held
    kinds due for a walk again."""
    target = policy.posture(plan, t.settings)
    walks = ledger_walks.load(t.ledger, plan.generation) if plan.generation else {}
    left = [k for k in target if k not in plan.done]
    # Kinds held in posture and walked to the end a while ago: walked again, cheaply. A
    # controlled kind's hold engage (marker `<kind>/engaged`) is walked again too, for
    # what was created or opted in during a long hold.
    held = [held_marker(k, target[k] == ENGAGE) for k in target if target[k] in (ENGAGE, CONTROL)]
    controlled = [k for k in left if target[k] == CONTROL]
    return _Todo(
        target=target,
        engaging=[k for k in left if target[k] == ENGAGE],
        controlled=controlled,
        relaxing=[k for k in left if target[k] not in (ENGAGE, CONTROL)],
        # A controlled kind is engaged when a hold begins, then left to its controller.
        engage_first=[k for k in controlled if policy.starts_hold(plan) and held_marker(k, False) not in plan.done],
        rewalking=[m for m in held if m in plan.done
                   and progress.rewalk_due(walks[m].at if m in walks else None, now, t.settings.rewalk_minutes)],
        walks=walks,
    )


def walk(t: _Tick, plan: Plan, result: TickResult, released: frozenset[str] = frozenset()) -> None:
    """The engage walk, then the relax walk, then the tick's finish (its stuck resources).
    `released`: resources released by hand in this engagement, which its walks leave alone."""
    now = t.runtime.clock.now()
    t.failing = ledger_failures.load(t.ledger)
    work = todo(t, plan, now)
    # A walk of a controlled kind's engage again (it did not finish, the mode changed, a
    # rewalk) leaves alone every mapping that already has a drain in this hold, or it
    # would undo its raises.
    needs_skip = (work.engage_first or any(Marker.parse(m).hold_engage for m in work.rewalking)) and not t.dry_run
    skip = t.stages.in_drain(t.runtime, plan) if needs_skip else frozenset()
    try:
        if engage_walk(t, plan, result, work, skip, released):
            relax_walk(t, plan, result, work, now)
    finally:
        result.stuck = stuck_now(t, plan)


def engage_walk(t: _Tick, plan: Plan, result: TickResult, work: _Todo, skip: frozenset[str],
                released: frozenset[str] = frozenset()) -> bool:
    """Every engage walk of this tick in one engine call, so kinds of different services
    are walked at once (Auto Scaling, ELB and Application Auto Scaling beside Lambda,
    holdfast.engine.SERVICE_OF): the kinds not yet engaged, in their declared order,
    each resuming after its cursor, then the re-walks of held kinds (each skipping what
    its last finished walk saw unchanged). Each kind's part of the report is then
    finished on its own marker (finish_kind), exactly as a walk of that kind alone.
    While engaging, the tick's deadline is the long engage budget (tick(engage_seconds=)).
    Returns whether the tick goes on to relaxing (False: the deadline passed, or
    another controller holds the engage walk)."""
    markers: dict[str, tuple[Marker, bool]] = {}   # kind -> (marker, re-walk)
    for kind in [k for k in work.target if k in work.engaging or k in work.engage_first]:   # declared order
        markers[kind] = (Marker(kind, hold_engage=kind not in work.engaging), False)
    for name in work.rewalking:
        marker = Marker.parse(name)
        markers.setdefault(marker.kind, (marker, True))
    if markers and not t.deadline():
        with t.deadline.engaging(plan) as walking:
            if not walking:
                t.log("another controller is walking the engage of this plan: leaving it to it", plan,
                      holder=walking.holder)
                result.actions.append("engage-walk-held")
                result.complete = False
                return False
            after = {k: plan.cursor.get(str(m)) for k, (m, again) in markers.items() if not again}
            seen = {k: ledger_walks.seen(t.ledger, plan.generation, str(m))
                    for k, (m, again) in markers.items() if again}
            # The drains' mappings are left alone by the engage of a controlled kind only.
            controlled = {k for k, (m, _) in markers.items() if m.hold_engage}
            leave = frozenset(a for a in skip if kind_of(a) in controlled) if skip else frozenset()
            leave |= released   # released by hand in this engagement: left as released
            options = {"skip": leave} if leave else {}
            # Each kind counted against max_resources on its own, as the tick always did, and
            # walked as soon as it is listed: the groups' first write does not wait for Lambda's listings.
            report = t.engine.engage(kinds=tuple(markers), dry_run=t.dry_run, after=after,
                                     stuck=stuck_arns(t, plan, ledger_failures.ENGAGE), each_kind=True,
                                     **({"seen": seen} if seen else {}), **options)
        for kind, (marker, again) in markers.items():
            finish_kind(t, plan, result, str(marker), _KindReport.of(report, kind), engaging=True, rewalk=again)
    if t.deadline():
        result.complete = False
        return False
    return True


def relax_walk(t: _Tick, plan: Plan, result: TickResult, work: _Todo, now) -> None:
    """The controlled kinds' tick and the relaxing kinds' walks, one kind at a time, each
    write guarded (the plan still current); then the replay and the retries of stuck
    restores. The first stale plan ends relaxing for this tick."""
    guard = _Sticky(ledger_leases.guard_factory(t.ledger, controller_id=t.runtime.controller_id,
                                                clock=t.runtime.clock)(plan.generation))
    for kind in work.controlled + work.relaxing:
        if t.deadline() or guard.refused:
            break
        if t.dry_run:
            # Recommend mode engaged nothing, so no controller has anything to drive.
            if kind not in work.controlled:
                result.outcomes.append(Outcome(kind, f"kind:{kind}", PLANNED, changes={"posture": {"to": work.target[kind]}}))
            mark(t, plan, result, kind)
            continue
        if kind in work.controlled:
            control(t, plan, result, kind, guard)
            continue
        if kind == capacity_stage.KIND and plan.stage == policy.CAPACITY:
            waves(t, plan, result, guard)
            continue
        report = t.engine.relax(kinds=(kind,), target_for=stalled_left(t, plan, kind, result), guard=guard)
        finish_kind(t, plan, result, kind, report, engaging=False)
    if plan.stage == REPLAY and REPLAY not in plan.done and not guard.refused and not t.deadline():
        replay(t, plan, result, guard)
    if not t.dry_run and not guard.refused and not t.deadline():
        retry_stuck_restores(t, plan, result, work, now, guard)
    if guard.refused:
        t.log("stale plan: relaxing stopped; the next tick re-reads", plan, reasons=[guard.refused])
        result.actions.append("stale")
    result.complete = result.complete and not t.deadline() and not guard.refused


def control(t: _Tick, plan: Plan, result: TickResult, kind: str, guard: "_Sticky") -> None:
    """One tick of a controlled kind: each resource's decision (kept in the ledger,
    conditional on the plan), then a guarded walk of the resources that move."""
    now = t.runtime.clock.now()
    try:
        decided = t.stages.drain(t.runtime, plan, now, dry_run=False)
    except StalePlan as err:
        guard.refused = str(err)
        return
    except AWS_ERRORS as err:   # bad input never stops the tick: the next tick decides again
        t.log("drain inputs unreadable: no cap moves this tick", plan, kind=kind, reasons=[error_text(err)])
        result.complete = False
        return
    stalled = decided.stalled
    result.stalled = len(stalled)
    announce_stalls(t, plan, decided)
    moving = decided.moving()
    outcomes, complete = [], True
    if moving:
        report = t.engine.relax(kinds=(kind,), target_for=decided.target_for, guard=guard, only=moving)
        outcomes, complete = report.outcomes, report.complete
        result.outcomes.extend(outcomes)
        count_failures(t, plan, outcomes, ledger_failures.RELAX)
    failed = [o for o in outcomes if o.action in (FAILED, REFUSED_STALE)]
    t.log("drained", plan, kind=kind, complete=complete, actions=decided.summary(), notes=decided.notes[:20],
          failed=[f"{o.arn}: {o.error}" for o in failed][:20],
          written=sum(1 for o in outcomes if o.action in WRITES))
    if failed or not complete:
        result.complete = False
    elif decided.finished and all(o.action in CONTROLLED_DONE or (o.arn in stalled and o.action in SUCCEEDED)
                                  for o in outcomes):
        mark(t, plan, result, kind)   # every mapping back at its owner's value, or reported stalled


def stalled_left(t: _Tick, plan: Plan, kind: str, result: TickResult):
    """After the drain stage, the restore of a controlled kind leaves alone the mappings
    whose drain is reported stalled: each keeps the cap last judged safe until an operator
    acts (`holdfast release ARN`), and, left as it is, it does not hold the stage back.
    None (restore everything) for other kinds, or when there is no stalled drain."""
    if kind not in CONTROLLED_KINDS:
        return None
    try:
        left = drain_stage.stalled(t.ledger, plan)
    except LedgerUnavailable:
        return None
    result.stalled = len(left)
    if not left:
        return None
    return lambda resource: LEAVE if resource.arn in left else None


def announce_stalls(t: _Tick, plan: Plan, decided) -> None:
    """Each stall reported once, when the drain's record first says it (the record keeps
    that it was announced): a failed publish is logged, and the DrainStalled alarm still
    says it."""
    for arn in decided.new_stalls:
        since, why = decided.stalled[arn]
        t.log("drain stalled", plan, arn=arn, since=since.isoformat() if since else None, reasons=[why])
        if not t.runtime.topic_arn:
            continue
        try:
            publish_stall(t.runtime, plan, arn, decided.consumers.get(arn), since, why,
                          decided.steps[arn].cap if arn in decided.steps else None)
        except AWS_ERRORS as err:
            t.log("stall notification failed: the DrainStalled alarm still reports it", plan, arn=arn,
                  reasons=[error_text(err)])


@uses("sns:Publish", by=("reconciler",))
def publish_stall(runtime: Runtime, plan: Plan, arn: str, consumer, since, why: str, cap) -> None:
    name = f"{consumer.function}<-{consumer.queue}" if consumer is not None else arn.rsplit(":", 1)[-1]
    message = {"event": "drain-stalled", "mapping": arn, "name": name, "generation": plan.generation,
               "stage": plan.stage, "stalled_since": since.isoformat() if since else None, "why": why,
               "cap_kept": cap,
               "what_to_do": ("the mapping keeps the cap last judged safe and no longer holds the later stages; fix "
                              f"its cause, or give it back to its owner with `holdfast release {arn}`")}
    runtime.clients("sns").publish(
        TopicArn=runtime.topic_arn, Subject=f"Holdfast: drain of {name} stalled"[:100],
        Message=json.dumps(message, indent=2))


def waves(t: _Tick, plan: Plan, result: TickResult, guard: "_Sticky") -> None:
    """One tick of the capacity stage's groups (holdfast.stages.capacity): those healthy
    now set Healthy again, then a wave resumed, a hold between waves, a step back on
    launch failures; the kind is done when no group is held."""
    now = t.runtime.clock.now()
    try:
        stepped = t.stages.capacity(t.runtime, plan, now, engine=t.engine, guard=guard,
                                    stuck=frozenset(stuck_arns(t, plan, ledger_failures.RELAX)))
    except StalePlan as err:
        guard.refused = str(err)
        return
    except AWS_ERRORS as err:   # bad input never stops the tick: the next tick decides again
        t.log("capacity inputs unreadable: no wave this tick", plan, kind=capacity_stage.KIND, reasons=[error_text(err)])
        result.complete = False
        return
    result.outcomes.extend(stepped.outcomes)
    counts = count_failures(t, plan, stepped.outcomes, ledger_failures.RELAX)
    failed = [o for o in stepped.outcomes if o.action in (FAILED, REFUSED_STALE)]
    # A group stuck restoring no longer holds the stage back (retried once it is done).
    blocking = [o for o in failed if not (o.action == FAILED and progress.is_stuck(counts.get(o.arn, 0),
                                                                                   t.settings.stuck_after_failures))]
    summary = stepped.summary()
    t.log("capacity wave", plan, kind=capacity_stage.KIND, **summary, notes=stepped.notes[:20],
          failed=[f"{o.arn}: {o.error}" for o in failed][:20])
    if summary["wave"] and stepped.step.resume:
        wave = summary["wave"]
        result.actions.append(f"wave:{wave['number']}:{len(stepped.step.resume)} groups, {wave['marked']} marked, "
                              f"{wave['reset']} reset, {wave['to_replace']} to replace")
    if stepped.step.step_back:
        result.actions.append(f"wave-step-back:{len(stepped.step.step_back)}")
    if blocking or not stepped.complete:
        result.complete = False
    elif stepped.finished:
        mark(t, plan, result, capacity_stage.KIND)


def replay(t: _Tick, plan: Plan, result: TickResult, guard: "_Sticky") -> None:
    now = t.runtime.clock.now()
    try:
        done = t.stages.replay(t.runtime, plan, now, guard=guard, dry_run=t.dry_run)
    except StalePlan as err:
        guard.refused = str(err)
        return
    except AWS_ERRORS as err:   # the next tick tries again
        t.log("replay inputs unreadable: the next tick tries again", plan, reasons=[error_text(err)])
        result.complete = False
        return
    result.outcomes.extend(done.outcomes)
    t.log("replayed", plan, sources=done.summary(), finished=done.finished)
    if done.finished:
        mark(t, plan, result, REPLAY)


# Release requests acted on in one tick at the most; the rest wait for the next.
RELEASES_PER_TICK = 20


def release(t: _Tick, plan: Plan, control: ledger_control.Control, result: TickResult) -> frozenset[str]:
    """The operators' release requests (CONTROL/RELEASE#<arn>, holdfast.core.release),
    before the walks, which leave alone what this returns (released during a hold), so
    that this tick's engage walk does not engage again what it restores: each claimed (so
    two ticks at once act on it once), checked (a kind Holdfast manages, this partition,
    region and account, mode auto, asked during the engagement in force),
    restored exactly as `holdfast release` does (Engine.release: no plan guard, the
    owner's changes while engaged kept), and marked done with its outcome. An item that is
    not a request Holdfast can act on is refused, saying why; a request past its expiry
    is marked `expired`, unacted. Each claim lasts from when it is taken until the tick's
    time is up at the latest; once it is up, the rest wait for the next tick."""
    if not control.releases:
        return frozenset()
    now, me = t.runtime.clock.now(), t.runtime.controller_id
    for request in control.releases:
        if release_requests.malformed(request):
            why = (f"not a release request Holdfast can act on: {request.problem}; nothing was done; "
                   "ask again with `holdfast release ARN --all-accounts`")
            if ledger_control.refuse_malformed_release(t.ledger, request, outcome=release_requests.REFUSED,
                                                       detail=why, controller_id=me, now=now):
                result.actions.append(f"release:{release_requests.REFUSED}")
                t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
                      outcome=release_requests.REFUSED, reasons=[why])
        elif release_requests.expired(request, now):
            if request.state == release_requests.ACTING:
                why = (f"requested at {request.at} and claimed by {request.controller}, whose tick stopped before "
                       "recording an outcome; it expired before another tick took it over: the resource may or may "
                       "not have been restored (`holdfast status` shows whether it is engaged); request it again "
                       "if it is still wanted")
            else:
                why = (f"requested at {request.at} and not acted on before it expired (Holdfast was paused, off "
                       "or unable to read its ledger): nothing was done; request it again if it is still wanted")
            ledger_control.finish_release(
                t.ledger, request, outcome=release_requests.EXPIRED, controller_id=me, now=now, claimed=False,
                detail=why)
            result.actions.append(f"release:{release_requests.EXPIRED}")
    due = [r for r in control.releases if release_requests.due(r, now)][:RELEASES_PER_TICK]
    if not due:
        return frozenset()
    left: set[str] = set()
    account = caller_account(t.runtime)
    if account is None:
        # STS did not answer: no ARN can be shown to be this account's, and refusing would
        # end each request for good over a failure of the reconciler's own. They wait.
        t.log("sts:GetCallerIdentity did not answer: release requests wait for the next tick", plan,
              waiting=[r.arn for r in due])
        result.actions.append("release:waiting")
        return frozenset()
    began = release_requests.engagement_began(plan)
    lease, d = ledger_claims.lease_seconds(t.settings.schedule_minutes), t.deadline
    releaser: Engine | None = None
    for i, request in enumerate(due):
        if d():
            t.log("tick time up: the other release requests wait for the next tick", plan,
                  waiting=[r.arn for r in due[i:]])
            break
        # The claim runs from now, never past the tick's end: a tick that took it over
        # while this one still restores would restore again and one outcome would be lost.
        now = t.runtime.clock.now()
        until = now + timedelta(seconds=max(0.0, min(lease, d.total - d.elapsed())))
        # Seen at this tick's control read (`t.started`), the clock the plan's times are on.
        if not ledger_control.claim_release(t.ledger, request, controller_id=me, now=now, until=until,
                                            seen=t.started):
            continue   # another tick took it, or it was replaced
        why = (release_requests.refusal(request.arn, partition=t.runtime.clients.partition,
                                        region=t.runtime.clients.region, account=account, mode=t.settings.mode)
               or release_requests.stale(request, began, t.started))
        if why is None:
            releaser = releaser or Engine(t.runtime)
            # The mark first, then the restore: a tick that dies between them leaves a resource
            # restored and marked, which the hold's walks leave alone and a takeover
            # (restored-unconfirmed) finds as it should. Every outcome keeps it.
            kept = ""
            if began is not None and plan.stage != NORMAL:
                kept = keep_released(t, request.arn, began, request.by or "a release request")
                left.add(request.arn)
            try:
                action, why = release_one(t, releaser, request)
                why += kept
            except (ValueError, *AWS_ERRORS) as err:   # bad input never stops the tick: the outcome says it
                action, why = FAILED, f"not released: {error_text(err) if isinstance(err, AWS_ERRORS) else err}"
        else:
            action = release_requests.REFUSED
        if release_requests.waits(action):
            # Not the request's answer: the restore may not write yet. Requested again, the
            # next tick acts on it; its mark stays, so the walks leave the resource alone meanwhile.
            why = f"waiting for the next tick: {why}"
            ledger_control.postpone_release(t.ledger, request, detail=why, controller_id=me)
            result.actions.append(f"release:{release_requests.WAITING}")
            t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
                  outcome=release_requests.WAITING, reasons=[why])
            continue
        ledger_control.finish_release(t.ledger, request, outcome=action, detail=why, controller_id=me,
                                      now=t.runtime.clock.now())
        result.actions.append(f"release:{action}")
        t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
              outcome=action, reasons=[why])
    return frozenset(left)


def keep_released(t: _Tick, arn: str, began, by: str) -> str:
    """Mark `arn` released in the engagement that began at `began`, so this hold's walks
    leave it as released; what to add to the outcome."""
    try:
        ledger_control.mark_released(t.ledger, arn, began=began, by=by, now=t.runtime.clock.now())
        return "; left released for the rest of this hold"
    except LedgerUnavailable as err:
        return f"; the next re-walk of this hold may engage it again ({err})"


def release_one(t: _Tick, releaser: Engine, request) -> tuple[str, str]:
    """Restore the resource of `request` and forget its record: (outcome, what it means)."""
    arn = request.arn
    recorded = ResourceLedger(t.ledger).get(arn) is not None
    outcome = releaser.release(arn)
    t.log("released", None, arn=arn, action=outcome.action, error=outcome.error)
    if outcome.action in (RESTORED, DRIFT_KEPT, VANISHED) and (recorded or outcome.action != VANISHED):
        ledger_failures.clear(t.ledger, arn)   # no longer stuck
        t.failing.pop(arn, None)
    if outcome.action == RESTORED:
        return RESTORED, "restored to its owner's settings; its record is forgotten"
    if outcome.action == DRIFT_KEPT:
        return DRIFT_KEPT, ("restored; the owner's changes while engaged were kept: " + ", ".join(sorted(outcome.drift))
                            + "; its record is forgotten")
    again = (" (an earlier attempt at this request, whose tick stopped before recording it, may have restored it)"
             if request.state == release_requests.ACTING else "")
    if outcome.action == VANISHED:
        if recorded:
            return VANISHED, "the resource no longer exists; its record is forgotten"
        return release_requests.REFUSED, f"{arn} does not exist and Holdfast holds no record of it; nothing to release{again}"
    if outcome.action == ALREADY:
        if request.state == release_requests.ACTING:
            # Taken over: the tick that claimed it may have restored it and stopped
            # before recording the outcome.
            return release_requests.UNCONFIRMED, (
                f"restored by an earlier attempt (unconfirmed): the tick {request.controller} that claimed this "
                f"request stopped before recording its outcome, and {arn} is now not engaged and Holdfast holds no "
                "record of it; nothing was written now")
        return release_requests.REFUSED, f"{arn} is not engaged and Holdfast holds no record of it; nothing to release{again}"
    return outcome.action, outcome.error or "; ".join(str(n.get("why", n)) for n in outcome.notes.values()) or "-"


@uses("sts:GetCallerIdentity", by=("reconciler",))
def caller_account(runtime: Runtime) -> str | None:
    """The account the reconciler acts in, None when STS does not answer (the release
    requests then wait for a tick that can tell: none can be shown to be of this account)."""
    try:
        return runtime.clients.account_id()
    except AWS_ERRORS:
        return None


def retry_stuck_restores(t: _Tick, plan: Plan, result: TickResult, work: _Todo, now, guard) -> None:
    """Restores that failed and whose kind is done (or the plan is back to normal) are
    tried again every `rewalk_minutes`: once their cause is gone (the owner put the
    opt-in tag back, a permission was granted), a tick restores them, no human needed."""
    target, walks = work.target, work.walks
    due = [f for f in t.failing.values() if f.operation == ledger_failures.RELAX and f.kind in REGISTRY_KINDS
           and (plan.stage == NORMAL or (target.get(f.kind) == RESTORE and f.kind in plan.done))]
    if not due or not progress.rewalk_due(walks[LEFTOVERS].at if LEFTOVERS in walks else None, now,
                                          t.settings.rewalk_minutes):
        return
    kinds = tuple(k for k in REGISTRY_KINDS if k in t.engine.actuators and any(f.kind == k for f in due))
    due = [f for f in due if f.kind in kinds]
    if not due:
        return
    report = t.engine.relax(kinds=kinds, guard=guard, only=[f.arn for f in due])
    result.outcomes.extend(report.outcomes)
    count_failures(t, plan, report.outcomes, ledger_failures.RELAX)
    t.log("stuck restores retried", plan, retried=[f.arn for f in due][:20],
          restored=[o.arn for o in report.outcomes if o.action in SUCCEEDED][:20])
    ledger_walks.walked(t.ledger, plan.generation, LEFTOVERS, now=now, finished=True, prints=set())


def finish_kind(t: _Tick, plan: Plan, result: TickResult, marker: str, report, *, engaging: bool,
                rewalk: bool = False) -> None:
    """Count the walk's failures, then carry out the pure progress decision for it."""
    result.outcomes.extend(report.outcomes)
    failed = [o for o in report.outcomes if o.action in (FAILED, REFUSED_STALE)]
    operation = ledger_failures.ENGAGE if engaging else ledger_failures.RELAX
    # Counted in recommend mode too (a ledger write, not a resource's): a plan walk that
    # keeps failing on a resource must not pin the stage either.
    counts = count_failures(t, plan, report.outcomes, operation)
    stuck = [o for o in failed if o.action == FAILED
             and progress.is_stuck(counts.get(o.arn, 0), t.settings.stuck_after_failures)]
    t.log("walked", plan, kind=marker, engaging=engaging, rewalk=rewalk, complete=report.complete,
          failed=[f"{o.arn}: {o.error}" for o in failed][:20], refused=report.refused,
          stuck=[o.arn for o in stuck][:20],
          # Why a resource was skipped or engaged without a destination, with its fix.
          noted=[{"arn": o.arn, **{k: v for k, v in note.items() if k in ("why", "fix", "command")}}
                 for o in report.outcomes for note in o.notes.values()][:20],
          api_calls=report.api_calls, written=sum(1 for o in report.outcomes if o.action in WRITES))
    kind = Marker.parse(marker).kind
    walked = progress.Walked(marker, engaging, report.complete, len(failed), bool(report.refused),
                             None if rewalk else report.cursor.get(kind), stuck=len(stuck))
    saved = None if rewalk else plan.cursor.get(marker)
    older = (progress.needs_relaxers(walked, saved_cursor=saved, dry_run=t.dry_run)
             and bool(stale_relaxers(t, plan)))
    step = progress.after_walk(walked, saved_cursor=saved, dry_run=t.dry_run, older_relaxers=older)
    if step.note:
        t.log(step.note, plan, kind=marker)
    if step.cursor is not None and not rewalk:
        ledger_plan.set_cursor(t.ledger, plan.generation, marker, step.cursor)
    if step.mark_done and not rewalk:
        mark(t, plan, result, marker)
    seen = report.seen.get(kind) if engaging else None
    if engaging and (step.mark_done or seen):
        ledger_walks.walked(t.ledger, plan.generation, marker, now=t.runtime.clock.now(),
                            finished=step.mark_done, prints=set(seen or ()))
    if rewalk:
        written = sum(1 for o in report.outcomes if o.action == ENGAGED)
        if written:
            result.actions.append(f"rewalk:{marker}:{written}")
    else:
        result.complete = result.complete and step.complete


def count_failures(t: _Tick, plan: Plan, outcomes: list[Outcome], operation: str) -> dict[str, int]:
    """Count each FAILED resource's failure in the ledger and clear the ones that
    succeeded; arn -> its count of failed walks."""
    counts: dict[str, int] = {}
    now = t.runtime.clock.now()
    for o in outcomes:
        if o.action == FAILED:
            failure = ledger_failures.record(t.ledger, arn=o.arn, kind=o.kind, operation=operation,
                                             generation=plan.generation, error=o.error or "", now=now)
            t.failing[o.arn] = failure
            counts[o.arn] = failure.failures
        elif o.action in SUCCEEDED and o.arn in t.failing:
            ledger_failures.clear(t.ledger, o.arn)
            t.failing.pop(o.arn, None)
    return counts


def stuck_arns(t: _Tick, plan: Plan, operation: str) -> set[str]:
    return {f.arn for f in t.failing.values() if f.operation == operation and f.generation == plan.generation
            and progress.is_stuck(f.failures, t.settings.stuck_after_failures)}


def stuck_now(t: _Tick, plan: Plan) -> list[ledger_failures.Failure]:
    """The stuck resources that matter now: every stuck restore (its resource is still
    engaged), and the stuck engages of this generation while it holds anything."""
    return ledger_failures.stuck(t.failing, plan, t.settings.stuck_after_failures)


def stale_relaxers(t: _Tick, plan: Plan) -> list[str]:
    """Controllers of an older generation whose relaxing write may have landed after
    this tick began (the lease is counted from the tick's start, not from now: a
    write guarded shortly before the tick can land on a resource the tick engaged)."""
    return ledger_leases.stale_relaxers(t.ledger, plan.generation, t.started)


def mark(t: _Tick, plan: Plan, result: TickResult, marker: str) -> None:
    if ledger_plan.mark_done(t.ledger, plan.generation, marker):
        result.actions.append(marker)


# ---- around the walk -----------------------------------------------------------------

def notify(t: _Tick, plan: Plan) -> None:
    if t.runtime.topic_arn:
        try:
            publish_stage(t.runtime, plan)
        except AWS_ERRORS as err:  # the walk goes on; the next tick publishes
            t.log("stage notification failed: the next tick tries again", plan, reasons=[error_text(err)])
            return
    ledger_plan.mark_notified(t.ledger, plan.generation)


def without_ledger(t: _Tick, error: str, now) -> TickResult:
    """Protection is monotone: engaging proceeds without the ledger; nothing is relaxed."""
    result = TickResult(None, None, ["ledger-unavailable"], reasons=(error,))
    try:
        verdict = t.collect(t.runtime, now, None)
    except Exception:
        logger.exception("ledger and verdict unavailable: no action", extra={"controller": t.runtime.controller_id})
        return result
    t.log("ledger unavailable", None, verdict=verdict.state, reasons=[error])
    if verdict.state == policy.IMPAIRED:
        with t.deadline.engaging(None):
            report = t.engine.engage(dry_run=t.dry_run)
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
    """Announce a new plan, one message per kind of subscriber (SNS MessageStructure
    `json`): AWS Chatbot's HTTPS subscription gets a custom notification it renders in
    Slack or Teams, e-mail the same as text (holdfast.core.announce), and every other
    protocol (`default`: SQS, Lambda) the JSON document. A failed publish is logged; the
    plan stays un-notified and the next tick tries again."""
    message = {
        "generation": plan.generation,
        "stage": plan.stage,
        "entered_at": plan.entered_at.isoformat() if plan.entered_at else None,
        "verdict": plan.verdict,
        "reasons": list(plan.reasons),
        "mode": runtime.settings.mode,
        "controller": runtime.controller_id,
    }
    # arn:partition:sns:region:account:name
    region, account = (runtime.topic_arn.split(":") + ["", "", "", "", ""])[3:5]
    where = {"account": account, "region": region or runtime.clients.region}
    runtime.clients("sns").publish(
        TopicArn=runtime.topic_arn,
        Subject=f"Holdfast: {plan.label} (generation {plan.generation})"[:100],
        MessageStructure="json",
        Message=json.dumps({
            "default": json.dumps(message, indent=2),
            "email": announce.text(plan, runtime.settings, **where),
            "https": json.dumps(announce.chat(plan, runtime.settings, **where)),
        }),
    )


REGISTRY_KINDS = policy.KINDS


def _emit_metrics(result: TickResult, telemetry: Telemetry) -> None:
    if not telemetry.metrics:
        return
    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service="holdfast-reconciler")
    if result.stage is not None:
        metrics.add_metric(name="StageIndex", unit=MetricUnit.Count, value=policy.STAGES.index(result.stage))
    metrics.add_metric(name="ResourcesEngaged", unit=MetricUnit.Count, value=result.count(ENGAGED))
    metrics.add_metric(name="WritesDone", unit=MetricUnit.Count, value=result.count(*WRITES))
    metrics.add_metric(name="WritesRefused", unit=MetricUnit.Count, value=result.count(REFUSED_STALE))
    metrics.add_metric(name="WritesFailed", unit=MetricUnit.Count, value=result.count(FAILED))
    # Resources that keep failing and no longer gate their stage; an alarm watches it.
    if result.stuck is not None:
        metrics.add_metric(name="ResourcesStuck", unit=MetricUnit.Count, value=len(result.stuck))
    # Drains that cannot finish and no longer gate the stages; an alarm watches it.
    if result.stalled is not None:
        metrics.add_metric(name="DrainStalled", unit=MetricUnit.Count, value=result.stalled)
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int("paused" in result.actions))
    metrics.flush_metrics()
