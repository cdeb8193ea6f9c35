"""EventBridge signals -> ledger. Wired to the ASG launch rule and the AWS Health rule.

Thin: `observation.intake.receive` parses and records; this logs and counts. It decides
no posture; the reconciler's tick reads what it recorded and evaluates. When a recorded
signal turns the verdict impaired and the plan is not holding yet,
`observation.trigger.after_signal` starts a tick at once (an asynchronous invoke of the
reconciler, once per plan generation and schedule period) instead of leaving it to the
schedule.

- Idempotent per event: the ledger put is conditional on a key derived from the
  signal (the activity id; eventArn + communicationId for Health), so EventBridge's
  at-least-once redelivery and a second copy of one Health communication store one item.
  Powertools' Idempotency utility would add a second table write for what the
  conditional put already guarantees, so it is not used.
- A malformed, unknown or out-of-scope event is logged with its reason and counted
  (metrics EventsMalformed / EventsIgnored), never raised: raising would only make
  Lambda retry an event that can never parse.
- An unreachable ledger is raised (LedgerUnavailable): that is the one failure a
  retry can fix, and Lambda's asynchronous retries do it.

The Runtime is built on the first invocation (handlers/shell.py); tests inject one with
`use(runtime)`.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from holdfast.core.signals import MALFORMED
from holdfast.handlers.shell import runtime_from_env
from holdfast.observation.intake import receive
from holdfast.observation.trigger import after_signal
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-detector")
metrics = Metrics()


_runtime: Runtime | None = None


def use(runtime: Runtime | None) -> None:
    """Inject the runtime (tests); None goes back to building it from the environment."""
    global _runtime
    _runtime = runtime


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event, context):
    global _runtime
    if _runtime is None:
        _runtime = runtime_from_env(getattr(context, "log_stream_name", None) or "detector")
    return handle(event, _runtime)


def handle(event, runtime: Runtime) -> dict:
    got = receive(runtime, event)
    event_id = event.get("id") if isinstance(event, dict) else None
    for name in got.metrics:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    if got.signal_id is None:
        log = logger.warning if got.outcome == MALFORMED else logger.info
        log("event not recorded", extra={"event_id": event_id, "outcome": got.outcome, "reason": got.reason})
    else:
        logger.info("signal " + got.outcome, extra={"event_id": event_id, "signal_id": got.signal_id, "class": got.klass,
                                                    "group": got.group, "zone": got.zone, "reason": got.reason})
    started = after_signal(runtime, got.klass, recorded=got.outcome == "recorded")
    if started.metric:
        metrics.add_metric(name=started.metric, unit=MetricUnit.Count, value=1)
    if started.outcome not in ("skipped",):
        log = logger.warning if started.outcome == "failed" else logger.info
        log("tick trigger: " + started.outcome, extra={"event_id": event_id, "reason": started.reason})
    return {**got.to_dict(), **started.to_dict()}
