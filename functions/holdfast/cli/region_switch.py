"""`holdfast doctor`'s Region switch checks: the plans that name Holdfast's steps, and
whether Holdfast is deployed in each of their Regions.

Read-only. The plans come from ARC Region switch's ListPlans and GetPlan (botocore's
`arc-region-switch`: its control-plane endpoint, in the partition's leading Region); a
step is Holdfast's when its custom Lambda block's payload has the `holdfast` object
(holdfast_cdk.RegionSwitchSteps writes it). For each such plan, one check per Region
(`region-switch <plan> <region>`):

- each Holdfast step names a function in that Region, and the payload it gives it names
  that function's own Region and account (else the step refuses at every run);
- the function exists (lambda GetFunction in that Region), is Holdfast's step function
  (its handler), and the ledger it names exists (dynamodb DescribeTable): Holdfast is
  deployed there; a step in mode auto needs Holdfast deployed in mode auto;
- a plan that engages Holdfast has a lift step (`region-switch <plan>`): without one the
  Region it leaves stays held until an operator's `holdfast advance`.

A function in another account than the credentials' is not checked from here (its
account's own `holdfast doctor` checks it), said so, never a failure; a listing the
credentials may not make is the same (`checked` false), since most accounts run no plan.
The credentials need `arc-region-switch:ListPlans`, `arc-region-switch:GetPlan`, and in
each Region `lambda:GetFunction` and `dynamodb:DescribeTable`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

from holdfast.aws import AWS_ERRORS, error_code, error_summary
from holdfast.core import evacuation as ev
from holdfast.core.model import AUTO, RECOMMEND, acts
from holdfast.iam import uses
from holdfast.readiness import Check

SERVICE = "arc-region-switch"
STEP_HANDLER = "holdfast.handlers.region_switch.handler"
NOT_FOUND = "ResourceNotFoundException"


@uses("arc-region-switch:ListPlans", "arc-region-switch:GetPlan", by=("cli",))
def read_plans(clients) -> list[dict[str, Any]]:
    """Every plan of the account, whole (GetPlan: ListPlans gives no workflows)."""
    client = clients(SERVICE)
    arns, token = [], None
    while True:
        page = client.list_plans(**({"nextToken": token} if token else {}))
        arns += [p["arn"] for p in page.get("plans", [])]
        token = page.get("nextToken")
        if not token:
            break
    return [client.get_plan(arn=arn)["plan"] for arn in arns]


def _steps(steps: Iterable[dict]) -> Iterator[dict]:
    """Every step, those inside a parallel block too."""
    for step in steps or ():
        yield step
        parallel = (step.get("executionBlockConfiguration") or {}).get("parallelConfig") or {}
        yield from _steps(parallel.get("steps"))


def holdfast_steps(plan: dict) -> list[tuple[str, str, list[tuple[str, dict | None]]]]:
    """(workflow action, step name, [(function ARN, its Holdfast payload or None)]) for each
    custom Lambda step of `plan` whose payloads include Holdfast's."""
    found = []
    for workflow in plan.get("workflows") or ():
        for step in _steps(workflow.get("steps")):
            config = (step.get("executionBlockConfiguration") or {}).get("customActionLambdaConfig")
            if not config:
                continue
            entries = [(entry.get("arn", ""), _payload(entry.get("payload"))) for entry in config.get("lambdas") or ()]
            if any(body is not None for _, body in entries):
                found.append((workflow.get("workflowTargetAction", "?"), step.get("name", "?"), entries))
    return found


def _payload(raw: Any) -> dict | None:
    try:
        body = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    inner = body.get(ev.PAYLOAD_KEY) if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else None


@uses("lambda:GetFunction", "dynamodb:DescribeTable", by=("cli",))
def deployed(clients, function_arn: str) -> tuple[bool, str, str | None]:
    """(Holdfast's step function is there with its ledger, what was found, the deployed mode)."""
    try:
        config = clients("lambda").get_function(FunctionName=function_arn)["Configuration"]
    except AWS_ERRORS as err:
        if error_code(err) == NOT_FOUND:
            return False, f"no function {function_arn}", None
        return False, f"cannot read {function_arn}: {error_summary(err)}", None
    env = (config.get("Environment") or {}).get("Variables") or {}
    if config.get("Handler") != STEP_HANDLER:
        return False, f"{function_arn} is not Holdfast's step function (handler {config.get('Handler')})", None
    try:
        mode = json.loads(env.get("HOLDFAST_SETTINGS") or "{}").get("mode", RECOMMEND)
    except ValueError:
        mode = None
    table = env.get("HOLDFAST_LEDGER_TABLE")
    try:
        clients("dynamodb").describe_table(TableName=table or "-")
    except AWS_ERRORS as err:
        return False, f"{function_arn}: its ledger {table} " + (
            "does not exist" if error_code(err) == NOT_FOUND else f"cannot be read: {error_summary(err)}"), mode
    return True, f"step function {config.get('FunctionName')}, ledger {table}, mode {mode}", mode


def checks(clients, clients_for: Callable[[str], Any], account: str) -> list[Check]:
    """The checks above; `clients_for(region)` gives clients in a plan's Region, `account`
    is the credentials' own."""
    try:
        plans = read_plans(clients)
    except AWS_ERRORS as err:
        return [Check("region-switch", True, f"not checked: Region switch plans could not be listed "
                      f"({error_summary(err)}); needs arc-region-switch:ListPlans and GetPlan", checked=False)]
    named = [(p, found) for p in plans if (found := holdfast_steps(p))]
    if not named:
        return [Check("region-switch", True, f"{len(plans)} Region switch plan(s); none names Holdfast's steps")]
    out = []
    for plan, found in named:
        out += _plan_checks(plan, found, clients_for, account)
    return out


def _plan_checks(plan: dict, found, clients_for, account: str) -> list[Check]:
    name = plan.get("name") or plan.get("arn")
    out = []
    kinds = {(body or {}).get("step") for _, _, entries in found for _, body in entries}
    if ev.ENGAGE_STEP in kinds and ev.LIFT_STEP not in kinds:
        out.append(Check(f"region-switch {name}", False, "the plan engages Holdfast but has no lift step: the Region "
                         "it leaves stays held until `holdfast advance` there",
                         "add RegionSwitchSteps.post_recovery to the plan's post-recovery workflow"))
    for region in plan.get("regions") or ():
        problems, notes, unchecked = [], [], []
        for action, step, entries in found:
            here = [(arn, body) for arn, body in entries if _arn_part(arn, 3) == region]
            if not here:
                problems.append(f"step {step} ({action}) names no function in {region}")
            for arn, body in here:
                fn_account = _arn_part(arn, 4)
                if body is None:
                    problems.append(f"step {step}: {arn} gets no Holdfast payload")
                    continue
                if body.get("region") != region or body.get("account") != fn_account:
                    problems.append(f"step {step}: the payload for {arn} names Region {body.get('region')} and "
                                    f"account {body.get('account')}: the step refuses at every run")
                if fn_account != account:
                    unchecked.append(f"{arn} is in account {fn_account}")
                    continue
                ok, detail, mode = deployed(clients_for(region), arn)
                if not ok:
                    problems.append(detail)
                elif acts(body.get("mode", AUTO)) and not acts(mode) and body.get("step") != ev.POSTURE_STEP:
                    problems.append(f"step {step} acts (mode auto), Holdfast in {region} is deployed with mode "
                                    f"{mode}: the step refuses")
                else:
                    notes.append(detail)
        label = f"region-switch {name} {region}"
        if problems:
            out.append(Check(label, False, "; ".join(problems),
                             f"deploy Holdfast in {region} with region_switch=RegionSwitchAccess() and mode auto, "
                             "and build the plan's steps with RegionSwitchSteps"))
        elif unchecked and not notes:
            out.append(Check(label, True, f"not checked from account {account}: {'; '.join(unchecked)} (run "
                             "`holdfast doctor` there)", checked=False))
        else:
            out.append(Check(label, True, "Holdfast deployed: " + "; ".join(sorted(set(notes)))
                             + (f"; not checked: {'; '.join(unchecked)}" if unchecked else "")))
    return out


def _arn_part(arn: str, index: int) -> str:
    parts = (arn or "").split(":")
    return parts[index] if len(parts) > index else ""
