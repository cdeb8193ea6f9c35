"""`holdfast audit`'s findings, and the rules that are not a kind's.

A finding is one setting of the account's own automation that makes recovery from a
regional impairment worse. Each kind's rule (`Kind.audit_rule`, holdfast.core.kinds)
takes one resource as the AWS API describes it (plain dicts) and the settings, and
returns a Finding or None; its actuator's `audit` lists the account's resources of the
kind and hands each to it. The two rules here are about Lambda functions as a whole:
their SDK retry mode, and whether their role can deliver to Holdfast's expired-events
queue.

For each mechanism Holdfast engages, a finding carries the exact AWS CLI command that
puts it into Holdfast's posture (the settings' values) and the one that puts back what
is there now; the other findings (AWS_RETRY_MODE, a role that may not deliver) have
nothing to pause, and their commands are None.
Pure: no boto3, no clock.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

RETRY_MODES = ("standard", "adaptive")

# What an audit reader says while it reads (the CLI's progress line).
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Finding:
    kind: str               # asg, esm, async, nlb, scalable-target, function
    resource: str           # ARN, or the name where the API gives no ARN
    problem: str
    pause_command: str | None = None
    resume_command: str | None = None
    name: str = ""          # short name for tables; not part of the JSON shape
    fix_command: str | None = None   # what fixes it, where that is not a pause (in the JSON when set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "problem": self.problem,
            "pause_command": self.pause_command,
            "resume_command": self.resume_command,
            **({"fix_command": self.fix_command} if self.fix_command else {}),
        }


@dataclass
class AuditResult:
    findings: list[Finding] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)   # "what: why", one per resource or listing

    def add(self, finding: Finding | None) -> None:
        if finding is not None:
            self.findings.append(finding)

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings]}


def aws(region: str, *words: Any) -> str:
    """An AWS CLI command line, every word shell-quoted."""
    return shlex.join(["aws", *map(str, words), "--region", region])


def selected(tags: Any, settings) -> bool:
    """Whether a resource's tags (a list of Key/Value pairs or a mapping) carry the selector."""
    pairs = tags.items() if isinstance(tags, Mapping) else ((t.get("Key"), t.get("Value")) for t in tags or ())
    return any(k == settings.selector_key and v == settings.selector_value for k, v in pairs)


def retry_mode_finding(function: Mapping[str, Any]) -> Finding | None:
    """A function whose environment does not choose a retry mode with a retry quota."""
    variables = (function.get("Environment") or {}).get("Variables") or {}
    mode = variables.get("AWS_RETRY_MODE")
    if mode is not None and mode.strip().lower() in RETRY_MODES:
        return None
    what = "AWS_RETRY_MODE not set" if mode is None else f"AWS_RETRY_MODE={mode}"
    return Finding(
        kind="function",
        resource=function["FunctionArn"],
        name=function["FunctionName"],
        problem=(
            f"{what} (want standard or adaptive): SDKs that default to legacy retries have no "
            "retry quota, so their retries multiply the load on a recovering dependency"
        ),
    )


def destination_finding(function: Mapping[str, Any], decision: str, queue_arn: str,
                        grant_command: str) -> Finding | None:
    """A selected function whose execution role may not send to Holdfast's expired-events
    queue (`decision` is IAM's simulation of sqs:SendMessage by that role on the queue:
    allowed, implicitDeny or explicitDeny). Lambda refuses the queue as its on-failure
    destination, so while engaged Holdfast bounds only its retries and keeps its event
    age: a long age, and events kept, but not in Holdfast's queue."""
    if decision == "allowed":
        return None
    return Finding(
        kind="async",
        resource=function["FunctionArn"],
        name=function["FunctionName"],
        problem=(f"its execution role may not send to Holdfast's expired-events queue ({decision} for sqs:SendMessage "
                 f"on {queue_arn}): Lambda refuses the queue as destination, so while engaged only its retries are "
                 "bounded and its event age is kept"),
        fix_command=grant_command,
    )
