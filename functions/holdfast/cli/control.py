"""Operator control of the reconciler: pause, unpause, advance, stage.

- `holdfast pause [--reason TEXT]` sets the kill switch (CONTROL/PAUSE). Every tick
  that starts after it does nothing at all, so writes stop within one tick.
- `holdfast unpause` clears it.
- `holdfast advance [--generation N]` skips the hold of the current plan (or of
  generation N, refused if that is no longer current). The walk, the verdict and the
  gating alarms still gate; `stage` shows what does.
- `holdfast stage` shows the plan, its generation, time in stage, the kill switch, and
  what gates the next stage, as the next tick would decide it from the last verdict.

--json documents:
    pause/unpause: {"command", "paused", "by", "reason", "at"}
    advance:       {"command", "generation", "stage", "by", "at"}
    stage:         {"command", "generation", "stage", "drain_step", "entered_at",
                    "minutes_in_stage", "verdict", "reasons", "done", "paused",
                    "pause": {...} | null, "advance_requested": bool,
                    "next": {"would_change": bool, "stage": ..., "reasons": [...], "gates": [...]}}
Exit codes: 0 done, 1 refused (no plan to advance, a stale generation, ledger
unreachable), 2 usage.
"""

from __future__ import annotations

from holdfast.cli import EXIT_FAILED, EXIT_OK
from holdfast.cli.context import Context, operator_name as _operator
from holdfast.core import errors, policy
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.observation import observe


def register(sub) -> None:
    p = sub.add_parser("pause", help="kill switch: the reconciler stops acting from its next tick")
    p.add_argument("--reason", default="", help="why (shown by `stage` and in every tick's log line)")
    p.set_defaults(func=pause)
    p = sub.add_parser("unpause", help="clear the kill switch")
    p.set_defaults(func=unpause)
    p = sub.add_parser("advance", help="skip the hold of the current stage")
    p.add_argument("--generation", type=int, default=None, help="only if the plan is still this generation")
    p.set_defaults(func=advance)
    p = sub.add_parser("stage", help="the plan, its generation, time in stage, and what gates the next stage")
    p.set_defaults(func=stage)


def _set(ctx: Context, paused: bool, reason: str, clock=None) -> int:
    now = (clock or ctx.runtime.clock).now()
    by = _operator()
    try:
        ledger_control.set_paused(ctx.clients("dynamodb"), ctx.ledger_table, paused, by=by, reason=reason, now=now)
    except errors.LedgerUnavailable as err:
        ctx.warn(str(err))
        return EXIT_FAILED
    doc = {"command": "pause" if paused else "unpause", "paused": paused, "by": by, "reason": reason, "at": now.isoformat()}
    ctx.emit(doc, "paused: the reconciler takes no action from its next tick" if paused else "unpaused: the reconciler acts again from its next tick")
    return EXIT_OK


def pause(ctx: Context, args) -> int:
    return _set(ctx, True, args.reason)


def unpause(ctx: Context, args) -> int:
    return _set(ctx, False, "")


def advance(ctx: Context, args, clock=None) -> int:
    dynamodb = ctx.clients("dynamodb")
    try:
        current = ledger_plan.read(dynamodb, ctx.ledger_table)
    except errors.LedgerUnavailable as err:
        ctx.warn(str(err))
        return EXIT_FAILED
    if current is None or current.stage == policy.NORMAL:
        ctx.warn("no hold to skip: the plan is normal")
        return EXIT_FAILED
    generation = args.generation if args.generation is not None else current.generation
    now = (clock or ctx.runtime.clock).now()
    try:
        ledger_control.request_advance(dynamodb, ctx.ledger_table, generation, by=_operator(), now=now)
    except (errors.PlanConflict, errors.LedgerUnavailable, errors.Contention) as err:
        ctx.warn(f"not advanced: {err}")
        return EXIT_FAILED
    doc = {"command": "advance", "generation": generation, "stage": current.label, "by": _operator(), "at": now.isoformat()}
    ctx.emit(doc, f"hold of generation {generation} ({current.label}) skipped: the next tick advances if the walk, verdict and alarms allow")
    return EXIT_OK


def stage(ctx: Context, args, clock=None) -> int:
    now = (clock or ctx.runtime.clock).now()
    try:
        seen = observe(ctx.runtime, now)  # the last recorded verdict: the CLI runs no probes
    except errors.LedgerUnavailable as err:
        ctx.warn(str(err))
        return EXIT_FAILED
    current, control, verdict = seen.plan or policy.Plan(mode=ctx.settings.mode), seen.control, seen.verdict
    d = seen.decide(now, ctx.settings)
    if verdict is None:
        nxt = {"would_change": False, "stage": current.label, "reasons": [], "gates": ["no verdict recorded yet"]}
    else:
        nxt = {"would_change": d.changed, "stage": d.plan.label, "reasons": list(d.reasons), "gates": list(d.gates)}
    if control.paused:
        nxt["gates"].insert(0, f"paused by {control.paused_by} at {control.paused_at}: {control.reason}")
    minutes = round((now - current.entered_at).total_seconds() / 60, 1) if current.entered_at else None
    doc = {
        "command": "stage",
        "generation": current.generation,
        "stage": current.stage,
        "drain_step": current.drain_step if current.stage == policy.DRAIN else None,
        "entered_at": current.entered_at.isoformat() if current.entered_at else None,
        "minutes_in_stage": minutes,
        "verdict": verdict.state if verdict else None,
        "reasons": list(current.reasons),
        "done": sorted(current.done),
        "paused": control.paused,
        "pause": {"by": control.paused_by, "at": control.paused_at, "reason": control.reason} if control.paused else None,
        "advance_requested": control.advance_generation == current.generation and current.generation > 0,
        "next": nxt,
    }
    lines = [
        f"stage       {current.label}  (generation {current.generation})",
        f"in stage    {minutes} min" if minutes is not None else "in stage    -",
        f"verdict     {doc['verdict'] or '-'}",
        f"why         {'; '.join(current.reasons) or '-'}",
        f"walked      {', '.join(doc['done']) or '-'}",
        f"paused      {'yes' if control.paused else 'no'}",
        f"next        {nxt['stage'] + ' (the next tick moves)' if nxt['would_change'] else 'stays'}",
    ] + [f"  gate      {g}" for g in nxt["gates"]]
    ctx.emit(doc, "\n".join(lines))
    return EXIT_OK
