"""The ledger's conditional writes, built from named clauses (as Powertools' idempotency
layer builds its own in persistence/dynamodb.py::_put_record), each with the race it
prevents. Every conditional write in holdfast.ledger takes its condition from here.

A condition is named here, with a comment that says the race it prevents, and every
`ConditionExpression` in holdfast takes one of these names (tests/architecture/test_rules.py).

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
# NOT_RELEASED_IN: an engage's write-ahead holds only while its resource carries no release
# mark (CONTROL/RELEASED#<arn>) of the engagement in force. A walk reads the marks once, at
# its tick's start; `holdfast release` landing while that walk (a re-walk of a long hold)
# is still listing would otherwise be engaged again at once, and stay engaged while
# `status` lists it as released. Checked in the transaction that writes the record, so a
# mark written before the record write wins, and one written after it finds the record
# (and restores it: the release writes its mark before its restore).
NOT_RELEASED_IN = "attribute_not_exists(#pk) OR #began <> :began"
# RECORD_VERSION_IS / FIRST_RECORD_VERSION: a mapping's cap is written only under the version
# of its record that the write was decided on (the tick's read of it). Timeline, one mapping:
#
#   tick A reads v4 .. A claims the write: v4 -> v5, writing 30 .. A's UpdateEventSourceMapping (slow)
#        tick B read v4 ............................ B claims: v4? no, v5 -> refused; acts next tick
#                      tick C reads v5: A's 30 not seen, sent < 60 s ago -> waits (core.restore.in_flight)
#
# Without it B, deciding from the same read, would write its cap beside A's, and whichever
# landed last would be on the mapping with the other's value dropped from the record: a
# late cap read as the owner's (kept for good), or a cap left after the final restore
# forgot the record. Every write of the record adds one to its version (a grow too: a
# cap written over a record grown since its read would drop the grown values); a record
# written before versions existed has none (FIRST_RECORD_VERSION, read as version 0).
RECORD_VERSION_IS = "#version = :version"
FIRST_RECORD_VERSION = "attribute_exists(#pk) AND attribute_not_exists(#version)"


def version_is(version: int) -> dict[str, Any]:
    """The record-version clause for an Update of a resource record read at `version`."""
    if version == 0:
        return {"ConditionExpression": FIRST_RECORD_VERSION, "ExpressionAttributeNames": {"#pk": PK, "#version": "version"},
                "ExpressionAttributeValues": {}}
    return {"ConditionExpression": RECORD_VERSION_IS, "ExpressionAttributeNames": {"#version": "version"},
            "ExpressionAttributeValues": {":version": {"N": str(version)}}}


# ---- claims (holdfast.ledger.claims) --------------------------------------------------

# FREE_OR_OURS_TO_TAKE: nobody holds the engage walk's claim, its holder's time is up, it is
# this controller's own, or it was taken under an older generation (a newer plan's walk
# wins). Two ticks that both find it free: one takes it, the other leaves the walk to it.
FREE_OR_OURS_TO_TAKE = (f"attribute_not_exists({PK}) OR #until <= :now OR #holder = :holder "
                        "OR #generation < :generation")
# HELD_BY_ME: a walk gives back only its own claim. A holder whose lease lapsed while it
# walked must not delete the claim of the tick that took it over (that tick's walk would
# be left unclaimed, and the next tick would walk beside it).
HELD_BY_ME = "#holder = :holder"
# NOT_YET_TRIGGERED: no tick trigger for this generation within the last period. A burst
# of launch failures, or several detectors at once, starts one extra tick, not hundreds.
NOT_YET_TRIGGERED = f"attribute_not_exists({PK}) OR #generation <> :generation OR #at <= :since"


# ---- control items (holdfast.ledger.control) ------------------------------------------

# NOT_THIS_EXECUTION: one evacuation hold per Region switch plan. A rerun of the same
# execution's step finds its own hold and writes nothing (the hold keeps the time it
# began); a newer execution's hold replaces an older one's.
NOT_THIS_EXECUTION = "attribute_not_exists(#pk) OR #execution <> :execution"
# NO_RELEASE_IN_FORCE: a release request is written only where none is still to be acted
# on (requested, or claimed by a tick). Two operators releasing one resource at once: the
# second is a duplicate and writes nothing, so a tick acting on the first is not undercut.
NO_RELEASE_IN_FORCE = "attribute_not_exists(#pk) OR #state = :done OR #ttl <= :now"
# RELEASE_TO_TAKE: a tick takes a release request only while it is the request it read and
# is requested, or claimed by a tick whose claim ran out. Two ticks at once: one restores
# the resource, the other leaves it.
RELEASE_TO_TAKE = "#request = :id AND (#state = :requested OR (#state = :acting AND #until <= :now))"
# RELEASE_CLAIMED_BY_ME: a tick records the outcome of (or gives back) a release request
# only while it still holds its claim: a tick whose claim ran out and was taken over must
# not mark done a restore the new holder is still making.
RELEASE_CLAIMED_BY_ME = "#request = :id AND #state = :acting AND #controller = :me"
# RELEASE_OPEN_AND_UNCLAIMED: an expired request, never claimed by this tick, is marked done
# only while it is still the request read and no tick's live claim is restoring it.
RELEASE_OPEN_AND_UNCLAIMED = "#request = :id AND #state <> :done AND NOT (#state = :acting AND #until > :now)"
# MALFORMED_RELEASE_UNCHANGED: a request item Holdfast cannot act on is marked done only
# while it is still that item (its request id the one read, or none yet): an operator's new
# request written meanwhile is not marked done unread.
MALFORMED_RELEASE_UNCHANGED = ("attribute_exists(#pk) AND (attribute_not_exists(#state) OR #state <> :done) AND "
                               "(#request = :id OR attribute_not_exists(#request) OR NOT attribute_type(#request, :string))")


# ---- resource records (holdfast.ledger.resources) -------------------------------------

# RECORD_EXISTS: a resource's identity is kept with its record only while the record is
# there. A restore that forgot the record meanwhile must not be followed by an update that
# creates a record holding an identity and no original.
RECORD_EXISTS = f"attribute_exists({PK})"
