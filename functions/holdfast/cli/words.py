"""The CHANGES column in plain words: what each recorded key's change means on the resource;
and `status`'s SETTING column: each recorded key and its values as an operator reads them.

The actuators record changes under their own keys (an Auto Scaling process name mapped to
"suspended", NLB attributes by short names). Each kind says its keys the way the AWS
console does (`Kind.words`, declared beside the kind in holdfast.core.kinds); here they
are looked up by kind, and a key a kind has no words for is printed as it is recorded
(`key: from -> to`).
"""

from __future__ import annotations

import json
from typing import Any

from holdfast.core.kinds import BY_NAME, Words


def _raw(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _words(kind: str) -> Words | None:
    found = BY_NAME.get(kind)
    return found.words if found else None


def change(kind: str, key: str, old: Any, new: Any) -> str:
    """One change in words, e.g. `ReplaceUnhealthy suspended`, `DNS failover off (was below 1)`."""
    words = _words(kind)
    said = words.change(key, old, new) if words else ""
    return said or f"{key}: {_raw(old)} -> {_raw(new)}"


def drift(kind: str, key: str, current: Any) -> str:
    return f"{key}: the owner's {_raw(current)} kept (changed while engaged)"


def setting(kind: str, key: str) -> str:
    """A recorded key's name for `status`, e.g. `process ReplaceUnhealthy`, `DNS failover: minimum healthy targets`."""
    words = _words(kind)
    return (words.setting(key) if words else None) or key


def value(kind: str, key: str, v: Any) -> str:
    """A recorded value for `status`: `suspended`, `uncapped`, `6 h (AWS's default)`, `off`."""
    words = _words(kind)
    said = words.value(key, v) if words else None
    return _raw(v) if said is None else said
