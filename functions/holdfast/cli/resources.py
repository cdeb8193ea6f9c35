"""CLI commands that act on resources by hand: ledger-init, plan, engage, resume, release, status.

They let an operator use Holdfast before (or instead of) the automatic controller, and
force any step while it runs. All of them go through `holdfast.engine`; nothing here
decides anything about a resource.

`--json` documents have one shape for every walk (plan, engage, resume, release):

    {"command": "engage", "ledger_available": true, "complete": true,
     "resources": [Outcome.to_dict(), ...],            # every resource touched or planned
     "failed": [{"kind", "arn", "error"}, ...],        # also in resources, with action "failed"
     "summary": {action: count},
     "api_calls": {kind: count}, "api_calls_by_kind": {kind: {"service:Operation": count}},
     "api_calls_by_operation": {"service:Operation": count}}

and `status` prints {"command": "status", "ledger_available", "resources": [{kind, arn, name,
original, applied, current, drift, recorded_in, settings: [{key, setting, original, applied,
current, drift}] (the SETTING column's words)}], "drifted": [arn, ...], "stuck": [{kind, arn,
operation, failures, error, first_failed_at, last_failed_at, generation, fix}],
"held": {engaged, by, at, command} | null, "readiness", "release_requests": [{arn, by, at,
state, outcome, detail, problem, ...}] (holdfast.core.release), "control_problems": [what of
the other control items could not be read as written], "api_calls_by_operation"}.
A stuck resource failed on `stuck_after_failures` walks and no longer holds its stage back;
`fix` is the command (and what to do first) that gets it out of that state.

The writing commands (ledger-init, engage, resume --now, release) ask first outside a
loopback endpoint, or take --yes, and have --dry-run (holdfast.cli.confirm); engage,
resume and release refuse where the deployed mode is recommend or off, unless
--force-mode. A dry run's document is the walk's, with "dry_run": true and every
resource that would change as "planned".

After a manual engage the plan stays normal: the ledger's CONTROL/HELD item says who
engaged and when, and `status` shows it ("held").

Exit codes: 0 done, 1 some resources failed (each named on stderr), 2 usage or settings
error (including a ledger table that does not exist: `holdfast ledger-init` creates it,
a write not confirmed, and a RESOURCE_ARN outside the partition, region and account the
command acts in: `release` acts on exactly the resource its ARN names, or on nothing),
3 AWS did not answer, 4 AWS refused the credentials.
"""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Any, Mapping

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from holdfast import engine
from holdfast.aws import error_code, error_message
from holdfast.cli import EXIT_FAILED, EXIT_OK, accounts, words
from holdfast.cli.confirm import add_write_options, ask, caller, honour_mode
from holdfast.cli.context import LEDGER_UNKNOWN, TAGGED_LEDGER, Context, UsageError, table
from holdfast.core import policy
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.kinds import CONTROLLED, kind_of
from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, PLANNED, RESTORED, SKIPPED, VANISHED, Outcome
from holdfast.ledger import control as ledger_control
from holdfast.ledger import failures as ledger_failures
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import readiness as ledger_readiness
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger.table import describe as describe_ledger
from holdfast.ledger.table import ensure_table
from holdfast.observation import drain_inputs

# Errors that are the caller's credentials, not the ledger's health: they stop the command.
CREDENTIAL_ERRORS = frozenset({
    "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException",
    "ExpiredTokenException", "ExpiredToken", "AccessDeniedException", "MissingAuthenticationTokenException",
})


def register(sub) -> None:
    p = sub.add_parser("ledger-init", help="create the ledger table if it is missing (writes)")
    add_write_options(p)
    p.set_defaults(func=ledger_init)

    p = sub.add_parser("plan", help="show what `engage` would change, per selected resource (no writes); "
                                    "with --all-accounts, in every account and region")
    accounts.add_arguments(p, "plan")
    p.set_defaults(func=plan)

    p = sub.add_parser("engage", help="put every selected resource into the protected posture now (writes); with "
                                      "--all-accounts, ask each account's reconciler for a hold (control item only)")
    p.add_argument("--reason", default="", help="with --all-accounts: why (shown by `stage` and the plan's reasons)")
    add_write_options(p, mode=True)
    accounts.add_arguments(p, "engage")
    p.set_defaults(func=engage)

    p = sub.add_parser("resume", help="restore every engaged resource (writes)")
    p.add_argument("--now", action="store_true", help="restore everything now, skipping the staged holds")
    add_write_options(p, mode=True)
    p.set_defaults(func=resume)

    p = sub.add_parser("release", help="restore one resource now and forget it (writes); with --all-accounts, "
                                       "ask the reconciler of each ARN's account and region to (control item only)")
    p.add_argument("resource_arn", metavar="RESOURCE_ARN", nargs="+",
                   help="the resource: its ARN, or its name where one engaged resource here has it (as `status` "
                        "shows it); with --all-accounts, one or more ARNs, each in the account and region it names")
    p.add_argument("--reason", default="", help="with --all-accounts: why (kept on the request with its outcome)")
    add_write_options(p, mode=True)
    accounts.add_arguments(p, "release")
    p.set_defaults(func=release)

    p = sub.add_parser("status", help="every engaged resource: original, applied and current values, and drift; "
                                      "with --all-accounts, every account's and region's plan")
    accounts.add_arguments(p, "status")
    p.set_defaults(func=status)


# ---- commands -------------------------------------------------------------------------

def ledger_init(ctx: Context, args) -> int:
    if ctx.ledger_found_by.startswith(LEDGER_UNKNOWN):
        raise UsageError(f"{ctx.ledger_found_by}: a deployed stack's ledger may exist here under another name, and "
                         "creating holdfast-ledger would make a second, empty one; name the table with --ledger-table")
    preview = lambda: (f"ledger-init: creates the DynamoDB table {ctx.ledger_table} if it is missing", 1)
    if args.dry_run:
        ctx.emit({"command": "ledger-init", "table": ctx.ledger_table, "region": ctx.clients.region, "dry_run": True},
                 preview()[0] + " (dry run: nothing written)")
        return EXIT_OK
    ask(ctx, args, "ledger-init", "create the ledger table", preview)
    created = ensure_table(ctx.clients("dynamodb"), ctx.ledger_table)
    ctx.emit(
        {"command": "ledger-init", "table": ctx.ledger_table, "region": ctx.clients.region, "created": created},
        f"ledger table {ctx.ledger_table} {'created' if created else 'already exists'} in {ctx.clients.region}",
    )
    return EXIT_OK



def plan(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "plan")
    if fanned is not None:
        return fanned
    reachable = _check_ledger(ctx)
    queue = ctx.use_expired_queue()
    ctx.use_own_resources()
    report = engine.Engine(ctx.runtime, progress=ctx.progress).engage(dry_run=True)
    _warn_shared_mappings(ctx, report)
    return _finish(ctx, "plan", report, reachable, queue=queue)


def _warn_shared_mappings(ctx: Context, report) -> None:
    """Selected event source mappings that share their function or queue: the drain reads
    shared figures for them (holdfast.observation.drain_inputs.sharing)."""
    selected = [o.arn for o in report.outcomes if o.kind in CONTROLLED]
    if not selected:
        return
    try:
        listed = drain_inputs.mappings(ctx.clients)
    except (ClientError, ConnectionError, HTTPClientError) as err:
        ctx.warn(f"whether mappings share a function or a queue is unknown: {err}")
        return
    for line in drain_inputs.sharing(listed, selected):
        ctx.warn(f"drain: {line}")


def engage(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "engage", writes=True)
    if fanned is not None:
        return fanned
    reachable = _check_ledger(ctx)
    honour_mode(ctx, args, "engage")
    queue = ctx.use_expired_queue()
    ctx.use_own_resources()
    if args.dry_run:
        report = engine.Engine(ctx.runtime, progress=ctx.progress).engage(dry_run=True)
        return _finish(ctx, "engage", report, reachable, queue=queue, dry_run=True)

    def preview() -> tuple[str, int]:
        planned = engine.Engine(ctx.runtime, progress=ctx.progress).engage(dry_run=True)
        ctx.progress("")
        if planned.refused:
            raise UsageError(planned.refused)
        changing = [o for o in planned.outcomes if o.action == PLANNED]
        return _walk_text("engage (would)", planned.outcomes, dict(Counter(o.action for o in planned.outcomes)),
                          reachable), len(changing)

    ask(ctx, args, "engage", "engage the selected resources", preview)
    if reachable:
        # Who engaged, before the walk: an engage interrupted mid-walk (Ctrl-C) keeps it, and
        # one that finds everything already engaged writes it where it is missing.
        _record_held(ctx, "holdfast engage", only_if_missing=True)
    try:
        # Each kind walked as soon as it is listed (the mappings capped before the async configs'
        # listing, one Lambda call per function), never more than max_resources in all.
        report = engine.Engine(ctx.runtime, progress=ctx.progress).engage_as_listed(count_together=True)
    except KeyboardInterrupt:
        _say_interrupted(ctx, reachable)
        raise
    if reachable and any(o.action == ENGAGED for o in report.outcomes):
        _record_held(ctx, "holdfast engage")
    return _finish(ctx, "engage", report, reachable, queue=queue)


def _say_interrupted(ctx: Context, reachable: bool) -> None:
    """What an engage interrupted mid-walk did and did not do: each resource it reached was
    recorded before it was changed (write-ahead), the rest are untouched."""
    ctx.progress("")
    engaged = "how many resources are engaged is unknown (the ledger is unreachable: `holdfast status` reads them " \
              "from their tags)"
    if reachable:
        view = ResourceLedger(ctx.ledger())
        records = view.records()
        engaged = (f"{len(records)} resources are engaged now, each with its original recorded" if view.available
                   else f"how many resources are engaged is unknown ({view.error})")
    held = "" if not reachable else "; who engaged them is recorded (`holdfast status` shows it)"
    ctx.warn(f"engage interrupted: {engaged}{held}; the resources the walk had not reached are not engaged, and one "
             "it was writing may be recorded and not yet changed. `holdfast engage` again finishes it (it skips what "
             "is in posture); `holdfast resume --now` restores what was engaged")


def _keep_released(ctx: Context, arn: str) -> None:
    """During a hold, mark `arn` released in its engagement: the hold's re-walks leave it as
    released (holdfast.core.release.left_released); the next hold protects it again."""
    from holdfast.core.release import engagement_began

    try:
        plan = ledger_plan.read(ctx.ledger())
        began = engagement_began(plan)
        if began is not None and plan.stage != policy.NORMAL:
            ledger_control.mark_released(ctx.ledger(), arn, began=began, by=caller(ctx),
                                         now=ctx.runtime.clock.now())
            ctx.warn(f"{arn} stays released for the rest of this hold (it began at {began.isoformat()}); "
                     "the next hold protects it again")
    except LedgerUnavailable as err:
        ctx.warn(f"{err}; the next re-walk of this hold may engage it again")


def _record_held(ctx: Context, command: str, *, only_if_missing: bool = False) -> None:
    """Record who engaged by hand (the caller's IAM identity). `only_if_missing`: unless a
    record is there already (its first engager's)."""
    try:
        if only_if_missing and ledger_control.read_control(ctx.ledger()).held_by:
            return
        ledger_control.set_held(ctx.ledger(), True, by=caller(ctx), command=command,
                                now=ctx.runtime.clock.now())
    except LedgerUnavailable as err:
        ctx.warn(f"{err}; `holdfast status` will not say who engaged")


def _restore_preview(ctx: Context, rows: list[dict[str, Any]], command: str) -> tuple[str, int, list[dict]]:
    """What a restore of these engaged resources would write: each key from its current
    value back to its original, except drift (the owner's change, kept)."""
    out, planned = [], []
    for r in rows:
        changes = {k: {"from": (r.get("current") or {}).get(k), "to": v} for k, v in (r.get("original") or {}).items()
                   if k not in (r.get("drift") or {}) and (r.get("current") or {}).get(k) != v}
        said = "; ".join(words.change(r["kind"], k, c["from"], c["to"]) for k, c in changes.items())
        said += "".join(f"; {words.drift(r['kind'], k, (r.get('current') or {}).get(k))}" for k in (r.get("drift") or {}))
        action = "vanished" if r.get("vanished") else (PLANNED if changes else "forget record")
        out.append((r["kind"], r.get("name") or name_of(r["arn"]), r["arn"], action, said.strip("; ") or "-"))
        planned.append({"kind": r["kind"], "arn": r["arn"], "action": action, "changes": changes,
                        "drift": sorted(r.get("drift") or {})})
    text = table(("KIND", "NAME", "ARN", "ACTION", "CHANGES"), out) if out else f"{command}: no engaged resources"
    return text, len(rows), planned


def _dry_restore(ctx: Context, command: str, rows: list[dict[str, Any]], reachable: bool) -> int:
    text, _, planned = _restore_preview(ctx, rows, command)
    ctx.emit({"command": command, "dry_run": True, "ledger_available": reachable, "resources": planned,
              "summary": dict(Counter(p["action"] for p in planned))},
             text + f"\n{command}: dry run, nothing written")
    return EXIT_OK


def resume(ctx: Context, args) -> int:
    if not args.now:
        raise UsageError(
            "a staged resume, with holds between stages, is the reconciler's job; "
            "`holdfast resume --now` restores every engaged resource at once"
        )
    reachable = _check_ledger(ctx)
    honour_mode(ctx, args, "resume --now")
    if args.dry_run:
        return _dry_restore(ctx, "resume", engine.Engine(ctx.runtime).status(), reachable)
    ask(ctx, args, "resume --now", "restore every engaged resource",
        lambda: _restore_preview(ctx, engine.Engine(ctx.runtime).status(), "resume")[:2])
    report = engine.Engine(ctx.runtime, progress=ctx.progress).relax()
    if reachable and report.complete and not report.failed:
        try:
            ledger_control.set_held(ctx.ledger(), False)
        except LedgerUnavailable as err:
            ctx.warn(str(err))
    return _finish(ctx, "resume", report, reachable)


def release(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "release", writes=True)
    if fanned is not None:
        return fanned
    if len(args.resource_arn) > 1:
        raise UsageError(f"release takes one RESOURCE_ARN ({len(args.resource_arn)} given); several, "
                         "in their own accounts and regions, go with --all-accounts")
    arn = resolve_name(ctx, args.resource_arn[0])
    try:
        kind = kind_of(arn)
    except ValueError as err:
        raise UsageError(str(err)) from err
    ctx.require_here(arn)
    reachable = _check_ledger(ctx)
    honour_mode(ctx, args, "release")
    if args.dry_run or not (args.yes or ctx.local()):
        rows = [r for r in engine.Engine(ctx.runtime, kinds=(kind,)).status() if r["arn"] == arn]
        if args.dry_run:
            return _dry_restore(ctx, "release", rows, reachable)
        if rows:   # not engaged: nothing to write, and the release below says so
            ask(ctx, args, "release", f"restore {arn} and forget its record",
                lambda: _restore_preview(ctx, rows, "release")[:2])
    # Read before the release forgets it: a vanished resource with no record was never Holdfast's.
    recorded = ResourceLedger(ctx.ledger()).get(arn) is not None
    if reachable:
        # The mark before the restore: interrupted between them, the resource is restored and
        # marked, and no re-walk of the hold engages it again (running this again finishes it).
        _keep_released(ctx, arn)
    before = Counter(ctx.clients.calls)
    outcome = engine.Engine(ctx.runtime).release(arn)
    if reachable and outcome.action in (RESTORED, DRIFT_KEPT, VANISHED):
        try:  # no longer stuck (it is listed by `holdfast status` until then)
            ledger_failures.clear(ctx.ledger(), arn)
        except LedgerUnavailable as err:
            ctx.warn(f"could not clear its failure count: {err}")
    if outcome.action == ALREADY or (outcome.action == VANISHED and reachable and not recorded):
        what = "does not exist" if outcome.action == VANISHED else "is not engaged"
        raise UsageError(f"{arn} {what} and Holdfast holds no record of it; nothing to release")
    report = engine.Report(
        outcomes=[outcome], ledger_available=reachable,
        api_calls={kind: sum((Counter(ctx.clients.calls) - before).values())},
    )
    return _finish(ctx, "release", report, reachable)


def resolve_name(ctx: Context, given: str) -> str:
    """RESOURCE_ARN as given, or the ARN of the one engaged resource of that name here (a
    group, function, target group or service name, as `status` shows it). A name that
    several engaged resources share, or none, is a usage error naming them: `release` acts
    on exactly one resource, or on nothing."""
    if given.startswith("arn:"):
        return given
    rows = engine.Engine(ctx.runtime).status()
    named = [r for r in rows if r.get("name") == given]
    if len(named) == 1:
        return named[0]["arn"]
    where = f"{ctx.clients.region} (account {ctx.account()})"
    if named:
        listed = "; ".join(f"{r['kind']} {r['arn']}" for r in named)
        raise UsageError(f"{len(named)} engaged resources in {where} are named {given!r}: {listed}; "
                         "give the ARN of the one to release (nothing was done)")
    names = sorted({r.get("name") for r in rows if r.get("name")})
    near = difflib.get_close_matches(given, names, n=1)
    raise UsageError(f"no engaged resource in {where} is named {given!r}"
                     + (f"; did you mean {near[0]!r}?" if near else "")
                     + " (`holdfast status` lists the engaged resources; nothing was done)")


def status(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "status")
    if fanned is not None:
        return fanned
    ledger_available = _check_ledger(ctx)
    rows = engine.Engine(ctx.runtime).status()
    drifted = [r["arn"] for r in rows if r.get("drift")]
    stuck = _stuck(ctx) if ledger_available else []
    hand = held(ctx, len(rows)) if ledger_available else None
    ready = _readiness(ctx) if ledger_available else None
    releases, unread, marks, evacuations = _release_requests(ctx) if ledger_available else ([], [], [], [])
    ctx.emit(
        {
            "command": "status",
            "ledger_available": ledger_available,
            "resources": [{**r, "settings": settings_in_words(r)} for r in rows],
            "drifted": drifted,
            "stuck": stuck,
            "held": hand,
            "readiness": ready,
            "release_requests": releases,
            "released": marks,
            "evacuations": evacuations,
            "control_problems": unread,
            "api_calls_by_operation": dict(ctx.clients.calls),
        },
        _status_text(rows, ledger_available, stuck) + (f"\n{held_text(hand)}" if hand else "")
        + "".join(f"\n{release_line(r)}" for r in releases)
        + "".join(f"\n{m['arn']} released by {m['by']} at {m['at']}: left released in the hold that began at "
                  f"{m['began']}" for m in marks)
        + "".join(f"\n{evacuation_line(e)}" for e in evacuations)
        + "".join(f"\ncontrol item not read as written: {p}" for p in unread) + "\n" + readiness_line(ready),
    )
    if not ctx.json:
        _report_calls(ctx, _calls_by_service(ctx))
    return EXIT_OK


# ---- the ledger -------------------------------------------------------------------------

def _readiness(ctx: Context) -> dict[str, Any] | None:
    """The last scheduled readiness result (holdfast.handlers.readiness), None before the first."""
    try:
        return ledger_readiness.read_result(ctx.ledger())
    except LedgerUnavailable as err:
        ctx.warn(f"readiness result unknown: {err}")
        return None


def _release_requests(ctx: Context) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]],
                                             list[dict[str, Any]]]:
    """The release requests an operator wrote through the org operator role
    (`release --all-accounts`), pending or done with their outcome; what of the other
    control items could not be read as written; the resources released by hand, each
    with the hold it stays released in; and the evacuation holds, each Region switch plan
    whose engage step holds this Region (who, when, which execution) until its
    post-recovery step lifts it (holdfast.region_switch)."""
    try:
        control = ledger_control.read_control(ctx.ledger())
    except LedgerUnavailable as err:
        ctx.warn(f"release requests and evacuation holds unknown: {err}")
        return [], [], [], []
    return ([r.to_dict() for r in control.releases], list(control.problems),
            [dict(arn=m.arn, began=m.began, by=m.by, at=m.at) for m in control.released],
            [dict(plan_arn=e.plan_arn, execution_id=e.execution_id, by=e.by, at=e.at) for e in control.evacuations])


def evacuation_line(e: dict[str, Any]) -> str:
    return (f"evacuation hold: Region switch plan {e['plan_arn']} (execution {e.get('execution_id') or '-'}) holds "
            f"this Region since {e.get('at') or '-'}, written by {e.get('by') or 'its engage step'}; the plan's "
            "post-recovery step lifts it, `holdfast advance` by hand")


def release_line(r: dict[str, Any]) -> str:
    asked = f"release of {r['arn']} requested by {r.get('by') or 'an operator'} at {r.get('at')}"
    if r.get("state") == "done":
        return f"{asked}: {r.get('outcome')} at {r.get('done_at')}: {r.get('detail')}"
    if r.get("problem"):
        return f"{asked}: not a request Holdfast can act on ({r['problem']}); the reconciler's next tick refuses it"
    return f"{asked}: {r.get('state')} (the reconciler's next tick acts on it)"


def readiness_line(result: dict[str, Any] | None) -> str:
    if result is None:
        return "readiness   no scheduled check has run yet (`holdfast doctor` runs them now)"
    # Rules the scheduled run does not check, and who does (holdfast.readiness: Check.checked).
    unchecked = [f"  not checked by the schedule: {c['check']}: {c.get('fix') or c['detail']}"
                 for c in result.get("checks", []) if c.get("checked") is False]
    if result.get("ok"):
        selected = ", ".join(f"{k} {n}" for k, n in (result.get("selected") or {}).items()) or "no resources selected"
        return "\n".join([f"readiness   ok at {result.get('at')} ({selected})", *unchecked])
    failed = [c for c in result.get("checks", []) if not c.get("ok")]
    lines = [f"readiness   {len(failed)} check(s) failed at {result.get('at')}: {', '.join(result.get('failed') or [])}"]
    lines += [f"  {c['check']}: {c['detail']}" + (f"\n    fix: {c['fix']}" if c.get("fix") else "") for c in failed]
    return "\n".join(lines + unchecked)


def held(ctx: Context, engaged: int) -> dict[str, Any] | None:
    """Resources engaged with no plan in force (normal, or none yet) are held by hand: the
    reconciler does not restore them. Who engaged them, when, with what (CONTROL/HELD);
    None when nothing is held that way."""
    if not engaged:
        return None
    try:
        current = ledger_plan.read(ctx.ledger())
        control = ledger_control.read_control(ctx.ledger())
    except LedgerUnavailable as err:
        ctx.warn(f"who holds resources by hand is unknown: {err}")
        return None
    if current is not None and current.stage != policy.NORMAL:
        return None
    return {"engaged": engaged, "by": control.held_by, "at": control.held_at, "command": control.held_command}


def held_text(hand: dict[str, Any]) -> str:
    who = (f"by {hand['by']} at {hand['at']} ({hand['command']})" if hand.get("by")
           else "by an earlier walk that left no record of who (a manual engage before this version, or an "
                "interrupted one)")
    return (f"held by hand: {hand['engaged']} resources engaged with no plan in force, {who}; the reconciler "
            "leaves them engaged while the plan is normal; `holdfast resume --now` restores them")


def _stuck(ctx: Context) -> list[dict[str, Any]]:
    """The stuck resources under the plan in force, each with the command that fixes it."""
    ledger, settings = ctx.ledger(), ctx.runtime.settings
    try:
        plan = ledger_plan.read(ledger)
        failing = ledger_failures.load(ledger)
    except LedgerUnavailable as err:
        ctx.warn(f"stuck resources unknown: {err}")
        return []
    return [{**f.to_dict(), "fix": ledger_failures.fix(f, settings.selector)}
            for f in ledger_failures.stuck(failing, plan, settings.stuck_after_failures)]


def _check_ledger(ctx: Context) -> bool:
    """True when the ledger answers. A missing table is the operator's to fix (exit 2);
    an unreachable ledger is not: engaging and restoring work from the resources' tags."""
    try:
        describe_ledger(ctx.ledger())
        if ctx.ledger_found_by.startswith(TAGGED_LEDGER):
            ctx.warn(f"ledger: {ctx.ledger_found_by}")   # SSM failed: say so, and how the ledger was found
        return True
    except ClientError as err:
        code = error_code(err) or ""
        if code == "ResourceNotFoundException" and ctx.ledger_found_by.startswith(LEDGER_UNKNOWN):
            # SSM failed and no tag named the ledger: a deployed stack's ledger may well exist
            # under another name, so `ledger-init` would make a second, empty one.
            ctx.warn(f"{ctx.ledger_found_by}: running from resource tags only, as with an unreachable ledger; "
                     "pass --ledger-table NAME (the stack's LedgerTableName output) to use the ledger")
            return False
        if code == "ResourceNotFoundException":
            raise UsageError(
                f"ledger table {ctx.ledger_table} does not exist in {ctx.clients.region}; "
                "create it with `holdfast ledger-init`"
            ) from err
        if code in CREDENTIAL_ERRORS:
            raise
        reason = f"{code}: {error_message(err)}"
    except (ConnectionError, HTTPClientError) as err:
        reason = str(err)
    ctx.warn(f"ledger {ctx.ledger_table} unreachable ({reason}); running from resource tags only")
    return False


# ---- output -----------------------------------------------------------------------------

def _finish(ctx: Context, command: str, report, ledger_reachable: bool, queue=None, dry_run: bool = False) -> int:
    """Print the report, name every failure, and choose the exit code."""
    ctx.progress("")  # clears the progress line
    if report.refused:
        raise UsageError(report.refused)
    ledger_available = ledger_reachable and report.ledger_available
    failed = [{"kind": o.kind, "arn": o.arn, "error": o.error} for o in report.failed]
    summary = dict(Counter(o.action for o in report.outcomes))
    ctx.emit(
        {
            "command": command,
            **({"dry_run": True} if dry_run else {}),
            "ledger_available": ledger_available,
            "ledger_error": report.ledger_error,
            "complete": report.complete,
            "resources": [o.to_dict() for o in report.outcomes],
            "failed": failed,
            "summary": summary,
            "api_calls": dict(report.api_calls),
            "api_calls_by_kind": {kind: dict(ops) for kind, ops in report.operations.items()},
            "api_calls_by_operation": dict(ctx.clients.calls),
            **({"expired_queue": {"arn": queue[0], "found_by": queue[1]}} if queue else {}),
        },
        _walk_text(command, report.outcomes, summary, ledger_available)
        + (f"\n{command}: dry run, nothing written" if dry_run else ""),
    )
    if not ctx.json:
        for o in report.outcomes:
            for topic, note in o.notes.items():
                ctx.warn(f"{o.action}: {o.kind} {o.arn}: {note.get('why', note)}")
                if note.get("command"):
                    ctx.warn(f"  to fix: {note['command']}")
                elif note.get("fix"):
                    ctx.warn(f"  to fix: {note['fix']}")
    for f in failed:
        ctx.warn(f"failed: {f['kind']} {f['arn']}: {f['error']}")
    # Left unchanged because no record could be written ahead (no tag room, no ledger): unprotected.
    unprotected = [o for o in report.outcomes if o.action == SKIPPED and "record" in o.notes]
    if ctx.json:
        for o in unprotected:
            ctx.warn(f"not engaged: {o.kind} {o.arn}: {o.notes['record']['why']}")
    if not report.complete:
        if command in ("resume", "release") and not ledger_available:
            ctx.warn("the ledger's records could not be read: resources recorded only there (no room for tags, "
                     "or their tags were stripped) were not restored; run the command again when the ledger answers")
        else:
            ctx.warn("the walk stopped before every resource was visited; run the command again")
    if not ctx.json:
        _report_calls(ctx, report.api_calls)
    return EXIT_FAILED if failed or unprotected or not report.complete else EXIT_OK


def _walk_text(command: str, outcomes: list[Outcome], summary: Mapping[str, int], ledger_available: bool) -> str:
    # By kind and name: the walks of the kinds finish in any order.
    rows = sorted((o.kind, o.name or name_of(o.arn), o.arn, o.action, _changes(o) or o.error or "") for o in outcomes)
    lines = [table(("KIND", "NAME", "ARN", "ACTION", "CHANGES"), rows)] if rows else [f"{command}: no selected resources"]
    lines.append(f"{command}: " + (", ".join(f"{n} {a}" for a, n in sorted(summary.items())) or "nothing to do"))
    if not ledger_available:
        lines.append("ledger unreachable: ran from resource tags only (the write-ahead record is on each resource)")
    return "\n".join(lines)


def name_of(arn: str) -> str:
    """A name for a table row whose resource was not read: the ARN's last part (a group,
    function or target group name; a mapping's UUID)."""
    if arn.startswith("discover:"):
        return "-"
    tail = arn.rsplit(":", 1)[-1]
    if tail.startswith("targetgroup/"):
        return tail.split("/")[1]
    return tail.rsplit("/", 1)[-1]


def _changes(o: Outcome) -> str:
    parts = [words.change(o.kind, k, v.get("from"), v.get("to")) for k, v in o.changes.items()]
    parts += [words.drift(o.kind, k, v.get("current")) for k, v in o.drift.items()]
    return "; ".join(parts)


def _status_text(rows: list[dict[str, Any]], ledger_available: bool, stuck: list[dict[str, Any]] = ()) -> str:
    out = []
    for r in rows:
        original, applied, current = (r.get(k) or {} for k in ("original", "applied", "current"))
        drift = r.get("drift") or {}
        keys = sorted(set(original) | set(applied) | set(current))
        kind = r["kind"]
        for i, key in enumerate(keys):
            out.append((
                kind if i == 0 else "", (r.get("name") or "-") if i == 0 else "", r["arn"] if i == 0 else "",
                words.setting(kind, key),
                words.value(kind, key, original.get(key)), _applied(kind, key, applied.get(key)),
                "(vanished)" if r.get("vanished") else words.value(kind, key, current.get(key)),
                "DRIFT" if key in drift else "",
            ))
    lines = [table(("KIND", "NAME", "ARN", "SETTING", "ORIGINAL", "APPLIED", "CURRENT", "DRIFT"), out)] if rows else ["no engaged resources"]
    lines.append(f"{len(rows)} engaged, {sum(1 for r in rows if r.get('drift'))} with drift")
    if stuck:
        lines.append("")
        lines.append(table(("STUCK", "KIND", "NAME", "ARN", "FAILED WALKS", "LAST ERROR"),
                           [(s["operation"], s["kind"], name_of(s["arn"]), s["arn"], str(s["failures"]), s["error"][:120])
                            for s in stuck]))
        lines += [f"  fix {s['arn']}: {s['fix']}" for s in stuck]
        lines.append(f"{len(stuck)} stuck: no longer holding their stage back (metric ResourcesStuck)")
    if not ledger_available:
        lines.append("ledger unreachable: engaged resources found from their tags only")
    return "\n".join(lines)


def _applied(kind: str, key: str, applied: Any) -> str:
    """What Holdfast set; a mapping's applied values are every cap it used (the floor and the drain's steps)."""
    if isinstance(applied, list):
        return ", ".join(words.value(kind, key, v) for v in applied)
    return words.value(kind, key, applied)


def settings_in_words(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each recorded key of a status row as the SETTING column says it (added to --json:
    the row's own fields keep their recorded keys and values)."""
    kind = r["kind"]
    original, applied, current = (r.get(k) or {} for k in ("original", "applied", "current"))
    return [{"key": key, "setting": words.setting(kind, key), "original": words.value(kind, key, original.get(key)),
             "applied": _applied(kind, key, applied.get(key)),
             "current": None if r.get("vanished") else words.value(kind, key, current.get(key)),
             "drift": key in (r.get("drift") or {})}
            for key in sorted(set(original) | set(applied) | set(current))]


def _calls_by_service(ctx: Context) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for operation, n in ctx.clients.calls.items():
        counts[operation.split(":")[0]] += n
    return dict(counts)


def _report_calls(ctx: Context, calls: Mapping[str, int]) -> None:
    total = sum(ctx.clients.calls.values())
    parts = ", ".join(f"{k} {n}" for k, n in sorted(calls.items()))
    ctx.warn(f"API calls: {parts or 'none'} (total {total})")
