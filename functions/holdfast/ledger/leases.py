"""Guards and leases: the check, at the moment of every relaxing write, that the plan is
still the one the tick read (checked at the moment of the write), and the lease that closes the window between
that check and the AWS write it protects.

Items: pk `PLAN`, sk `LEASE#<controller>` — the generation a controller last relaxed
under, and when (TTL one day).

- `guard(g)` is called immediately before every relaxing write. It is a transaction:
  a ConditionCheck that `CURRENT.generation` is still g, and an update of the
  controller's lease. A failure raises `StalePlan`. When the ledger cannot be reached
  the guard also refuses: relaxing without a fresh plan is never safe.
- Between a guard's check and the AWS write it protects there is one API call. A tick
  that engages under a newer generation does not record its engage walk as done while
  another controller's lease from an older generation is younger than LEASE_SECONDS
  (`stale_relaxers`), so a relaxing write that slipped through is re-engaged by a later walk.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Callable

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, failure_kind
from holdfast.core.errors import LedgerUnavailable, StalePlan
from holdfast.core.model import Guard
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import PLAN_PK, key, still_current

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

# Longer than one AWS write can take under the SDK's standard retries (3 attempts of a
# 3 s connect and 10 s read timeout): a relaxing write guarded earlier has landed or failed by then.
LEASE_SECONDS = 60


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


def guard_factory(ledger: "Ledger", *, controller_id: str, clock) -> Callable[[int], Guard]:
    """guard(g) -> a Guard that raises StalePlan unless generation g is current *now*."""

    def guard(generation: int) -> Guard:
        return lambda: check_generation(ledger, generation, controller_id=controller_id, now=clock.now())

    return guard


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("reconciler",))
def check_generation(ledger: "Ledger", generation: int, *, controller_id: str, now: datetime) -> None:
    """One transaction: ConditionCheck CURRENT.generation == g, and this controller's
    lease records that it is about to relax under g."""
    lease = {
        **key(PLAN_PK, f"LEASE#{controller_id}"),
        "generation": {"N": str(generation)},
        "at": {"S": now.isoformat()},
        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
    }
    try:
        ledger.transact_write_items([still_current(generation), {"Put": {"Item": lease}}])
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            raise StalePlan(f"plan generation {generation} is no longer current") from err
        raise StalePlan(f"cannot confirm plan generation {generation} ({failure_kind(err)}): not relaxing") from err


@uses("dynamodb:Query", by=("reconciler",))
def stale_relaxers(ledger: "Ledger", generation: int, now: datetime) -> list[str]:
    """Controllers that relaxed under an older generation less than LEASE_SECONDS ago."""
    pages = ledger.query_pages(
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :lease)",
        ExpressionAttributeNames={"#pk": PK, "#sk": SK},
        ExpressionAttributeValues={":pk": {"S": PLAN_PK}, ":lease": {"S": "LEASE#"}},
        ConsistentRead=True,
    )
    cutoff = now - timedelta(seconds=LEASE_SECONDS)
    try:
        return [
            item[SK]["S"].removeprefix("LEASE#")
            for page in pages
            for item in page["Items"]
            if int(item["generation"]["N"]) < generation and datetime.fromisoformat(item["at"]["S"]) > cutoff
        ]
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the controllers' leases from {ledger.table}: {failure_kind(err)}") from err
