"""The detector's last verdict (its hysteresis needs the previous one): pk `PLAN`, sk `VERDICT`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger.conditions import PLAN_PK, key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

VERDICT = "VERDICT"


@uses("dynamodb:GetItem", by=("reconciler", "cli", "detector"))
def read_verdict(ledger: "Ledger") -> dict[str, Any] | None:
    try:
        item = ledger.get_item(Key=key(PLAN_PK, VERDICT))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the verdict from {ledger.table}: {failure_kind(err)}") from err
    return json.loads(item["verdict"]["S"]) if item else None


@uses("dynamodb:PutItem", by=("reconciler",))
def write_verdict(ledger: "Ledger", verdict: dict[str, Any]) -> None:
    """Unconditional: the verdict is an observation, not a decision; the last one wins."""
    try:
        ledger.put_item(Item={**key(PLAN_PK, VERDICT), "verdict": {"S": json.dumps(verdict)}})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot write the verdict to {ledger.table}: {failure_kind(err)}") from err
