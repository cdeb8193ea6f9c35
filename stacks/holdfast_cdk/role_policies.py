"""The controllers' IAM policies, from policies/<role>.json: the repository's top-level
`policies/`, shipped in the wheel as `holdfast_cdk/policies/` (pyproject.toml's package-dir).

The JSON documents are the reviewable source of truth: tests/iam compares their
actions with the `@uses` declarations in the code. They carry placeholders such as
`${SelectorKey}` or `${LedgerTableArn}` that are filled here at synth (holdfast.iam.fill). A placeholder is
a name without a colon, so IAM's own policy variables (`${aws:username}`) pass
through untouched, and an unknown name fails synth instead of reaching IAM.

A statement whose `Action` list is empty is a slot kept ready for code that will need
it (adding an action is then a one-line edit); it is left out of the rendered policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from aws_cdk import aws_iam as iam

from holdfast.iam import fill


def _policies_dir() -> Path:
    here = Path(__file__).resolve().parent
    packaged = here / "policies"  # an installed wheel
    return packaged if packaged.is_dir() else here.parents[1] / "policies"  # a clone: <root>/policies


POLICIES_DIR = _policies_dir()


def read(role: str, directory: Path | None = None) -> dict[str, Any]:
    """The raw document for `role`, placeholders unfilled."""
    return json.loads(((directory or POLICIES_DIR) / f"{role}.json").read_text())


def render(document: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any] | None:
    """Fill placeholders and drop empty slots; None when no statement has an action."""
    statements = [fill(s, values) for s in document["Statement"] if s.get("Action")]
    if not statements:
        return None
    return {"Version": document["Version"], "Statement": statements}


def document(role: str, values: Mapping[str, str], directory: Path | None = None) -> iam.PolicyDocument | None:
    rendered = render(read(role, directory), values)
    return iam.PolicyDocument.from_json(rendered) if rendered else None
