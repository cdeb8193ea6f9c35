"""Resources that keep failing: pk `STUCK`, sk `<arn>`, one item per failing resource.

A resource whose engage or restore fails is counted here, once per walk that tried it,
so the count survives across ticks and controllers (an atomic ADD). The count belongs
to one plan generation and one operation (engage or relax): the first failure under a
new one starts it again at 1, since a new plan is a new attempt. A success clears the
item. Whether a count is "stuck" (no longer gating its stage) is the pure decision of
holdfast.core.progress.

Why a family of its own and not a count on the resource's original record: a resource
that fails before anything was written (an IAM denial, a validation error) has no
record to count on; a record is forgotten when its resource is restored, while a stuck
restore must stay visible after the plan has moved on; and one small partition is one
Query per tick for the metric and `holdfast status`. Items leave by TTL
(FAILURE_TTL_DAYS after their last failure) or when their resource succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, failure_kind
from holdfast.core import progress
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.policy import NORMAL
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import SAME_ATTEMPT, key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

PARTITION = "STUCK"
FAILURE_TTL_DAYS = 14
ENGAGE, RELAX = "engage", "relax"


@dataclass(frozen=True)
class Failure:
    arn: str
    kind: str
    operation: str          # engage | relax
    generation: int
    failures: int           # walks that failed on it under this generation and operation
    error: str
    first_failed_at: str
    last_failed_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _failure(item: dict[str, Any]) -> Failure:
    return Failure(
        arn=item[SK]["S"],
        kind=item["kind"]["S"],
        operation=item["operation"]["S"],
        generation=int(item["generation"]["N"]),
        failures=int(item["failures"]["N"]),
        error=item.get("error", {}).get("S", ""),
        first_failed_at=item.get("first_failed_at", {}).get("S", ""),
        last_failed_at=item.get("last_failed_at", {}).get("S", ""),
    )


@uses("dynamodb:Query", by=("reconciler", "cli"))
def load(ledger: "Ledger") -> dict[str, Failure]:
    """Every failing resource, by ARN (one Query of a small partition)."""
    try:
        pages = ledger.query_pages(
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": PK},
            ExpressionAttributeValues={":pk": {"S": PARTITION}},
            ConsistentRead=True,
        )
        return {f.arn: f for page in pages for f in map(_failure, page["Items"])}
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the failing resources from {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:UpdateItem", "dynamodb:PutItem", by=("reconciler",))
def record(ledger: "Ledger", *, arn: str, kind: str, operation: str, generation: int, error: str,
           now: datetime) -> Failure:
    """Count one more failed walk of `arn`; the count after it."""
    at = now.isoformat()
    ttl = {"N": str(int((now + timedelta(days=FAILURE_TTL_DAYS)).timestamp()))}
    error = error[:500]
    try:
        try:
            item = ledger.update_item(
                Key=key(PARTITION, arn),
                UpdateExpression="ADD failures :one SET #error = :error, last_failed_at = :at, #ttl = :ttl",
                ConditionExpression=SAME_ATTEMPT,
                ExpressionAttributeNames={"#generation": "generation", "#operation": "operation", "#error": "error",
                                          "#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":one": {"N": "1"}, ":error": {"S": error}, ":at": {"S": at}, ":ttl": ttl,
                                           ":generation": {"N": str(generation)}, ":operation": {"S": operation}},
                ReturnValues="ALL_NEW",
            )["Attributes"]
            return _failure(item)
        except (ClientError, BotoCoreError) as err:
            if not condition_failed(err):
                raise
        # The first failure under this generation and operation (or at all): count from 1.
        item = {
            **key(PARTITION, arn), "kind": {"S": kind}, "operation": {"S": operation},
            "generation": {"N": str(generation)}, "failures": {"N": "1"}, "error": {"S": error},
            "first_failed_at": {"S": at}, "last_failed_at": {"S": at}, TTL_ATTRIBUTE: ttl,
        }
        ledger.put_item(Item=item)
        return _failure(item)
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot count a failure of {arn} in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:DeleteItem", by=("reconciler", "cli"))
def clear(ledger: "Ledger", arn: str) -> None:
    """The resource succeeded: it is no longer failing."""
    try:
        ledger.delete_item(Key=key(PARTITION, arn))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot clear the failures of {arn} in {ledger.table}: {failure_kind(err)}") from err


def stuck(failing: dict[str, Failure], plan, threshold: int) -> list[Failure]:
    """The stuck resources that matter under `plan` (None: no plan): every stuck restore
    (its resource is still engaged), and the stuck engages of the plan's generation while
    it holds anything (an engage that failed under an older plan is tried afresh)."""
    out = []
    for f in sorted(failing.values(), key=lambda f: f.arn):
        if not progress.is_stuck(f.failures, threshold):
            continue
        if f.operation == RELAX or (plan is not None and plan.stage != NORMAL and f.generation == plan.generation):
            out.append(f)
    return out


def fix(failure: Failure, selector: str) -> str:
    """The command (and what to do first) that gets a stuck resource out of its state."""
    denied = any(w in failure.error for w in ("AccessDenied", "not authorized", "UnauthorizedOperation"))
    if failure.arn.startswith("discover:"):
        return (f"the listing of {failure.kind} fails ({failure.error}); fix that (the controller role's permissions), "
                "then `holdfast engage` walks it now")
    if failure.operation == RELAX:
        why = (f"the controller is denied: put its opt-in tag {selector} back (the next retry restores it), or "
               if denied else "after fixing the cause, ")
        return f"{why}`holdfast release {failure.arn}` restores it now and forgets its record"
    why = (f"the controller is denied; grant it, or remove the opt-in tag {selector} to leave it out. "
           if denied else "after fixing the cause, ")
    return f"{why}`holdfast engage` protects it now (the controller's next re-walk does too)"
