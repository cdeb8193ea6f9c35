"""Operator control: the kill switch and "skip the hold of generation g".

Items: pk `CONTROL`, sk `PAUSE` (never expires) and `ADVANCE` (TTL one day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, contended, failure_kind
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import key, still_current

CONTROL_PK, PAUSE, ADVANCE = "CONTROL", "PAUSE", "ADVANCE"


@dataclass(frozen=True)
class Control:
    paused: bool = False
    paused_by: str | None = None
    paused_at: str | None = None
    reason: str | None = None
    advance_generation: int | None = None


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
    pause, advance = by_sk.get(PAUSE), by_sk.get(ADVANCE)
    text = lambda item, key: item[key]["S"] if item and key in item else None
    return Control(
        paused=bool(pause and pause.get("paused", {}).get("BOOL")),
        paused_by=text(pause, "by"),
        paused_at=text(pause, "at"),
        reason=text(pause, "reason"),
        advance_generation=int(advance["generation"]["N"]) if advance else None,
    )


@uses("dynamodb:PutItem", by=("cli",))
def set_paused(dynamodb, table: str, paused: bool, *, by: str, reason: str, now: datetime) -> None:
    item = {"paused": {"BOOL": paused}, "by": {"S": by}, "reason": {"S": reason or "-"}, "at": {"S": now.isoformat()}}
    try:
        dynamodb.put_item(TableName=table, Item={**key(CONTROL_PK, PAUSE), **item})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot set the kill switch in {table}: {failure_kind(err)}") from err


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("cli",))
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
