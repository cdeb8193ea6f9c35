"""Operator control: the kill switch, "skip the hold of generation g", "engage now,
from generation g", and who holds resources by hand.

Items: pk `CONTROL`, sk `PAUSE` (never expires), `ADVANCE` and `ENGAGE` (TTL one day) and
`HELD` (who last engaged resources from the CLI, and when; removed by a complete
`resume --now`). Everything an operator writes is in this partition, so a role limited to
it by dynamodb:LeadingKeys (HoldfastOperator, policies/operator.json) can steer Holdfast in
an account without any permission on its resources: the reconciler acts on the request.
The resource records say what is engaged; `HELD` says by whom, for `status` and `stage`
when no plan is in force.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, contended, failure_kind
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import CURRENT, PLAN_PK, key, still_current

CONTROL_PK, PAUSE, ADVANCE, ENGAGE, HELD = "CONTROL", "PAUSE", "ADVANCE", "ENGAGE", "HELD"


@dataclass(frozen=True)
class Control:
    paused: bool = False
    paused_by: str | None = None
    paused_at: str | None = None
    reason: str | None = None
    advance_generation: int | None = None
    engage_generation: int | None = None   # engage from this plan generation (an operator's request)
    engage_by: str | None = None
    engage_reason: str | None = None
    held_by: str | None = None       # who engaged resources by hand (the CLI), when
    held_at: str | None = None
    held_command: str | None = None

    def engage_requested(self, generation: int) -> str | None:
        """Why the plan of `generation` should go to hold now, or None: a request is for
        the plan its operator saw, so it acts once (the hold it starts is a newer generation)."""
        if self.engage_generation is None or self.engage_generation != generation:
            return None
        return f"engaged by {self.engage_by or 'an operator'}: {self.engage_reason or '-'}"


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


@uses("dynamodb:Query", by=("reconciler", "cli"))
def read_control(dynamodb, table: str) -> Control:
    try:
        items = dynamodb.query(
            TableName=table,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PK},
            ExpressionAttributeValues={":pk": {"S": CONTROL_PK}},
            ConsistentRead=True,
        )["Items"]
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the kill switch from {table}: {failure_kind(err)}") from err
    by_sk = {item[SK]["S"]: item for item in items}
    pause, advance, engage, held = by_sk.get(PAUSE), by_sk.get(ADVANCE), by_sk.get(ENGAGE), by_sk.get(HELD)
    text = lambda item, key: item[key]["S"] if item and key in item else None
    return Control(
        paused=bool(pause and pause.get("paused", {}).get("BOOL")),
        paused_by=text(pause, "by"),
        paused_at=text(pause, "at"),
        reason=text(pause, "reason"),
        advance_generation=int(advance["generation"]["N"]) if advance else None,
        engage_generation=int(engage["generation"]["N"]) if engage and "generation" in engage else None,
        engage_by=text(engage, "by"),
        engage_reason=text(engage, "reason"),
        held_by=text(held, "by"),
        held_at=text(held, "at"),
        held_command=text(held, "command"),
    )


@uses("dynamodb:PutItem", "dynamodb:DeleteItem", by=("cli",))
def set_held(dynamodb, table: str, held: bool, *, by: str = "", command: str = "", now: datetime | None = None) -> None:
    """Record who engaged resources by hand (held) or that a resume put everything back (not)."""
    try:
        if held:
            item = {"by": {"S": by}, "command": {"S": command}, "at": {"S": now.isoformat() if now else "-"}}
            dynamodb.put_item(TableName=table, Item={**key(CONTROL_PK, HELD), **item})
        else:
            dynamodb.delete_item(TableName=table, Key=key(CONTROL_PK, HELD))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record who holds resources by hand in {table}: {failure_kind(err)}") from err


@uses("dynamodb:PutItem", by=("cli", "operator"))
def set_paused(dynamodb, table: str, paused: bool, *, by: str, reason: str, now: datetime) -> None:
    item = {"paused": {"BOOL": paused}, "by": {"S": by}, "reason": {"S": reason or "-"}, "at": {"S": now.isoformat()}}
    try:
        dynamodb.put_item(TableName=table, Item={**key(CONTROL_PK, PAUSE), **item})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot set the kill switch in {table}: {failure_kind(err)}") from err


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("cli", "operator"))
def request_advance(dynamodb, table: str, generation: int, *, by: str, now: datetime) -> None:
    """Skip the hold of `generation`, only if it is still the current plan: an operator
    acting on a stale view must not skip the hold of a plan they have not seen."""
    try:
        dynamodb.transact_write_items(
            TransactItems=[
                still_current(table, generation),
                {
                    "Put": {
                        "TableName": table,
                        "Item": {
                            **key(CONTROL_PK, ADVANCE),
                            "generation": {"N": str(generation)},
                            "by": {"S": by},
                            "at": {"S": now.isoformat()},
                            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
                        },
                    }
                },
            ]
        )
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            raise PlanConflict(f"plan generation {generation} is no longer current") from err
        if contended(err):
            raise Contention(f"the plan is busy (another controller's transaction): try again") from err
        raise LedgerUnavailable(f"cannot record the advance in {table}: {failure_kind(err)}") from err


@uses("dynamodb:GetItem", "dynamodb:PutItem", by=("cli", "operator"))
def request_engage(dynamodb, table: str, *, by: str, reason: str, now: datetime) -> int:
    """Ask the reconciler to go to hold from the plan in force now (its generation, 0
    when there is none yet), as if an impairment were detected: its next tick starts a
    hold, walks the engage with its own role, and lifts it in stages like any other.
    Returns the generation the request names. A request for a plan that has moved on
    (a tick decided in between) does nothing: the operator has not seen that plan."""
    try:
        item = dynamodb.get_item(TableName=table, Key=key(PLAN_PK, CURRENT), ConsistentRead=True,
                                 ProjectionExpression="#generation",
                                 ExpressionAttributeNames={"#generation": "generation"}).get("Item")
        generation = int(item["generation"]["N"]) if item and "generation" in item else 0
        dynamodb.put_item(TableName=table, Item={
            **key(CONTROL_PK, ENGAGE),
            "generation": {"N": str(generation)},
            "by": {"S": by},
            "reason": {"S": reason or "-"},
            "at": {"S": now.isoformat()},
            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
        })
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the engage request in {table}: {failure_kind(err)}") from err
    return generation
