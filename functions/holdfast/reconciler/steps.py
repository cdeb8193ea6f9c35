"""The tick's steps: one tick reads the world, decides the plan, and moves toward it.

    tick(runtime) -> TickResult

The rest of the reconciler package is the loop's bookkeeping, kept apart as
controller-runtime keeps it from the Reconcile it calls: the tick's state
(holdfast.reconciler.state), its deadline and the engage walk's claim
(holdfast.reconciler.deadline), the release requests (holdfast.reconciler.releases), and
the announcements on SNS and the metrics (holdfast.reconciler.announcements).

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
   re-reads). Every new generation is announced on SNS (holdfast.reconciler.announcements).
3. Walk toward `policy.posture(plan)`, kinds not yet `done` for this generation,
   through one Engine built for the tick (one ledger, the rate budgets, one actuator per
   kind): first every engaging kind (and the re-walks of held kinds, step 5) in ONE
   engine call, with no guard (protection is monotone), so kinds of different services
   are walked at once (Auto Scaling, ELB and Application Auto Scaling beside Lambda) and
   each kind's part of the report is finished on its own marker; then relaxing kinds,
   one at a time, each write guarded by guard(g), checked at the moment of the write.
   The engaging walk has the long budget when the handler gives one (`engage_seconds`:
   the invocation's remaining time, holdfast.reconciler.deadline): it goes on while there
   is engage work and Lambda time, is claimed in the ledger (holdfast.ledger.claims: a lease of about one schedule
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
   (holdfast.reconciler.releases, holdfast.core.release); this tick's walks leave what it released alone.
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
- during an engage walk's later phase, after an alias's write-ahead record (an alias with
  no async config of its own), before its Put: the listing names a qualifier whose record
  is on its function's tags though it has no config, so the next walk Puts it with the
  known configs, before any ListAliases.
- after a mapping the tagging index listed was capped, before the second pass's ListTags
  (or the restore that follows where its tags no longer carry the selector): the original
  is in the ledger; a later walk reads the mapping's tags first and, if it is not
  selected, leaves it, capped until the relax or `holdfast release` restores it from the
  record (as a mapping whose owner removed the selector while engaged).
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

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import policy, progress
from holdfast.core import release as release_requests
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict, StalePlan
from holdfast.core.kinds import CONTROLLED as CONTROLLED_KINDS
from holdfast.core.kinds import kind_of
from holdfast.core.model import ENGAGED, FAILED, LEAVE, PLANNED, REFUSED_STALE, Outcome, is_off
from holdfast.core.policy import CONTROL, ENGAGE, NORMAL, REPLAY, RESTORE, Plan
from holdfast.core.progress import Marker, held_marker
from holdfast.engine import Engine
from holdfast.ledger import failures as ledger_failures
from holdfast.ledger import leases as ledger_leases
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger import walks as ledger_walks
from holdfast.observation import Collect, observe
from holdfast.observation import collect as fresh_verdict
from holdfast.reconciler.announcements import announce_stalls, emit_metrics, notify
from holdfast.reconciler.deadline import TickDeadline
from holdfast.reconciler.releases import release
from holdfast.reconciler.state import (
    CONTROLLED_DONE,
    LEFTOVERS,
    SUCCEEDED,
    WRITES,
    EngineFactory,
    KindReport,
    Stages,
    StickyGuard,
    Tick,
    TickResult,
    Todo,
    logger,
)
from holdfast.runtime import Runtime
from holdfast.stages import capacity as capacity_stage
from holdfast.stages import drain as drain_stage

REGISTRY_KINDS = policy.KINDS


def tick(runtime: Runtime, *, collect: Collect | None = None, engine: EngineFactory | None = None,
         stages: Stages | None = None, engage_seconds: float | None = None) -> TickResult:
    """One reconcile step. `collect` (the fresh verdict) defaults to
    holdfast.observation.collect, `engine` to holdfast.engine.Engine and `stages` to
    Stages (the drain and the replay); tests inject them.

    `engage_seconds`: how long this tick may keep walking while it engages (the Lambda
    handler passes its remaining time less a margin). None: the tick budget
    (`settings.tick_budget_seconds`) for everything, and no claim on the engage walk."""
    settings = runtime.settings
    if is_off(settings.mode):
        if runtime.telemetry.decisions:
            logger.info("mode off: nothing to do", extra={"controller": runtime.controller_id})
        return TickResult(None, None, ["off"])
    # One ledger a tick: the walks, the evidence and the stages share its one Query of the
    # resource records and of the drain's records.
    ledger = runtime.ledger()
    deadline = TickDeadline(runtime, engage_seconds, ledger=ledger)
    make_engine = engine or (lambda rt, deadline: Engine(rt, deadline=deadline, ledger=ledger))
    run = Tick(runtime, collect or fresh_verdict, make_engine(runtime, deadline), deadline, stages or Stages(ledger),
               ledger)
    result = reconcile(run)
    emit_metrics(result, runtime.telemetry)
    return result


# ---- the steps: observe -> decide -> engage walk -> relax walk -> finish -> notify ---------

def reconcile(t: Tick) -> TickResult:
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


def _paused(t: Tick, seen) -> TickResult:
    current, control = seen.plan, seen.control
    t.log("paused: no action", current,
          reasons=[f"kill switch set by {control.paused_by} at {control.paused_at}: {control.reason}"])
    return TickResult(current.stage if current else None, current.generation if current else None, ["paused"])


def decide(t: Tick, seen, now) -> tuple[Plan, TickResult, bool] | TickResult:
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


def todo(t: Tick, plan: Plan, now) -> Todo:
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
    return Todo(
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


def walk(t: Tick, plan: Plan, result: TickResult, released: frozenset[str] = frozenset()) -> None:
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


def engage_walk(t: Tick, plan: Plan, result: TickResult, work: Todo, skip: frozenset[str],
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
            report = t.engine.engage_as_listed(kinds=tuple(markers), dry_run=t.dry_run, after=after,
                                               stuck=stuck_arns(t, plan, ledger_failures.ENGAGE),
                                               **({"seen": seen} if seen else {}), **options)
        for kind, (marker, again) in markers.items():
            finish_kind(t, plan, result, str(marker), KindReport.of(report, kind), engaging=True, rewalk=again)
    if t.deadline():
        result.complete = False
        return False
    return True


def relax_walk(t: Tick, plan: Plan, result: TickResult, work: Todo, now) -> None:
    """The controlled kinds' tick and the relaxing kinds' walks, one kind at a time, each
    write guarded (the plan still current); then the replay and the retries of stuck
    restores. The first stale plan ends relaxing for this tick."""
    guard = StickyGuard(ledger_leases.guard_factory(t.ledger, controller_id=t.runtime.controller_id,
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


def control(t: Tick, plan: Plan, result: TickResult, kind: str, guard: StickyGuard) -> None:
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


def stalled_left(t: Tick, plan: Plan, kind: str, result: TickResult):
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


def waves(t: Tick, plan: Plan, result: TickResult, guard: StickyGuard) -> None:
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


def replay(t: Tick, plan: Plan, result: TickResult, guard: StickyGuard) -> None:
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


def retry_stuck_restores(t: Tick, plan: Plan, result: TickResult, work: Todo, now, guard) -> None:
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


def finish_kind(t: Tick, plan: Plan, result: TickResult, marker: str, report, *, engaging: bool,
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


def count_failures(t: Tick, plan: Plan, outcomes: list[Outcome], operation: str) -> dict[str, int]:
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


def stuck_arns(t: Tick, plan: Plan, operation: str) -> set[str]:
    return {f.arn for f in t.failing.values() if f.operation == operation and f.generation == plan.generation
            and progress.is_stuck(f.failures, t.settings.stuck_after_failures)}


def stuck_now(t: Tick, plan: Plan) -> list[ledger_failures.Failure]:
    """The stuck resources that matter now: every stuck restore (its resource is still
    engaged), and the stuck engages of this generation while it holds anything."""
    return ledger_failures.stuck(t.failing, plan, t.settings.stuck_after_failures)


def stale_relaxers(t: Tick, plan: Plan) -> list[str]:
    """Controllers of an older generation whose relaxing write may have landed after
    this tick began (the lease is counted from the tick's start, not from now: a
    write guarded shortly before the tick can land on a resource the tick engaged).

    Once none is found for a generation, none is for the rest of the tick, so the leases
    are read once, not once per kind walked: a lease under generation g is written only
    while g is current (check_generation's condition), and this plan's generation was
    current when the tick read it, so no lease older than it can appear after; one that
    was there can only go (overwritten under a newer generation, or lapsed), and the
    cutoff is the tick's start. A lease found is read again at the next kind, as it may
    have gone."""
    if plan.generation in t.no_stale_relaxers:
        return []
    found = ledger_leases.stale_relaxers(t.ledger, plan.generation, t.started)
    if not found:
        t.no_stale_relaxers.add(plan.generation)
    return found


def mark(t: Tick, plan: Plan, result: TickResult, marker: str) -> None:
    if ledger_plan.mark_done(t.ledger, plan.generation, marker):
        result.actions.append(marker)


def without_ledger(t: Tick, error: str, now) -> TickResult:
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

