"""The detector's last verdict (its hysteresis needs the previous one): pk `PLAN`, sk `VERDICT`."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger.conditions import PLAN_PK, key

VERDICT = "VERDICT"


@uses("dynamodb:GetItem", by=("reconciler", "cli", "detector"))
def read_verdict(dynamodb, table: str) -> dict[str, Any] | None:
    try:
        item = dynamodb.get_item(TableName=table, Key=key(PLAN_PK, VERDICT)).get("Item")
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the verdict from {table}: {failure_kind(err)}") from err
    return json.loads(item["verdict"]["S"]) if item else None


@uses("dynamodb:PutItem", by=("reconciler",))
def write_verdict(dynamodb, table: str, verdict: dict[str, Any]) -> None:
    """Unconditional: the verdict is an observation, not a decision; the last one wins."""
    try:
        dynamodb.put_item(TableName=table, Item={**key(PLAN_PK, VERDICT), "verdict": {"S": json.dumps(verdict)}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot write the verdict to {table}: {failure_kind(err)}") from err
