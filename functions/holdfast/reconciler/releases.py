"""The operators' release requests (CONTROL/RELEASE#<arn>, holdfast.core.release), acted
on by a tick before its walks: each claimed, checked, restored as `holdfast release`
does, and its outcome recorded on it. The crash points of a release are in the tick's
table (holdfast.reconciler.steps)."""

from __future__ import annotations

from datetime import timedelta

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import release as release_requests
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.model import ALREADY, DRIFT_KEPT, FAILED, RESTORED, VANISHED
from holdfast.core.policy import NORMAL, Plan
from holdfast.engine import Engine
from holdfast.iam import uses
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import control as ledger_control
from holdfast.ledger import failures as ledger_failures
from holdfast.ledger.resources import ResourceLedger
from holdfast.reconciler.state import Tick, TickResult
from holdfast.runtime import Runtime

# Release requests acted on in one tick at the most; the rest wait for the next.
RELEASES_PER_TICK = 20


def release(t: Tick, plan: Plan, control: ledger_control.Control, result: TickResult) -> frozenset[str]:
    """The operators' release requests (CONTROL/RELEASE#<arn>, holdfast.core.release),
    before the walks, which leave alone what this returns (released during a hold), so
    that this tick's engage walk does not engage again what it restores: each claimed (so
    two ticks at once act on it once), checked (a kind Holdfast manages, this partition,
    region and account, mode auto, asked during the engagement in force),
    restored exactly as `holdfast release` does (Engine.release: no plan guard, the
    owner's changes while engaged kept), and marked done with its outcome. An item that is
    not a request Holdfast can act on is refused, saying why; a request past its expiry
    is marked `expired`, unacted. Each claim lasts from when it is taken until the tick's
    time is up at the latest; once it is up, the rest wait for the next tick."""
    if not control.releases:
        return frozenset()
    now, me = t.runtime.clock.now(), t.runtime.controller_id
    for request in control.releases:
        if release_requests.malformed(request):
            why = (f"not a release request Holdfast can act on: {request.problem}; nothing was done; "
                   "ask again with `holdfast release ARN --all-accounts`")
            if ledger_control.refuse_malformed_release(t.ledger, request, outcome=release_requests.REFUSED,
                                                       detail=why, controller_id=me, now=now):
                result.actions.append(f"release:{release_requests.REFUSED}")
                t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
                      outcome=release_requests.REFUSED, reasons=[why])
        elif release_requests.expired(request, now):
            if request.state == release_requests.ACTING:
                why = (f"requested at {request.at} and claimed by {request.controller}, whose tick stopped before "
                       "recording an outcome; it expired before another tick took it over: the resource may or may "
                       "not have been restored (`holdfast status` shows whether it is engaged); request it again "
                       "if it is still wanted")
            else:
                why = (f"requested at {request.at} and not acted on before it expired (Holdfast was paused, off "
                       "or unable to read its ledger): nothing was done; request it again if it is still wanted")
            ledger_control.finish_release(
                t.ledger, request, outcome=release_requests.EXPIRED, controller_id=me, now=now, claimed=False,
                detail=why)
            result.actions.append(f"release:{release_requests.EXPIRED}")
    due = [r for r in control.releases if release_requests.due(r, now)][:RELEASES_PER_TICK]
    if not due:
        return frozenset()
    left: set[str] = set()
    account = caller_account(t.runtime)
    if account is None:
        # STS did not answer: no ARN can be shown to be this account's, and refusing would
        # end each request for good over a failure of the reconciler's own. They wait.
        t.log("sts:GetCallerIdentity did not answer: release requests wait for the next tick", plan,
              waiting=[r.arn for r in due])
        result.actions.append("release:waiting")
        return frozenset()
    began = release_requests.engagement_began(plan)
    lease, d = ledger_claims.lease_seconds(t.settings.schedule_minutes), t.deadline
    releaser: Engine | None = None
    for i, request in enumerate(due):
        if d():
            t.log("tick time up: the other release requests wait for the next tick", plan,
                  waiting=[r.arn for r in due[i:]])
            break
        # The claim runs from now, never past the tick's end: a tick that took it over
        # while this one still restores would restore again and one outcome would be lost.
        now = t.runtime.clock.now()
        until = now + timedelta(seconds=max(0.0, min(lease, d.total - d.elapsed())))
        # Seen at this tick's control read (`t.started`), the clock the plan's times are on.
        if not ledger_control.claim_release(t.ledger, request, controller_id=me, now=now, until=until,
                                            seen=t.started):
            continue   # another tick took it, or it was replaced
        why = (release_requests.refusal(request.arn, partition=t.runtime.clients.partition,
                                        region=t.runtime.clients.region, account=account, mode=t.settings.mode)
               or release_requests.stale(request, began, t.started))
        if why is None:
            releaser = releaser or Engine(t.runtime)
            # The mark first, then the restore: a tick that dies between them leaves a resource
            # restored and marked, which the hold's walks leave alone and a takeover
            # (restored-unconfirmed) finds as it should. Every outcome keeps it.
            kept = ""
            if began is not None and plan.stage != NORMAL:
                kept = keep_released(t, request.arn, began, request.by or "a release request")
                left.add(request.arn)
            try:
                action, why = release_one(t, releaser, request)
                why += kept
            except (ValueError, *AWS_ERRORS) as err:   # bad input never stops the tick: the outcome says it
                action, why = FAILED, f"not released: {error_text(err) if isinstance(err, AWS_ERRORS) else err}"
        else:
            action = release_requests.REFUSED
        if release_requests.waits(action):
            # Not the request's answer: the restore may not write yet. Requested again, the
            # next tick acts on it; its mark stays, so the walks leave the resource alone meanwhile.
            why = f"waiting for the next tick: {why}"
            ledger_control.postpone_release(t.ledger, request, detail=why, controller_id=me)
            result.actions.append(f"release:{release_requests.WAITING}")
            t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
                  outcome=release_requests.WAITING, reasons=[why])
            continue
        ledger_control.finish_release(t.ledger, request, outcome=action, detail=why, controller_id=me,
                                      now=t.runtime.clock.now())
        result.actions.append(f"release:{action}")
        t.log("release request", plan, arn=request.arn, requested_by=request.by, requested_at=request.at,
              outcome=action, reasons=[why])
    return frozenset(left)


def keep_released(t: Tick, arn: str, began, by: str) -> str:
    """Mark `arn` released in the engagement that began at `began`, so this hold's walks
    leave it as released; what to add to the outcome."""
    try:
        ledger_control.mark_released(t.ledger, arn, began=began, by=by, now=t.runtime.clock.now())
        return "; left released for the rest of this hold"
    except LedgerUnavailable as err:
        return f"; the next re-walk of this hold may engage it again ({err})"


def release_one(t: Tick, releaser: Engine, request) -> tuple[str, str]:
    """Restore the resource of `request` and forget its record: (outcome, what it means)."""
    arn = request.arn
    recorded = ResourceLedger(t.ledger).get(arn) is not None
    outcome = releaser.release(arn)
    t.log("released", None, arn=arn, action=outcome.action, error=outcome.error)
    if outcome.action in (RESTORED, DRIFT_KEPT, VANISHED) and (recorded or outcome.action != VANISHED):
        ledger_failures.clear(t.ledger, arn)   # no longer stuck
        t.failing.pop(arn, None)
    if outcome.action == RESTORED:
        return RESTORED, "restored to its owner's settings; its record is forgotten"
    if outcome.action == DRIFT_KEPT:
        return DRIFT_KEPT, ("restored; the owner's changes while engaged were kept: " + ", ".join(sorted(outcome.drift))
                            + "; its record is forgotten")
    again = (" (an earlier attempt at this request, whose tick stopped before recording it, may have restored it)"
             if request.state == release_requests.ACTING else "")
    if outcome.action == VANISHED:
        if recorded:
            return VANISHED, "the resource no longer exists; its record is forgotten"
        return release_requests.REFUSED, f"{arn} does not exist and Holdfast holds no record of it; nothing to release{again}"
    if outcome.action == ALREADY:
        if request.state == release_requests.ACTING:
            # Taken over: the tick that claimed it may have restored it and stopped
            # before recording the outcome.
            return release_requests.UNCONFIRMED, (
                f"restored by an earlier attempt (unconfirmed): the tick {request.controller} that claimed this "
                f"request stopped before recording its outcome, and {arn} is now not engaged and Holdfast holds no "
                "record of it; nothing was written now")
        return release_requests.REFUSED, f"{arn} is not engaged and Holdfast holds no record of it; nothing to release{again}"
    return outcome.action, outcome.error or "; ".join(str(n.get("why", n)) for n in outcome.notes.values()) or "-"


@uses("sts:GetCallerIdentity", by=("reconciler",))
def caller_account(runtime: Runtime) -> str | None:
    """The account the reconciler acts in, None when STS does not answer (the release
    requests then wait for a tick that can tell: none can be shown to be of this account)."""
    try:
        return runtime.clients.account_id()
    except AWS_ERRORS:
        return None
