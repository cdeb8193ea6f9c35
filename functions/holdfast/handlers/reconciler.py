"""The one-minute tick (EventBridge schedule, or the detector when the verdict turns
impaired). Thin: build the shell once per container, call reconciler.tick, return a summary.

An engaging tick may walk for as long as the invocation has time (its remaining time,
from the Lambda context, less MARGIN_SECONDS: `tick(engage_seconds=)`); the function's
timeout is Lambda's maximum (holdfast_cdk/constructs/controllers.py). Relaxing keeps the
short `tick_budget_seconds`.

The controller id is the Lambda log stream, unique per execution environment, so two
overlapping invocations (a slow tick and the next minute's) are told apart in leases,
plans and logs. Clients and settings are built on the first invocation, never at import.

The Runtime comes from the environment (handlers/shell.py).
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger

from holdfast.handlers.shell import runtime_from_env
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-reconciler")


_runtime: Runtime | None = None
# Left of the Lambda's time after an engaging tick's walk: progress marks, logs, metrics.
MARGIN_SECONDS = 30


def engage_seconds(context) -> float | None:
    """How long this invocation may keep engaging: its remaining time less MARGIN_SECONDS
    (None without a Lambda context: the tick budget)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return max(0.0, remaining() / 1000 - MARGIN_SECONDS)


def use(runtime: Runtime | None) -> None:
    """Inject the runtime (tests); None goes back to building it from the environment."""
    global _runtime
    _runtime = runtime


@logger.inject_lambda_context
def handler(event, context):
    from holdfast.reconciler import tick

    global _runtime
    if _runtime is None:
        _runtime = runtime_from_env(getattr(context, "log_stream_name", None) or f"pid-{os.getpid()}")
    result = tick(_runtime, engage_seconds=engage_seconds(context))
    return {
        "stage": result.stage,
        "generation": result.generation,
        "actions": result.actions,
        "complete": result.complete,
        "outcomes": len(result.outcomes),
    }
