"""Operator control of the reconciler: pause, unpause, advance, stage.

- `holdfast pause [--reason TEXT]` sets the kill switch (CONTROL/PAUSE). Every tick
  that starts after it does nothing at all, so writes stop within one tick.
- `holdfast unpause` clears it.
- `holdfast advance [--generation N]` skips the hold of the current plan (or of
  generation N, refused if that is no longer current). The walk, the verdict and the
  gating alarms still gate; `stage` shows what does.
- `holdfast stage` shows the plan, its generation, time in stage, the kill switch, and
  what gates the next stage, as the next tick would decide it from the last verdict;
  and, from the ledger's records of this hold, each mapping's drain (its controller's
  newest decision, its cap, the forecast time to drain made when its drain started
  against the time elapsed since, and the forecast on the newest measured throughput)
  and each replay source (status, messages moved, rate, why).

--json documents:
    pause/unpause: {"command", "paused", "by", "reason", "at"}
    advance:       {"command", "generation", "stage", "by", "at"}
    stage:         {"command", "generation", "stage", "entered_at",
                    "minutes_in_stage", "verdict", "reasons", "done", "paused",
                    "pause": {...} | null, "advance_requested": bool,
                    "next": {"would_change": bool, "stage": ..., "reasons": [...], "gates": [...]},
                    "drain": [{"arn", "name", "action", "cap", "ceiling", "started_at", "elapsed_minutes",
                               "forecast_minutes", "forecast", "measured_minutes", "reasons", "waiting_on",
                               "stalled_since", "stalled_why"}],
                    "replay": [{"source", "kind", "status", "moved", "rate", "attempts", "reason"}],
                    "capacity": {"waves", "groups", "total_groups", "marked", "reset", "to_replace",
                                 "stepped_back", "waves_detail", "stepped_back_groups"} | null,
                    "held": {"engaged", "by", "at", "command"} | null}
pause, unpause and advance write: outside a loopback endpoint they ask, or take --yes,
and --dry-run writes nothing (holdfast.cli.confirm). `stage` also says who holds resources
by hand when no plan is in force ("held").

Exit codes: 0 done, 1 refused (no plan to advance, a stale generation, ledger
unreachable), 2 usage (a write not confirmed too), 3 AWS did not answer.
"""

from __future__ import annotations

from holdfast.cli import EXIT_FAILED, EXIT_OK, accounts
from holdfast.cli.confirm import add_write_options, ask, caller
from holdfast.cli.context import Context, UsageError, table
from holdfast.cli.resources import held, held_text
from holdfast.core import drain as dc
from holdfast.core import errors, policy, pollers
from holdfast.core import replay as rp
from holdfast.core.errors import LedgerUnavailable
from holdfast.ledger import control as ledger_control
from holdfast.ledger import drain as ledger_drain
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.resources import ResourceLedger
from holdfast.observation import observe
from holdfast.stages import capacity as capacity_stage
from holdfast.stages.drain import current_records, hold_started


def register(sub) -> None:
    p = sub.add_parser("pause", help="kill switch: the reconciler stops acting from its next tick (writes); "
                                     "with --all-accounts, in every account and region")
    p.add_argument("--reason", default="", help="why (shown by `stage` and in every tick's log line)")
    add_write_options(p)
    accounts.add_arguments(p, "pause")
    p.set_defaults(func=pause)
    p = sub.add_parser("unpause", help="clear the kill switch (writes); with --all-accounts, in every account and region")
    add_write_options(p)
    accounts.add_arguments(p, "unpause")
    p.set_defaults(func=unpause)
    p = sub.add_parser("advance", help="skip the hold of the current stage (writes)")
    p.add_argument("--generation", type=int, default=None, help="only if the plan is still this generation "
                                                                  "(with --all-accounts: each account's current plan)")
    add_write_options(p)
    accounts.add_arguments(p, "advance")
    p.set_defaults(func=advance)
    p = sub.add_parser("stage", help="the plan, its generation, time in stage, and what gates the next stage")
    p.set_defaults(func=stage)


def _set(ctx: Context, paused: bool, reason: str, clock=None, args=None) -> int:
    now = (clock or ctx.runtime.clock).now()
    by = caller(ctx)   # the IAM identity, as `engage` records it (the OS user says nothing in a shared runner)
    command = "pause" if paused else "unpause"
    said = (f"sets the kill switch in {ctx.ledger_table}: the reconciler takes no action from its next tick"
            if paused else f"clears the kill switch in {ctx.ledger_table}: the reconciler acts again from its next tick")
    if args is not None and args.dry_run:
        ctx.emit({"command": command, "dry_run": True, "paused": paused, "by": by, "reason": reason},
                 f"{command}: {said} (dry run: nothing written)")
        return EXIT_OK
    if args is not None:
        ask(ctx, args, command, "set the kill switch" if paused else "clear the kill switch",
            lambda: (f"{command}: {said}", 1))
    try:
        ledger_control.set_paused(ctx.ledger(), paused, by=by, reason=reason, now=now)
    except errors.LedgerUnavailable as err:
        ctx.warn(str(err))
        return EXIT_FAILED
    doc = {"command": "pause" if paused else "unpause", "paused": paused, "by": by, "reason": reason, "at": now.isoformat()}
    ctx.emit(doc, "paused: the reconciler takes no action from its next tick" if paused else "unpaused: the reconciler acts again from its next tick")
    return EXIT_OK



def pause(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "pause", writes=True)
    return fanned if fanned is not None else _set(ctx, True, args.reason, args=args)


def unpause(ctx: Context, args) -> int:
    fanned = accounts.fan_out(ctx, args, "unpause", writes=True)
    return fanned if fanned is not None else _set(ctx, False, "", args=args)


def advance(ctx: Context, args, clock=None) -> int:
    if getattr(args, "all_accounts", False) and args.generation is not None:
        raise UsageError("--generation names one account's plan: without it, --all-accounts skips the hold of each "
                         "account-region's current plan")
    fanned = accounts.fan_out(ctx, args, "advance", writes=True)
    if fanned is not None:
        return fanned
    ledger = ctx.ledger()
    try:
        current = ledger_plan.read(ledger)
    except errors.LedgerUnavailable as err:
        ctx.warn(str(err))
        return EXIT_FAILED
    if current is None or current.stage == policy.NORMAL:
        ctx.warn("no hold to skip: the plan is normal")
        return EXIT_FAILED
    generation = args.generation if args.generation is not None else current.generation
    now = (clock or ctx.runtime.clock).now()
    said = f"skips the hold of generation {generation} ({current.label})"
    if getattr(args, "dry_run", False):
        ctx.emit({"command": "advance", "dry_run": True, "generation": generation, "stage": current.label},
                 f"advance: {said} (dry run: nothing written)")
        return EXIT_OK
    if hasattr(args, "yes"):
        ask(ctx, args, "advance", "skip the current hold", lambda: (f"advance: {said}", 1))
    try:
        by = caller(ctx)
        ledger_control.request_advance(ledger, generation, by=by, now=now)
    except (errors.PlanConflict, errors.LedgerUnavailable, errors.Contention) as err:
        ctx.warn(f"not advanced: {err}")
        return EXIT_FAILED
    doc = {"command": "advance", "generation": generation, "stage": current.label, "by": by, "at": now.isoformat()}
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
        "entered_at": current.entered_at.isoformat() if current.entered_at else None,
        "minutes_in_stage": minutes,
        "verdict": verdict.state if verdict else None,
        "reasons": list(current.reasons),
        "done": sorted(current.done),
        "paused": control.paused,
        "pause": {"by": control.paused_by, "at": control.paused_at, "reason": control.reason} if control.paused else None,
        "advance_requested": control.advance_generation == current.generation and current.generation > 0,
        "next": nxt,
        "drain": [],
        "replay": [],
        "capacity": None,
    }
    try:
        engaged = len(ResourceLedger(ctx.ledger()).records())
    except LedgerUnavailable:
        engaged = 0
    doc["held"] = held(ctx, engaged)
    if current.stage != policy.NORMAL:
        try:
            doc["drain"] = drains(ctx, current, now)
            doc["replay"] = replays(ctx, current)
        except errors.LedgerUnavailable as err:
            ctx.warn(f"drain and replay records unreadable: {err}")
    if current.stage == policy.CAPACITY:
        try:
            doc["capacity"] = waves(ctx, current)
        except errors.LedgerUnavailable as err:
            ctx.warn(f"the capacity stage's record unreadable: {err}")
    lines = [
        f"stage       {current.label}  (generation {current.generation})",
        f"in stage    {minutes} min" if minutes is not None else "in stage    -",
        f"verdict     {doc['verdict'] or '-'}",
        f"why         {'; '.join(current.reasons) or '-'}",
        f"walked      {', '.join(doc['done']) or '-'}",
        f"paused      {'yes' if control.paused else 'no'}",
        f"next        {nxt['stage'] + ' (the next tick moves)' if nxt['would_change'] else 'stays'}",
    ] + [f"  gate      {g}" for g in nxt["gates"]]
    if doc["held"]:
        lines.append(f"held        {held_text(doc['held']).removeprefix('held by hand: ')}")
    lines += _drain_text(doc["drain"]) + _replay_text(doc["replay"]) + _waves_text(doc["capacity"])
    ctx.emit(doc, "\n".join(lines))
    return EXIT_OK


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def drains(ctx: Context, plan: policy.Plan, now) -> list[dict]:
    """Each mapping's drain in this hold, from its ledger record; for one in provisioned mode
    (its resource record holds pollers), the MaximumPollers its cap is written as."""
    out = []
    ledger = ctx.ledger()
    records = current_records(ledger, plan)
    provisioned = {r.arn for r in ResourceLedger(ledger).records() if pollers.MAX_KEY in r.original} if records else set()
    for arn, item in sorted(records.items()):
        d = dc.Drain.from_dict(item.doc["drain"])
        last = d.last
        cap = d.state.cap if d.state else None
        out.append({
            "arn": arn,
            "name": item.doc.get("name", arn.rsplit(":", 1)[-1]),
            "action": last.action if last else None,
            "cap": cap,
            "pollers": pollers.pollers_for(cap) if arn in provisioned and isinstance(cap, int) else None,
            "ceiling": d.ceiling,
            "started_at": d.started_at.isoformat() if d.started_at else None,
            "elapsed_minutes": _minutes((now - d.started_at).total_seconds()) if d.started_at else None,
            "forecast_minutes": _minutes(d.forecast.seconds) if d.forecast else None,
            "forecast": d.forecast.reason if d.forecast else None,
            "measured_minutes": _minutes(d.measured.seconds) if d.measured else None,
            "reasons": list(last.reasons) if last else [],
            "waiting_on": list(last.waiting_on) if last else [],
            "stalled_since": d.stalled_since.isoformat() if d.stalled_since else None,
            "stalled_why": d.stalled_why,
        })
    return out


def waves(ctx: Context, plan: policy.Plan) -> dict | None:
    """The capacity stage's waves in this generation (holdfast.stages.capacity), from its
    ledger record: how many groups came back, and how many instances were marked
    unhealthy, set Healthy again, and left to replace."""
    record, _ = capacity_stage.read_record(ctx.ledger(), plan.generation)
    if record is None:
        return None
    return {**record.totals(), "total_groups": record.total, "waves_detail": [w.to_dict() for w in record.waves],
            "stepped_back_groups": sorted(record.stepped_back)}


def _waves_text(capacity: dict | None) -> list[str]:
    if not capacity:
        return []
    return [f"capacity    {capacity['waves']} wave(s), {capacity['groups']} of {capacity['total_groups']} group(s) "
            f"resumed: {capacity['marked']} instance(s) marked unhealthy, {capacity['reset']} reset (healthy now), "
            f"{capacity['to_replace']} left to replace; {capacity['stepped_back']} group(s) stepped back"]


def replays(ctx: Context, plan: policy.Plan) -> list[dict]:
    """Each replay source of this hold, from its ledger record."""
    since = hold_started(plan)
    out = []
    for arn, item in sorted(ledger_drain.read_all(ctx.ledger(), ledger_drain.REPLAY).items()):
        try:
            r = rp.Replay.from_dict(item.doc["replay"])
        except (KeyError, ValueError):
            continue
        if r.since != since:
            continue
        out.append({"source": arn, "kind": r.kind, "status": r.status, "moved": r.moved, "rate": r.rate,
                    "attempts": r.attempts, "reason": r.reason})
    return out


def _num(value) -> str:
    return "-" if value is None else f"{value:g}"


def _drain_text(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["action"] or "-"] = counts.get(r["action"] or "-", 0) + 1
    head = f"drain       {len(rows)} mapping(s): " + ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
    body = table(
        ["mapping", "last", "cap", "ceiling", "elapsed min", "forecast min (at start)", "now min (measured)", "why"],
        [[r["name"], r["action"] or "-", _num(r["cap"]) + (f" ({r['pollers']} pollers)" if r.get("pollers") else ""),
          _num(r["ceiling"]), _num(r["elapsed_minutes"]),
          _num(r["forecast_minutes"]), _num(r["measured_minutes"]), (r["reasons"] or ["-"])[-1][:100]] for r in rows],
        inset=2,
    )
    stalled = [f"  stalled   {r['name']} since {r['stalled_since'] or '-'} (keeps cap {_num(r['cap'])}, no longer "
               f"holds the stages): {r['stalled_why']}" for r in rows if r.get("stalled_why")]
    return [head] + ["  " + line for line in body.splitlines()] + stalled


def _replay_text(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    body = table(["source", "status", "moved", "rate/s", "why"],
                 [[r["source"].rsplit(":", 1)[-1], r["status"], f"{r['moved']:,}", _num(r["rate"]), r["reason"][:100]]
                  for r in rows], inset=2)
    return [f"replay      {len(rows)} source(s)"] + ["  " + line for line in body.splitlines()]
