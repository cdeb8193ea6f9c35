"""The plan ledger: the plan in force, its generation, and the rules that keep racing
controllers from undoing each other (the October DNS enactors, turned into rules).

Items (pk `PLAN` unless said otherwise):

| sk                  | what                                                          | expires |
|---------------------|---------------------------------------------------------------|---------|
| `CURRENT`           | the active plan: generation, stage, entered_at, drain step,   | never   |
|                     | verdict, reasons, mode, `done` kinds (progress), `notified`   |         |
| `GEN#<gen:012>`     | history: each plan as written                                 | TTL     |
| `LEASE#<controller>`| the generation a controller last relaxed under, and when      | TTL     |
| CONTROL / `PAUSE`   | the kill switch the CLI sets                                  | never   |
| CONTROL / `ADVANCE` | an operator's "skip the hold of generation g"                 | TTL     |
| `VERDICT`           | the detector's last verdict, for its hysteresis               | never   |

Rules:
- A plan is written only as generation current+1, in one transaction with its history
  item (`write`). Nothing here deletes a plan: `CURRENT` is overwritten only by its
  successor, history leaves by TTL (invariant 5).
- `guard(g)` is called immediately before every relaxing write. It is a transaction:
  a ConditionCheck that `CURRENT.generation` is still g, and an update of the
  controller's lease. The check runs at the moment of the write, never only at the
  start of a walk (invariant 4); a failure raises `StalePlan`. When the ledger cannot
  be reached the guard also refuses: relaxing without a fresh plan is never safe.
- Between a guard's check and the AWS write it protects there is one API call. The
  lease closes that window: a tick that engages under a newer generation does not
  record its engage walk as done while another controller's lease from an older
  generation is younger than LEASE_SECONDS (`stale_relaxers`), so a relaxing write that
  slipped through is re-engaged by a later walk.
- Progress (`mark_done`, `set_cursor`) and notification (`mark_notified`) are
  conditional on the generation, so a stale controller cannot mark a newer plan's work
  done or move its cursor. A cursor is an attribute `cursor:<marker>` of CURRENT; `write`
  replaces the whole item, so a new generation starts with none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from ..actuators.base import Guard, StalePlan
from ..iam import uses
from ..policy import Plan
from . import PK, SK, TTL_ATTRIBUTE

PLAN_PK, CURRENT = "PLAN", "CURRENT"
CURSOR = "cursor:"
CONTROL_PK, PAUSE, ADVANCE = "CONTROL", "PAUSE", "ADVANCE"
HISTORY_DAYS = 30
# Longer than one AWS write can take under the SDK's standard retries (3 attempts of a
# 3 s connect and 10 s read timeout): a relaxing write guarded earlier has landed or failed by then.
LEASE_SECONDS = 60

# Named sub-conditions (as Powertools' idempotency layer builds its own):
# - NO_PLAN_YET: two controllers that both found no plan race to create generation 1;
#   exactly one wins, the other re-reads.
NO_PLAN_YET = "attribute_not_exists(#pk)"
# - IS_GENERATION: the plan is still the generation the writer read. For a new plan it
#   means "nobody wrote g+1 meanwhile", so a slow controller can never overwrite a newer
#   plan with an older decision (the October enactor). For guards, progress and
#   notification it means "my plan is still the active one".
IS_GENERATION = "#generation = :generation"


class PlanConflict(Exception):
    """Another controller wrote the plan first; re-read and decide again."""


class LedgerUnavailable(Exception):
    """The ledger could not be read or written (not a conflict)."""


@dataclass(frozen=True)
class Control:
    paused: bool = False
    paused_by: str | None = None
    paused_at: str | None = None
    reason: str | None = None
    advance_generation: int | None = None


def _key(pk: str, sk: str) -> dict:
    return {PK: {"S": pk}, SK: {"S": sk}}


def _still_current(table: str, generation: int) -> dict:
    """A transaction item that holds only while `generation` is the active plan."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": _key(PLAN_PK, CURRENT),
            "ConditionExpression": IS_GENERATION,
            "ExpressionAttributeNames": {"#generation": "generation"},
            "ExpressionAttributeValues": {":generation": {"N": str(generation)}},
        }
    }


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


def _iso(when: datetime | None) -> dict:
    return {"S": when.isoformat()} if when else {"NULL": True}


def _time(value: dict) -> datetime | None:
    return None if "NULL" in value else datetime.fromisoformat(value["S"])


def _code(err: Exception) -> str:
    """The AWS error code, or the kind of failure when no answer came (no connection,
    timeout): the ledger is unreachable either way, and it says which."""
    return err.response["Error"]["Code"] if isinstance(err, ClientError) else type(err).__name__


def _cancelled_by_condition(err: Exception) -> bool:
    if not isinstance(err, ClientError):
        return False
    code = err.response["Error"]["Code"]
    if code == "ConditionalCheckFailedException":
        return True
    reasons = err.response.get("CancellationReasons") or []
    return code == "TransactionCanceledException" and any(r.get("Code") == "ConditionalCheckFailed" for r in reasons)


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


@uses("dynamodb:GetItem", by=("reconciler", "cli"))
def read_item(dynamodb, table: str) -> dict[str, Any] | None:
    """The raw CURRENT item (with written_by, notified), strongly consistent."""
    try:
        return dynamodb.get_item(TableName=table, Key=_key(PLAN_PK, CURRENT), ConsistentRead=True).get("Item")
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the plan from {table}: {_code(err)}") from err


def read(dynamodb, table: str) -> Plan | None:
    item = read_item(dynamodb, table)
    return from_item(item) if item else None


@uses("dynamodb:PutItem", by=("reconciler",))
def write(dynamodb, table: str, plan: Plan, *, controller_id: str, now: datetime) -> None:
    """Write `plan` as the successor of generation plan.generation-1, with its history
    item, atomically. Raises PlanConflict when that is no longer the current plan."""
    previous = plan.generation - 1
    item = to_item(plan, controller_id=controller_id, now=now)
    current = {
        "TableName": table,
        "Item": {**_key(PLAN_PK, CURRENT), **item},
        "ExpressionAttributeNames": {"#pk": PK} if previous == 0 else {"#generation": "generation"},
    }
    if previous == 0:
        current["ConditionExpression"] = NO_PLAN_YET
    else:
        current["ConditionExpression"] = IS_GENERATION
        current["ExpressionAttributeValues"] = {":generation": {"N": str(previous)}}
    history = {
        "TableName": table,
        "Item": {
            **_key(PLAN_PK, f"GEN#{plan.generation:012d}"),
            **item,
            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=HISTORY_DAYS)))},
        },
    }
    try:
        dynamodb.transact_write_items(TransactItems=[{"Put": current}, {"Put": history}])
    except (ClientError, BotoCoreError) as err:
        if _cancelled_by_condition(err):
            raise PlanConflict(f"generation {plan.generation} lost: the plan is no longer generation {previous}") from err
        raise LedgerUnavailable(f"cannot write plan generation {plan.generation}: {_code(err)}") from err


def _update_current(dynamodb, table: str, generation: int, expression: str, values: dict,
                    names: dict | None = None) -> bool:
    try:
        dynamodb.update_item(
            TableName=table,
            Key=_key(PLAN_PK, CURRENT),
            UpdateExpression=expression,
            ConditionExpression=IS_GENERATION,
            ExpressionAttributeNames={"#generation": "generation", **(names or {})},
            ExpressionAttributeValues={":generation": {"N": str(generation)}, **values},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if _cancelled_by_condition(err):
            return False
        raise LedgerUnavailable(f"cannot update plan generation {generation}: {_code(err)}") from err


@uses("dynamodb:UpdateItem", by=("reconciler",))
def mark_done(dynamodb, table: str, generation: int, kind: str) -> bool:
    """Record that `kind`'s walk finished for `generation`. False if the plan moved on."""
    return _update_current(dynamodb, table, generation, "ADD done :kind", {":kind": {"SS": [kind]}})


@uses("dynamodb:UpdateItem", by=("reconciler",))
def set_cursor(dynamodb, table: str, generation: int, marker: str, arn: str) -> bool:
    """Record where `marker`'s unfinished walk resumes for `generation`. False if the plan moved on."""
    return _update_current(dynamodb, table, generation, "SET #cursor = :arn", {":arn": {"S": arn}},
                           {"#cursor": CURSOR + marker})


@uses("dynamodb:UpdateItem", by=("reconciler",))
def mark_notified(dynamodb, table: str, generation: int) -> bool:
    return _update_current(dynamodb, table, generation, "SET notified = :yes", {":yes": {"BOOL": True}})


def guard_factory(dynamodb, table: str, *, controller_id: str, clock) -> Callable[[int], Guard]:
    """guard(g) -> a Guard that raises StalePlan unless generation g is current *now*."""

    def guard(generation: int) -> Guard:
        return lambda: check_generation(dynamodb, table, generation, controller_id=controller_id, now=clock.now())

    return guard


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("reconciler",))
def check_generation(dynamodb, table: str, generation: int, *, controller_id: str, now: datetime) -> None:
    """One transaction: ConditionCheck CURRENT.generation == g, and this controller's
    lease records that it is about to relax under g."""
    lease = {
        **_key(PLAN_PK, f"LEASE#{controller_id}"),
        "generation": {"N": str(generation)},
        "at": {"S": now.isoformat()},
        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
    }
    try:
        dynamodb.transact_write_items(
            TransactItems=[
                _still_current(table, generation),
                {"Put": {"TableName": table, "Item": lease}},
            ]
        )
    except (ClientError, BotoCoreError) as err:
        if _cancelled_by_condition(err):
            raise StalePlan(f"plan generation {generation} is no longer current") from err
        raise StalePlan(f"cannot confirm plan generation {generation} ({_code(err)}): not relaxing") from err


@uses("dynamodb:Query", by=("reconciler",))
def stale_relaxers(dynamodb, table: str, generation: int, now: datetime) -> list[str]:
    """Controllers that relaxed under an older generation less than LEASE_SECONDS ago."""
    pages = dynamodb.get_paginator("query").paginate(
        TableName=table,
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :lease)",
        ExpressionAttributeNames={"#pk": PK, "#sk": SK},
        ExpressionAttributeValues={":pk": {"S": PLAN_PK}, ":lease": {"S": "LEASE#"}},
        ConsistentRead=True,
    )
    cutoff = now - timedelta(seconds=LEASE_SECONDS)
    try:
        return [
            item[SK]["S"].removeprefix("LEASE#")
            for page in pages
            for item in page["Items"]
            if int(item["generation"]["N"]) < generation and datetime.fromisoformat(item["at"]["S"]) > cutoff
        ]
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the controllers' leases from {table}: {_code(err)}") from err


# ---- operator control ----------------------------------------------------------------


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
        raise LedgerUnavailable(f"cannot read the kill switch from {table}: {_code(err)}") from err
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
        dynamodb.put_item(TableName=table, Item={**_key(CONTROL_PK, PAUSE), **item})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot set the kill switch in {table}: {_code(err)}") from err


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("cli",))
def request_advance(dynamodb, table: str, generation: int, *, by: str, now: datetime) -> None:
    """Skip the hold of `generation`, only if it is still the current plan: an operator
    acting on a stale view must not skip the hold of a plan they have not seen."""
    try:
        dynamodb.transact_write_items(
            TransactItems=[
                _still_current(table, generation),
                {
                    "Put": {
                        "TableName": table,
                        "Item": {
                            **_key(CONTROL_PK, ADVANCE),
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
        if _cancelled_by_condition(err):
            raise PlanConflict(f"plan generation {generation} is no longer current") from err
        raise LedgerUnavailable(f"cannot record the advance in {table}: {_code(err)}") from err


# ---- the last verdict (the detector's hysteresis needs the previous one) ------------

VERDICT = "VERDICT"


@uses("dynamodb:GetItem", by=("reconciler", "cli"))
def read_verdict(dynamodb, table: str) -> dict[str, Any] | None:
    try:
        item = dynamodb.get_item(TableName=table, Key=_key(PLAN_PK, VERDICT)).get("Item")
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the verdict from {table}: {_code(err)}") from err
    return json.loads(item["verdict"]["S"]) if item else None


@uses("dynamodb:PutItem", by=("reconciler",))
def write_verdict(dynamodb, table: str, verdict: dict[str, Any]) -> None:
    """Unconditional: the verdict is an observation, not a decision; the last one wins."""
    try:
        dynamodb.put_item(TableName=table, Item={**_key(PLAN_PK, VERDICT), "verdict": {"S": json.dumps(verdict)}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot write the verdict to {table}: {_code(err)}") from err
