"""A small IAM policy evaluator for tests: does a set of identity-policy documents allow
one request? Test support only (never shipped); moto evaluates no IAM at all.

It follows the IAM User Guide's "Policy evaluation logic" for identity-based policies
of one account: an explicit Deny in any statement wins; otherwise some Allow must match;
otherwise the request is implicitly denied. A statement matches when its Action (or
NotAction), its Resource (or NotResource) and every condition in its Condition block
match. Matching follows the IAM JSON policy element reference:

- Action: case-insensitive, `*` and `?` wildcards.
- Resource: case-sensitive ARN match, `*` and `?` wildcards (which match across `:`).
- Condition: every operator must match, and within an operator every key; a key's
  values are OR-ed. Condition keys are case-insensitive; the values of the request
  context are strings or lists of strings (multivalued keys such as aws:TagKeys).
  Operators: StringEquals, StringNotEquals, StringEqualsIgnoreCase, StringLike,
  StringNotLike, ArnEquals, ArnLike, ArnNotEquals, ArnNotLike, Bool, Null, and the
  ForAllValues: / ForAnyValue: set qualifiers of the string and ARN operators. A
  single-valued operator on a key absent from the context does not match (a
  ...Not... operator does match: "If the key that you specify in a policy condition is
  not present in the request context, the values do not match" — negated operators
  return true). ForAllValues on an absent or empty key matches; ForAnyValue does not
  (IAM User Guide, "Set operators for multivalued context keys").
  Any other operator raises, so a test never passes on a condition nothing evaluated.

Policy variables (`${aws:username}`) are not substituted; a policy under test with one
raises as well.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

Context = Mapping[str, "str | list[str] | bool"]


class Unsupported(ValueError):
    """A policy uses something this evaluator does not implement."""


def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _wild(pattern: str, value: str, *, case: bool) -> bool:
    if "${" in pattern:
        raise Unsupported(f"policy variable in {pattern!r}")
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _action_matches(statement: Mapping[str, Any], action: str) -> bool:
    if "Action" in statement:
        return any(_wild(p, action, case=False) for p in _list(statement["Action"]))
    if "NotAction" in statement:
        return not any(_wild(p, action, case=False) for p in _list(statement["NotAction"]))
    raise Unsupported("statement without Action or NotAction")


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    if "Resource" in statement:
        return any(_wild(p, resource, case=True) for p in _list(statement["Resource"]))
    if "NotResource" in statement:
        return not any(_wild(p, resource, case=True) for p in _list(statement["NotResource"]))
    raise Unsupported("statement without Resource or NotResource")


def _lookup(context: Context, key: str) -> Any:
    for k, v in context.items():
        if k.lower() == key.lower():
            return v
    return None


_SCALAR = {
    "StringEquals": lambda want, have: want == have,
    "StringEqualsIgnoreCase": lambda want, have: want.lower() == have.lower(),
    "StringLike": lambda want, have: _wild(want, have, case=True),
    "ArnEquals": lambda want, have: want == have,
    "ArnLike": lambda want, have: _wild(want, have, case=True),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike",
            "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _condition(operator: str, key: str, wanted: Any, context: Context) -> bool:
    wanted = [str(w) if not isinstance(w, bool) else str(w).lower() for w in _list(wanted)]
    have = _lookup(context, key)
    if operator == "Null":
        absent = have is None or have == []
        return any((w == "true") == absent for w in wanted)
    if operator == "Bool":
        return have is not None and any(str(have).lower() == w for w in wanted)
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise Unsupported(f"condition operator {operator}")
    negated = base in _NEGATED
    test = _SCALAR.get(_NEGATED.get(base, base))
    if test is None:
        raise Unsupported(f"condition operator {operator}")
    values = [] if have is None else [str(v) for v in _list(have)]

    def one(value: str) -> bool:
        hit = any(test(w, value) for w in wanted)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(one(v) for v in values)
    if qualifier == "ForAnyValue":
        return any(one(v) for v in values)
    if have is None:
        return negated
    if len(values) != 1:
        raise Unsupported(f"single-valued operator {operator} on multivalued key {key}")
    return one(values[0])


def _conditions_match(statement: Mapping[str, Any], context: Context) -> bool:
    return all(
        _condition(operator, key, wanted, context)
        for operator, keys in (statement.get("Condition") or {}).items()
        for key, wanted in keys.items()
    )


def statement_matches(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool:
    return (_action_matches(statement, action) and _resource_matches(statement, resource)
            and _conditions_match(statement, context))


def decide(documents: Iterable[Mapping[str, Any] | str], action: str, resource: str,
           context: Context | None = None) -> tuple[bool, list[str]]:
    """(allowed, the Sids or indexes of the statements that decided it)."""
    context = context or {}
    allows, denies = [], []
    for d, document in enumerate(documents):
        doc = json.loads(document) if isinstance(document, str) else document
        for i, statement in enumerate(_list(doc.get("Statement", []))):
            if statement_matches(statement, action, resource, context):
                (denies if statement.get("Effect") == "Deny" else allows).append(statement.get("Sid") or f"{d}.{i}")
    if denies:
        return False, denies
    return bool(allows), allows


def allows(documents: Iterable[Mapping[str, Any] | str], action: str, resource: str,
           context: Context | None = None) -> bool:
    return decide(documents, action, resource, context)[0]



# ---- enforcing a policy on moto's answers ------------------------------------------------

# The writes whose statements carry tag conditions, and where each request names its
# resource(s): (boto3 service, operation) -> a function of the request's parameters.
_TARGETS = {
    ("autoscaling", "SuspendProcesses"): lambda p: [p["AutoScalingGroupName"]],
    ("autoscaling", "ResumeProcesses"): lambda p: [p["AutoScalingGroupName"]],
    ("autoscaling", "CreateOrUpdateTags"): lambda p: sorted({t["ResourceId"] for t in p["Tags"]}),
    ("autoscaling", "DeleteTags"): lambda p: sorted({t["ResourceId"] for t in p["Tags"]}),
    ("lambda", "PutFunctionEventInvokeConfig"): lambda p: [p["FunctionName"]],
    ("lambda", "UpdateFunctionEventInvokeConfig"): lambda p: [p["FunctionName"]],
    ("lambda", "DeleteFunctionEventInvokeConfig"): lambda p: [p["FunctionName"]],
    ("lambda", "TagResource"): lambda p: [p["Resource"]],
    ("lambda", "UntagResource"): lambda p: [p["Resource"]],
    ("elbv2", "ModifyTargetGroupAttributes"): lambda p: [p["TargetGroupArn"]],
    ("elbv2", "AddTags"): lambda p: list(p["ResourceArns"]),
    ("elbv2", "RemoveTags"): lambda p: list(p["ResourceArns"]),
}
_PREFIX = {"autoscaling": "autoscaling", "lambda": "lambda", "elbv2": "elasticloadbalancing"}


class Enforced:
    """Holdfast's clients answer AccessDenied wherever `documents` (filled policies) deny
    a write whose statements carry tag conditions, evaluated on the resource's tags at the
    moment of the call, as IAM does; moto evaluates no IAM. `denied` lists what was refused.

        with Enforced(clients, [holdfast.iam.fill(policies.read("reconciler"), values)]) as iam: ...
    """

    def __init__(self, clients, documents, region: str = "us-east-1"):
        import boto3

        self.documents = list(documents)
        self.denied: list[tuple[str, str]] = []
        self._clients = {s: clients(s) for s in _PREFIX}
        self._reader = {s: boto3.client(s, region_name=region) for s in _PREFIX}   # not enforced: the evaluator's reads

    def __enter__(self):
        for client in self._clients.values():
            client.meta.events.register("before-parameter-build", self._check)
        return self

    def __exit__(self, *exc):
        for client in self._clients.values():
            client.meta.events.unregister("before-parameter-build", self._check)

    def _check(self, params, model, **_):
        from botocore.exceptions import ClientError

        service = model.service_model.service_name
        targets = _TARGETS.get((service, model.name))
        if targets is None:
            return
        action = f"{_PREFIX[service]}:{model.name}"
        for target in targets(params):
            arn, tags = self._resource(service, target)
            context: dict[str, Any] = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
            if service == "autoscaling":
                context.update({f"autoscaling:ResourceTag/{k}": v for k, v in tags.items()})
            keys = _request_tag_keys(service, model.name, params)
            if keys is not None:
                context["aws:TagKeys"] = keys
            if not allows(self.documents, action, arn, context):
                self.denied.append((action, arn))
                raise ClientError({"Error": {"Code": "AccessDenied", "Message": (
                    f"User is not authorized to perform: {action} on resource: {arn} because no identity-based "
                    "policy allows the action")}, "ResponseMetadata": {"HTTPStatusCode": 403}}, model.name)

    def _resource(self, service: str, target: str) -> tuple[str, dict[str, str]]:
        reader = self._reader[service]
        if service == "autoscaling":
            [group] = reader.describe_auto_scaling_groups(AutoScalingGroupNames=[target])["AutoScalingGroups"]
            return group["AutoScalingGroupARN"], {t["Key"]: t["Value"] for t in group.get("Tags", [])}
        if service == "lambda":
            arn = target if target.startswith("arn:") else reader.get_function(FunctionName=target)["Configuration"]["FunctionArn"]
            arn = ":".join(arn.split(":")[:7])   # a qualifier's config: its function's tags
            return arn, reader.list_tags(Resource=arn)["Tags"]
        descriptions = reader.describe_tags(ResourceArns=[target])["TagDescriptions"]
        return target, {t["Key"]: t["Value"] for d in descriptions for t in d["Tags"]}


def _request_tag_keys(service: str, operation: str, params) -> list[str] | None:
    if service == "autoscaling" and operation in ("CreateOrUpdateTags", "DeleteTags"):
        return sorted({t["Key"] for t in params["Tags"]})
    if service == "lambda" and operation == "TagResource":
        return sorted(params["Tags"])
    if service == "lambda" and operation == "UntagResource":
        return sorted(params["TagKeys"])
    if service == "elbv2" and operation == "AddTags":
        return sorted({t["Key"] for t in params["Tags"]})
    if service == "elbv2" and operation == "RemoveTags":
        return sorted(params["TagKeys"])
    return None
