"""An operator's release request, and what the reconciler decides about it (pure).

`holdfast release ARN... --all-accounts` cannot restore a resource itself: the org
operator role may write only Holdfast's control items (policies/operator.json). It
writes a request instead, one item per resource (holdfast.ledger.control), and the
reconciler's next tick acts on it once with its own role: the same restore as
`holdfast release ARN` (holdfast.engine.Engine.release: exactly that resource, the
owner's changes while engaged kept), then the outcome on the request.

A request moves requested -> acting (a tick claimed it, until `claim_until`) -> done
(with its outcome). A claim whose tick died is taken over once it has expired; a done
request is never acted on again. A request past its expiry (a day, as the other
requests) is not acted on: its outcome is `expired`.

Refused, with the outcome saying why, before anything is written: an ARN that is not a
kind Holdfast manages, one in another partition, region or account than the
reconciler's (a lookup by name would find this region's resource of the same name),
any request in mode recommend, an item Holdfast cannot read as a request (the operator
role may write any item in its partition: `problem` says what is wrong), and a request
asked before the engagement in force began (`engagement_began`): it was asked about an
earlier posture, and acted on now it would strip the protection of a hold its operator
had not seen. A resource with no record is refused by the restore itself (nothing to
put back).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from holdfast.core.kinds import kind_of
from holdfast.core.model import REFUSED_STALE, acts
from holdfast.core.policy import NORMAL, Plan

REQUESTED, ACTING, DONE = "requested", "acting", "done"
# Outcomes besides the restore's own actions (restored, drift-kept, vanished, failed).
REFUSED, EXPIRED, UNCONFIRMED = "refused", "expired", "restored-unconfirmed"
# Not an outcome: the restore must wait, and the request is requested again for the next tick.
WAITING = "waiting"
STATES = (REQUESTED, ACTING, DONE)


@dataclass(frozen=True)
class ReleaseRequest:
    arn: str
    id: str                           # one per request written: a duplicate write of it is the same request
    by: str | None = None
    reason: str | None = None
    at: str | None = None             # when it was requested (ISO 8601)
    expires: int | None = None        # epoch seconds; not acted on after
    state: str = REQUESTED
    controller: str | None = None     # the tick that claimed it
    claim_until: int | None = None    # epoch seconds
    outcome: str | None = None
    detail: str | None = None
    done_at: str | None = None
    problem: str | None = None        # why the item is not a request Holdfast can act on (holdfast.ledger.control)
    seen_at: str | None = None        # when a tick first read it (ISO 8601, the reconcilers' clock)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Released:
    """A resource released by hand (`holdfast release`, or a release request) during the
    engagement that began at `began` (ISO 8601): that engagement's walks, re-walks
    included, leave it as released; the next engagement protects it again."""

    arn: str
    began: str
    by: str | None = None
    at: str | None = None


def left_released(released: tuple[Released, ...], plan: Plan | None) -> frozenset[str]:
    """The ARNs the engage walks of `plan`'s engagement leave alone: released by hand in it."""
    began = marked_engagement(plan)
    if began is None:
        return frozenset()
    return frozenset(r.arn for r in released if r.began == began)


def marked_engagement(plan: Plan | None) -> str | None:
    """The engagement whose release marks an engage's write-ahead must respect (its start,
    ISO 8601, as the marks name it), or None: no marks apply (no hold; `normal`)."""
    began = engagement_began(plan)
    if began is None or plan is None or plan.stage == NORMAL:
        return None
    return began.isoformat()


def _epoch(now: datetime) -> int:
    return int(now.timestamp())


def claimed(request: ReleaseRequest, now: datetime) -> bool:
    """Claimed by a tick whose claim has not run out."""
    return request.state == ACTING and request.claim_until is not None and request.claim_until > _epoch(now)


def malformed(request: ReleaseRequest) -> bool:
    """An item that is not a request Holdfast can act on, and not done: the tick refuses it."""
    return request.problem is not None and request.state != DONE


def expired(request: ReleaseRequest, now: datetime) -> bool:
    return (request.state != DONE and not malformed(request) and not claimed(request, now)
            and request.expires is not None and request.expires <= _epoch(now))


def waits(action: str) -> bool:
    """Whether a restore's outcome means "not yet" rather than an answer to the request:
    `refused-stale`, a write the restore may not make now (the mapping's last cap write
    has not shown and may still land, or another controller moved its record since this
    tick read it). The next tick acts on the request again (it stays requested, until it
    expires); marked done, it would never be acted on and the resource would stay engaged."""
    return action == REFUSED_STALE


def due(request: ReleaseRequest, now: datetime) -> bool:
    """Whether a tick should act on `request` now: requested, or claimed by a tick whose
    claim has run out, and not expired."""
    if request.state == DONE or malformed(request) or expired(request, now):
        return False
    if request.state == ACTING:
        return request.claim_until is not None and request.claim_until <= _epoch(now)
    return request.state == REQUESTED


def problem(*, arn: str, key_arn: str, id: str | None, at: str | None, state: str | None,
            claim_until: int | None) -> str | None:
    """What makes a request item one Holdfast cannot act on, or None: the fields as
    read (a field of the wrong type is None here; holdfast.ledger.control names it)."""
    wrong = []
    if arn != key_arn:
        wrong.append(f"its arn {arn!r} is not the resource of its key ({key_arn})")
    if not id:
        wrong.append("it has no request id")
    if requested_at(at) is None:
        wrong.append(f"its time of asking {at!r} is not an ISO 8601 time with a UTC offset")
    if state not in STATES:
        wrong.append(f"its state {state!r} is none of {', '.join(STATES)}")
    elif state == ACTING and claim_until is None:
        wrong.append("it is claimed with no claim_until")
    return "; ".join(wrong) or None


def requested_at(at: str | None) -> datetime | None:
    try:
        when = datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        return None
    return when if when is not None and when.utcoffset() is not None else None


def engagement_began(plan: Plan | None) -> datetime | None:
    """When the engagement in force began: the latest hold (an impairment, or an
    operator's engage: `impaired_at`), or a later step back, which engages again what its
    stage holds (`entered_at` of a stepped-back plan). None before any hold."""
    if plan is None:
        return None
    times = [t for t in (plan.impaired_at, plan.entered_at if plan.stepped_back else None) if t is not None]
    return max(times, default=None)


def stale(request: ReleaseRequest, began: datetime | None, seen: datetime | None = None) -> str | None:
    """Why `request` is refused as asked before the engagement that began at `began`, or
    None. `seen`: when a tick first read it (the request's `seen_at`, or this tick's
    control read for a request no tick had read before), on the clock `began` is on: a
    request first read at or before the hold began was in the ledger before the hold's
    plan was written. Without `seen` (no tick time known) nothing is refused."""
    first = requested_at(request.seen_at) or seen
    if began is None or first is None or first > began:
        return None
    return (f"asked at {request.at} (first read by a tick at {first.isoformat()}), before this hold began at "
            f"{began.isoformat()}: the hold may have engaged {request.arn} since; nothing was done; ask again to "
            "release it from this hold")


def refusal(arn: str, *, partition: str, region: str, account: str | None, mode: str) -> str | None:
    """Why the reconciler must not act on a release of `arn`, or None. `account` None:
    the reconciler's account could not be learnt, so no ARN can be shown to be its own."""
    try:
        kind_of(arn)
    except ValueError as err:
        return str(err)
    parts = arn.split(":")
    wrong = []
    if parts[1] != partition:
        wrong.append(f"partition {parts[1]} (Holdfast here runs in {partition})")
    if parts[3] != region:
        wrong.append(f"region {parts[3]} (this reconciler acts in {region})")
    if account is None:
        wrong.append(f"account {parts[4]} (this reconciler's account is unknown: it could not call sts:GetCallerIdentity)")
    elif parts[4] != account:
        wrong.append(f"account {parts[4]} (this reconciler acts in {account})")
    if wrong:
        return f"{arn} is in " + " and ".join(wrong) + "; nothing was done"
    if not acts(mode):
        return f"Holdfast here runs in mode {mode}: it writes to no resource, so nothing was released"
    return None
