"""The one-minute tick (EventBridge schedule). Thin: build the shell once per container,
call reconciler.tick, return a summary.

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
    result = tick(_runtime)
    return {
        "stage": result.stage,
        "generation": result.generation,
        "actions": result.actions,
        "complete": result.complete,
        "outcomes": len(result.outcomes),
    }
