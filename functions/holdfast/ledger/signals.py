"""Signals in the ledger: recorded once, read by window, gone by TTL.

Item families (see ledger/__init__.py):

| pk                       | sk                        | what                                  |
|--------------------------|---------------------------|---------------------------------------|
| `SIGNAL#<yyyy-mm-ddThh>` | `<iso time>#<signal id>`  | launch results, probe results          |
| `HEALTH`                 | `<eventArn>#<commId>`     | AWS Health communications              |

- Idempotent: `record` is a conditional put (attribute_not_exists), so EventBridge's
  at-least-once delivery, the polling fallback finding an activity the event already
  reported, and a second copy of one Health communication each store one item. A signal's key
  is a function of the signal alone (its time and id), never of when it arrived.
- Health issues stay open for hours and may have opened before any window we read, so
  they live in one small partition that `recent` reads whole.
- Every item carries `expires_at` = signal time + settings.signal_ttl_hours; DynamoDB's
  TTL deletes them (lazily, so `recent` also filters expired items out).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Iterable

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.signals import HEALTH, Signal, iso
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import NO_RECORD_YET

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

SIGNAL_PREFIX = "SIGNAL#"
HEALTH_PK = "HEALTH"


def key(signal: Signal) -> dict[str, str]:
    if signal.source == HEALTH:
        return {PK: HEALTH_PK, SK: signal.id}
    return {PK: _bucket(signal.time), SK: f"{iso(signal.time)}#{signal.id}"}


def _bucket(t: datetime) -> str:
    return SIGNAL_PREFIX + t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H")


def to_item(signal: Signal, ttl_hours: int) -> dict:
    expires = int((signal.time + timedelta(hours=ttl_hours)).timestamp())
    body = signal.to_dict()
    item = {**{k: {"S": v} for k, v in key(signal).items()}, TTL_ATTRIBUTE: {"N": str(expires)}}
    for name in ("time", "source", "klass", "id"):
        item[name] = {"S": body[name]}
    for name in ("zone", "group"):
        if body[name]:
            item[name] = {"S": body[name]}
    item["detail"] = {"M": {k: {"S": str(v)} for k, v in body["detail"].items()}}
    return item


def from_item(item: dict) -> Signal:
    return Signal.from_dict(
        {
            "time": item["time"]["S"],
            "source": item["source"]["S"],
            "zone": item.get("zone", {}).get("S"),
            "group": item.get("group", {}).get("S"),
            "klass": item["klass"]["S"],
            "detail": {k: v["S"] for k, v in item.get("detail", {}).get("M", {}).items()},
            "id": item["id"]["S"],
        }
    )


@uses("dynamodb:PutItem", by=("detector", "reconciler"))
def record(ledger: "Ledger", signal: Signal, *, ttl_hours: int) -> bool:
    """Store a signal once. True when stored now, False when it was already there."""
    try:
        ledger.put_item(
            Item=to_item(signal, ttl_hours),
            # The key is derived from the signal alone, so a redelivery finds its twin.
            ConditionExpression=NO_RECORD_YET,
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot record signal {signal.id}: {err}") from err


def record_all(ledger: "Ledger", signals: Iterable[Signal], *, ttl_hours: int) -> int:
    """Record each signal; returns how many were new."""
    return sum(record(ledger, s, ttl_hours=ttl_hours) for s in signals)


@uses("dynamodb:Query", by=("reconciler", "cli", "detector"))
def recent(ledger: "Ledger", since: datetime, now: datetime) -> list[Signal]:
    """Signals with since <= time <= now, plus every unexpired Health communication
    (an issue stays open until its closing communication, however long ago it opened)."""
    try:
        items = []
        hour = since.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
        while hour <= now:
            items += _query(
                ledger,
                "#pk = :pk AND #sk BETWEEN :lo AND :hi",
                {":pk": {"S": _bucket(hour)}, ":lo": {"S": iso(since)}, ":hi": {"S": iso(now) + "~"}},
            )
            hour += timedelta(hours=1)
        items += _query(ledger, "#pk = :pk", {":pk": {"S": HEALTH_PK}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read signals: {err}") from err
    epoch = int(now.timestamp())
    return [from_item(i) for i in items if int(i.get(TTL_ATTRIBUTE, {}).get("N", epoch + 1)) > epoch]


def _query(ledger: "Ledger", condition: str, values: dict) -> list[dict]:
    names = {"#pk": PK} if "#sk" not in condition else {"#pk": PK, "#sk": SK}
    kwargs = dict(KeyConditionExpression=condition, ExpressionAttributeNames=names,
                  ExpressionAttributeValues=values)
    items = []
    while True:
        page = ledger.query(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
