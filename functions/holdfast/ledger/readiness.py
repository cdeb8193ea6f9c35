"""The last scheduled readiness result: pk `READINESS`, sk `LAST` (one item, the last run wins).

Written by the readiness function (holdfast.handlers.readiness), read by `holdfast status`
and `holdfast status --all-accounts`. Its own partition, so the readiness role writes it
and nothing else of the ledger (policies/readiness.json, by dynamodb:LeadingKeys).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger.conditions import key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

READINESS_PK, LAST = "READINESS", "LAST"


@uses("dynamodb:PutItem", by=("readiness",))
def write_result(ledger: "Ledger", result: dict[str, Any]) -> None:
    try:
        ledger.put_item(Item={**key(READINESS_PK, LAST), "result": {"S": json.dumps(result)}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the readiness result in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:GetItem", by=("cli", "readonly"))
def read_result(ledger: "Ledger") -> dict[str, Any] | None:
    """{"at", "ok", "failed": [check names], "checks": [...], "selected": {kind: n}}, or None before the first run."""
    try:
        item = ledger.get_item(Key=key(READINESS_PK, LAST))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the readiness result from {ledger.table}: {failure_kind(err)}") from err
    return json.loads(item["result"]["S"]) if item and "result" in item else None
