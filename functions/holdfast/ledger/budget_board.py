"""Shares of the account's rate budgets, as leases in the ledger (holdfast.budget.ShareBoard).

Items: pk `BUDGET`, sk `<budget>#<controller>`, attributes `joined`, `renewed`, `until`
(epoch seconds, fractions kept) and the table's TTL attribute an hour on, so a lease
of a controller that vanished leaves the table by itself. A lease counts while `until`
is in the future; `holdfast.budget` decides what a share is.

One renewal is two calls: a Query of the budget's leases, then a Put of this
controller's lease (a new or lapsed lease starts a new `joined`). Every controller
renews each budget about once a second, so a walk adds about two DynamoDB requests a
second per budget, far inside the table's on-demand throughput. Any DynamoDB error is
`BoardUnavailable`: the budget then assumes a conservative share and carries on, since
engaging must never wait for the ledger (it must go on when the ledger is unreachable).

Times are wall-clock seconds (`clock`), the only clock two Lambda hosts share; their
skew (milliseconds) is small against the one-second renewal.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from botocore.exceptions import BotoCoreError, ClientError

from ..budget import BoardUnavailable, Share
from ..iam import uses
from . import PK, SK, TTL_ATTRIBUTE

if TYPE_CHECKING:
    from .store import Ledger

PARTITION = "BUDGET"
KEEP_SECONDS = 3600   # the TTL attribute: DynamoDB removes lapsed leases after this


def _sk(budget: str, member: str) -> str:
    return f"{budget}#{member}"


class LedgerShareBoard:
    def __init__(self, ledger: "Ledger", *, clock: Callable[[], float] = time.time):
        self._ledger = ledger
        self.table = ledger.table
        self._clock = clock

    @uses("dynamodb:Query", "dynamodb:PutItem", by=("reconciler", "cli"))
    def renew(self, budget: str, member: str, ttl: float) -> Share:
        now = self._clock()
        try:
            leases = self._leases(budget)
            mine = leases.pop(member, None)
            joined = mine[0] if mine is not None and mine[2] > now else now
            self._ledger.put_item(Item={
                PK: {"S": PARTITION}, SK: {"S": _sk(budget, member)},
                "joined": {"N": repr(joined)}, "renewed": {"N": repr(now)}, "until": {"N": repr(now + ttl)},
                TTL_ATTRIBUTE: {"N": str(int(now + KEEP_SECONDS))},
            })
        except (ClientError, BotoCoreError) as err:
            raise BoardUnavailable(f"budget leases in {self.table}: {err}") from err
        live = {m: lease for m, lease in leases.items() if lease[2] > now}
        return Share(holders=len(live) + 1, ready=all(renewed >= joined for _, renewed, _ in live.values()))

    def _leases(self, budget: str) -> dict[str, tuple[float, float, float]]:
        out: dict[str, tuple[float, float, float]] = {}
        pages = self._ledger.query_pages(
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": PK, "#sk": SK},
            ExpressionAttributeValues={":pk": {"S": PARTITION}, ":prefix": {"S": f"{budget}#"}},
            ConsistentRead=True,
        )
        for page in pages:
            for item in page["Items"]:
                member = item[SK]["S"][len(budget) + 1:]
                out[member] = (float(item["joined"]["N"]), float(item["renewed"]["N"]), float(item["until"]["N"]))
        return out

    @uses("dynamodb:DeleteItem", by=("reconciler", "cli"))
    def leave(self, budget: str, member: str) -> None:
        try:
            self._ledger.delete_item(Key={PK: {"S": PARTITION}, SK: {"S": _sk(budget, member)}})
        except (ClientError, BotoCoreError) as err:
            raise BoardUnavailable(f"budget leases in {self.table}: {err}") from err
