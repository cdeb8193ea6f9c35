"""What a restore writes back: a pure decision per key, from original, applied and current.

| current is ...            | decision      | why                                          |
|---------------------------|---------------|----------------------------------------------|
| the original              | NOTHING       | already as the owner had it                  |
| what Holdfast applied     | WRITE         | put the original back                        |
| anything else             | KEEP_DRIFT    | the owner changed it while engaged: theirs   |

`applied` for a key is the value Holdfast wrote, or a list of values it may have
written (a cap raise in flight records both the old and the new cap, so a crash
between the tag write and the resource write is never mistaken for drift).
Pure: no boto3, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

WRITE = "write-original"
KEEP_DRIFT = "keep-drift"
NOTHING = "nothing"


@dataclass(frozen=True)
class Decision:
    action: str
    original: Any
    applied: Any
    current: Any


def holdfast_values(applied: Any) -> list[Any]:
    """The values a key's `applied` entry names as Holdfast's own."""
    return list(applied) if isinstance(applied, (list, tuple)) else [applied]


def decide_key(original: Any, applied: Any, current: Any) -> str:
    if current == original:
        return NOTHING
    if current in holdfast_values(applied):
        return WRITE
    return KEEP_DRIFT


def decide(original: Mapping[str, Any], applied: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Decision]:
    """One decision per recorded key. A key missing from `current` counts as None."""
    return {
        key: Decision(decide_key(value, applied.get(key), current.get(key)), value, applied.get(key), current.get(key))
        for key, value in original.items()
    }


def writes(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """The values to write back: the original of every key Holdfast still holds."""
    return {k: d.original for k, d in decisions.items() if d.action == WRITE}


def drift(decisions: Mapping[str, Decision]) -> dict[str, dict[str, Any]]:
    """The keys the owner changed while engaged, for the report."""
    return {
        k: {"original": d.original, "applied": d.applied, "current": d.current}
        for k, d in decisions.items()
        if d.action == KEEP_DRIFT
    }
