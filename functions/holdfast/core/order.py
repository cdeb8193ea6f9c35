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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

HARM_CEILING = 10**12   # harm values stay below it (rank = HARM_CEILING - harm, 13 digits)
ENGAGE, TAGS = "engage", "tags"


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


@dataclass(frozen=True)
class Step:
    kind: str
    phase: str   # ENGAGE: list (if not yet) and engage the kind; TAGS: its deferred record tags


def lane_steps(kinds: Sequence[str], defers_tag: Collection[str]) -> list[Step]:
    """The steps of one service's lane, in order: each kind's engage as given, then the
    deferred tags of each kind that defers them, in the same order."""
    return [Step(k, ENGAGE) for k in kinds] + [Step(k, TAGS) for k in kinds if k in defers_tag]
