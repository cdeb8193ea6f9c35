"""An ARC Region switch custom Lambda block -> one of Holdfast's steps in this Region.

Thin: the payload is checked and the step run by holdfast.region_switch (the decisions
in holdfast.core.evacuation). Its return value completes the block; StepRefused and
StepPending are raised, so Lambda answers with a function error that names them
(`errorType`, `errorMessage`): the block runs the function again every
`retryIntervalMinutes` until its `timeoutMinutes`, then fails the step and pauses the
execution (ARC Developer Guide, "Custom action Lambda execution block"). A refusal wrote
nothing and says what to change; a pending step has done its part and a rerun finds it
done. Nothing else is raised: an unexpected error is logged and raised as StepPending.

The account and Region the step may act in are this function's own, from the ARN it
was invoked by (`context.invoked_function_arn`), never from the payload.

Environment (holdfast_cdk.region_switch): the controllers' own (handlers/shell.py),
HOLDFAST_TICK_FUNCTION_ARN (the reconciler, which a step starts a tick of).
"""

from __future__ import annotations

from aws_lambda_powertools import Logger

from holdfast import region_switch
from holdfast.core.evacuation import StepPending, StepRefused
from holdfast.handlers.shell import runtime_from_env
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-region-switch")

_runtime: Runtime | None = None


def use(runtime: Runtime | None) -> None:
    """Inject the runtime (tests); None goes back to building it from the environment."""
    global _runtime
    _runtime = runtime


@logger.inject_lambda_context
def handler(event, context):
    global _runtime
    if _runtime is None:
        # Not governed through the ledger: a step makes a few calls and may write no budget lease.
        _runtime = runtime_from_env(f"region-switch:{getattr(context, 'log_stream_name', 'local')}", governed=False)
    return handle(event, _runtime, getattr(context, "invoked_function_arn", ""))


def handle(event, runtime: Runtime, function_arn: str) -> dict:
    meta = {k: event.get(k) for k in ("PlanArn", "ExecutionId", "StepName")} if isinstance(event, dict) else {}
    try:
        result = region_switch.run(runtime, event, function_arn)
    except StepRefused as err:
        logger.error("step refused: nothing written", extra={**meta, "reason": str(err)})
        raise
    except StepPending as err:
        logger.info("step pending: Region switch runs it again", extra={**meta, "reason": str(err)})
        raise
    except Exception as err:  # an unexpected failure: retried by the block like a pending step
        logger.exception("step failed", extra=meta)
        raise StepPending(f"{type(err).__name__}: {err}; Region switch runs the step again") from err
    logger.info("step " + result["status"], extra={**meta, "detail": result["detail"]})
    return result
