"""Claims: conditional puts that let one controller of several do a piece of work.

Items: pk `PLAN`, sk `ENGAGE-WALK` and `TICK-TRIGGER` (TTL one day).

- The engage walk (`take_engage_walk`): a tick that engages with the long engage budget
  (holdfast.reconciler) may walk for many minutes, while the schedule starts another
  tick every period. Those later ticks would walk the same resources again from the same
  cursor (the walk is idempotent, so this is safe) and split the account's rate budgets
  with it (so it is slow: every extra walker is reads that protect nothing). So the
  engage walk is claimed, and a tick that finds a live claim of the same or a newer
  generation leaves the engage to its holder. The claim is a lease: it lasts
  `lease_seconds` (one schedule period less one renewal interval) and its holder renews
  it every RENEW_SECONDS while it walks, with the same conditional put. A holder killed
  outright (out of memory, a runtime crash, a sandbox reset) runs no `finally` and
  gives nothing back: its claim lapses within one schedule period of its last renewal,
  so at most one scheduled tick finds it held, and the next engages. A renewal that
  finds the claim taken over (its lease had lapsed, or a newer generation's walk took
  it) fails, and the holder stops walking: the new holder walks instead. The holder
  releases the claim when its walk ends.

  Timeline, schedule period P = 60 s, lease L = P - RENEW_SECONDS = 45 s:

      t=0   A claims until 45     t=15, 30, 45 ... A renews: until = now + 45
      t=50  A is killed (last renewal at 45: until 90)
      t=60  B's tick: 60 < 90, held by A        t=120  C's tick: 120 >= 90, C claims

  The condition compares `until` with the taker's clock: Lambda hosts keep NTP time,
  far inside the 15 s between a lease's end and the tick after it.
- The tick trigger (`claim_tick_trigger`): the detector starts a tick when the verdict
  turns impaired (handlers/detector.py). A burst of launch failures, or several detector
  instances at once, must start one extra tick, not hundreds: the trigger is claimed per
  plan generation and at most once per `period`.

An unreachable ledger is LedgerUnavailable, as everywhere in holdfast.ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, failure_kind
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger import TTL_ATTRIBUTE
from holdfast.ledger.conditions import FREE_OR_OURS_TO_TAKE, HELD_BY_ME, NOT_YET_TRIGGERED, PLAN_PK, key

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

ENGAGE_WALK, TICK_TRIGGER = "ENGAGE-WALK", "TICK-TRIGGER"
# How often the holder of the engage walk renews its claim (and re-reads the plan).
RENEW_SECONDS = 15


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


def lease_seconds(schedule_minutes: int) -> int:
    """How long an engage-walk claim lasts unless renewed: one schedule period less one
    renewal interval (so the tick after a dead holder's lease finds it lapsed, with a
    renewal interval to spare for the ticks' start-up), never less than two renewal
    intervals (a renewal may be late by one)."""
    return max(2 * RENEW_SECONDS, schedule_minutes * 60 - RENEW_SECONDS)


@dataclass(frozen=True)
class Claim:
    taken: bool
    holder: str | None = None   # who holds it when not taken

    def __bool__(self) -> bool:
        return self.taken


@uses("dynamodb:PutItem", by=("reconciler",))
def take_engage_walk(ledger: "Ledger", *, generation: int, controller_id: str, now: datetime,
                     until: datetime) -> Claim:
    """Take the claim, or renew it (the same put: its holder may always put its own again).
    Not taken: another controller's lease is live and of the same or a newer generation."""
    item = {
        **key(PLAN_PK, ENGAGE_WALK),
        "holder": {"S": controller_id},
        "generation": {"N": str(generation)},
        "until": {"N": str(_epoch(until))},
        "at": {"S": now.isoformat()},
        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
    }
    try:
        ledger.put_item(
            Item=item, ConditionExpression=FREE_OR_OURS_TO_TAKE,
            ExpressionAttributeNames={"#until": "until", "#holder": "holder", "#generation": "generation"},
            ExpressionAttributeValues={":now": {"N": str(_epoch(now))}, ":holder": {"S": controller_id},
                                       ":generation": {"N": str(generation)}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return Claim(True)
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            old = getattr(err, "response", {}).get("Item") or {}
            return Claim(False, old.get("holder", {}).get("S"))
        raise LedgerUnavailable(f"cannot claim the engage walk ({failure_kind(err)})") from err


@uses("dynamodb:DeleteItem", by=("reconciler",))
def release_engage_walk(ledger: "Ledger", *, controller_id: str) -> None:
    """Give the claim back (only this controller's own). Best effort: a claim not given
    back expires at its `until`."""
    try:
        ledger.delete_item(Key=key(PLAN_PK, ENGAGE_WALK), ConditionExpression=HELD_BY_ME,
                             ExpressionAttributeNames={"#holder": "holder"},
                             ExpressionAttributeValues={":holder": {"S": controller_id}})
    except (ClientError, BotoCoreError):
        pass   # not ours any more, or the ledger is gone: the claim expires on its own


@uses("dynamodb:PutItem", by=("detector", "regionswitch"))
def claim_tick_trigger(ledger: "Ledger", *, generation: int, controller_id: str, now: datetime,
                       period: timedelta) -> bool:
    """True for exactly one caller per plan generation and period."""
    item = {
        **key(PLAN_PK, TICK_TRIGGER),
        "holder": {"S": controller_id},
        "generation": {"N": str(generation)},
        "at": {"N": str(_epoch(now))},
        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
    }
    try:
        ledger.put_item(
            Item=item, ConditionExpression=NOT_YET_TRIGGERED,
            ExpressionAttributeNames={"#generation": "generation", "#at": "at"},
            ExpressionAttributeValues={":generation": {"N": str(generation)},
                                       ":since": {"N": str(_epoch(now - period))}},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot claim the tick trigger ({failure_kind(err)})") from err
