"""Readiness: what a deploy and an event need, checked in an account, each with a fix.
`holdfast doctor` runs them on an operator's credentials; the readiness function
(holdfast.handlers.readiness) runs them on a schedule in every account and region the
stack is in, and records the result where `holdfast status` shows it.

Read-only. Every check returns Checks (name, ok, detail, fix); a check that cannot be
made (its read is denied) is not ok, and says which permission it needs:

- `powertools-layer <region>`: the public SSM parameter the stack resolves the Powertools
  layer from, in each target region (Powertools has gone without a parameter for some
  versions before, and a missing one fails the deploy).
- `controller-role <kind>`: the reconciler's role may make each write that kind needs, on
  one selected resource of it (or a sample ARN in this account and region), with the
  selector tag and Holdfast's tag keys in the request context: IAM's own policy
  simulation (iam:SimulatePrincipalPolicy), so permission boundaries count too.
- `health-rule`: an enabled EventBridge rule for AWS Health issues matching this region
  on `detail.eventRegion`.
- `expired-events-queue`: the queue exists (found as `engage` finds it).
- `settings-drift`: the settings the stack published (its SSM settings parameter) are
  the ones the reconciler runs with (its HOLDFAST_SETTINGS), so a partial deploy or a hand
  edit of either is seen.
- `resources`: selected resources Holdfast could not act on (a plan walk: failed or
  skipped, each with its note's fix).
- `async-destinations` (DESTINATIONS): every selected function's execution role may send
  to Holdfast's expired-events queue, which Lambda requires of an on-failure destination
  (IAM's simulation of sqs:SendMessage by each distinct role, `destination_checks`; the
  same simulation `holdfast audit` lists its findings from). `doctor` only: the schedule
  names the rule as not checked (`destinations_unscheduled`), because it needs
  iam:SimulatePrincipalPolicy on the roles of every selected function, roles the stack
  does not know, so on every role of the account, and IAM says of that action that it
  "discloses information about the permissions granted to other" principals (IAM API
  Reference, SimulatePrincipalPolicy): the readiness role simulates the reconciler's role only.

The CLI's own credentials need: ssm:GetParameter, lambda:ListFunctions,
iam:SimulatePrincipalPolicy, events:ListRules, sqs:GetQueueUrl/GetQueueAttributes,
ssm:GetParametersByPath, and the read actions of `holdfast plan`; the readiness
function's are policies/readiness.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from botocore.exceptions import ClientError

from holdfast import iam
from holdfast.actuators import REGISTRY
from holdfast.aws import AWS_ERRORS, error_code, error_text
from holdfast.core.kinds import BY_NAME
from holdfast.iam import uses

# The layer the stack deploys with (holdfast_cdk.constructs.controllers; a test keeps the
# two equal: holdfast may not import holdfast_cdk).
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
RECONCILER_HANDLER = "holdfast.handlers.reconciler.handler"
TAG_KEYS = ["holdfast:original", "holdfast:applied"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    checked: bool = True     # False: a rule this run does not check (it says who does), never a failure

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix, "checked": self.checked}


DESTINATIONS = "async-destinations"


@uses("tag:GetResources", "lambda:ListFunctions", "iam:SimulatePrincipalPolicy", "sqs:GetQueueUrl",
      "sqs:GetQueueAttributes", by=("cli",))
def destination_decisions(clients, settings, queue_arn: str) -> tuple[list[tuple[dict, str, str]], list[str]]:
    """([(function, IAM's decision for sqs:SendMessage by its role on the queue, the grant
    command)], what could not be read). One SimulatePrincipalPolicy call per distinct role;
    a selected function is one carrying the selector tag."""
    from holdfast.actuators.async_config import grant
    from holdfast.actuators.selection import tagged

    unreadable: list[str] = []
    try:
        selected = set(tagged(clients, settings, "lambda:function"))
        functions = [f for page in clients("lambda").get_paginator("list_functions").paginate()
                     for f in page.get("Functions", ()) if f["FunctionArn"] in selected]
    except AWS_ERRORS as err:
        return [], [f"selected Lambda functions: {error_text(err)}"]
    kms = _queue_key(clients, queue_arn)
    decisions: dict[str, str] = {}
    out = []
    for function in functions:
        role = function.get("Role", "")
        if role not in decisions:
            try:
                answer = clients("iam").simulate_principal_policy(
                    PolicySourceArn=role, ActionNames=["sqs:SendMessage"], ResourceArns=[queue_arn])
                decisions[role] = answer["EvaluationResults"][0]["EvalDecision"]
            except AWS_ERRORS as err:
                decisions[role] = ""
                unreadable.append(f"role {role} (simulating sqs:SendMessage needs iam:SimulatePrincipalPolicy): "
                                  f"{error_text(err)[:300]}")
        if decisions[role]:
            out.append((function, decisions[role], grant(role, queue_arn, kms)["command"]))
    return out, unreadable


def _queue_key(clients, queue_arn: str) -> str | None:
    try:
        parts = queue_arn.split(":")
        sqs = clients("sqs")
        url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"]).get("Attributes", {}).get("KmsMasterKeyId")
    except AWS_ERRORS:
        return None


def destination_checks(clients, settings, queue_arn: str) -> list[Check]:
    """The DESTINATIONS rule: one check, failed when any selected function's role may not
    send to the queue (each named, each role's grant in the fix) or could not be simulated."""
    decided, unreadable = destination_decisions(clients, settings, queue_arn)
    denied = [(f, d, command) for f, d, command in decided if d != "allowed"]
    checks = []
    if denied:
        names = ", ".join(f"{f['FunctionName']} ({d})" for f, d, _ in denied)
        checks.append(Check(DESTINATIONS, False,
                            f"{len(denied)} selected function(s) whose execution role may not send to Holdfast's "
                            f"expired-events queue {queue_arn}: {names}; Lambda refuses the queue as their on-failure "
                            "destination, so while engaged only their retries are bounded and their event age is kept",
                            "; ".join(dict.fromkeys(command for _, _, command in denied))))
    for what in unreadable:
        checks.append(Check(DESTINATIONS, False, f"could not check {what}",
                            "the caller's credentials need iam:SimulatePrincipalPolicy on the functions' roles"))
    if not checks:
        checks.append(Check(DESTINATIONS, True, f"the roles of {len(decided)} selected function(s) may send to {queue_arn}"))
    return checks


def destinations_unscheduled() -> Check:
    """The DESTINATIONS rule as the scheduled run reports it: not checked there, and why."""
    return Check(DESTINATIONS, True,
                 "not checked by the scheduled run: simulating each selected function's role needs "
                 "iam:SimulatePrincipalPolicy on every role of the account, which discloses their permissions, "
                 "and the readiness role simulates the reconciler's role only",
                 "`holdfast doctor` (or `holdfast audit`) checks it with credentials that may simulate the functions' roles",
                 checked=False)


@uses("ssm:GetParameter", by=("cli", "readiness"))
def powertools_layer(clients_for: Callable[[str], Any], regions: Iterable[str]) -> list[Check]:
    checks = []
    for region in regions:
        name = f"powertools-layer {region}"
        try:
            value = clients_for(region)("ssm").get_parameter(Name=POWERTOOLS_LAYER_PARAMETER)["Parameter"]["Value"]
            checks.append(Check(name, True, f"{POWERTOOLS_LAYER_PARAMETER} = {value}"))
        except ClientError as err:
            missing = error_code(err) == "ParameterNotFound"
            checks.append(Check(name, False, f"{POWERTOOLS_LAYER_PARAMETER}: {error_text(err)}",
                                (f"Powertools publishes no layer {POWERTOOLS_VERSION} for python3.13 arm64 in {region}: "
                                 "pin a release that has one (requirements.txt and holdfast_cdk.constructs.controllers."
                                 "POWERTOOLS_VERSION) or deploy elsewhere") if missing else
                                "the CLI's credentials need ssm:GetParameter on the public /aws/service/powertools/* parameters"))
        except AWS_ERRORS as err:   # no answer, or one that is not AWS's
            checks.append(Check(name, False, f"{POWERTOOLS_LAYER_PARAMETER}: {error_text(err)}", "check the region's endpoint"))
    return checks


@uses("lambda:ListFunctions", by=("cli",))
def reconciler_role(clients, ledger_table: str) -> tuple[str | None, str]:
    """The deployed reconciler's execution role: the function running Holdfast's reconciler
    handler on this ledger table. (None, why) when there is none."""
    try:
        for page in clients("lambda").get_paginator("list_functions").paginate():
            for function in page.get("Functions", []):
                env = ((function.get("Environment") or {}).get("Variables") or {})
                if function.get("Handler") == RECONCILER_HANDLER and env.get("HOLDFAST_LEDGER_TABLE", ledger_table) == ledger_table:
                    return function["Role"], function["FunctionName"]
    except AWS_ERRORS as err:
        return None, f"cannot list functions ({error_text(err)}; needs lambda:ListFunctions)"
    return None, f"no function runs {RECONCILER_HANDLER} with ledger {ledger_table} in {clients.region}: not deployed here"


# The tag the stack puts on its ledger (holdfast_cdk.constructs.ledger.COMPONENT_TAG).
LEDGER_TAG = ("holdfast:component", "ledger")
OLD_FIXED_LEDGER = "holdfast-ledger"   # the table's name before CloudFormation named it


@uses("dynamodb:ListTables", "dynamodb:DescribeTable", "dynamodb:ListTagsOfResource", "dynamodb:Query",
      by=("cli", "readiness"))
def retained_ledgers(clients, ledger_table: str) -> Check:
    """Other Holdfast ledgers in this region that still hold resource records.

    A table is Holdfast's when it carries the ledger's tag, or has the fixed name every
    ledger had before CloudFormation named them. A stack first deployed under that name and
    updated without `ledger_table_name` gets a new, empty ledger while the retained one
    keeps its records: resources engaged then, whose record is in the ledger only (no tag
    room), are held with no controller that knows them, and `holdfast status` on the new
    stack cannot see them."""
    from holdfast.ledger import PK
    from holdfast.ledger.resources import PARTITION

    name = "retained-ledgers"
    db = clients("dynamodb")
    holding: list[str] = []
    try:
        tables = [t for page in db.get_paginator("list_tables").paginate() for t in page.get("TableNames", [])]
        for table in tables:
            if table == ledger_table:
                continue
            if table != OLD_FIXED_LEDGER:
                try:
                    tags = _table_tags(db, table)
                except ClientError as err:
                    # The readiness role may read only tables with the ledger's tag: a denial is not ours.
                    if error_code(err) in ("AccessDeniedException", "AccessDenied"):
                        continue
                    raise
                if tags.get(LEDGER_TAG[0]) != LEDGER_TAG[1]:
                    continue
            answer = db.query(TableName=table, KeyConditionExpression="#pk = :pk", Limit=1,
                              ExpressionAttributeNames={"#pk": PK},
                              ExpressionAttributeValues={":pk": {"S": PARTITION}})
            if answer.get("Count") or answer.get("Items"):
                holding.append(table)
    except AWS_ERRORS as err:
        return Check(name, False, f"cannot look for retained ledgers ({error_text(err)})",
                     "the credentials need dynamodb:ListTables, DescribeTable, ListTagsOfResource and Query")
    if not holding:
        return Check(name, True, f"no other Holdfast ledger here holds resource records (this stack's: {ledger_table})")
    return Check(name, False,
                 f"{', '.join(holding)}: a Holdfast ledger other than this stack's ({ledger_table}) still holds resource "
                 "records: resources engaged under it may still be held, and this stack's controller does not know them",
                 f"restore them from it: `holdfast --ledger-table {holding[0]} resume --now`; or carry on with it: set "
                 "ledger_table_name to its name and bring it into the stack with `npx cdk import`")


def _table_tags(db, table: str) -> dict[str, str]:
    arn = db.describe_table(TableName=table)["Table"]["TableArn"]
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn}
    while True:
        page = db.list_tags_of_resource(**kwargs)
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        if not page.get("NextToken"):
            return tags
        kwargs["NextToken"] = page["NextToken"]


# Lambda keeps at least this much of an account's concurrency unreserved ("Lambda
# concurrency": reservations may total the account's limit less 100).
UNRESERVED_MINIMUM = 100
CONTROLLER_FUNCTIONS = 3   # detector, reconciler, readiness


@uses("lambda:GetAccountSettings", "lambda:GetFunction", by=("cli",))
def concurrency(clients, settings, reconciler: str | None) -> Check:
    """Whether the account has room for Holdfast's reserved concurrency: Lambda refuses a
    reservation that would leave less than 100 unreserved, and an account out of
    concurrency throttles every function without one (the controllers too, in the event).
    `reconciler`: the deployed reconciler's name, whose reservation (once deployed) is
    already taken from the unreserved pool."""
    name, wanted = "concurrency", settings.controller_reserved_concurrency
    lam = clients("lambda")
    try:
        limits = lam.get_account_settings()["AccountLimit"]
        reserved_now = 0
        if reconciler:
            reserved_now = int((lam.get_function(FunctionName=reconciler).get("Concurrency") or {})
                               .get("ReservedConcurrentExecutions") or 0)
    except AWS_ERRORS as err:
        return Check(name, False, f"cannot read the account's concurrency ({error_text(err)})",
                     "the CLI's credentials need lambda:GetAccountSettings and lambda:GetFunction")
    total, unreserved = int(limits["ConcurrentExecutions"]), int(limits["UnreservedConcurrentExecutions"])
    if not wanted:
        return Check(name, True, f"controller_reserved_concurrency 0: Holdfast reserves none; {unreserved} of "
                                 f"{total} unreserved (an account out of concurrency throttles the controllers too)")
    # Already reserved by a deployed stack: only what is not reserved yet must fit.
    needed = 0 if reserved_now == wanted else wanted * CONTROLLER_FUNCTIONS
    room = unreserved - UNRESERVED_MINIMUM
    if needed > room:
        return Check(name, False,
                     f"{unreserved} of {total} concurrent executions unreserved: reserving {wanted} for each of "
                     f"Holdfast's {CONTROLLER_FUNCTIONS} functions ({needed}) would leave fewer than "
                     f"{UNRESERVED_MINIMUM}, which Lambda refuses (the deploy fails)",
                     "ask for a higher concurrency quota (Service Quotas, AWS Lambda, Concurrent executions), free "
                     "other functions' reservations, or set controller_reserved_concurrency lower (0 reserves none)")
    return Check(name, True, f"{unreserved} of {total} concurrent executions unreserved; Holdfast reserves {wanted} "
                             f"for each of its functions" + (" (in place)" if needed == 0 else f" ({needed} to come)"))


# The write actions that change a resource's tags: evaluated with the keys they write.
TAG_WRITES = frozenset({"TagResource", "UntagResource", "CreateOrUpdateTags", "DeleteTags", "AddTags", "RemoveTags"})
READ_VERBS = ("Describe", "List", "Get")


def kind_writes(kind: str) -> list[str]:
    """The writes on the kind's own service its actuator declares (@uses on its methods
    and its bases'): what engaging and restoring it call on the resource. (A write of
    another service a call needs, such as ecs:UpdateService behind RegisterScalableTarget,
    is on another resource: simulating it on this ARN would say nothing.)"""
    service = BY_NAME[kind].service.name + ":"
    actions: dict[str, None] = {}
    for klass in REGISTRY[kind].__mro__:
        prefix = f"{klass.__module__}.{klass.__qualname__}."
        for site, declared in iam.SITES.items():
            if site.startswith(prefix):
                actions.update(dict.fromkeys(sorted(a for a in declared if a.startswith(service)
                                                    and not a.split(":")[1].startswith(READ_VERBS))))
    return list(actions)


def kind_requests(kind: str, arn: str, settings) -> list[tuple[str, dict[str, Any]]]:
    """(action, request context) of every write engaging and restoring `kind` makes, on a
    resource carrying the selector: the actuator's declared writes, each in the context its
    kind declares (holdfast.core.kinds: tag_condition_prefixes, write_context)."""
    spec = BY_NAME[kind]
    key, value = settings.selector_key, settings.selector_value
    tagged = {f"{prefix}:ResourceTag/{key}": value for prefix in spec.tag_condition_prefixes}
    return [(action, {**tagged, "aws:TagKeys": TAG_KEYS} if action.split(":")[1] in TAG_WRITES
             else {**tagged, **dict(spec.write_context)})
            for action in kind_writes(kind)]


def sample_arn(kind: str, partition: str, region: str, account: str) -> str:
    return BY_NAME[kind].sample_arn.format(partition=partition, region=region, account=account)


def _context_entries(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"ContextKeyName": k, "ContextKeyValues": v if isinstance(v, list) else [v],
             "ContextKeyType": "stringList" if isinstance(v, list) else "string"} for k, v in context.items()]


@uses("iam:SimulatePrincipalPolicy", by=("cli", "readiness"))
def controller_permissions(clients, role_arn: str, kinds: Mapping[str, str], settings) -> list[Check]:
    """One check per kind: every write it needs is `allowed` for the role, by IAM's simulation."""
    checks = []
    for kind, arn in kinds.items():
        denied = []
        for action, context in kind_requests(kind, arn, settings):
            try:
                answer = clients("iam").simulate_principal_policy(
                    PolicySourceArn=role_arn, ActionNames=[action], ResourceArns=[arn],
                    ContextEntries=_context_entries(context))
                decision = answer["EvaluationResults"][0]["EvalDecision"]
            except AWS_ERRORS as err:
                checks.append(Check(f"controller-role {kind}", False, f"cannot simulate {role_arn}: {error_text(err)}",
                                    "the CLI's credentials need iam:SimulatePrincipalPolicy on the reconciler's role"))
                break
            if decision != "allowed":
                denied.append(f"{action} ({decision})")
        else:
            if denied:
                checks.append(Check(f"controller-role {kind}", False, f"{role_arn} may not: {', '.join(denied)} on {arn}",
                                    "deploy the stack's policy (policies/reconciler.json) unchanged, "
                                    "or find the permission boundary or SCP that denies it"))
            else:
                checks.append(Check(f"controller-role {kind}", True, f"{role_arn} may make every {kind} write on {arn}"))
    return checks


@uses("events:ListRules", by=("cli", "readiness"))
def health_rule(clients, region: str, settings) -> Check:
    try:
        rules = [r for page in clients("events").get_paginator("list_rules").paginate() for r in page.get("Rules", [])]
    except AWS_ERRORS as err:
        return Check("health-rule", False, f"cannot list rules ({error_text(err)})", "the CLI's credentials need events:ListRules")
    for rule in rules:
        try:
            pattern = json.loads(rule.get("EventPattern") or "{}")
        except json.JSONDecodeError:
            continue
        if "aws.health" not in (pattern.get("source") or []):
            continue
        detail = pattern.get("detail") or {}
        if region not in (detail.get("eventRegion") or []):
            continue
        if rule.get("State") != "ENABLED":
            return Check("health-rule", False, f"rule {rule['Name']} matches AWS Health issues for {region} but is {rule.get('State')}",
                         f"aws events enable-rule --name {rule['Name']} --region {region}")
        missing = [s for s in settings.health_services if s not in (detail.get("service") or [])]
        if missing:
            return Check("health-rule", False, f"rule {rule['Name']} does not match services {missing}",
                         "deploy the stack again with the current health_services setting")
        return Check("health-rule", True, f"rule {rule['Name']} matches AWS Health issues for {region} on detail.eventRegion")
    return Check("health-rule", False, f"no enabled EventBridge rule matches AWS Health issues with detail.eventRegion {region}",
                 "deploy Holdfast's stack in this region (npx cdk deploy), or redeploy it: the rule matches detail.eventRegion")


@uses("sqs:GetQueueUrl", "sqs:GetQueueAttributes", by=("cli", "readiness"))
def expired_queue(clients, arn: str | None, found_by: str) -> Check:
    if arn is None:
        return Check("expired-events-queue", False, found_by,
                     "deploy Holdfast's stack (it publishes /holdfast/<stack>/expired-queue-arn), or pass --expired-queue-arn")
    parts = arn.split(":")
    try:
        sqs = clients("sqs")
        url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"]).get("Attributes", {})
    except AWS_ERRORS as err:
        return Check("expired-events-queue", False, f"{arn} ({found_by}): {error_text(err)}",
                     "the parameter names a queue that is gone: redeploy the stack, or pass --expired-queue-arn")
    days = int(attributes.get("MessageRetentionPeriod", 345600)) // 86400
    return Check("expired-events-queue", True, f"{arn} ({found_by}), keeps messages {days} days")


@uses("ssm:GetParameter", "lambda:GetFunctionConfiguration", by=("readiness",))
def settings_drift(clients, parameter_name: str, reconciler_arn: str) -> Check:
    """The published settings against the reconciler's own (both canonical JSON, as the stack writes them)."""
    from holdfast.settings import ENV_VAR, Settings, SettingsError

    try:
        published = clients("ssm").get_parameter(Name=parameter_name)["Parameter"]["Value"]
        env = clients("lambda").get_function_configuration(FunctionName=reconciler_arn).get("Environment") or {}
        running = (env.get("Variables") or {}).get(ENV_VAR)
    except AWS_ERRORS as err:
        return Check("settings-drift", False, f"cannot read {parameter_name} or {reconciler_arn}: {error_text(err)}",
                     "the readiness role needs ssm:GetParameter on the settings parameter and "
                     "lambda:GetFunctionConfiguration on the reconciler")
    try:
        a, b = Settings.from_json(published).to_mapping(), Settings.from_json(running).to_mapping()
    except SettingsError as err:
        return Check("settings-drift", False, f"settings unreadable: {err}", "deploy the stack again")
    differ = sorted(k for k in a if a[k] != b.get(k))
    if differ:
        return Check("settings-drift", False, f"{parameter_name} and the reconciler differ in: {', '.join(differ)}",
                     "deploy the stack again (`npx cdk deploy`): one of them was changed outside it")
    return Check("settings-drift", True, f"the reconciler runs the settings {parameter_name} publishes")
