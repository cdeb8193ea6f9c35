"""The one-minute tick (EventBridge schedule). Thin: build the shell once per container,
call reconciler.tick, return a summary.

The controller id is the Lambda log stream, unique per execution environment, so two
overlapping invocations (a slow tick and the next minute's) are told apart in leases,
plans and logs. Clients and settings are built on the first invocation, never at import.

Environment (contracts §1): HOLDFAST_SETTINGS, HOLDFAST_LEDGER_TABLE, HOLDFAST_TOPIC_ARN.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger

from .shell import Shell

logger = Logger(service="holdfast-reconciler")


_shell: Shell | None = None


def use(shell: Shell | None) -> None:
    """Inject the shell (tests); None goes back to building it from the environment."""
    global _shell
    _shell = shell


@logger.inject_lambda_context
def handler(event, context):
    from ..reconciler import tick

    global _shell
    if _shell is None:
        _shell = Shell.from_env()
    controller_id = getattr(context, "log_stream_name", None) or f"pid-{os.getpid()}"
    result = tick(_shell.clients, _shell.settings, _shell.table, _shell.clock, controller_id=controller_id)
    return {
        "stage": result.stage,
        "generation": result.generation,
        "actions": result.actions,
        "complete": result.complete,
        "outcomes": len(result.outcomes),
    }
