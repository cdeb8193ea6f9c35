"""The last scheduled readiness result: pk `READINESS`, sk `LAST` (one item, the last run wins).

Written by the readiness function (holdfast.handlers.readiness), read by `holdfast status`
and `holdfast status --all-accounts`. Its own partition, so the readiness role writes it
and nothing else of the ledger (policies/readiness.json, by dynamodb:LeadingKeys).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger.conditions import key

READINESS_PK, LAST = "READINESS", "LAST"


@uses("dynamodb:PutItem", by=("readiness",))
def write_result(dynamodb, table: str, result: dict[str, Any]) -> None:
    try:
        dynamodb.put_item(TableName=table, Item={**key(READINESS_PK, LAST), "result": {"S": json.dumps(result)}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the readiness result in {table}: {failure_kind(err)}") from err


@uses("dynamodb:GetItem", by=("cli", "readonly"))
def read_result(dynamodb, table: str) -> dict[str, Any] | None:
    """{"at", "ok", "failed": [check names], "checks": [...], "selected": {kind: n}}, or None before the first run."""
    try:
        item = dynamodb.get_item(TableName=table, Key=key(READINESS_PK, LAST)).get("Item")
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the readiness result from {table}: {failure_kind(err)}") from err
    return json.loads(item["result"]["S"]) if item and "result" in item else None
