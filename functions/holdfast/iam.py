"""IAM actions, declared next to the code that needs them (as Cloud Custodian does).

Every function that calls AWS is decorated with `@uses("service:Action", ..., by=...)`.
`by` names the principals that run that code: the `reconciler` and `detector`
Lambda roles (whose policies live in policies/<role>.json), or `cli` (the
operator's own credentials, no policy of ours). tests/iam checks that each role's
policy grants exactly what its code declares, and that every AWS call in the source
is declared.

`fill` puts the deployment's values into a policy document of policies/: one function for
the construct that renders it at synth (holdfast_cdk.role_policies), the fixtures that
enforce it against moto (holdfast_fixtures.iam_policy), the demo's server and the tests.

Pure: no boto3.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, TypeVar

ROLES = ("reconciler", "detector", "cli", "readonly", "operator", "readiness", "regionswitch")

F = TypeVar("F", bound=Callable)

# role -> actions; filled at import time by @uses.
DECLARED: dict[str, set[str]] = defaultdict(set)
# qualified function name -> actions, for error messages.
SITES: dict[str, set[str]] = defaultdict(set)


def uses(*actions: str, by: Iterable[str] = ("reconciler",)) -> Callable[[F], F]:
    """Declare the IAM actions a function's AWS calls need, and who runs it."""
    roles = tuple(by)
    for role in roles:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {ROLES}")
    for action in actions:
        if action.count(":") != 1 or "*" in action:
            raise ValueError(f"IAM action must be 'service:Action' without wildcards, got {action!r}")

    def mark(fn: F) -> F:
        for role in roles:
            DECLARED[role].update(actions)
        SITES[f"{fn.__module__}.{fn.__qualname__}"].update(actions)
        return fn

    return mark


# A placeholder in policies/<role>.json: `${Name}`, a name without a colon, so IAM's own
# policy variables (`${aws:username}`, `${aws:PrincipalTag/team}`) pass through untouched.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*)\}")


def fill(node: Any, values: Mapping[str, str], *, strict: bool = True) -> Any:
    """A policy document, or any part of one, with its `${Name}` placeholders filled from
    `values`. strict: a name `values` lacks is a ValueError naming it (at synth, so that an
    unknown name never reaches IAM); otherwise it is left as written (a test that fills
    only what it checks)."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        if strict:
            raise ValueError(f"policy placeholder ${{{name}}} is not one of: {', '.join(sorted(values))}")
        return match.group(0)

    if isinstance(node, str):
        return PLACEHOLDER.sub(value, node)
    if isinstance(node, list):
        return [fill(item, values, strict=strict) for item in node]
    if isinstance(node, dict):
        return {fill(key, values, strict=strict): fill(item, values, strict=strict) for key, item in node.items()}
    return node
