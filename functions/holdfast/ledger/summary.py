"""One region's ledger at a glance, for `holdfast status --all-accounts`
(holdfast.cli.accounts): the plan, the last verdict's state, the kill switch and how many
resources are engaged, by kind. Reads only; the items' wire format stays in the ledger.

`before_read()` is called before each DynamoDB call (the caller's read budget).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from holdfast.core.policy import Plan
from holdfast.iam import uses
from holdfast.ledger import PK
from holdfast.ledger.conditions import CURRENT, PLAN_PK, key
from holdfast.ledger.control import CONTROL_PK, PAUSE
from holdfast.ledger.plan import from_item
from holdfast.ledger.resources import PARTITION as RES_PK
from holdfast.ledger.verdict import VERDICT

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger


@dataclass(frozen=True)
class Summary:
    plan: Plan | None                 # None: no plan yet (normal, generation 0)
    verdict: str | None               # the last verdict's state, None when there is none
    paused: bool
    engaged_by_kind: dict[str, int] = field(default_factory=dict)


@uses("dynamodb:GetItem", "dynamodb:Query", by=("cli", "readonly"))
def read(ledger: "Ledger", *, before_read: Callable[[], None] = lambda: None) -> Summary:
    before_read()
    item = ledger.get_item(Key=key(PLAN_PK, CURRENT))
    plan = from_item(item) if item else None
    before_read()
    verdict = ledger.get_item(Key=key(PLAN_PK, VERDICT))
    state = json.loads(verdict["verdict"]["S"]).get("state") if verdict and "verdict" in verdict else None
    before_read()
    control = ledger.get_item(Key=key(CONTROL_PK, PAUSE))
    paused = bool(control and control.get("paused", {}).get("BOOL"))
    kinds: Counter[str] = Counter()
    request = dict(KeyConditionExpression="#pk = :pk", ProjectionExpression="#kind",
                   ExpressionAttributeNames={"#pk": PK, "#kind": "kind"}, ExpressionAttributeValues={":pk": {"S": RES_PK}})
    while True:
        before_read()
        page = ledger.query(**request)
        kinds.update(i.get("kind", {}).get("S", "?") for i in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return Summary(plan, state, paused, dict(sorted(kinds.items())))
