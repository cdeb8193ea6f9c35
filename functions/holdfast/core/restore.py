"""What a restore writes back: a pure decision per key, from original, applied and current.

| current is ...            | decision      | why                                          |
|---------------------------|---------------|----------------------------------------------|
| the original              | NOTHING       | already as the owner had it                  |
| what Holdfast applied     | WRITE         | put the original back                        |
| anything else             | KEEP_DRIFT    | the owner changed it while engaged: theirs   |

`applied` for a key is the value Holdfast wrote, or a set (a list) of values that may
be Holdfast's on the resource now. An engage grows it (`grow`): the first write-ahead
holds every value an engage may write to the key (for a mapping, the floor), and a
re-engage only adds. A partial relax moves it (`advance`), before it writes: the set
becomes the value on the resource now (Holdfast's: a relax never moves an owner's
value), the value about to be written, what an engage may write, and the previous
write's target while the resource does not show it (it may land late). So the set stays
bounded however many caps a drain writes (it fits in a tag, and the tag's copy is as
exact as the ledger's), while a crash between the record and the write, a late tag
write from a controller whose plan moved on (it is guarded, and at most re-engages to
the floor) or two ticks raising together can never make a value Holdfast wrote look
like the owner's (which would then be kept for good and blamed on the owner). And an
owner's value equal to one of the drain's earlier caps is the owner's: only the cap
before the latest write is ambiguous (a crash may have left it), and it counts as
Holdfast's.

Writes of one kind (a mapping's caps) are serialised per resource: the ledger keeps the
last relaxing write (`Record.writing`: its values and when it was sent), a relax waits
while that write may still land (`in_flight`), and until it is seen its target stays in
the applied set (`advance`'s `unseen`).

Two copies of a record exist, the tag on the resource and the ledger's; `merge` makes
one from both: each original from the ledger's copy when it has the key (written once,
conditionally, and never overwritten, while a tag can be stripped and rewritten), and
the applied values of both.
Pure: no boto3, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Mapping

from holdfast.core.model import Record

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


def _order(value: Any) -> tuple:
    # bool before int: True == 1 in Python, but they are different settings.
    return (type(value).__name__, "" if value is None else value)


def union(*entries: Any) -> Any:
    """One `applied` entry holding every value of `entries` (each a value or a list),
    in a fixed order; a single value stays a scalar, which keeps the tag short."""
    seen: dict[tuple, Any] = {}
    for entry in entries:
        for value in holdfast_values(entry):
            seen.setdefault((type(value).__name__, value), value)  # as _keys
    values = sorted(seen.values(), key=_order)
    return values[0] if len(values) == 1 else values


def grow_applied(applied: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """`applied` with the values of `more` added, key by key; nothing is ever removed."""
    out = dict(applied)
    for key, entry in more.items():
        out[key] = union(out[key], entry) if key in out else union(entry)
    return out


def advance(applied: Mapping[str, Any], current: Mapping[str, Any], values: Mapping[str, Any],
            may_write: Callable[[str, Any], Iterable[Any]], unseen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`applied` as a partial relax records it before writing `values`: per written key,
    the value on the resource now if it is Holdfast's, the value to write, every value
    an engage may write to the key (`may_write`), and the target of the previous write to
    it while that write is not seen on the resource (`unseen`: a request AWS may still
    apply late, a throttled one retried or one re-sent after a read timeout; dropped,
    it would land as a value no record names, the owner's for good). The keys not
    written stay as they are."""
    out = dict(applied)
    for key, value in values.items():
        now = current.get(key)
        before = [now] if key in applied and _keys(now) <= _keys(applied[key]) else []
        late = [unseen[key]] if unseen and key in unseen else []
        out[key] = union(before, late, value, list(may_write(key, value)))
    return out


def unseen(last: Mapping[str, Any] | None, current: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the last relaxing write (`last`: its `values`, as the ledger keeps it)
    that the resource does not show: not seen yet (late, or failed)."""
    values = (last or {}).get("values") or {}
    return {k: v for k, v in values.items() if current.get(k) != v}


def in_flight(last: Mapping[str, Any] | None, current: Mapping[str, Any], now: datetime | None,
              seconds: float) -> bool:
    """Whether the last relaxing write (`last`: its `values` and when it was sent, `at`; a
    write answered has no `at`) may still land: not seen on the resource, and sent less
    than `seconds` before `now` (the longest one write takes under the SDK's retries).
    Unknown times (`now` or `at` None) count as landed: only a clock on both sides can
    tell; so does an `at` more than `seconds` after `now` (a writer whose clock is ahead,
    an operator's machine: waiting for it would wait for its clock, not for its write)."""
    if not unseen(last, current) or now is None or not (last or {}).get("at"):
        return False
    try:
        sent = datetime.fromisoformat(last["at"])
        return abs(now - sent) < timedelta(seconds=seconds)
    except (TypeError, ValueError):
        return False


def same(first: Record, second: Record) -> bool:
    """Whether two records say the same: each covers the other."""
    return covers(first, second) and covers(second, first)


def _keys(entry: Any) -> set[tuple]:
    return {(type(v).__name__, v) for v in holdfast_values(entry)}


def covers(record: Record, other: Record) -> bool:
    """Whether `record` already holds everything `other` says: each of its originals and
    each of its applied values."""
    return all(key in record.original for key in other.original) and all(
        key in record.applied and _keys(entry) <= _keys(record.applied[key]) for key, entry in other.applied.items()
    )


def conflicts(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Keys both originals name with different values: (first's, second's)."""
    return {k: (first[k], second[k]) for k in first.keys() & second.keys() if first[k] != second[k]}


def merge(tag: Record | None, ledger: Record | None) -> Record | None:
    """One record from the tag's copy and the ledger's (either may be None).

    Each original comes from the ledger's copy when it has the key: it is written once,
    conditionally, and never overwritten, whereas a tag can be stripped by an IaC apply
    and rewritten. The applied values are the union of both copies."""
    if tag is None or ledger is None:
        return tag or ledger
    original = {**tag.original, **ledger.original}
    applied = grow_applied(ledger.applied, tag.applied)
    return Record(ledger.kind, ledger.arn, original, applied, ledger.identity, ledger.version, ledger.writing)


def grow(record: Record | None, kind: str, arn: str, current: Mapping[str, Any], changes: Mapping[str, Any],
         may_write: Callable[[str, Any], Iterable[Any]]) -> Record:
    """The record to write ahead of `changes`: a key seen for the first time records its
    current value as the original (a recorded original is never replaced), and every
    value Holdfast may write to a changed key in this engagement, `may_write(key, value)`,
    joins its applied set."""
    original = dict(record.original) if record else {}
    applied = dict(record.applied) if record else {}
    more: dict[str, Any] = {}
    for key, value in changes.items():
        original.setdefault(key, current.get(key))
        more[key] = union(value, list(may_write(key, value)))
    return Record(kind, arn, original, grow_applied(applied, more))


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


def without_drift(changes: Mapping[str, Any], record, current: Mapping[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The posture changes an engage still has to make, and the owner's drift it leaves
    alone: a key the owner changed while engaged (`record`: its original and applied
    values; None: no record, so no drift) is theirs, kept and reported, never engaged again."""
    if record is None:
        return dict(changes), {}
    owner = drift(decide(record.original, record.applied, current))
    return {k: v for k, v in changes.items() if k not in owner}, owner
