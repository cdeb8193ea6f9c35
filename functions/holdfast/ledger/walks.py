"""When each kind was last walked in a plan generation, and what that walk saw:
pk `WALK`, sk `<generation:012>#<marker>`.

- `at`: when the kind's walk last finished (marked done, or a re-walk completed). A
  kind held in posture is walked again every `settings.rewalk_minutes` (holdfast.reconciler).
- `seen`: the keys (holdfast.engine.bookkeeping.walk_key: ARN and listed selection) of the
  candidates the generation's walks finished, a string set grown with ADD, so two
  controllers' walks add up. A re-walk reads and engages only the candidates not among
  them, or whose listing shows them changed (holdfast.engine.bookkeeping.changed_since_walked).

One Query per tick reads the generation's `at` values (the sets are left out by a
projection); a re-walk reads its kind's set with one GetItem. Items leave by TTL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

PARTITION = "WALK"
TTL_DAYS = 7


def _sk(generation: int, marker: str) -> str:
    return f"{generation:012d}#{marker}"


@dataclass(frozen=True)
class Walk:
    marker: str
    at: datetime | None


@uses("dynamodb:Query", by=("reconciler",))
def load(ledger: "Ledger", generation: int) -> dict[str, Walk]:
    """marker -> when its walk last finished under `generation`."""
    try:
        pages = ledger.query_pages(
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :gen)",
            ProjectionExpression="#sk, #at",
            ExpressionAttributeNames={"#pk": PK, "#sk": SK, "#at": "at"},
            ExpressionAttributeValues={":pk": {"S": PARTITION}, ":gen": {"S": _sk(generation, "")}},
            ConsistentRead=True,
        )
        out = {}
        for page in pages:
            for item in page["Items"]:
                marker = item[SK]["S"].split("#", 1)[1]
                at = item.get("at", {}).get("S")
                out[marker] = Walk(marker, datetime.fromisoformat(at) if at else None)
        return out
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the walks from {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:GetItem", by=("reconciler",))
def seen(ledger: "Ledger", generation: int, marker: str) -> set[str]:
    try:
        item = ledger.get_item(Key=key(PARTITION, _sk(generation, marker)), ConsistentRead=True) or {}
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the walk of {marker} from {ledger.table}: {failure_kind(err)}") from err
    return set(item.get("seen", {}).get("SS", ()))


@uses("dynamodb:UpdateItem", by=("reconciler",))
def walked(ledger: "Ledger", generation: int, marker: str, *, now: datetime, finished: bool,
           prints: set[str]) -> None:
    """Add what a walk of `marker` saw; `finished`: it reached the end (sets `at`)."""
    sets, values = ["#ttl = :ttl"], {":ttl": {"N": str(int((now + timedelta(days=TTL_DAYS)).timestamp()))}}
    names = {"#ttl": TTL_ATTRIBUTE}
    if finished:
        sets.append("#at = :at")
        names["#at"] = "at"
        values[":at"] = {"S": now.isoformat()}
    expression = "SET " + ", ".join(sets)
    if prints:
        expression += " ADD #seen :prints"
        names["#seen"] = "seen"
        values[":prints"] = {"SS": sorted(prints)}
    try:
        ledger.update_item(Key=key(PARTITION, _sk(generation, marker)), UpdateExpression=expression,
                             ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the walk of {marker} in {ledger.table}: {failure_kind(err)}") from err
