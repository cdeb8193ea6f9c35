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
from holdfast.actuators.tagged import pages
from holdfast.aws import AWS_ERRORS, error_summary
from holdfast.core.audit import AuditResult, Progress, destination_finding
from holdfast.iam import uses
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


@uses("lambda:ListFunctions", "iam:SimulatePrincipalPolicy", "sqs:GetQueueUrl", "sqs:GetQueueAttributes",
      by=("cli",))
def destinations(clients, settings: Settings, queue_arn: str, result: AuditResult, say: Progress) -> None:
    """Selected functions whose execution role may not send to Holdfast's queue, one
    SimulatePrincipalPolicy call per distinct role (the CLI's credentials need
    iam:SimulatePrincipalPolicy)."""
    from holdfast.actuators.async_config import grant
    from holdfast.actuators.selection import tagged

    say("checking which functions' roles can deliver expired events")
    try:
        selected = set(tagged(clients, settings, "lambda:function"))
        functions = [f for f in pages(clients("lambda"), "list_functions", "Functions") if f["FunctionArn"] in selected]
    except AWS_ERRORS as err:
        result.unreadable.append(f"selected Lambda functions: {error_summary(err)}")
        return
    kms = _queue_key(clients, queue_arn)
    decisions: dict[str, str] = {}
    for function in functions:
        role = function.get("Role", "")
        if role not in decisions:
            try:
                answer = clients("iam").simulate_principal_policy(
                    PolicySourceArn=role, ActionNames=["sqs:SendMessage"], ResourceArns=[queue_arn])
                decisions[role] = answer["EvaluationResults"][0]["EvalDecision"]
            except AWS_ERRORS as err:
                decisions[role] = ""
                result.unreadable.append(f"role {role} (simulating sqs:SendMessage needs iam:SimulatePrincipalPolicy): "
                                         f"{error_summary(err)}")
        if decisions[role]:
            result.add(destination_finding(function, decisions[role], queue_arn, grant(role, queue_arn, kms)["command"]))


def _queue_key(clients, queue_arn: str) -> str | None:
    try:
        parts = queue_arn.split(":")
        sqs = clients("sqs")
        url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"]).get("Attributes", {}).get("KmsMasterKeyId")
    except AWS_ERRORS:
        return None
