"""The order of an engage walk: the most harm capped first. Pure.

An engage walk spends each service's rate budget on its own (Lambda's control plane is
one 15/s quota for every call, reads included), so within one service the order of the
calls is the order in which harm goes away. Two decisions:

- `position(harm, arn)`: a resource's place within its kind, as a string that sorts in
  the order of the walk: the most harm first (each actuator's `harm`, judged from the bulk
  listing alone), ties by ARN. Positions are also the walk's cursor (holdfast.engine).
- `per_call(harm, calls, most)`: where the resources of one kind cost different numbers of
  calls of the one budget before their change lands, the harm each call removes (Smith's
  rule: the order that removes the most harm soonest serves the highest harm per unit of
  time first), scaled by the kind's `most` so that it stays a whole number and a kind
  whose resources all cost the same keeps its harm as it is. A resource the walk does not
  expect to need a change (`likely` False: a mapping the Tagging API's index does not list
  as selected while it lists others, actuators.esm) removes no harm the walk can count
  on: 0, after every resource that may, among themselves by ARN.
- `lane_steps(kinds, defers_tag)`: the steps of one service's lane: every kind's engage in
  the order given (the most dangerous first: SQS mappings, which flood a dependency, before
  async configs), then the second pass of the record tags a kind deferred
  (holdfast.actuators.tagged: while the ledger answers, its record is the write-ahead). The
  tags come last because they remove no harm: the resource is already in posture and its
  original already durable in the ledger, and every call they would spend earlier delays a
  cap. A lane whose kinds defer nothing has no tag step.
- `late_position(key)` / `late_key(position)`: a kind whose listing cannot name every
  resource (async configs: an alias with no config of its own is named only by one
  ListAliases per function) finds the rest in a later phase of its walk, one step per
  `key` (a function), only once every resource the listing named is engaged: those carry
  the harm that is already known. A cursor in that phase is a position after every
  listed resource's (`LATE` sorts after any rank), naming the last step finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

HARM_CEILING = 10**12   # harm values stay below it (rank = HARM_CEILING - harm, 13 digits)
ENGAGE, TAGS = "engage", "tags"
LATE = "~"   # the rank of a later phase's cursor: after every position of a listed resource


def position(harm: int, arn: str) -> str:
    """The place of a resource with `harm` in its kind's engage order: most harm first,
    then by ARN, as a string that sorts in that order (harm is clamped to 0..HARM_CEILING-1)."""
    harm = max(0, min(int(harm), HARM_CEILING - 1))
    return f"{HARM_CEILING - harm:013d} {arn}"


def per_call(harm: int, calls: int, most: int = 1, *, likely: bool = True) -> int:
    """`harm` per call of `calls` (1..most) before the change lands, as a whole number on
    the scale of `most` calls: harm * most // calls; 0 when the change is not `likely`."""
    if not likely:
        return 0
    calls = max(1, min(int(calls), int(most)))
    return int(harm) * int(most) // calls


def late_position(key: str | None) -> str:
    """The cursor of a walk in its later phase: every listed resource finished, and every
    step up to `key` (None: none yet). It sorts after every `position`."""
    return f"{LATE} {key or ''}"


def late_key(cursor: str | None) -> str | None:
    """The last finished step a later-phase cursor names ('' when none yet); None for a
    cursor that is not in a later phase (a position, a bare ARN, or None)."""
    if cursor is None or not cursor.startswith(f"{LATE} "):
        return None
    return cursor[len(LATE) + 1:]


@dataclass(frozen=True)
class Step:
    kind: str
    phase: str   # ENGAGE: list (if not yet) and engage the kind; TAGS: its deferred record tags


def lane_steps(kinds: Sequence[str], defers_tag: Collection[str]) -> list[Step]:
    """The steps of one service's lane, in order: each kind's engage as given, then the
    deferred tags of each kind that defers them, in the same order."""
    return [Step(k, ENGAGE) for k in kinds] + [Step(k, TAGS) for k in kinds if k in defers_tag]
