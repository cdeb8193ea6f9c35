"""The drain's and the replay's records: one per mapping (pk `DRAIN`) and one per replay
source queue (pk `REPLAY`), sk the resource's ARN, the document a JSON string; and the
capacity stage's waves, one record per plan generation (pk `WAVES`).

| pk       | sk                  | document                                            |
|----------|---------------------|-----------------------------------------------------|
| `DRAIN`  | `<mapping arn>`     | holdfast.core.drain.Drain.to_dict()         |
| `REPLAY` | `<queue arn>`       | holdfast.core.replay.Replay.to_dict()               |
| `WAVES`  | `capacity#<gen:012>`| holdfast.core.capacity.Waves.to_dict()              |

What the controller raises a cap from is what it wrote here, so every write follows the
rule of every relaxing write (the plan current at the moment of the write): in one transaction with the check that the
plan is still generation g, at the moment of the write. A write also holds only over the
version its writer read (conditions.UNCHANGED_SINCE_READ), so two controllers of one
generation cannot both step a drain from the same read: the second is refused (Conflict)
and acts next tick on what the first wrote. A refused plan check is StalePlan.

Records leave by TTL (`RECORD_DAYS` after their last write) and are ignored once the
hold they belong to (`since`) is not the plan's: nothing deletes them (never delete what is in use).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, condition_failed_at, failure_kind
from holdfast.core.errors import Conflict, LedgerUnavailable, StalePlan
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import UNCHANGED_SINCE_READ, key, still_current

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

DRAIN, REPLAY, WAVES = "DRAIN", "REPLAY", "WAVES"
PARTITIONS = (DRAIN, REPLAY, WAVES)
RECORD_DAYS = 14


@dataclass(frozen=True)
class Item:
    arn: str
    doc: dict[str, Any]
    version: int          # 0: not written yet
    generation: int       # the plan generation it was written under
    updated_at: str | None = None


def _partition(partition: str) -> str:
    if partition not in PARTITIONS:
        raise ValueError(f"unknown record partition {partition!r}; one of {PARTITIONS}")
    return partition


def read_all(ledger: "Ledger", partition: str) -> dict[str, Item]:
    """Every record of the partition, by ARN, strongly consistent. A record whose document
    is not JSON is left out (and reported by the caller as missing: it starts again).

    One Query a ledger (one tick): the engine's walk (the mappings in drain), the drain
    stage and the replay stage read the same answer, kept current with the tick's own
    writes (`write`). A failed Query is not kept (the next reader reads again), and a
    write that failed drops the kept answer, as ledger/resources.py's Shared does."""
    with ledger.partitions_lock:
        kept = ledger.partitions.get(_partition(partition))
        if kept is None:
            kept = ledger.partitions[partition] = _query(ledger, partition)
        return dict(kept)


def _remember(ledger: "Ledger", partition: str, item: Item | None) -> None:
    """This tick's write, in its kept read: what a Query now would answer. None: the write
    failed, so the next reader reads again."""
    with ledger.partitions_lock:
        if item is None:
            ledger.partitions.pop(partition, None)
        elif partition in ledger.partitions:
            ledger.partitions[partition][item.arn] = item


@uses("dynamodb:Query", by=("reconciler", "cli"))
def _query(ledger: "Ledger", partition: str) -> dict[str, Item]:
    out: dict[str, Item] = {}
    try:
        for page in ledger.query_pages(
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PK},
            ExpressionAttributeValues={":pk": {"S": partition}},
            ConsistentRead=True,
        ):
            for item in page["Items"]:
                try:
                    doc = json.loads(item["doc"]["S"])
                except (KeyError, ValueError):
                    continue
                out[item[SK]["S"]] = Item(item[SK]["S"], doc, int(item["version"]["N"]), int(item["generation"]["N"]),
                                          item.get("updated_at", {}).get("S"))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the {partition.lower()} records from {ledger.table}: {failure_kind(err)}") from err
    return out


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("reconciler",))
def write(ledger: "Ledger", partition: str, arn: str, doc: dict[str, Any], *, generation: int,
          read_version: int, controller_id: str, now: datetime) -> Item:
    """Write `doc` as the next version of the record, only while `generation` is the plan
    and the record is still `read_version` (0: absent). StalePlan when the plan moved on,
    Conflict when another controller wrote the record since it was read."""
    version = read_version + 1
    put = {
        "Item": {
            **key(_partition(partition), arn),
            "doc": {"S": json.dumps(doc, sort_keys=True)},
            "version": {"N": str(version)},
            "generation": {"N": str(generation)},
            "updated_by": {"S": controller_id},
            "updated_at": {"S": now.isoformat()},
            TTL_ATTRIBUTE: {"N": str(int((now + timedelta(days=RECORD_DAYS)).timestamp()))},
        },
        "ConditionExpression": UNCHANGED_SINCE_READ,
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {":version": {"N": str(read_version)}},
    }
    try:
        ledger.transact_write_items([still_current(generation), {"Put": put}])
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            if condition_failed_at(err, 0):
                raise StalePlan(f"plan generation {generation} is no longer current") from err
            _remember(ledger, partition, None)   # another controller's write: read it next time
            raise Conflict(f"{partition.lower()} record of {arn} changed since it was read (version {read_version})") from err
        _remember(ledger, partition, None)
        raise LedgerUnavailable(f"cannot write the {partition.lower()} record of {arn}: {failure_kind(err)}") from err
    written = Item(arn, doc, version, generation, now.isoformat())
    _remember(ledger, partition, written)
    return written
