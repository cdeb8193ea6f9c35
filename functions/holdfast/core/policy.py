"""The stage policy: given what is observed, which plan should be in force.

Pure: no boto3, no clock. `decide(verdict, plan, alarms, now, settings)` returns the
next plan and the reasons for it; the reconciler writes that plan (a new generation)
only when it differs, and moves the resources toward `posture(plan, settings)`.

Stages follow the recovery order:

    normal -> hold -> drain -> replay -> fresh-work -> routing -> capacity -> normal

The drain and the replay are their own part of this module (at the end): SQS event
source mappings are not lifted by a stage's hold but by a feedback controller per
mapping (holdfast.core.drain), from the hold on, on the consumer's own evidence.

- A stage advances when its posture walk is complete, its hold has passed (time in
  stage counted from the later of entering it, the verdict turning `recovering` and
  the last regional capacity failure above the recovery share, `verdict.last_failing`:
  a lone group's failures are routine and restart no hold), the verdict is
  `recovering` or `normal`, the built-in gate of the stage it moves to is open
  (holdfast.core.gates), and every gating alarm is OK. A missing alarm or
  INSUFFICIENT_DATA is not OK.
- The built-in gates read evidence derived from the selected fleet, no alarm needed:
  drain -> replay the consumers' errors and throttles over the hold (`drain`, below;
  each mapping's own cap is its controller's, holdfast.core.drain);
  fresh-work -> routing the selected target groups' health, ELB health-check
  terminations and launch health; routing -> capacity launches healthy for
  `capacity_hold_minutes`. The advance's reasons carry what each gate saw, each line
  starting `evidence: `.
- The drain stage's exit gate is a drain gate, `drain(plan, evidence, now, settings) ->
  DrainMove` (advance or wait); the default, `consumers_healthy`, is the built-in drain
  evidence. It never steps back: each mapping's controller cuts its own cap.
- A gating alarm in ALARM steps back one stage; after a step back the next one waits a
  full hold, so a slow alarm cannot walk the plan to hold.
- An `impaired` verdict returns to hold from any stage.
- A Region switch evacuation in force (holdfast.core.evacuation) keeps a hold from
  advancing until its post-recovery step lifts it; it starts no hold by itself (its
  engage request does).
- An operator `advance` for the current generation skips the time gates (hold and
  capacity hold) and the built-in evidence; the walk, the verdict and the alarms still
  gate. Pause is handled by the reconciler, which then decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Sequence

from holdfast.core import gates as builtin
from holdfast.core.evidence import DRAIN as DRAIN_EVIDENCE
from holdfast.core.evidence import ROUTING as ROUTING_EVIDENCE
from holdfast.core.evidence import DrainEvidence, Evidence
from holdfast.core.kinds import CONTROLLED, KINDS, RELAXED_IN
from holdfast.core.model import RECOMMEND

NORMAL, HOLD, DRAIN, FRESH_WORK, ROUTING, CAPACITY = "normal", "hold", "drain", "fresh-work", "routing", "capacity"
REPLAY = "replay"
STAGES = (NORMAL, HOLD, DRAIN, REPLAY, FRESH_WORK, ROUTING, CAPACITY)

# The stage in which each kind is relaxed (before it the kind is held) is declared with
# the kind: holdfast.core.kinds.RELAXED_IN.

# Verdict states (holdfast.detection.detector); repeated here so the policy needs no import of the shell.
IMPAIRED, RECOVERING = "impaired", "recovering"

# Per-kind posture.
ENGAGE = "engage"     # into the safe posture (monotone; no guard)
RESTORE = "restore"   # back to the original (relaxing; guarded)
CONTROL = "control"   # each resource's own controller decides (the drain; see below)

ALARM_OK = "OK"


@dataclass(frozen=True)
class Plan:
    """The posture plan in force. A new decision is a new generation."""

    generation: int = 0
    stage: str = NORMAL
    entered_at: datetime | None = None
    drain_step: int = 0            # unused since the drain is a controller; kept for plans already written
    verdict: str = "normal"        # the verdict state the plan was decided on
    reasons: tuple[str, ...] = ()
    mode: str = RECOMMEND          # settings.mode it was decided under (the settings default)
    impaired_at: datetime | None = None  # when the latest hold began
    stepped_back: bool = False     # entered by a regression: re-engage before relaxing
    done: frozenset[str] = frozenset()   # kinds whose walk finished for this generation
    # Walk marker -> the ARN an unfinished engage walk resumes after (engine Report.cursor).
    # A new generation starts with none, so every generation walks everything once.
    cursor: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {STAGES}")

    @property
    def label(self) -> str:
        return self.stage


@dataclass(frozen=True)
class Decision:
    plan: Plan
    changed: bool
    reasons: tuple[str, ...]
    # What still stands between this plan and the next stage (empty when it advanced).
    gates: tuple[str, ...] = field(default=())
    # What the built-in gate of the next stage saw (also in `reasons` when it advanced).
    evidence: tuple[str, ...] = field(default=())


# ---- the drain stage's exit gate ---------------------------------------------------------

ADVANCE, WAIT, BACK = "advance", "wait", "back"


@dataclass(frozen=True)
class DrainMove:
    """A drain gate's answer for the drain stage's exit: advance, wait (or back, which the
    shipped gate never answers: each mapping's controller cuts its own cap)."""

    action: str
    blocking: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


DrainController = Callable[["Plan", "DrainEvidence | None", datetime, Any], DrainMove]


def consumers_healthy(plan: "Plan", evidence: DrainEvidence | None, now: datetime, settings) -> DrainMove:
    """The drain stage's exit: the consumers' errors and throttles over the hold, from the
    built-in drain evidence (holdfast.core.gates.drain_gate). Never back: the backlog's age
    is no gate, and each mapping's controller cuts its own cap on its own evidence."""
    judged = builtin.drain_gate(evidence, now, settings)
    return DrainMove(WAIT if judged.blocking else ADVANCE, judged.blocking, judged.evidence)


def evidence_needed(plan: "Plan | None", verdict) -> frozenset[str]:
    """Which built-in evidence the next decision reads, so the shell reads only that (and
    nothing while the verdict is impaired: no stage advances then)."""
    if plan is None or verdict is None or verdict.state == IMPAIRED:
        return frozenset()
    if plan.stage == DRAIN:
        return frozenset({DRAIN_EVIDENCE})
    if plan.stage == FRESH_WORK:
        return frozenset({ROUTING_EVIDENCE})
    return frozenset()


def posture(plan: Plan, settings) -> dict[str, Any]:
    """kind -> ENGAGE, RESTORE or CONTROL, for every kind; {} in normal."""
    if plan.stage == NORMAL:
        return {}
    order = STAGES.index(plan.stage)
    out: dict[str, Any] = {}
    for kind in KINDS:
        relaxed_from = STAGES.index(RELAXED_IN[kind])
        if kind in CONTROLLED and plan.stage in (HOLD, DRAIN):
            out[kind] = CONTROL
        elif order < relaxed_from:
            out[kind] = ENGAGE
        else:
            out[kind] = RESTORE
    return out


def decide(
    verdict,
    plan: Plan | None,
    alarms: Mapping[str, str | None],
    now: datetime,
    settings,
    *,
    advance_generation: int | None = None,
    evidence: Evidence | None = None,
    drain: DrainController | None = None,
    operator_engage: str | None = None,
    evacuation: Sequence[str] = (),
) -> Decision:
    """The next plan. `verdict` is a holdfast.core.detector.Verdict (its state, since,
    reasons and the last times of each criterion); `alarms` maps each gating alarm name
    to its state (None when the alarm does not exist); `evidence` is what the shell read
    for the gates (`evidence_needed`); `drain` is the drain stage's exit gate
    (`consumers_healthy` when None); `operator_engage` is why an operator asked for a hold
    of this plan (holdfast.ledger.control.Control.engage_requested), None when none did;
    `evacuation` the gates of the Region switch evacuations that keep a hold in force
    until their post-recovery step lifts them (holdfast.core.evacuation.holding): an
    operator's advance skips them, as it skips the hold's time."""
    plan = plan or Plan(mode=settings.mode)
    drain = drain or consumers_healthy
    state = verdict.state
    evidence = evidence or Evidence()

    def new(stage: str, reasons: list[str], **changes) -> Decision:
        fresh = replace(
            plan,
            generation=plan.generation + 1,
            stage=stage,
            entered_at=now,
            drain_step=changes.pop("drain_step", 0),
            verdict=state,
            reasons=tuple(reasons),
            mode=settings.mode,
            stepped_back=changes.pop("stepped_back", False),
            done=frozenset(),
            cursor={},
            **changes,
        )
        return Decision(fresh, True, tuple(reasons))

    def stay(reasons: list[str], gates: list[str] = ()) -> Decision:
        return Decision(plan, False, tuple(reasons), tuple(gates))

    if state == IMPAIRED:
        why = [f"verdict impaired: {'; '.join(verdict.reasons) or 'no reason given'}"]
        if plan.stage == HOLD:
            return stay(why + ["holding"], ["verdict is impaired"])
        origin = "impairment detected" if plan.stage == NORMAL else f"new impairment during {plan.label}"
        return new(HOLD, why + [f"{origin}: back to hold"], impaired_at=now)

    if operator_engage is not None:
        if plan.stage == HOLD:
            return stay([operator_engage, "holding"])
        origin = "operator engage" if plan.stage == NORMAL else f"operator engage during {plan.label}"
        return new(HOLD, [operator_engage, f"{origin}: to hold"], impaired_at=now)

    if plan.stage == NORMAL:
        return stay([f"verdict {state}: nothing engaged"])

    if plan.mode != settings.mode:
        return _same_stage(plan, settings, state)

    operator = advance_generation == plan.generation
    skip_time = operator or not _held(plan)
    alarm_gates, alarming = _alarm_gates(alarms, settings)
    judged = _judge(plan, verdict, evidence, now, settings, drain)
    if alarming and plan.stage != HOLD:
        what = f"alarm {', '.join(alarming)} in ALARM"
        if plan.stepped_back and now - plan.entered_at < timedelta(minutes=settings.hold_minutes):
            return stay([f"{what}; stepped back already, waiting a hold"], alarm_gates)
        stage, step = _previous(plan, settings)
        return new(
            stage,
            [f"{what} during {plan.label}: step back to {stage}"],
            drain_step=step,
            stepped_back=True,
        )

    gates = _walk_gates(plan, settings)
    if plan.stage == HOLD and not operator:
        gates += list(evacuation)
    started = _stage_clock(plan, verdict)
    if not skip_time and now - started < timedelta(minutes=settings.hold_minutes):
        left = timedelta(minutes=settings.hold_minutes) - (now - started)
        gates.append(f"hold: {_minutes(left)} left of {settings.hold_minutes} min")
    target, step = _next(plan, settings)
    if not operator:
        gates += judged.blocking
    gates += alarm_gates
    if gates:
        return replace(stay([f"{plan.label}: verdict {state}"], gates), evidence=judged.evidence)
    reasons = [f"{plan.label} passed: verdict {state}, alarms OK"
               + (", hold skipped by operator, built-in evidence too" if operator and _held(plan) else "")]
    reasons += [f"evidence: {e}" for e in judged.evidence]
    decision = new(target, reasons + [f"advance to {target}"], drain_step=step)
    return replace(decision, evidence=judged.evidence)


def _judge(plan: Plan, verdict, evidence: Evidence, now: datetime, settings, drain: DrainController) -> builtin.Judgement:
    """The built-in gate of the stage the plan would move to next."""
    if plan.stage == HOLD:
        # The mappings drain from the hold on, each on its own evidence: nothing to judge here.
        return builtin.Judgement((), ("each SQS mapping drains from the hold on under its own controller, on its "
                                      "own evidence (holdfast stage lists them)",))
    if plan.stage == REPLAY:
        return builtin.Judgement((), ("every replay source finished or ended with its reason (holdfast stage lists them)",))
    if plan.stage == DRAIN:
        move = drain(plan, evidence.drain, now, settings)
        return builtin.Judgement(move.blocking if move.action != ADVANCE else (), move.evidence, False)
    target, _ = _next(plan, settings)
    if target == ROUTING:
        return builtin.routing_gate(evidence.routing, verdict, now, settings)
    if target == CAPACITY:
        return builtin.capacity_gate(verdict, plan.impaired_at, now, settings)
    return builtin.Judgement()


def _same_stage(plan: Plan, settings, state: str) -> Decision:
    """A mode change starts a new generation in the same stage and keeps its clock:
    progress recorded under `recommend` (nothing written) must not count under `auto`."""
    reasons = (f"mode changed from {plan.mode} to {settings.mode}: walk again",)
    fresh = replace(plan, generation=plan.generation + 1, mode=settings.mode, verdict=state, reasons=reasons, done=frozenset(), cursor={})
    return Decision(fresh, True, reasons)


def _alarm_gates(alarms: Mapping[str, str | None], settings) -> tuple[list[str], list[str]]:
    gates, alarming = [], []
    for name in settings.gating_alarms:
        value = alarms.get(name)
        if value is None:
            gates.append(f"alarm {name} missing: not OK")
        elif value != ALARM_OK:
            gates.append(f"alarm {name} is {value}: not OK")
            if value == "ALARM":
                alarming.append(name)
    return gates, alarming


def _stage_clock(plan: Plan, verdict) -> datetime:
    """Time in stage counts from the latest of: entering it, the verdict turning
    recovering, the last regional capacity failure above the recovery share (the same
    criterion as the verdict's: a lone group's failures are routine)."""
    times = [plan.entered_at]
    if verdict.state == RECOVERING and verdict.since:
        times.append(verdict.since)
    if getattr(verdict, "last_failing", None):
        times.append(verdict.last_failing)
    return max(times)


def _next(plan: Plan, settings) -> tuple[str, int]:
    order = STAGES[1:] + (NORMAL,)
    return order[order.index(plan.stage) + 1], 0


def _previous(plan: Plan, settings) -> tuple[str, int]:
    return STAGES[STAGES.index(plan.stage) - 1], 0


def _minutes(delta: timedelta) -> str:
    return f"{max(delta.total_seconds(), 0) / 60:.1f} min"


# ---- the drain and the replay ----------------------------------------------------------
#
# Event source mappings are lifted by a feedback controller each (holdfast.core.drain),
# not by a stage's hold. Their posture is CONTROL in hold and in drain: the reconciler
# engages them when a hold begins, and from then on each mapping waits at the floor until
# its own evidence (its function's Errors, its downstream alarms) says its dependency is
# back, then drains under the controller, and gets its owner's original back once its
# queue has been caught up for a while. That may happen while the plan is still in hold:
# the drain depends on the consumer's downstream, not on EC2 launches, so it does not wait
# for the launch verdict's quiet window. The other stages keep their own gates.
#
# - hold -> drain: the usual gates, except that the controlled walk is not one of them.
# - drain -> replay: every mapping back at its owner's value (the controlled walk done),
#   the consumers' errors and throttles healthy over the hold (`consumers_healthy`),
#   the hold, the verdict and the gating alarms.
# - replay -> fresh-work: every replay source finished (its walk marked REPLAY), the
#   verdict and the gating alarms; no hold of its own: a replay is watched while it runs
#   (cancelled when its downstream alarms), and a finished move leaves nothing relaxed.

# The controlled kinds (holdfast.core.kinds.CONTROLLED: a kind's `controlled` declaration,
# today SQS event source mappings) are imported above.


def starts_hold(plan: Plan) -> bool:
    """This generation began a hold (a new impairment): controlled kinds are engaged again.
    A step back into hold or a mode change keeps the hold (and the drains) it had."""
    return plan.stage == HOLD and plan.entered_at is not None and plan.entered_at == plan.impaired_at


def _walk_gates(plan: Plan, settings) -> list[str]:
    gates = []
    for kind, target in posture(plan, settings).items():
        if kind in plan.done or (target == CONTROL and plan.stage == HOLD):
            continue
        gates.append(f"{kind} drain not finished: not every mapping is back at its owner's value"
                     if target == CONTROL else f"{kind} walk not finished")
    if plan.stage == REPLAY and REPLAY not in plan.done:
        gates.append("replay not finished")
    return gates


def _held(plan: Plan) -> bool:
    """Whether the stage has a hold of its own (the replay has none)."""
    return plan.stage != REPLAY
