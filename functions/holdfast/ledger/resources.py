"""Per-resource original records in the ledger: pk `RES`, sk `<arn>`.

One partition, so every record is one paginated Query, never a Scan of the whole table
(signals included). Holdfast writes these at most at the Lambda write rate, far inside
one partition's throughput.

The ledger is the second copy of a write-ahead record; the first is the tag on the
resource. Engaging must go on when the ledger is unreachable (its region may be the
impaired one), so every method here turns a DynamoDB error into a result, never an
exception, and the first failure marks the ledger unavailable for the rest of the run:
a walk over a thousand resources then does not wait out a thousand timeouts.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed
from holdfast.core.model import Record
from holdfast.iam import uses
from holdfast.ledger import PK, SK
from holdfast.ledger.conditions import NO_RECORD_YET

PARTITION = "RES"


def _key(arn: str) -> dict[str, Any]:
    return {PK: {"S": PARTITION}, SK: {"S": arn}}


class ResourceLedger:
    """Original records of engaged resources, tolerant of an unreachable table."""

    def __init__(self, dynamodb, table: str):
        self._db = dynamodb
        self.table = table
        self.available = True
        self.error: str | None = None
        self._lock = threading.Lock()
        self._known: set[str] | None = None

    def holds(self, arn: str) -> bool:
        """Whether the ledger has a record for `arn`, from one Query per run (cached).
        True when the ledger is unreachable: nothing could be written anyway."""
        with self._lock:
            known = self._known
        if known is None:
            known = {r.arn for r in self.records()}
            with self._lock:
                self._known = known
        return not self.available or arn in known

    def _failed(self, err: Exception) -> None:
        with self._lock:
            self.available = False
            self.error = self.error or f"{type(err).__name__}: {err}"

    @uses("dynamodb:PutItem", by=("reconciler", "cli"))
    def put_original(self, record: Record, name: str) -> bool:
        """Record an original unless one is already there. False when the ledger is unreachable."""
        if not self.available:
            return False
        item = {
            **_key(record.arn),
            "kind": {"S": record.kind},
            "name": {"S": name},
            "original": {"S": json.dumps(record.original, sort_keys=True)},
            "applied": {"S": json.dumps(record.applied, sort_keys=True)},
        }
        try:
            self._db.put_item(TableName=self.table, Item=item, ConditionExpression=NO_RECORD_YET)
        except (ClientError, BotoCoreError) as err:
            if not condition_failed(err):
                self._failed(err)
                return False
        return True

    @uses("dynamodb:GetItem", by=("reconciler", "cli"))
    def get(self, arn: str) -> Record | None:
        """The record for one resource; None when absent or the ledger is unreachable."""
        if not self.available:
            return None
        try:
            item = self._db.get_item(TableName=self.table, Key=_key(arn), ConsistentRead=True).get("Item")
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return None
        return _record(item) if item else None

    @uses("dynamodb:DeleteItem", by=("reconciler", "cli"))
    def forget(self, arn: str) -> bool:
        """Drop a record after its resource is restored (or vanished). False when unreachable."""
        if not self.available:
            return False
        try:
            self._db.delete_item(TableName=self.table, Key=_key(arn))
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return False
        return True

    @uses("dynamodb:Query", by=("reconciler", "cli"))
    def records(self) -> list[Record]:
        """Every original record; empty when the ledger is unreachable."""
        if not self.available:
            return []
        out: list[Record] = []
        try:
            for page in self._db.get_paginator("query").paginate(
                TableName=self.table,
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": PK},
                ExpressionAttributeValues={":pk": {"S": PARTITION}},
                ConsistentRead=True,
            ):
                out.extend(_record(item) for item in page["Items"])
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return []
        return out


def _record(item: dict[str, Any]) -> Record:
    return Record(
        kind=item["kind"]["S"],
        arn=item[SK]["S"],
        original=json.loads(item["original"]["S"]),
        applied=json.loads(item["applied"]["S"]),
    )
