"""Holdfast's own resources: never engaged, whatever their tags.

A construct user who tags a whole stack (`Tags.of(stack).add("holdfast:protect", "true")`)
tags Holdfast's own functions and queues too. Holdfast must not bound its own async
configs or cap its own mappings in the worst hour, so discovery leaves out every
resource this value names, for every kind, and the walk reports each as `skipped` with
the reason (`plan` shows it).

How a resource is known as Holdfast's in a real account:
- CloudFormation tags every resource it creates with `aws:cloudformation:stack-id` and
  `aws:cloudformation:logical-id` (CloudFormation User Guide, "Resource tag"; the `aws:`
  prefix is reserved: nobody can set or remove them). The construct gives its controllers
  its stack's id and the logical IDs of its resources Holdfast could act on
  (holdfast_cdk.construct: the HOLDFAST_STACK_ID and HOLDFAST_OWN_LOGICAL_IDS variables);
  a resource whose tags carry both is Holdfast's.
- Function names, for the propagation of those tags varies by resource type: the
  reconciler knows its own name from Lambda (AWS_LAMBDA_FUNCTION_NAME), and the CLI reads
  every Holdfast stack's function names, stack id and logical IDs from SSM
  (`<parameter prefix>/own-resources`), as it finds the expired-events queue.

A mapping is Holdfast's when its function is. Pure: no boto3, no environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

STACK_ID_TAG = "aws:cloudformation:stack-id"
LOGICAL_ID_TAG = "aws:cloudformation:logical-id"


@dataclass(frozen=True)
class Own:
    # (stack id, logical id) of each of Holdfast's resources, as CloudFormation tags them.
    resources: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    # Names of Holdfast's Lambda functions.
    functions: frozenset[str] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.resources or self.functions)

    def holds(self, arn: str, tags: Mapping[str, str] | None = None) -> bool:
        """Whether `arn` (with its `tags`, when known) is one of Holdfast's own resources."""
        tags = tags or {}
        stack, logical = tags.get(STACK_ID_TAG), tags.get(LOGICAL_ID_TAG)
        if stack and logical and (stack, logical) in self.resources:
            return True
        parts = arn.split(":")
        return len(parts) > 6 and parts[2] == "lambda" and parts[5] == "function" and parts[6] in self.functions

    def why(self, arn: str, tags: Mapping[str, str] | None = None) -> dict[str, str]:
        """The note an outcome carries for a resource Holdfast leaves alone as its own."""
        tags = tags or {}
        how = (f"CloudFormation stack {tags.get(STACK_ID_TAG)}, logical ID {tags.get(LOGICAL_ID_TAG)}"
               if (tags.get(STACK_ID_TAG), tags.get(LOGICAL_ID_TAG)) in self.resources else "its function name")
        return {"why": f"one of Holdfast's own resources ({how}): never engaged, whatever its tags",
                "fix": "nothing to do; to stop seeing it, keep the selector tag off Holdfast's own resources"}

    def __or__(self, other: "Own") -> "Own":
        return Own(self.resources | other.resources, self.functions | other.functions)

    def to_json(self) -> str:
        return json.dumps({"resources": sorted(list(r) for r in self.resources), "functions": sorted(self.functions)})


NOT_OWN = Own()


def own(stack_id: str | None = None, logical_ids: Iterable[str] = (), functions: Iterable[str] = ()) -> Own:
    ids = [i for i in logical_ids if i]
    return Own(frozenset((stack_id, i) for i in ids) if stack_id else frozenset(), frozenset(f for f in functions if f))


def from_document(document: str | Mapping[str, Any]) -> Own:
    """The value a stack publishes for the CLI (`<parameter prefix>/own-resources`):
    {"stack_id", "logical_ids": [...], "functions": [...]}. ValueError when malformed."""
    try:
        doc = json.loads(document) if isinstance(document, str) else dict(document)
        return own(doc.get("stack_id"), list(doc.get("logical_ids") or []), list(doc.get("functions") or []))
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"not a Holdfast own-resources document: {err}") from err
