"""IAM SimulatePrincipalPolicy, which moto 5.2.5 lacks, for tests and the demo.

Request (IAM API reference, SimulatePrincipalPolicy): PolicySourceArn (required: a
user, group or role), ActionNames (required), ResourceArns (default `*`),
PolicyInputList (more identity-policy documents to include), ContextEntries
(ContextKeyName, ContextKeyValues, ContextKeyType), MaxItems and Marker. The policies
simulated are those of the principal: for a role or a group its inline and attached
managed policies (the default version), for a user also those of every group it
belongs to ("If you specify a user, the simulation also includes all policies that are
attached to any groups the user belongs to"), plus PolicyInputList.

Response: EvaluationResults, one per action ("The simulator now returns a single
EvaluationResult per action, regardless of how many resource ARNs are provided", IAM
API reference, EvaluationResult), each with EvalActionName, EvalResourceName (the one
resource, or `*`), EvalDecision (the most restrictive decision over the resources:
explicitDeny, then implicitDeny, then allowed), MatchedStatements (SourcePolicyId,
SourcePolicyType: the deny statements when denied, else the allow statements),
MissingContextValues (condition keys the matching statements name that the request's
context does not give), and ResourceSpecificResults (EvalResourceName,
EvalResourceDecision, MatchedStatements, MissingContextValues) per resource;
IsTruncated and Marker past MaxItems results. Errors: NoSuchEntity (404) for a
principal that does not exist, InvalidInput (400) for a PolicySourceArn that is not a
user, group or role, PolicyEvaluation (500) for a policy this evaluator cannot
evaluate (holdfast_fixtures.iam_policy.Unsupported: an operator or a policy variable it
does not implement), so no test passes on a condition nothing evaluated.

Statements are evaluated by holdfast_fixtures.iam_policy (Allow / Deny, Action,
NotAction, Resource, NotResource, the condition operators it lists). Not simulated:
permission boundaries (PermissionsBoundaryPolicyInputList), service control policies,
session policies, resource-based policies (ResourcePolicy, ResourceOwner, CallerArn,
ResourceHandlingOption are accepted and ignored), cross-account evaluation
(EvalDecisionDetails), statement positions (StartPosition / EndPosition), and the
global condition keys IAM fills in itself (aws:CurrentTime, ...): give them as
ContextEntries.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from . import iam_policy

ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY = "allowed", "explicitDeny", "implicitDeny"
_SEVERITY = {ALLOWED: 0, IMPLICIT_DENY: 1, EXPLICIT_DENY: 2}
MAX_ITEMS = 100   # the API's default page size


class SimulationError(Exception):
    """An error answer of the API: code, HTTP status, message."""

    def __init__(self, code: str, status: int, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


class Policy:
    """One identity-policy document, named as the simulator names its source."""

    def __init__(self, source_id: str, source_type: str, document: Mapping[str, Any] | str):
        self.source_id, self.source_type = source_id, source_type
        self.document = json.loads(document) if isinstance(document, str) else dict(document)

    def statements(self) -> list[Mapping[str, Any]]:
        statements = self.document.get("Statement", [])
        return statements if isinstance(statements, list) else [statements]


def _context(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """ContextEntries as iam_policy's request context: a list for the *List types."""
    context: dict[str, Any] = {}
    for entry in entries or ():
        values = list(entry.get("ContextKeyValues") or [])
        many = str(entry.get("ContextKeyType", "string")).lower().endswith("list")
        context[entry["ContextKeyName"]] = values if many else (values[0] if values else None)
    return context


def _condition_keys(statement: Mapping[str, Any]) -> set[str]:
    return {key for block in (statement.get("Condition") or {}).values() for key in block}


def _one(policies: list[Policy], action: str, resource: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """The decision for one action on one resource."""
    allows, denies, missing = [], [], set()
    known = {k.lower() for k in context}
    for policy in policies:
        for statement in policy.statements():
            try:
                acts = iam_policy._action_matches(statement, action) and iam_policy._resource_matches(statement, resource)
                if not acts:
                    continue
                missing |= {k for k in _condition_keys(statement) if k.lower() not in known}
                if not iam_policy._conditions_match(statement, context):
                    continue
            except iam_policy.Unsupported as err:
                raise SimulationError("PolicyEvaluation", 500, f"{policy.source_id}: {err}") from err
            matched = {"SourcePolicyId": policy.source_id, "SourcePolicyType": policy.source_type}
            (denies if statement.get("Effect") == "Deny" else allows).append(matched)
    decision = EXPLICIT_DENY if denies else ALLOWED if allows else IMPLICIT_DENY
    return {"EvalResourceName": resource, "EvalResourceDecision": decision,
            "MatchedStatements": denies if denies else allows, "MissingContextValues": sorted(missing)}


def simulate(policies: list[Policy], request: Mapping[str, Any]) -> dict[str, Any]:
    """The SimulatePrincipalPolicy answer for `request` over the principal's `policies`."""
    actions = list(request.get("ActionNames") or [])
    if not actions:
        raise SimulationError("InvalidInput", 400, "ActionNames is required")
    policies = policies + [Policy(f"PolicyInputList.{i}", "none", d)
                           for i, d in enumerate(request.get("PolicyInputList") or [], 1)]
    resources = list(request.get("ResourceArns") or ["*"])
    context = _context(request.get("ContextEntries") or [])
    results = []
    for action in actions:
        each = [_one(policies, action, resource, context) for resource in resources]
        worst = max(each, key=lambda r: _SEVERITY[r["EvalResourceDecision"]])
        results.append({
            "EvalActionName": action,
            "EvalResourceName": resources[0] if len(resources) == 1 else "*",
            "EvalDecision": worst["EvalResourceDecision"],
            "MatchedStatements": worst["MatchedStatements"],
            "MissingContextValues": sorted({k for r in each for k in r["MissingContextValues"]}),
            "ResourceSpecificResults": each,
        })
    start = int(request.get("Marker") or 0)
    size = int(request.get("MaxItems") or MAX_ITEMS)
    page = results[start:start + size]
    answer: dict[str, Any] = {"EvaluationResults": page, "IsTruncated": start + size < len(results)}
    if answer["IsTruncated"]:
        answer["Marker"] = str(start + size)
    return answer


def principal_policies(backend, arn: str) -> list[Policy]:
    """The identity policies of a user, group or role in moto's IAM backend."""
    parts = arn.split(":", 5)
    if len(parts) < 6 or parts[2] != "iam":
        raise SimulationError("InvalidInput", 400, f"PolicySourceArn {arn!r} is not an IAM ARN")
    kind, _, name = parts[5].partition("/")
    name = name.rsplit("/", 1)[-1]
    finders = {"role": backend.get_role, "user": backend.get_user, "group": backend.get_group}
    if kind not in finders:
        raise SimulationError("InvalidInput", 400,
                              f"PolicySourceArn {arn!r} must be a user, group or role")
    try:
        entity = finders[kind](name)
    except Exception as err:   # moto's NoSuchEntity / IAMNotFoundException
        raise SimulationError("NoSuchEntity", 404, f"The {kind} with name {name} cannot be found.") from err
    policies = _entity_policies(entity, kind)
    if kind == "user":
        for group in backend.get_groups_for_user(name):
            policies += _entity_policies(group, "group")
    return policies


def _entity_policies(entity, kind: str) -> list[Policy]:
    out = [Policy(name, kind, document) for name, document in sorted((getattr(entity, "policies", None) or {}).items())]
    for policy in (getattr(entity, "managed_policies", None) or {}).values():
        document = next((v.document for v in policy.versions if v.is_default), None)
        if document is not None:
            source = "aws-managed" if ":aws:policy/" in policy.arn else "user-managed"
            out.append(Policy(policy.name, source, document))
    return out
