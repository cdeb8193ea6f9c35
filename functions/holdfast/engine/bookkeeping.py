"""Where an engage walk stands, and what the next walk of a kind may pass over: the
engine's walk bookkeeping (holdfast.engine.fleet reads and fills it; the actuators only
answer its questions: `harm`, `listed_current`, `listed_tags`, `posture`).

Order. An engage walk reads and engages a kind's candidates most harmful first: each
actuator's `harm(candidate)`, from the listing alone (no call), e.g. uncapped mappings
and then the highest caps, groups with the most instances; ties in ARN order. A
candidate's place in that order is its `position` ("<rank> <arn>", rank = HARM_CEILING -
harm, so positions sort as strings). An engaged resource's harm is taken from its
record's original values (the ledger's), so engaging it does not move it in the order.

Cursor. `Report.cursor[kind]` is where the next walk may resume (`cursor`): the position
such that every candidate at or before it finished (engaged, already, not selected,
vanished). A FAILED resource is never passed over — unless it is one of `stuck` (it
failed on every walk of several ticks: holdfast.core.progress), which no longer holds
the kind back: the cursor stops before it, so the next walk retries it. A deferred
record tag not yet written (`tag_pending`) stops it too, so the next walk reads that
resource again and writes the tag. None = from the start; a kind that finished without
failure has None.

Settled. Harm still changes between walks for resources not yet engaged (an owner
removes a cap, a group scales out), so a position that was after the cursor can be
before it on the next walk: a resumed walk therefore passes over a candidate at or
before the cursor only when it is `settled` — its listing shows it in posture (or its
only differences are the owner's drift on a record), or, for a kind whose listing does
not show the managed values, the ledger holds its record. Anything else at or before
the cursor is read again: a resource whose priority rose past the cursor is never
skipped. A cursor that is a bare ARN (written before positions) is compared by ARN,
with the same rule.

Seen. `Report.seen[kind]` holds the `walk_key` of every candidate the walk `finished`.
A re-walk of a kind already done (`engage(seen=...)`, holdfast.reconciler) lists every
candidate again but reads and engages only those a walk has not seen (new, or newly
selected), and those whose listing shows them out of posture or stripped of their
record tag (`changed_since_walked`): a group created or opted in during the hold, a
process an IaC apply resumed, a cap it removed. The keys are kept per generation in
the ledger (holdfast.ledger.walks).

`to_walk` puts the two together: whether this walk reads a candidate at all.

Later phase. A kind whose listing cannot name every resource (async configs: an alias
with no config of its own is named only by ListAliases, one call per function) has
steps (`late_keys`: one per function) that find the rest (`late_candidates`), each
engaged as it is found. They run after the walk's listed candidates, and only when every
one of those finished (`walked_through`): no step's call is spent before a cap
whose harm is already known. A walk that stops in the phase leaves a cursor after every
listed candidate's position (core.order.late_position) naming the last step of the run
of finished steps (`late_cursor`): the next walk passes over the listed candidates that
are settled, reads those that are not, and, once they are finished, resumes the steps
after it. A step is finished when its candidates are (a failure that is not stuck stops
the cursor before it, so the next walk lists it again); a step whose listing failed is
finished, its outcome says so, and only a later walk of the kind lists it again. A
finished step's `late_walk_key` joins `Report.seen`, so a re-walk lists only the steps
no walk of the generation finished (a function newly selected, one whose listing failed).
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from holdfast.core import order, restore
from holdfast.core.model import FAILED, SKIPPED, Candidate, Outcome
from holdfast.core.tags import TagError, read_record

HARM_CEILING = order.HARM_CEILING
# A walk's result for an item the deadline came before: it was not walked.
NOT_WALKED = object()


def position(act, candidate: Candidate, ledger=None) -> str:
    """The candidate's place in the engage order (core.order.position): most harm first
    (for a kind whose resources cost different calls of the budget before their change,
    the most harm per call: core.order.per_call; after them, those it does not expect to
    change: `likely`), then by ARN. An engaged resource's harm
    is its original's (the ledger's record), so engaging it does not move it."""
    record = ledger.cached(candidate.arn) if ledger is not None else None
    harm = act.harm(candidate, record.original if record else None)
    most = getattr(act, "most_calls_before_cap", 1)
    if most > 1:   # resources of the kind cost different calls before their change (actuators.esm)
        likely = getattr(act, "likely", None)
        harm = order.per_call(harm, act.calls_before_cap(candidate), most,
                              likely=likely(candidate) if likely is not None else True)
    return order.position(harm, candidate.arn)


def at_or_before(act, candidate: Candidate, cursor: str, ledger) -> bool:
    """Whether `candidate` is at or before `cursor` (a position, or a bare ARN)."""
    if " " not in cursor:
        return candidate.arn <= cursor
    return position(act, candidate, ledger) <= cursor


def settled(act, candidate: Candidate, ledger) -> bool:
    """Whether a resumed walk may pass over `candidate` without reading it: its listing
    shows it in posture (differences that are the owner's drift on its record aside), or
    — when the listing does not show the managed values — the ledger holds its record."""
    record = ledger.cached(candidate.arn)
    current = act.listed_current(candidate)
    if current is None:
        return record is not None
    changes, _ = restore.without_drift(act.posture(current), record, current)
    return not changes


def walk_key(candidate: Candidate) -> str:
    """A short key for a candidate as a walk saw it (its ARN, and whether the listing
    alone selects it): a re-walk reads again every candidate whose key no finished walk
    of the generation recorded (new, or newly selected through its function or service)."""
    return hashlib.sha1(f"{candidate.arn}|{candidate.selected}".encode()).hexdigest()[:12]


def changed_since_walked(act, candidate: Candidate, keys: set[str], ledger) -> bool:
    """Whether a re-walk must read `candidate` again: unknown to the walks so far, or its
    listing shows it out of posture (a process an IaC apply resumed, a cap removed: not
    the owner's drift, which the record tells), or shows no record tag on a resource the
    ledger holds engaged (an IaC apply stripped it)."""
    if walk_key(candidate) not in keys:
        return True
    record = ledger.cached(candidate.arn)
    current = act.listed_current(candidate)
    if current is not None:
        changes, _ = restore.without_drift(act.posture(current), record, current)
        if changes:
            return True
    tags = act.listed_tags(candidate)
    return tags is not None and record is not None and _record_of(tags) is None


def to_walk(act, candidate: Candidate, ledger, *, after: str | None, seen: set[str] | None) -> bool:
    """Whether this walk reads `candidate`: not when it is at or before the cursor `after`
    and settled, nor, on a re-walk (`seen`: the keys of the walks so far), when its
    listing is unchanged since a finished walk saw it."""
    if after is not None and at_or_before(act, candidate, after, ledger) and settled(act, candidate, ledger):
        return False
    return seen is None or changed_since_walked(act, candidate, seen, ledger)


def tag_pending(result: Any) -> bool:
    """An engaged resource whose deferred record tag is not written yet (actuators.tagged)."""
    return isinstance(result, Outcome) and "tag" in result.notes


def finished(result: Any) -> bool:
    """A walked candidate that needs no further walk: not cut off by the deadline, not
    failed, not left unchanged for want of a record."""
    return result is not NOT_WALKED and not (isinstance(result, Outcome) and (
        result.action == FAILED or (result.action == SKIPPED and "record" in result.notes)
        or tag_pending(result)))


def walked_through(items: list[Candidate], results: list, stuck: frozenset[str] = frozenset()) -> bool:
    """Whether the walk of `items` reached its end with every item finished (a stuck
    resource's failure aside): what `cursor` answers None to, which it also answers for a
    walk stopped before its first item."""
    return not any(result is NOT_WALKED or tag_pending(result)
                   or (isinstance(result, Outcome) and result.action == FAILED and item.arn not in stuck)
                   for item, result in zip(items, results))


def cursor(act, ledger, items: list[Candidate], results: list, start: str | None,
           stuck: frozenset[str] = frozenset()) -> str | None:
    """The position of the last of the run of finished items from the start; None when
    all finished. A stuck resource's failure does not stop it. Never moved back: an item
    before `start` that a resumed walk read again (its harm rose) leaves it where it was."""
    at = start
    for item, result in zip(items, results):
        if result is NOT_WALKED or tag_pending(result) or (
                isinstance(result, Outcome) and result.action == FAILED and item.arn not in stuck):
            return at
        here = position(act, item, ledger)
        at = here if at is None or here > at else at
    return None


def late_walk_key(key: str) -> str:
    """The walk key of a finished later-phase step (`Report.seen`)."""
    return hashlib.sha1(f"{key}|late".encode()).hexdigest()[:12]


def step_finished(outcomes: list, stuck: frozenset[str]) -> bool:
    """Whether a later-phase step whose candidates gave `outcomes` is finished: each one
    is, or failed and is stuck."""
    return all(finished(o) or (isinstance(o, Outcome) and o.action == FAILED and o.arn in stuck) for o in outcomes)


def late_cursor(steps: list[str], results: list, start: str | None) -> str | None:
    """The later phase's cursor: None when every step finished (results: True finished,
    False not, NOT_WALKED), else core.order.late_position of the last step of the run of
    finished steps from the start (the one `start` names, when none)."""
    at = order.late_key(start) or None
    for key, result in zip(steps, results):
        if result is not True:
            return order.late_position(at)
        at = key
    return None


def _record_of(tags: Mapping[str, str]):
    try:
        return read_record(tags)
    except TagError:
        return None
