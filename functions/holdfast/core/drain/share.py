"""Mappings that share their evidence: one function's several mappings, one queue's several
readers. Pure: stdlib only.

Lambda's Duration, Invocations, Errors, Throttles and ConcurrentExecutions are per function,
SQS's NumberOfMessagesReceived/Deleted/Sent and its visible messages per queue: a mapping
that shares either reads its siblings' work as its own (a function with concurrency 20
serving two queues reads 20 for each of them, and each would start at 20). Unless the
mapping publishes its own metrics (MetricsConfig EventCount: its received and deleted are
its own), each shared figure is apportioned by the mapping's share of its group:

- the share of a group is the mapping's cap over the sum of the group's caps, or an equal
  share when a member has no cap (an uncapped reader's concurrency is not known);
- the function's pre-event concurrency is the function's: the caps of its mappings
  together never exceed it plus the search's step (`allot`), so two drains of one
  function cannot each take the whole function.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from holdfast.core.drain.baseline import Minute
from holdfast.core.drain.constants import LAMBDA_MIN_CAP
from holdfast.core.drain.inputs import Datapoint, Reading

# Sums a mapping shares with the other mappings of its function, and with its queue's
# other readers. Maxima and percentiles (p90 Duration, the oldest message's age) are not
# apportioned: they are not sums of the mappings' parts.
FUNCTION_SUMS = ("duration", "invocations", "errors", "throttles", "concurrency")
QUEUE_SUMS = ("received", "deleted", "sent", "visible")
OWN_WITH_EVENT_COUNTS = ("received", "deleted")


@dataclass(frozen=True)
class Member:
    """One mapping as its groups see it: its function, its queue and its cap in force."""

    arn: str
    function: str
    queue: str
    cap: int | None


@dataclass(frozen=True)
class Shares:
    """A mapping's share of its function's metrics and of its queue's (1.0: alone)."""

    function: float = 1.0
    queue: float = 1.0
    function_mates: int = 1    # mappings of its function, itself included
    queue_mates: int = 1       # readers of its queue, itself included

    @property
    def shared(self) -> bool:
        return self.function_mates > 1 or self.queue_mates > 1

    @property
    def least(self) -> float:
        """The smaller share (Facts.share): how much of what it reads is its own at worst."""
        return min(self.function, self.queue)


def _share(me: Member, group: list[Member]) -> float:
    if len(group) <= 1:
        return 1.0
    caps = [m.cap for m in group]
    if any(c is None or c <= 0 for c in caps):
        return 1.0 / len(group)
    return me.cap / sum(caps)


def shares(members: Mapping[str, Member]) -> dict[str, Shares]:
    """Each mapping's shares of its function's and its queue's metrics."""
    by_function: dict[str, list[Member]] = {}
    by_queue: dict[str, list[Member]] = {}
    for m in members.values():
        by_function.setdefault(m.function, []).append(m)
        by_queue.setdefault(m.queue, []).append(m)
    return {arn: Shares(_share(m, by_function[m.function]), _share(m, by_queue[m.queue]),
                        len(by_function[m.function]), len(by_queue[m.queue]))
            for arn, m in members.items()}


def _scaled(point: Datapoint | None, share: float) -> Datapoint | None:
    return None if point is None or share == 1.0 else Datapoint(point.at, point.value * share)


def apportion(reading: Reading, share: Shares) -> Reading:
    """The reading with the shared sums cut to this mapping's share. Received and deleted
    that came from the mapping's own metrics (`reading.per_mapping`) are its own already."""
    changes = {}
    for name in FUNCTION_SUMS:
        if share.function != 1.0 and getattr(reading, name) is not None:
            changes[name] = _scaled(getattr(reading, name), share.function)
    for name in QUEUE_SUMS:
        if reading.per_mapping and name in OWN_WITH_EVENT_COUNTS:
            continue
        if share.queue != 1.0 and getattr(reading, name) is not None:
            changes[name] = _scaled(getattr(reading, name), share.queue)
    return replace(reading, **changes) if changes else reading


def apportion_minute(minute: Minute, share: Shares, *, own_counts: bool = False) -> Minute:
    """A pre-event minute cut the same way (`own_counts`: received and deleted are the
    mapping's own metrics)."""
    changes = {}
    for name in FUNCTION_SUMS:
        if hasattr(minute, name) and share.function != 1.0 and getattr(minute, name) is not None:
            changes[name] = getattr(minute, name) * share.function
    for name in QUEUE_SUMS:
        if own_counts and name in OWN_WITH_EVENT_COUNTS:
            continue
        if hasattr(minute, name) and share.queue != 1.0 and getattr(minute, name) is not None:
            changes[name] = getattr(minute, name) * share.queue
    return replace(minute, **changes) if changes else minute


@dataclass(frozen=True)
class Want:
    """One mapping of a function, for `allot`: the cap in force and the cap decided (None:
    the owner's original comes back, or nothing is written: not the allotment's to move)."""

    arn: str
    current: int | None
    wanted: int | None


def allot(budget: float, wants: list[Want]) -> dict[str, int]:
    """The caps of one function's mappings, together at most `budget` (what the function
    carried before the event plus the search's step): a mapping may keep the cap in force
    and what it cuts to; only raises are limited, the room left after the others' caps
    shared equally among the raising ones (each never above what it asked for, never below
    the cap in force nor Lambda's minimum). Returns the ARNs whose decided cap is lowered,
    with their allotted cap."""
    raising = [w for w in wants if w.wanted is not None and isinstance(w.current, int) and w.wanted > w.current]
    if not raising:
        return {}
    fixed = sum((w.wanted if w.wanted is not None else (w.current or 0)) for w in wants if w not in raising)
    room = budget - fixed - sum(w.current for w in raising)
    if room >= sum(w.wanted - w.current for w in raising):
        return {}
    given = {w.arn: w.current for w in raising}
    left = max(room, 0.0)
    pending = sorted(raising, key=lambda w: w.wanted - w.current)
    while pending and left > 0:
        each = left / len(pending)
        w = pending[0]
        need = w.wanted - given[w.arn]
        if need <= each:
            given[w.arn] = w.wanted
            left -= need
            pending.pop(0)
        else:
            for p in pending:
                given[p.arn] = given[p.arn] + int(each)
            left = 0
    out = {}
    for w in raising:
        cap = max(LAMBDA_MIN_CAP, min(w.wanted, given[w.arn]))
        if cap < w.wanted:
            out[w.arn] = cap
    return out
