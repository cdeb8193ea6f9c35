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
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Walked:
    """What one kind's walk reported."""

    marker: str               # the kind, or "<kind>/engaged" for a re-engage before a raise
    engaging: bool
    complete: bool            # the walk reached the end of the kind before the deadline
    failed: int               # resources FAILED or refused (stale plan)
    refused: bool = False     # the blast-radius limit stopped it before any write
    cursor: str | None = None  # where an unfinished engage walk may resume


@dataclass(frozen=True)
class Progress:
    mark_done: bool = False
    cursor: str | None = None  # persist this cursor for the marker; None: leave it
    complete: bool = True      # the tick's walk is still complete after this kind
    note: str | None = None    # why progress was held back, for the log


def after_walk(walked: Walked, *, saved_cursor: str | None, dry_run: bool, older_relaxers: bool) -> Progress:
    if not walked.complete or walked.failed or walked.refused:
        if not walked.engaging or walked.refused or walked.cursor is None or walked.cursor == saved_cursor:
            return Progress(complete=False)
        if older_relaxers and not dry_run:
            return Progress(complete=False, note="cursor not moved: an older generation relaxed moments ago")
        return Progress(complete=False, cursor=walked.cursor)
    if walked.engaging and older_relaxers and not dry_run:
        return Progress(complete=False, note=(
            "engage walk not recorded: an older generation relaxed moments ago; walking again next tick"))
    return Progress(mark_done=True)


def needs_relaxers(walked: Walked, *, saved_cursor: str | None, dry_run: bool) -> bool:
    """Whether `after_walk` depends on `older_relaxers` (so the shell reads the leases only then)."""
    if dry_run or not walked.engaging or walked.refused:
        return False
    unfinished = not walked.complete or walked.failed
    return not unfinished or (walked.cursor is not None and walked.cursor != saved_cursor)
