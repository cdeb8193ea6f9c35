"""`holdfast audit`: read an account's automation and list what makes recovery worse.

Each kind's reader is its actuator's `audit` (holdfast.actuators: it lists the kind's
resources, every page, and hands each to the kind's rule, holdfast.core.kinds); this
module runs them, one check per kind, and the one check that is no kind's: whether the
selected functions' roles can deliver to Holdfast's expired-events queue.
Read-only. A resource that cannot be read is named in `unreadable`, and the audit
carries on with the rest: each check (a kind's listing, each resource's read, each
role's simulation) catches the AWS errors of its own calls, whatever they are (an
AccessDenied, a throttle past the SDK's retries, an answer that is not AWS's at all), and
the check that fails is that check's outcome, never the whole audit's.
"""

from __future__ import annotations

from typing import Callable

from holdfast.actuators import REGISTRY
from holdfast.aws import AWS_ERRORS, error_summary
from holdfast.core.audit import AuditResult, Progress, destination_finding
from holdfast.settings import Settings

__all__ = ["AuditResult", "destinations", "run"]


def run(clients, settings: Settings, progress: Progress | None = None, *, expired_queue_arn: str | None = None) -> AuditResult:
    result = AuditResult()
    say = progress or (lambda _: None)
    checks: list[tuple[str, Callable[[], None]]] = [
        (kind, lambda actuator=actuator: actuator(clients, settings, None).audit(result, say))
        for kind, actuator in REGISTRY.items()]
    if expired_queue_arn:
        checks.append(("expired-events destinations",
                       lambda: destinations(clients, settings, expired_queue_arn, result, say)))
    for name, check in checks:
        try:
            check()
        except AWS_ERRORS as err:   # an error the check itself did not name: still only this check's
            result.unreadable.append(f"{name}: {error_summary(err)}")
    result.findings.sort(key=lambda f: (f.kind, f.name, f.resource))
    return result


def destinations(clients, settings: Settings, queue_arn: str, result: AuditResult, say: Progress) -> None:
    """Selected functions whose execution role may not send to Holdfast's queue: the
    DESTINATIONS rule of holdfast.readiness (`doctor` checks the same simulation), as
    findings with each role's grant."""
    from holdfast.readiness import destination_decisions

    say("checking which functions' roles can deliver expired events")
    decided, unreadable = destination_decisions(clients, settings, queue_arn)
    result.unreadable.extend(unreadable)
    for function, decision, command in decided:
        result.add(destination_finding(function, decision, queue_arn, command))
