"""The ledger's conditional writes, built from named clauses (as Powertools' idempotency
layer builds its own in persistence/dynamodb.py::_put_record), each with the race it
prevents. Every conditional write in holdfast.ledger takes its condition from here.

Timeline of the plan item, two controllers A and B:

    A reads CURRENT g=4 ....................... A writes g=5 if generation = 4   (wins)
         B reads CURRENT g=4 .......... B writes g=5 if generation = 4          (loses:
                                                                   PlanConflict, re-read)
    A guard(5): ConditionCheck generation = 5, then the relaxing AWS write; a B that
    moved the plan to 6 in between makes A's next guard fail (StalePlan): A stops.
"""

from __future__ import annotations

from typing import Any

from holdfast.ledger import PK, SK

PLAN_PK, CURRENT = "PLAN", "CURRENT"

# NO_PLAN_YET: two controllers that both found no plan race to create generation 1;
# exactly one wins, the other re-reads.
NO_PLAN_YET = "attribute_not_exists(#pk)"
# IS_GENERATION: the plan is still the generation the writer read. For a new plan it
# means "nobody wrote g+1 meanwhile", so a slow controller can never overwrite a newer
# plan with an older decision (the October enactor). For guards, progress and
# notification it means "my plan is still the active one".
IS_GENERATION = "#generation = :generation"
# NO_RECORD_YET: a resource's original is written once. A second engage (another
# controller, a re-engage after a cap raise) must never replace the owner's original
# with values Holdfast itself set.
NO_RECORD_YET = f"attribute_not_exists({PK})"
# RECORD_UNCHANGED: a record grows (a new key's original, more applied values) by a
# read-modify-write; two controllers growing it at once must not drop each other's values,
# so the write holds only while the record is still the one read.
RECORD_UNCHANGED = "#original = :old_original AND #applied = :old_applied"
# SAME_ATTEMPT: a resource's failure count goes on only within one plan generation and
# operation; the first failure under a new one starts it again at 1.
SAME_ATTEMPT = "#generation = :generation AND #operation = :operation"


def key(pk: str, sk: str) -> dict:
    return {PK: {"S": pk}, SK: {"S": sk}}


def generation_is(generation: int) -> dict[str, Any]:
    """The IS_GENERATION clause with its names and values, for a Put, Update or ConditionCheck."""
    return {
        "ConditionExpression": IS_GENERATION,
        "ExpressionAttributeNames": {"#generation": "generation"},
        "ExpressionAttributeValues": {":generation": {"N": str(generation)}},
    }


def still_current(generation: int) -> dict:
    """A transaction item that holds only while `generation` is the active plan (the
    ledger's transact_write_items names the table)."""
    return {"ConditionCheck": {"Key": key(PLAN_PK, CURRENT), **generation_is(generation)}}
# UNCHANGED_SINCE_READ: a controller's record (a mapping's drain, a replay) is written only
# over the version its writer read, or where there was none: two controllers of the same
# generation acting on one read would each raise the cap from it (ledger/drain.py).
UNCHANGED_SINCE_READ = f"attribute_not_exists({PK}) OR #version = :version"
