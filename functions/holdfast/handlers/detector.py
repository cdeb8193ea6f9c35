"""EventBridge signals -> ledger. Wired to the ASG launch rule and the AWS Health rule.

Thin: parse (detection.signals), record (ledger.signals), log, count. It decides
nothing; the reconciler's tick reads what it recorded and evaluates.

- Idempotent per event: the ledger put is conditional on a key derived from the
  signal (the activity id; eventArn + communicationId for Health), so EventBridge's
  at-least-once redelivery and the Health backup region's copy store one item.
  Powertools' Idempotency utility would add a second table write for what the
  conditional put already guarantees, so it is not used.
- A malformed, unknown or out-of-scope event is logged with its reason and counted
  (metrics EventsMalformed / EventsIgnored), never raised: raising would only make
  Lambda retry an event that can never parse.
- An unreachable ledger is raised (LedgerUnavailable): that is the one failure a
  retry can fix, and Lambda's asynchronous retries do it.

Environment (contracts §1): HOLDFAST_SETTINGS, HOLDFAST_LEDGER_TABLE, AWS_REGION.
Clients are created on first use; tests inject a Shell with `use(shell)`.
"""

from __future__ import annotations


from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from ..detection.signals import MALFORMED, parse_event
from ..ledger.signals import record
from .shell import Shell

logger = Logger(service="holdfast-detector")
metrics = Metrics()


_shell: Shell | None = None


def use(shell: Shell | None) -> None:
    """Inject the shell (tests); None goes back to building it from the environment."""
    global _shell
    _shell = shell


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event, context):
    global _shell
    if _shell is None:
        _shell = Shell.from_env()
    return handle(event, _shell)


def handle(event, shell: Shell) -> dict:
    parsed = parse_event(event, region=shell.clients.region, settings=shell.settings)
    event_id = event.get("id") if isinstance(event, dict) else None
    if parsed.signal is None:
        name = "EventsMalformed" if parsed.klass == MALFORMED else "EventsIgnored"
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
        log = logger.warning if parsed.klass == MALFORMED else logger.info
        log("event not recorded", extra={"event_id": event_id, "outcome": parsed.klass, "reason": parsed.reason})
        return {"outcome": parsed.klass, "reason": parsed.reason}

    signal = parsed.signal
    new = record(shell.clients("dynamodb"), shell.table, signal, ttl_hours=shell.settings.signal_ttl_hours)
    outcome = "recorded" if new else "duplicate"
    metrics.add_metric(name="SignalsRecorded" if new else "SignalsDuplicate", unit=MetricUnit.Count, value=1)
    if new:
        metrics.add_metric(name=f"Signal-{signal.klass}", unit=MetricUnit.Count, value=1)
    logger.info(
        "signal " + outcome,
        extra={"event_id": event_id, "signal_id": signal.id, "class": signal.klass, "group": signal.group,
               "zone": signal.zone, "reason": parsed.reason},
    )
    return {"outcome": outcome, "class": signal.klass, "signal_id": signal.id, "reason": parsed.reason}
