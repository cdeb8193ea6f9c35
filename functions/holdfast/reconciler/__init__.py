"""The control loop: one tick reads the world, decides the plan, and moves toward it.

    from holdfast.reconciler import tick
    tick(runtime) -> TickResult

As controller-runtime keeps the loop's bookkeeping (requeue, metrics, logging) apart
from the Reconcile it calls, the reconciler is a few rooms:

- `steps`: the tick itself, its steps in order (observe -> decide -> notify -> release
  requests -> engage walk -> relax walk -> finish), with the table of its crash points
  and how the next tick recovers from each.
- `state`: what one tick was given and has learnt (Tick), what it has to walk (Todo),
  what it returns (TickResult), and the stages it drives (Stages).
- `deadline`: when the tick stops walking (TickDeadline), and the claim of a long
  engage walk (holdfast.ledger.claims).
- `releases`: the operators' release requests, acted on before the walks.
- `announcements`: a new plan and a stalled drain on SNS, and the tick's metrics.
"""

from holdfast.reconciler.announcements import METRICS_NAMESPACE, emit_metrics, publish_stage, publish_stall
from holdfast.reconciler.deadline import PLAN_CHECK_SECONDS, TickDeadline
from holdfast.reconciler.releases import RELEASES_PER_TICK
from holdfast.reconciler.state import EngineFactory, Stages, Tick, TickResult, logger
from holdfast.reconciler.steps import reconcile, tick

__all__ = [
    "METRICS_NAMESPACE", "PLAN_CHECK_SECONDS", "RELEASES_PER_TICK", "EngineFactory", "Stages", "Tick", "TickDeadline",
    "TickResult", "emit_metrics", "logger", "publish_stage", "publish_stall", "reconcile", "tick",
]
