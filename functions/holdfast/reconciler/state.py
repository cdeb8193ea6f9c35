"""The tick's state: what one tick was given and has learnt so far (Tick), what it has
to walk (Todo), what it returns (TickResult), and the small types the steps share
(holdfast.reconciler.steps): one kind's part of a walk report, the guard that stops
relaxing at the first stale plan, the stages a tick drives.

As controller-runtime keeps the request and its result apart from the Reconcile that
fills them, the steps read and fill these and keep nothing of their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from aws_lambda_powertools import Logger

from holdfast.core.errors import StalePlan
from holdfast.core.model import (
    ALREADY,
    DRIFT_KEPT,
    ENGAGED,
    RAISED,
    RESTORED,
    SKIPPED,
    VANISHED,
    Guard,
    Outcome,
    recommends_only,
)
from holdfast.core.policy import Plan
from holdfast.engine import TickEngine, WalkReport
from holdfast.ledger import Ledger
from holdfast.ledger import failures as ledger_failures
from holdfast.observation import Collect
from holdfast.runtime import Runtime
from holdfast.stages import capacity as capacity_stage
from holdfast.stages import drain as drain_stage
from holdfast.stages import replay as replay_stage

if TYPE_CHECKING:
    from holdfast.reconciler.deadline import TickDeadline

# The reconciler's one logger (holdfast.cli.drill reads its handler).
logger = Logger(service="holdfast-reconciler")

WRITES = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT)
# Outcomes that end a resource's run of failures.
SUCCEEDED = (ENGAGED, ALREADY, RAISED, RESTORED, DRIFT_KEPT, VANISHED, SKIPPED)
LEFTOVERS = "stuck-restores"   # the walk marker of the retries of stuck restores


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


@dataclass
class KindReport:
    """One kind's part of an engage walk of several kinds: what finish_kind reads."""

    outcomes: list[Outcome]
    complete: bool
    refused: str | None
    api_calls: dict[str, int]
    cursor: dict[str, str | None]
    seen: dict[str, set[str]]

    @classmethod
    def of(cls, report: WalkReport, kind: str) -> "KindReport":
        # The deadline cut the walk: the kinds it names are unfinished, the others complete.
        complete = report.complete or kind not in report.unfinished
        refused = report.refused if not report.refused_kinds or kind in report.refused_kinds else None
        return cls([o for o in report.outcomes if o.kind == kind], complete, refused,
                   {kind: report.api_calls[kind]} if kind in report.api_calls else {},
                   {kind: report.cursor[kind]} if kind in report.cursor else {},
                   {kind: report.seen[kind]} if kind in report.seen else {})


class Tick:
    """One tick's inputs and what it has learnt so far; the steps below read and fill it."""

    def __init__(self, runtime: Runtime, collect: Collect, engine: TickEngine, deadline: TickDeadline,
                 stages: Stages, ledger: Ledger):
        self.runtime, self.settings, self.table = runtime, runtime.settings, runtime.table
        self.ledger = ledger
        self.collect, self.engine, self.deadline = collect, engine, deadline
        self.stages = stages
        self.dry_run = recommends_only(self.settings.mode)
        self.started = runtime.clock.now()
        self.failing: dict[str, ledger_failures.Failure] = {}   # loaded by the walk
        self.no_stale_relaxers: set[int] = set()   # generations with no older relaxer's lease (steps.stale_relaxers)

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
class Todo:
    """What the walk has to do for a plan: the decide step's output, the walks' input."""

    target: dict[str, str]          # kind -> posture
    engaging: list[str]             # kinds whose posture is ENGAGE, not done
    controlled: list[str]           # kinds under a controller (CONTROL), not done
    relaxing: list[str]             # kinds relaxed by a plain walk, not done
    engage_first: list[str]         # controlled kinds whose hold engage is still to walk
    rewalking: list[str]            # markers of held kinds due for a walk again
    walks: dict[str, Any]           # marker -> its last walk (holdfast.ledger.walks)


class StickyGuard:
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
