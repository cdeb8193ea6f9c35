"""What a tick records after walking one kind: the progress decision. Pure.

The tick walks a kind, then asks `after_walk` what to persist, and carries the answer
out (holdfast.reconciler): mark the kind done for this generation, move its engage
cursor, or record nothing. Progress is persisted (as Kopf persists a handler's progress,
_core/actions/progression.py) so the next tick continues where this one stopped.

Rules:
- A walk that did not finish (deadline, a failure, a stale-plan refusal, the blast
  radius) is not done, and the tick is not complete.
- An unfinished engage walk keeps its cursor, so the next tick resumes after it; the
  cursor never passes a failed resource (the engine stops it before one).
- While another controller relaxed under an older generation moments ago
  (`older_relaxers`: its lease is younger than LEASE_SECONDS), an engage walk is
  neither marked done nor moves its cursor: that controller's guarded write may land
  after this walk passed the resource, and the next walk must see it again.
- In recommend mode nothing was written, so no relaxer can have undone anything: the
  lease is not consulted.
- A resource that failed on `stuck_after_failures` walks in a row (counted across ticks
  and controllers in the ledger: holdfast.ledger.failures) is stuck: it no longer holds
  its kind back. A walk whose only failures are stuck resources is done; the stuck ones
  are reported, counted in the ResourcesStuck metric and listed by `holdfast status`.
  Bounded retries, then the stage moves on: no state of the plan needs a human to leave it.
- A kind done and still held in posture is walked again once `rewalk_minutes` have passed
  since its last finished walk (`rewalk_due`); the re-walk is recorded as finished by the
  same rule, so a re-walk that keeps failing on a resource is retried each tick only
  until that resource is stuck.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Marker:
    """The name a walk's progress is kept under in the plan (`done`, `cursor`, the walks):
    a kind's own walk (`asg`), or the engage of a controlled kind when a hold begins
    (`esm/engaged`), after which its drain's controller drives it."""

    kind: str
    hold_engage: bool = False

    SEPARATOR = "/"
    ENGAGED = "engaged"

    def __str__(self) -> str:
        return f"{self.kind}{self.SEPARATOR}{self.ENGAGED}" if self.hold_engage else self.kind

    @classmethod
    def parse(cls, marker: str) -> "Marker":
        kind, sep, rest = marker.partition(cls.SEPARATOR)
        if sep and rest != cls.ENGAGED:
            raise ValueError(f"not a walk marker: {marker!r}")
        return cls(kind, bool(sep))


def held_marker(kind: str, engaged_by_walk: bool) -> str:
    """The marker of a held kind's engage: its own (`kind`) when the walk keeps it engaged,
    its hold engage (`kind/engaged`) when a controller drives it after that."""
    return str(Marker(kind, hold_engage=not engaged_by_walk))


@dataclass(frozen=True)
class Walked:
    """What one kind's walk reported."""

    marker: str               # the kind, or "<kind>/engaged" for a re-engage before a raise
    engaging: bool
    complete: bool            # the walk reached the end of the kind before the deadline
    failed: int               # resources FAILED or refused (stale plan)
    refused: bool = False     # the blast-radius limit stopped it before any write
    cursor: str | None = None  # where an unfinished engage walk may resume
    stuck: int = 0            # how many of `failed` are stuck resources (they no longer gate)


@dataclass(frozen=True)
class Progress:
    mark_done: bool = False
    cursor: str | None = None  # persist this cursor for the marker; None: leave it
    complete: bool = True      # the tick's walk is still complete after this kind
    note: str | None = None    # why progress was held back, for the log


def is_stuck(failures: int, threshold: int) -> bool:
    """A resource that failed on `threshold` walks in a row no longer gates its stage."""
    return failures >= threshold


def rewalk_due(last: datetime | None, now: datetime, minutes: int) -> bool:
    """Whether a kind held in posture, last walked to the end at `last`, is walked again now."""
    return last is None or now - last >= timedelta(minutes=minutes)


def after_walk(walked: Walked, *, saved_cursor: str | None, dry_run: bool, older_relaxers: bool) -> Progress:
    gating = walked.failed - walked.stuck
    if not walked.complete or gating or walked.refused:
        if not walked.engaging or walked.refused or walked.cursor is None or walked.cursor == saved_cursor:
            return Progress(complete=False)
        if older_relaxers and not dry_run:
            return Progress(complete=False, note="cursor not moved: an older generation relaxed moments ago")
        return Progress(complete=False, cursor=walked.cursor)
    if walked.engaging and older_relaxers and not dry_run:
        return Progress(complete=False, note=(
            "engage walk not recorded: an older generation relaxed moments ago; walking again next tick"))
    if walked.stuck:
        return Progress(mark_done=True, note=(
            f"{walked.stuck} stuck resource(s) no longer hold {walked.marker} back: reported (ResourcesStuck, "
            "`holdfast status`)"))
    return Progress(mark_done=True)


def needs_relaxers(walked: Walked, *, saved_cursor: str | None, dry_run: bool) -> bool:
    """Whether `after_walk` depends on `older_relaxers` (so the shell reads the leases only then)."""
    if dry_run or not walked.engaging or walked.refused:
        return False
    unfinished = not walked.complete or walked.failed - walked.stuck
    return not unfinished or (walked.cursor is not None and walked.cursor != saved_cursor)
