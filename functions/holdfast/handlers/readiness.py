"""The readiness check that runs by itself (EventBridge schedule, every `readiness_hours`).

The read-only checks `holdfast doctor` makes (holdfast.readiness), with the
function's own role: the Powertools layer parameter of this region, the reconciler's
permissions for every kind (IAM's policy simulation), the AWS Health rule, the
expired-events queue, the published settings against the reconciler's, and a plan walk
of the selected resources (how many of each kind, and which Holdfast could not act on).
Doctor's `async-destinations` rule (can each selected function's role send to the
expired-events queue) is listed as not checked (`checked` false, never a failure), with
why: it needs iam:SimulatePrincipalPolicy on every role of the account, which this
function's role does not hold.
The walk is left out while a plan is in force: during an event it would spend the
account's API budgets the reconciler needs. A plan that cannot be read counts as one in
force (assume engaged): the ledger's own region may be the impaired one, and the
reconciler is then engaging from tags alone against the same Lambda budget; the
`resources` check says it was not walked, and why.

Each run records its result in the ledger (pk `READINESS`, sk `LAST`; `holdfast status`
shows it) and publishes `ReadinessChecksFailed` (failed checks, 0 when ready) in the
`Holdfast` namespace, on which the stack's alarm fires. A run that cannot record its
result still publishes the metric; a run that does not happen leaves the metric missing,
which the alarm treats as failing.

Environment (holdfast_cdk.constructs.controllers): the controllers' own (handlers/shell.py),
and HOLDFAST_RECONCILER_ROLE_ARN, HOLDFAST_RECONCILER_FUNCTION_ARN, HOLDFAST_SETTINGS_PARAMETER.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from holdfast import engine, readiness
from holdfast.core import policy
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.kinds import KINDS
from holdfast.core.model import FAILED, SKIPPED
from holdfast.handlers.shell import runtime_from_env
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import readiness as ledger_readiness
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-readiness")

RECONCILER_ROLE_ENV = "HOLDFAST_RECONCILER_ROLE_ARN"
RECONCILER_FUNCTION_ENV = "HOLDFAST_RECONCILER_FUNCTION_ARN"
SETTINGS_PARAMETER_ENV = "HOLDFAST_SETTINGS_PARAMETER"
METRICS_NAMESPACE = "Holdfast"
FAILED_METRIC = "ReadinessChecksFailed"

_runtime: Runtime | None = None


def use(runtime: Runtime | None) -> None:
    """Inject the runtime (tests); None goes back to building it from the environment."""
    global _runtime
    _runtime = runtime


def run(runtime: Runtime, *, reconciler_role: str, reconciler_function: str, settings_parameter: str) -> dict[str, Any]:
    """Every check, the result recorded; returns it."""
    clients, settings = runtime.clients, runtime.settings
    checks = readiness.powertools_layer(lambda region: clients, [clients.region])
    checks.append(readiness.expired_queue(clients, runtime.expired_queue_arn, "the stack's expired-events queue"))
    checks.append(readiness.health_rule(clients, clients.region, settings))
    checks.append(readiness.settings_drift(clients, settings_parameter, reconciler_function))
    checks.append(readiness.retained_ledgers(clients, runtime.table))
    # doctor's rule by its name, said not checked here (holdfast.readiness: DESTINATIONS).
    checks.append(readiness.destinations_unscheduled())

    selected: Counter[str] = Counter()
    first: dict[str, str] = {}
    unreadable = None
    try:
        current = ledger_plan.read(runtime.ledger())
    except LedgerUnavailable as err:
        current, unreadable = None, str(err)
        checks.append(readiness.Check("ledger", False, unreadable, "the ledger table must exist and be readable"))
    if unreadable is not None:
        checks.append(readiness.Check("resources", True, "not walked: the plan cannot be read, so Holdfast assumes one "
                                      "is in force (the reconciler may be engaging from tags alone and needs the API "
                                      "budgets)"))
    elif current is not None and current.stage != policy.NORMAL:
        checks.append(readiness.Check("resources", True, f"not walked: plan generation {current.generation} "
                                      f"({current.label}) is in force, and the reconciler needs the API budgets"))
    else:
        report = engine.Engine(runtime).engage(dry_run=True)
        for o in report.outcomes:
            if o.arn.startswith("discover:"):
                continue
            selected[o.kind] += 1
            first.setdefault(o.kind, o.arn)
        stuck = [o for o in report.outcomes if o.action in (FAILED, SKIPPED)]
        for o in stuck:
            note = next(iter(o.notes.values()), {}) if o.notes else {}
            checks.append(readiness.Check(f"resource {o.kind}", False, f"{o.arn}: {o.action}: {note.get('why') or o.error}",
                                          note.get("fix") or note.get("command") or "`holdfast plan` shows it again"))
        if not stuck:
            counts = ", ".join(f"{k} {n}" for k, n in sorted(selected.items())) or "none"
            checks.append(readiness.Check("resources", report.complete,
                                          f"selected: {counts}" + ("" if report.complete else " (the walk did not finish)")))

    account = reconciler_role.split(":")[4]
    kinds = {k: first.get(k) or readiness.sample_arn(k, clients.partition, clients.region, account) for k in KINDS}
    checks += readiness.controller_permissions(clients, reconciler_role, kinds, settings)

    failed = [c.name for c in checks if not c.ok]
    result = {"at": runtime.clock.now().isoformat(), "ok": not failed, "failed": failed,
              "selected": dict(sorted(selected.items())), "checks": [c.to_dict() for c in checks]}
    try:
        ledger_readiness.write_result(runtime.ledger(), result)
    except LedgerUnavailable as err:
        logger.warning("readiness result not recorded: %s", err)
    return result


def _emit(result: Mapping[str, Any]) -> None:
    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service="holdfast-readiness")
    metrics.add_metric(name=FAILED_METRIC, unit=MetricUnit.Count, value=len(result["failed"]))
    metrics.flush_metrics()


@logger.inject_lambda_context
def handler(event, context, env: Mapping[str, str] | None = None):
    global _runtime
    env = os.environ if env is None else env
    if _runtime is None:
        _runtime = runtime_from_env(f"readiness:{getattr(context, 'log_stream_name', 'local')}", env, governed=False)
    result = run(_runtime, reconciler_role=env[RECONCILER_ROLE_ENV], reconciler_function=env[RECONCILER_FUNCTION_ENV],
                 settings_parameter=env[SETTINGS_PARAMETER_ENV])
    for check in result["checks"]:
        if not check["ok"]:
            logger.warning("readiness check failed", extra=check)
    _emit(result)
    return {"ok": result["ok"], "failed": result["failed"], "selected": result["selected"]}
