"""Operator control: the kill switch, "skip the hold of generation g", "engage now,
from generation g", "release this resource", and who holds resources by hand.

Items: pk `CONTROL`, sk `PAUSE` (never expires), `ADVANCE` and `ENGAGE` (TTL one day),
`RELEASE#<resource ARN>` (one release request per resource, holdfast.core.release; TTL
one day, kept with its outcome once done) and `HELD` (who last engaged resources from
the CLI, and when; removed by a complete `resume --now`), and `EVACUATION#<plan ARN>`
(a Region switch plan's evacuation hold: written by its engage step, removed by its
post-recovery lift; never expires, since an evacuation may last weeks). Everything an operator writes is in this partition, so a role limited to
it by dynamodb:LeadingKeys (HoldfastOperator, policies/operator.json) can steer Holdfast in
an account without any permission on its resources: the reconciler acts on the request.
The resource records say what is engaged; `HELD` says by whom, for `status` and `stage`
when no plan is in force.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, contended, failure_kind
from holdfast.core.errors import Contention, LedgerUnavailable, PlanConflict
from holdfast.core.evacuation import Evacuation
from holdfast.core.release import ACTING, DONE, REQUESTED, Released, ReleaseRequest
from holdfast.core.release import problem as release_problem
from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE
from holdfast.ledger.conditions import (
    CURRENT,
    MALFORMED_RELEASE_UNCHANGED,
    NO_RELEASE_IN_FORCE,
    NOT_RELEASED_IN,
    NOT_THIS_EXECUTION,
    PLAN_PK,
    RELEASE_CLAIMED_BY_ME,
    RELEASE_OPEN_AND_UNCLAIMED,
    RELEASE_TO_TAKE,
    key,
    still_current,
)

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

CONTROL_PK, PAUSE, ADVANCE, ENGAGE, HELD = "CONTROL", "PAUSE", "ADVANCE", "ENGAGE", "HELD"
RELEASE_PREFIX = "RELEASE#"
EVACUATION_PREFIX = "EVACUATION#"   # a Region switch plan's hold on this Region (holdfast.core.evacuation)
RELEASED_PREFIX = "RELEASED#"   # a resource released by hand, and the engagement it was released in
REQUEST_DAYS = 1


@dataclass(frozen=True)
class Control:
    paused: bool = False
    paused_by: str | None = None
    paused_at: str | None = None
    reason: str | None = None
    advance_generation: int | None = None
    engage_generation: int | None = None   # engage from this plan generation (an operator's request)
    engage_by: str | None = None
    engage_reason: str | None = None
    held_by: str | None = None       # who engaged resources by hand (the CLI), when
    held_at: str | None = None
    held_command: str | None = None
    releases: tuple[ReleaseRequest, ...] = ()     # the release requests, in ARN order
    released: tuple[Released, ...] = ()           # resources released by hand, and in which engagement
    evacuations: tuple[Evacuation, ...] = ()      # Region switch plans holding this Region, by plan ARN
    problems: tuple[str, ...] = ()    # fields of PAUSE, ADVANCE, ENGAGE, HELD that could not be read, and why

    def engage_requested(self, generation: int) -> str | None:
        """Why the plan of `generation` should go to hold now, or None: a request is for
        the plan its operator saw, so it acts once (the hold it starts is a newer generation)."""
        if self.engage_generation is None or self.engage_generation != generation:
            return None
        return f"engaged by {self.engage_by or 'an operator'}: {self.engage_reason or '-'}"


def _epoch(when: datetime) -> int:
    return int(when.timestamp())


@uses("dynamodb:Query", by=("reconciler", "cli", "readonly", "regionswitch"))
def read_control(ledger: "Ledger") -> Control:
    items: list[dict] = []
    page: dict = {}
    try:
        while True:   # a page is 1 MB at most: many release requests done with long details fill one
            answer = ledger.query(
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": PK},
                ExpressionAttributeValues={":pk": {"S": CONTROL_PK}},
                ConsistentRead=True,
                **page,
            )
            items += answer["Items"]
            if "LastEvaluatedKey" not in answer:
                break
            page = {"ExclusiveStartKey": answer["LastEvaluatedKey"]}
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the kill switch from {ledger.table}: {failure_kind(err)}") from err
    by_sk = {item[SK]["S"]: item for item in items}
    pause, advance, engage, held = by_sk.get(PAUSE), by_sk.get(ADVANCE), by_sk.get(ENGAGE), by_sk.get(HELD)
    problems: list[str] = []

    # The operator role may write any item in CONTROL: a field of the wrong type is read
    # as absent and named in `problems`, never an error that stops every tick.
    def text(item: dict | None, name: str) -> str | None:
        value = item.get(name) if item else None
        if value is None:
            return None
        if isinstance(value, dict) and isinstance(value.get("S"), str):
            return value["S"]
        problems.append(f"{item[SK]['S']}: {name} {_shown(value)} is not a string; read as absent")
        return None

    def generation(item: dict | None) -> int | None:
        value = item.get("generation") if item else None
        if value is None:
            return None
        try:
            return int(value["N"])
        except (KeyError, TypeError, ValueError):
            problems.append(f"{item[SK]['S']}: generation {_shown(value)} is not a whole number; "
                            "the request is not acted on (write it again with the CLI)")
            return None

    paused = pause.get("paused") if pause else None
    if paused is not None and not (isinstance(paused, dict) and isinstance(paused.get("BOOL"), bool)):
        problems.append(f"{PAUSE}: paused {_shown(paused)} is not a boolean; read as not paused "
                        "(`holdfast pause` writes it)")
    return Control(
        paused=bool(isinstance(paused, dict) and paused.get("BOOL") is True),
        paused_by=text(pause, "by"),
        paused_at=text(pause, "at"),
        reason=text(pause, "reason"),
        advance_generation=generation(advance),
        engage_generation=generation(engage),
        engage_by=text(engage, "by"),
        engage_reason=text(engage, "reason"),
        held_by=text(held, "by"),
        held_at=text(held, "at"),
        held_command=text(held, "command"),
        releases=tuple(release_from_item(by_sk[sk]) for sk in sorted(by_sk) if sk.startswith(RELEASE_PREFIX)),
        released=tuple(r for sk in sorted(by_sk) if sk.startswith(RELEASED_PREFIX)
                       and (r := _released(by_sk[sk], problems)) is not None),
        evacuations=tuple(_evacuation(by_sk[sk], problems) for sk in sorted(by_sk) if sk.startswith(EVACUATION_PREFIX)),
        problems=tuple(problems),
    )


def _evacuation(item: dict, problems: list[str]) -> Evacuation:
    """The evacuation hold `item` holds. Any item under EVACUATION# holds (a field of the
    wrong type is read as absent and named in `problems`): holding is the safe reading."""
    values = {}
    for name in ("execution", "by", "at"):
        value = item.get(name)
        if value is not None and not (isinstance(value, dict) and isinstance(value.get("S"), str)):
            problems.append(f"{item[SK]['S']}: {name} {_shown(value)} is not a string; read as absent")
            value = None
        values[name] = value["S"] if value else None
    return Evacuation(plan_arn=item[SK]["S"][len(EVACUATION_PREFIX):], execution_id=values["execution"],
                      by=values["by"], at=values["at"])


def _released(item: dict, problems: list[str]) -> Released | None:
    """The release mark `item` holds, or None (named in `problems`) when it is not one."""
    values = {}
    for name in ("arn", "began", "by", "at"):
        value = item.get(name)
        if value is not None and not (isinstance(value, dict) and isinstance(value.get("S"), str)):
            problems.append(f"{item[SK]['S']}: {name} {_shown(value)} is not a string; the mark is not read")
            return None
        values[name] = value["S"] if value else None
    if values["arn"] != item[SK]["S"][len(RELEASED_PREFIX):] or not values["began"]:
        problems.append(f"{item[SK]['S']}: not a release mark Holdfast wrote (no began, or another arn); not read")
        return None
    return Released(**values)


@uses("dynamodb:PutItem", by=("cli", "reconciler"))
def mark_released(ledger: "Ledger", arn: str, *, began: datetime, by: str, now: datetime) -> None:
    """Record that `arn` was released by hand in the engagement that began at `began`: its
    walks leave it as released (holdfast.core.release.left_released). Kept two days."""
    item = {"arn": {"S": arn}, "began": {"S": began.isoformat()}, "by": {"S": by or "-"}, "at": {"S": now.isoformat()},
            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=2)))}}
    try:
        ledger.put_item(Item={**key(CONTROL_PK, RELEASED_PREFIX + arn), **item})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the release of {arn} in {ledger.table}: {failure_kind(err)}") from err


def not_released(arn: str, began: str) -> dict:
    """A transaction item that holds only while `arn` has no release mark of the engagement
    that began at `began` (ISO 8601): the condition an engage's write-ahead is written
    under (holdfast.ledger.resources.ResourceLedger.put_original, `engage`)."""
    return {"ConditionCheck": {"Key": key(CONTROL_PK, RELEASED_PREFIX + arn), "ConditionExpression": NOT_RELEASED_IN,
                               "ExpressionAttributeNames": {"#pk": PK, "#began": "began"},
                               "ExpressionAttributeValues": {":began": {"S": began}}}}


def release_from_item(item: dict) -> ReleaseRequest:
    """The release request `item` holds. Never raises: the operator role may write any
    item in CONTROL, so one that Holdfast did not write (a field of the wrong type, a
    number that is not whole seconds, an unknown state) is read as far as it can be, with
    `problem` saying what is wrong; the tick refuses it (reconciler.release), and the
    other requests and control items are read as ever."""
    wrong: list[str] = []

    def text(name: str) -> str | None:
        value = item.get(name)
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("S"), str):
            wrong.append(f"{name} {_shown(value)} is not a string")
            return None
        return value["S"]

    def number(name: str) -> int | None:
        value = item.get(name)
        if value is None:
            return None
        raw = value.get("N") if isinstance(value, dict) else None
        if not isinstance(raw, str):
            wrong.append(f"{name} {_shown(value)} is not a number")
            return None
        try:
            return int(raw)
        except ValueError:
            wrong.append(f"{name} {raw} is not whole epoch seconds")
            return None

    key_arn = item[SK]["S"][len(RELEASE_PREFIX):]
    arn, request_id, at, state = text("arn"), text("request"), text("at"), text("state")
    claim_until = number("claim_until")
    fields = dict(by=text("by"), reason=text("reason"), expires=number(TTL_ATTRIBUTE), controller=text("controller"),
                  outcome=text("outcome"), detail=text("detail"), done_at=text("done_at"), seen_at=text("seen_at"))
    shape = release_problem(arn=key_arn if arn is None else arn, key_arn=key_arn, id=request_id, at=at,
                            state=state, claim_until=claim_until)
    problems = wrong + ([shape] if shape else [])
    return ReleaseRequest(arn=key_arn, id=request_id or "-", at=at, state=state or REQUESTED,
                          claim_until=claim_until, problem="; ".join(problems) or None, **fields)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@uses("dynamodb:PutItem", "dynamodb:DeleteItem", by=("cli",))
def set_held(ledger: "Ledger", held: bool, *, by: str = "", command: str = "", now: datetime | None = None) -> None:
    """Record who engaged resources by hand (held) or that a resume put everything back (not)."""
    try:
        if held:
            item = {"by": {"S": by}, "command": {"S": command}, "at": {"S": now.isoformat() if now else "-"}}
            ledger.put_item(Item={**key(CONTROL_PK, HELD), **item})
        else:
            ledger.delete_item(Key=key(CONTROL_PK, HELD))
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record who holds resources by hand in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:PutItem", by=("regionswitch",))
def hold_for_evacuation(ledger: "Ledger", plan_arn: str, *, execution_id: str | None, by: str, now: datetime) -> bool:
    """Hold this Region for Region switch plan `plan_arn` (holdfast.core.evacuation): a
    hold in force does not advance until `lift_evacuation`. One hold per plan: a newer
    execution's replaces an older one's; a rerun of the same execution's step writes
    nothing (its hold keeps the time it began). True when this call wrote it."""
    execution = execution_id or "-"
    item = {"execution": {"S": execution}, "by": {"S": by}, "at": {"S": now.isoformat()}}
    try:
        ledger.put_item(Item={**key(CONTROL_PK, EVACUATION_PREFIX + plan_arn), **item},
                        ConditionExpression=NOT_THIS_EXECUTION,
                        ExpressionAttributeNames={"#pk": PK, "#execution": "execution"},
                        ExpressionAttributeValues={":execution": {"S": execution}})
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot record the evacuation hold in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:DeleteItem", by=("regionswitch",))
def lift_evacuation(ledger: "Ledger", plan_arn: str) -> bool:
    """End plan `plan_arn`'s evacuation hold; False when it held nothing (a rerun)."""
    try:
        answer = ledger.delete_item(Key=key(CONTROL_PK, EVACUATION_PREFIX + plan_arn), ReturnValues="ALL_OLD")
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot lift the evacuation hold in {ledger.table}: {failure_kind(err)}") from err
    return bool(answer and answer.get("Attributes"))


@uses("dynamodb:PutItem", by=("cli", "operator"))
def set_paused(ledger: "Ledger", paused: bool, *, by: str, reason: str, now: datetime) -> None:
    item = {"paused": {"BOOL": paused}, "by": {"S": by}, "reason": {"S": reason or "-"}, "at": {"S": now.isoformat()}}
    try:
        ledger.put_item(Item={**key(CONTROL_PK, PAUSE), **item})
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot set the kill switch in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:ConditionCheckItem", "dynamodb:PutItem", by=("cli", "operator"))
def request_advance(ledger: "Ledger", generation: int, *, by: str, now: datetime) -> None:
    """Skip the hold of `generation`, only if it is still the current plan: an operator
    acting on a stale view must not skip the hold of a plan they have not seen."""
    try:
        ledger.transact_write_items([
            still_current(generation),
            {
                "Put": {
                    "Item": {
                        **key(CONTROL_PK, ADVANCE),
                        "generation": {"N": str(generation)},
                        "by": {"S": by},
                        "at": {"S": now.isoformat()},
                        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
                    },
                }
            },
        ])
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            raise PlanConflict(f"plan generation {generation} is no longer current") from err
        if contended(err):
            raise Contention("the plan is busy (another controller's transaction): try again") from err
        raise LedgerUnavailable(f"cannot record the advance in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:GetItem", "dynamodb:PutItem", by=("cli", "operator", "regionswitch"))
def request_engage(ledger: "Ledger", *, by: str, reason: str, now: datetime) -> int:
    """Ask the reconciler to go to hold from the plan in force now (its generation, 0
    when there is none yet), as if an impairment were detected: its next tick starts a
    hold, walks the engage with its own role, and lifts it in stages like any other.
    Returns the generation the request names. A request for a plan that has moved on
    (a tick decided in between) does nothing: the operator has not seen that plan."""
    try:
        item = ledger.get_item(Key=key(PLAN_PK, CURRENT), ConsistentRead=True,
                               ProjectionExpression="#generation",
                               ExpressionAttributeNames={"#generation": "generation"})
        generation = int(item["generation"]["N"]) if item and "generation" in item else 0
        ledger.put_item(Item={
            **key(CONTROL_PK, ENGAGE),
            "generation": {"N": str(generation)},
            "by": {"S": by},
            "reason": {"S": reason or "-"},
            "at": {"S": now.isoformat()},
            TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=1)))},
        })
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot record the engage request in {ledger.table}: {failure_kind(err)}") from err
    return generation


def _release_key(arn: str) -> dict:
    return key(CONTROL_PK, RELEASE_PREFIX + arn)


@uses("dynamodb:PutItem", "dynamodb:GetItem", by=("cli", "operator"))
def request_release(ledger: "Ledger", arn: str, *, by: str, reason: str, now: datetime,
                    request_id: str) -> tuple[ReleaseRequest, bool]:
    """Ask the reconciler to release `arn` (restore it and forget its record) at its next
    tick. Returns (the request in force, whether this call wrote it): while a request for
    the same resource is still to be acted on (requested, or claimed by a tick), another
    is a duplicate and writes nothing. A done request, or one past its expiry, is
    replaced by the new one."""
    epoch = _epoch(now)
    item = {
        **_release_key(arn),
        "arn": {"S": arn}, "request": {"S": request_id}, "by": {"S": by}, "reason": {"S": reason or "-"},
        "at": {"S": now.isoformat()}, "state": {"S": REQUESTED},
        TTL_ATTRIBUTE: {"N": str(_epoch(now + timedelta(days=REQUEST_DAYS)))},
    }
    try:
        ledger.put_item(
            Item=item,
            ConditionExpression=NO_RELEASE_IN_FORCE,
            ExpressionAttributeNames={"#pk": PK, "#state": "state", "#ttl": TTL_ATTRIBUTE},
            ExpressionAttributeValues={":done": {"S": DONE}, ":now": {"N": str(epoch)}},
        )
        return release_from_item(item), True
    except (ClientError, BotoCoreError) as err:
        if not condition_failed(err):
            raise LedgerUnavailable(f"cannot record the release request in {ledger.table}: {failure_kind(err)}") from err
    try:
        found = ledger.get_item(Key=_release_key(arn), ConsistentRead=True)
    except (ClientError, BotoCoreError) as err:
        raise LedgerUnavailable(f"cannot read the release request in {ledger.table}: {failure_kind(err)}") from err
    if found is None:   # deleted in between (its TTL): this request is not written; the caller may ask again
        raise LedgerUnavailable(f"the release request for {arn} in {ledger.table} changed while it was written: try again")
    return release_from_item(found), False


@uses("dynamodb:UpdateItem", by=("reconciler",))
def claim_release(ledger: "Ledger", request: ReleaseRequest, *, controller_id: str, now: datetime,
                  until: datetime, seen: datetime | None = None) -> bool:
    """Take `request` for this tick: True when it was still to be acted on (the same
    request, requested, or claimed by a tick whose claim ran out). Two ticks at once:
    one takes it, the other gets False and leaves it. `seen`: when this tick read the
    request, kept as its `seen_at` unless an earlier tick's is there (holdfast.core.release:
    requests are judged by the reconcilers' clock, not the operator's)."""
    seen_at = (seen or now).isoformat()
    try:
        ledger.update_item(
            Key=_release_key(request.arn),
            UpdateExpression="SET #state = :acting, #controller = :me, #until = :until, "
                             "#seen = if_not_exists(#seen, :seen)",
            ConditionExpression=RELEASE_TO_TAKE,
            ExpressionAttributeNames={"#state": "state", "#controller": "controller", "#until": "claim_until",
                                      "#request": "request", "#seen": "seen_at"},
            ExpressionAttributeValues={":acting": {"S": ACTING}, ":requested": {"S": REQUESTED},
                                       ":me": {"S": controller_id}, ":until": {"N": str(_epoch(until))},
                                       ":now": {"N": str(_epoch(now))}, ":id": {"S": request.id},
                                       ":seen": {"S": seen_at}},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot claim the release request in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:UpdateItem", by=("reconciler",))
def finish_release(ledger: "Ledger", request: ReleaseRequest, *, outcome: str, detail: str,
                   controller_id: str, now: datetime, claimed: bool = True) -> bool:
    """Record the outcome of `request`: done, never acted on again. `claimed`: only if
    this tick still holds its claim; otherwise (an expired request, never claimed by this
    tick) only if it is still the request that was read and no tick's claim on it is
    running (that tick may be restoring it). False when the request changed meanwhile."""
    try:
        ledger.update_item(
            Key=_release_key(request.arn),
            UpdateExpression="SET #state = :done, #outcome = :outcome, #detail = :detail, #done_at = :at, "
                             "#controller = :me REMOVE #until",
            ConditionExpression=RELEASE_CLAIMED_BY_ME if claimed else RELEASE_OPEN_AND_UNCLAIMED,
            ExpressionAttributeNames={"#state": "state", "#outcome": "outcome", "#detail": "detail",
                                      "#done_at": "done_at", "#controller": "controller", "#until": "claim_until",
                                      "#request": "request"},
            ExpressionAttributeValues={":done": {"S": DONE}, ":outcome": {"S": outcome}, ":detail": {"S": detail or "-"},
                                       ":at": {"S": now.isoformat()}, ":me": {"S": controller_id},
                                       ":id": {"S": request.id}, ":acting": {"S": ACTING},
                                       **({} if claimed else {":now": {"N": str(_epoch(now))}})},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot record the release outcome in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:UpdateItem", by=("reconciler",))
def postpone_release(ledger: "Ledger", request: ReleaseRequest, *, detail: str, controller_id: str) -> bool:
    """Give `request` back to the next tick, not done: this tick's claim on it ends and it
    is requested again (its `seen_at` kept), with `detail` saying why it waits. Only while
    this tick still holds its claim; False when the request changed meanwhile. For a restore
    that must wait (holdfast.core.release.waits), which marked done would never be acted on."""
    try:
        ledger.update_item(
            Key=_release_key(request.arn),
            UpdateExpression="SET #state = :requested, #detail = :detail REMOVE #until",
            ConditionExpression=RELEASE_CLAIMED_BY_ME,
            ExpressionAttributeNames={"#state": "state", "#detail": "detail", "#until": "claim_until",
                                      "#request": "request", "#controller": "controller"},
            ExpressionAttributeValues={":requested": {"S": REQUESTED}, ":detail": {"S": detail or "-"},
                                       ":id": {"S": request.id}, ":acting": {"S": ACTING},
                                       ":me": {"S": controller_id}},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot give the release request back in {ledger.table}: {failure_kind(err)}") from err


@uses("dynamodb:UpdateItem", by=("reconciler",))
def refuse_malformed_release(ledger: "Ledger", request: ReleaseRequest, *, outcome: str, detail: str,
                             controller_id: str, now: datetime) -> bool:
    """Record `outcome` on a request item Holdfast cannot act on (`request.problem`):
    done, its expiry a day from now (a whole number, so DynamoDB's TTL removes it),
    and a new request may replace it. Only if it is still that item: its request id
    is the one read, or it still has none (a new request has one). False otherwise."""
    try:
        ledger.update_item(
            Key=_release_key(request.arn),
            UpdateExpression="SET #state = :done, #outcome = :outcome, #detail = :detail, #done_at = :at, "
                             "#controller = :me, #ttl = :expires REMOVE #until",
            ConditionExpression=MALFORMED_RELEASE_UNCHANGED,
            ExpressionAttributeNames={"#pk": PK, "#state": "state", "#outcome": "outcome", "#detail": "detail",
                                      "#done_at": "done_at", "#controller": "controller", "#until": "claim_until",
                                      "#request": "request", "#ttl": TTL_ATTRIBUTE},
            ExpressionAttributeValues={":done": {"S": DONE}, ":outcome": {"S": outcome}, ":detail": {"S": detail or "-"},
                                       ":at": {"S": now.isoformat()}, ":me": {"S": controller_id},
                                       ":id": {"S": request.id}, ":string": {"S": "S"},
                                       ":expires": {"N": str(_epoch(now + timedelta(days=REQUEST_DAYS)))}},
        )
        return True
    except (ClientError, BotoCoreError) as err:
        if condition_failed(err):
            return False
        raise LedgerUnavailable(f"cannot record the release outcome in {ledger.table}: {failure_kind(err)}") from err
