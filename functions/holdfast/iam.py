"""IAM actions, declared next to the code that needs them (as Cloud Custodian does).

Every function that calls AWS is decorated with `@uses("service:Action", ..., by=...)`.
`by` names the principals that run that code: the `reconciler` and `detector`
Lambda roles (whose policies live in policies/<role>.json), or `cli` (the
operator's own credentials, no policy of ours). tests/iam checks that each role's
policy grants exactly what its code declares, and that every AWS call in the source
is declared.

Pure: no boto3.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable, TypeVar

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
