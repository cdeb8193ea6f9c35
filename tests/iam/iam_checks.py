"""The checks that tie policies/<role>.json to the code, as plain functions.

tests/iam runs them on the real policies and code, and on doctored inputs to show
each one reports drift. Every function returns a list of findings (empty = clean).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import botocore.session
from botocore import xform_name

# boto3 service name -> IAM prefix, for the services Holdfast's code may call.
SERVICE_PREFIX = {
    "application-autoscaling": "application-autoscaling",
    "arc-region-switch": "arc-region-switch",
    "autoscaling": "autoscaling",
    "cloudwatch": "cloudwatch",
    "dynamodb": "dynamodb",
    "ec2": "ec2",
    "ecs": "ecs",
    "elbv2": "elasticloadbalancing",
    "events": "events",
    "fis": "fis",
    "iam": "iam",
    "kms": "kms",
    "lambda": "lambda",
    "organizations": "organizations",
    "resourcegroupstaggingapi": "tag",
    "sns": "sns",
    "sqs": "sqs",
    "ssm": "ssm",
    "sts": "sts",
}
# Operations whose IAM action is not named after them: any one of the set is enough
# (IAM has no TransactWriteItems action: each item needs its own, PutItem, UpdateItem,
# DeleteItem or ConditionCheckItem), and an empty set means no permission is needed.
ACTIONS_FOR_OPERATION: dict[str, frozenset[str]] = {
    "lambda:Invoke": frozenset({"lambda:InvokeFunction"}),
    "dynamodb:TransactWriteItems": frozenset(
        {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}
    ),
    "dynamodb:TransactGetItems": frozenset({"dynamodb:GetItem"}),
    "sts:GetCallerIdentity": frozenset(),
}

READ_VERBS = ("Describe", "List", "Get", "BatchGet", "Query", "Scan")

# Writes no tag condition can scope, each with the reason (policies/README.md says more).
UNSCOPABLE_WRITES = {
    "lambda:UpdateEventSourceMapping": "a mapping does not carry its function's tags; the "
    "only condition, lambda:FunctionArn, cannot name a tag",
    "lambda:TagResource": "on event source mappings, which do not carry their function's tags "
    "(on functions it is tag-scoped)",
    "lambda:UntagResource": "as lambda:TagResource",
    "application-autoscaling:RegisterScalableTarget": "a target selected through its ECS "
    "service's tag carries no selector tag of its own",
    "application-autoscaling:TagResource": "as RegisterScalableTarget; limited to Holdfast's tag keys",
    "application-autoscaling:UntagResource": "as application-autoscaling:TagResource",
    "cloudwatch:PutMetricData": "takes no resource; limited by the cloudwatch:namespace condition instead",
}
# Writes confined to Holdfast's own resources by their exact ARN need no tag.
OWN_RESOURCES = ("${LedgerTableArn}", "${TopicArn}", "${ExpiredQueueArn}", "${ReconcilerFunctionArn}", "${ReconcilerRoleArn}")


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def granted(document: dict) -> set[str]:
    return {action for s in document["Statement"] for action in _as_list(s.get("Action", []))}


def drift(role: str, granted_actions: set[str], declared: set[str]) -> list[str]:
    """An action granted but used by no code, or used but not granted."""
    findings = []
    if extra := granted_actions - declared:
        findings.append(f"policies/{role}.json grants actions no @uses(by={role!r}) declares: {sorted(extra)}")
    if missing := declared - granted_actions:
        findings.append(f"code declares @uses(by={role!r}) actions policies/{role}.json does not grant: {sorted(missing)}")
    return findings


def wildcard_actions(document: dict) -> list[str]:
    return [
        f"{s.get('Sid', '?')}: {action}"
        for s in document["Statement"]
        for action in _as_list(s.get("Action", []))
        if "*" in action or "?" in action
    ] + [f"{s.get('Sid', '?')}: NotAction" for s in document["Statement"] if "NotAction" in s]


def is_write(action: str) -> bool:
    return not action.split(":", 1)[1].startswith(READ_VERBS)


def _tag_scoped(statement: dict) -> bool:
    return any("ResourceTag/" in key for keys in statement.get("Condition", {}).values() for key in keys)


def _key_scoped(statement: dict) -> bool:
    """Limited to named partitions of a DynamoDB table: every write's partition key must be
    one listed (ForAllValues) and present (Null false, so a request naming no key is not
    vacuously allowed)."""
    conditions = statement.get("Condition", {})
    listed = conditions.get("ForAllValues:StringEquals", {}).get("dynamodb:LeadingKeys")
    present = conditions.get("Null", {}).get("dynamodb:LeadingKeys") == "false"
    return bool(listed) and present


def _own_resource(statement: dict) -> bool:
    return all(r in OWN_RESOURCES for r in _as_list(statement["Resource"]))


def unscoped_writes(document: dict, unscopable: Iterable[str] = UNSCOPABLE_WRITES) -> list[str]:
    """Write actions neither limited by a tag condition, nor to Holdfast's own resources,
    nor to named partitions of the ledger (dynamodb:LeadingKeys), nor on the documented list of writes no service condition can scope."""
    return [
        f"{s.get('Sid', '?')}: {action}"
        for s in document["Statement"]
        if not (_tag_scoped(s) or _own_resource(s) or _key_scoped(s))
        for action in _as_list(s.get("Action", []))
        if is_write(action) and action not in unscopable
    ]


# ---- calls in the source ---------------------------------------------------------


@functools.cache
def operations() -> dict[str, frozenset[str]]:
    """snake_case method name -> the IAM actions it may mean, across SERVICE_PREFIX."""
    session = botocore.session.get_session()
    found: dict[str, set[str]] = {}
    for service, prefix in SERVICE_PREFIX.items():
        for operation in session.get_service_model(service).operation_names:
            action = f"{prefix}:{operation}"
            found.setdefault(xform_name(operation), set()).update(ACTIONS_FOR_OPERATION.get(action, {action}))
    return {name: frozenset(actions) for name, actions in found.items()}


@functools.cache
def waiters() -> dict[str, frozenset[str]]:
    """waiter name -> the IAM actions of the operation it polls."""
    session = botocore.session.get_session()
    found: dict[str, set[str]] = {}
    for service, prefix in SERVICE_PREFIX.items():
        try:
            model = session.get_waiter_model(service)
        except Exception:  # botocore raises DataNotFoundError for services without waiters
            continue
        for name in model.waiter_names:
            found.setdefault(xform_name(name), set()).add(f"{prefix}:{model.get_waiter(name).operation}")
    return {name: frozenset(actions) for name, actions in found.items()}


@dataclass(frozen=True)
class Call:
    where: str
    name: str
    actions: frozenset[str]


def aws_calls(root: Path) -> list[Call]:
    """Every call in `root` that names a botocore operation, paginator or waiter.

    Calls made through a helper that takes the operation's name as a string are seen too:
    `self._call("tag_resource", ...)`, `call(client, "describe_x")`,
    `getattr(client, "suspend_processes")(...)` — any call whose (first, or for getattr
    second) argument is a string naming an operation. Method calls on `self`/`cls` that
    only *share* an operation's name (`self.describe(...)`) are Holdfast's own and
    skipped; everything else that carries an operation's name is taken to be an AWS
    call, which errs on the side of declaring too much rather than missing a call.
    """
    ops, waits = operations(), waiters()
    calls = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            pager = isinstance(node.func, ast.Attribute) and node.func.attr in ("get_paginator", "get_waiter")
            named = None if pager else _named_operation(node)
            if named is not None and ops.get(named):
                calls.append(Call(where, f"{_callee(node)}({named!r})", ops[named]))
                continue
            if not isinstance(node.func, ast.Attribute):
                continue
            receiver = node.func.value
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
                continue
            name = node.func.attr
            if name in ("get_paginator", "get_waiter") and node.args and isinstance(node.args[0], ast.Constant):
                target = node.args[0].value
                actions = (ops if name == "get_paginator" else waits).get(target)
                calls.append(Call(where, f"{name}({target!r})", actions or frozenset({f"?:{target}"})))
            elif ops.get(name):
                calls.append(Call(where, name, ops[name]))
    return calls


def _named_operation(node: ast.Call) -> str | None:
    """The string an operation-by-name helper is given: its first argument, or
    getattr's second; None when there is no such string."""
    args = node.args
    if isinstance(node.func, ast.Name) and node.func.id == "getattr":
        args = args[1:]
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[0].value
    return None


def _callee(node: ast.Call) -> str:
    return ast.unparse(node.func)


def undeclared_calls(calls: Iterable[Call], declared: set[str]) -> list[str]:
    return [
        f"{c.where}: {c.name}() needs one of {sorted(c.actions)}, declared by no @uses"
        for c in calls
        if not c.actions & declared
    ]
