"""The plan ledger: the plan in force, its generation, and the rules that keep racing
controllers from undoing each other (the October DNS enactors, turned into rules).

Items (pk `PLAN`):

| sk                  | what                                                          | expires |
|---------------------|---------------------------------------------------------------|---------|
| `CURRENT`           | the active plan: generation, stage, entered_at, drain step,   | never   |
|                     | verdict, reasons, mode, `done` kinds (progress), `notified`   |         |
| `GEN#<gen:012>`     | history: each plan as written                                 | TTL     |

The other families live beside this module: guards and leases (`leases.py`), operator
control (`control.py`), the last verdict (`verdict.py`); every condition comes from
`conditions.py`.

Rules:
- A plan is written only as generation current+1, in one transaction with its history
  item (`write`). Nothing here deletes a plan: `CURRENT` is overwritten only by its
  successor, history leaves by TTL (nothing deletes the active plan).
- Progress (`mark_done`, `set_cursor`) and notification (`mark_notified`) are
  conditional on the generation, so a stale controller cannot mark a newer plan's work
  done or move its cursor. A cursor is an attribute `cursor:<marker>` of CURRENT; `write`
  replaces the whole item, so a new generation starts with none.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, contended, failure_kind
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict
from holdfast.core.policy import Plan
from holdfast.iam import uses
from holdfast.ledger import PK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import CURRENT, IS_GENERATION, NO_PLAN_YET, PLAN_PK, key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

CURSOR = "cursor:"
HISTORY_DAYS = 30


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


def _iso(when: datetime | None) -> dict:
    return {"S": when.isoformat()} if when else {"NULL": True}


def _time(value: dict) -> datetime | None:
    return None if "NULL" in value else datetime.fromisoformat(value["S"])


def to_item(plan: Plan, *, controller_id: str, now: datetime) -> dict[str, Any]:
    return {
        "generation": {"N": str(plan.generation)},
        "stage": {"S": plan.stage},
        "entered_at": _iso(plan.entered_at),
        "drain_step": {"N": str(plan.drain_step)},
        "verdict": {"S": plan.verdict},
        "reasons": {"L": [{"S": r} for r in plan.reasons]},
        "mode": {"S": plan.mode},
        "impaired_at": _iso(plan.impaired_at),
        "stepped_back": {"BOOL": plan.stepped_back},
        "written_by": {"S": controller_id},
        "written_at": {"S": now.isoformat()},
        "notified": {"BOOL": False},
    }


def from_item(item: dict[str, Any]) -> Plan:
    return Plan(
        generation=int(item["generation"]["N"]),
        stage=item["stage"]["S"],
        entered_at=_time(item["entered_at"]),
        drain_step=int(item["drain_step"]["N"]),
        verdict=item["verdict"]["S"],
        reasons=tuple(r["S"] for r in item["reasons"]["L"]),
        mode=item["mode"]["S"],
        impaired_at=_time(item["impaired_at"]),
        stepped_back=item["stepped_back"]["BOOL"],
        done=frozenset(item.get("done", {}).get("SS", ())),
        cursor={k.removeprefix(CURSOR): v["S"] for k, v in item.items() if k.startswith(CURSOR)},
    )


@uses("dynamodb:GetItem", by=("reconciler", "cli", "detector", "readiness", "operator", "regionswitch"))
def read_item(ledger: "Ledger") -> dict[str, Any] | None:
    """The raw CURRENT item (with written_by, notified), strongly consistent."""
    try:
        return ledger.get_item(Key=key(PLAN_PK, CURRENT), ConsistentRead=True)
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the plan from {ledger.table}: {failure_kind(err)}") from err


def is_notified(item: Mapping[str, Any] | None) -> bool:
    """Whether the plan item's new generation was announced (its `notified` flag)."""
    return bool((item or {}).get("notified", {}).get("BOOL", False))


def read(ledger: "Ledger") -> Plan | None:
    item = read_item(ledger)
    return from_item(item) if item else None


@uses("dynamodb:PutItem", by=("reconciler",))
def write(ledger: "Ledger", plan: Plan, *, controller_id: str, now: datetime) -> None:
    """Write `plan` as the successor of generation plan.generation-1, with its history
    item, atomically. Raises PlanConflict when that is no longer the current plan."""
    previous = plan.generation - 1
    item = to_item(plan, controller_id=controller_id, now=now)
    current = {
        "Item": {**key(PLAN_PK, CURRENT), **item},
        "ExpressionAttributeNames": {"#pk": PK} if previous == 0 else {"#generation": "generation"},
    }
    if previous == 0:
        current["ConditionExpression"] = NO_PLAN_YET
    else:
        current["ConditionExpression"] = IS_GENERATION
        current["ExpressionAttributeValues"] = {":generation": {"N": str(previous)}}
    history = {
        "Item": {
            **key(PLAN_PK, f"GEN#{plan.generation:012d}"),
            **item,
            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=HISTORY_DAYS)))},
        },
    }
    try:
        ledger.transact_write_items([{"Put": current}, {"Put": history}])
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            raise PlanConflict(f"generation {plan.generation} lost: the plan is no longer generation {previous}") from err
        if contended(err):
            # Another controller's transaction held the plan item (overlapping ticks): the
            # ledger is fine; re-read next tick.
            raise Contention(f"plan generation {plan.generation} not written: another transaction held the plan") from err
        raise LedgerUnavailable(f"cannot write plan generation {plan.generation}: {failure_kind(err)}") from err


def _update_current(ledger: "Ledger", generation: int, expression: str, values: dict,
                    names: dict | None = None) -> bool:
    try:
        ledger.update_item(
            Key=key(PLAN_PK, CURRENT),
            UpdateExpression=expression,
            ConditionExpression=IS_GENERATION,
            ExpressionAttributeNames={"#generation": "generation", **(names or {})},
            ExpressionAttributeValues={":generation": {"N": str(generation)}, **values},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        if contended(err):
            # A single write met another controller's open transaction on the plan item
            # (DynamoDB's TransactionConflict, which botocore does not retry): contention.
            raise Contention(f"plan generation {generation} busy: another transaction held the plan") from err
        raise LedgerUnavailable(f"cannot update plan generation {generation}: {failure_kind(err)}") from err


@uses("dynamodb:UpdateItem", by=("reconciler",))
def mark_done(ledger: "Ledger", generation: int, kind: str) -> bool:
    """Record that `kind`'s walk finished for `generation`. False if the plan moved on."""
    return _update_current(ledger, generation, "ADD done :kind", {":kind": {"SS": [kind]}})


@uses("dynamodb:UpdateItem", by=("reconciler",))
def set_cursor(ledger: "Ledger", generation: int, marker: str, arn: str) -> bool:
    """Record where `marker`'s unfinished walk resumes for `generation`. False if the plan moved on."""
    return _update_current(ledger, generation, "SET #cursor = :arn", {":arn": {"S": arn}},
                           {"#cursor": CURSOR + marker})


@uses("dynamodb:UpdateItem", by=("reconciler",))
def mark_notified(ledger: "Ledger", generation: int) -> bool:
    return _update_current(ledger, generation, "SET notified = :yes", {":yes": {"BOOL": True}})
