"""`holdfast doctor`: check in an account what a deploy and an event need, each with a fix.

Read-only (holdfast.readiness has the checks; the readiness function runs them on a
schedule too). The Powertools layer is checked in the region of each settings target
(else the CLI's region); with --all-regions also in every region of `org_regions`, the
regions a StackSet deploys to: run it before the first deploy of a new region, since a
region without the layer's parameter fails the deploy. With --json:
{"command": "doctor", "ok": bool, "checks": [{"check", "ok", "detail", "fix"}]}.
It also finds the ARC Region switch plans that name Holdfast's steps and checks Holdfast
in each of their Regions (holdfast.cli.region_switch).
Exit 0 when every check passed, 1 when any did not (each is named with its fix).
"""

from __future__ import annotations

from holdfast import engine, readiness
from holdfast.aws import AWS_ERRORS, Clients, error_summary
from holdfast.cli import region_switch as region_switch_checks
from holdfast.cli.context import table
from holdfast.core.kinds import KINDS
from holdfast.core.model import FAILED, SKIPPED


def register(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check what a deploy and an event need (layer, roles, Health rule, queue, resources), each with a fix",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--all-regions", action="store_true",
                   help="check the Powertools layer in every region of the settings' targets and org_regions, "
                        "not only the targets' (or the CLI's) region")
    p.set_defaults(func=run)


def run(ctx, args) -> int:
    settings, clients = ctx.settings, ctx.clients
    regions = sorted({t.region for t in settings.targets}) or [clients.region]
    if getattr(args, "all_regions", False):
        regions = sorted({*regions, *settings.org_regions, clients.region})
    profile, endpoint = getattr(args, "profile", None), getattr(args, "endpoint_url", None)

    def clients_for(region: str) -> Clients:
        return clients if region == clients.region else Clients(region=region, profile=profile, endpoint_url=endpoint)

    ctx.progress("checking the Powertools layer")
    checks = readiness.powertools_layer(clients_for, regions)
    queue, found_by = ctx.use_expired_queue()
    ctx.use_own_resources()
    checks.append(readiness.expired_queue(clients, queue, found_by))
    checks.append(readiness.health_rule(clients, clients.region, settings))
    checks.append(readiness.retained_ledgers(clients, ctx.ledger_table))

    ctx.progress("planning every selected resource")
    report = engine.Engine(ctx.runtime, progress=ctx.progress).engage(dry_run=True)
    selected: dict[str, str] = {}
    for o in report.outcomes:
        if not o.arn.startswith("discover:"):
            selected.setdefault(o.kind, o.arn)
    # Holdfast's own resources are skipped on purpose (holdfast.core.own): not a problem.
    stuck = [o for o in report.outcomes if o.action in (FAILED, SKIPPED) and "own" not in o.notes]
    for o in stuck:
        note = next(iter(o.notes.values()), {}) if o.notes else {}
        checks.append(readiness.Check(f"resource {o.kind}", False, f"{o.arn}: {o.action}: {note.get('why') or o.error}",
                                   note.get("fix") or note.get("command") or "see the error; `holdfast plan` shows it again"))
    if queue:
        ctx.progress("checking which functions' roles can deliver expired events")
        checks += readiness.destination_checks(clients, settings, queue)
    if not stuck and report.complete:
        checks.append(readiness.Check("resources", True, f"{len(report.outcomes)} selected resources: Holdfast can act on each"))

    role, where = readiness.reconciler_role(clients, ctx.ledger_table)
    checks.append(readiness.concurrency(clients, settings, where if role is not None else None))
    if role is None:
        checks.append(readiness.Check("controller-role", False, where, "deploy Holdfast's stack here (npx cdk deploy)"))
    else:
        account = role.split(":")[4]
        kinds = {k: selected.get(k) or readiness.sample_arn(k, clients.partition, clients.region, account) for k in KINDS}
        checks += readiness.controller_permissions(clients, role, kinds, settings)

    checks += region_switch(ctx, clients_for)

    ctx.progress("")
    ok = all(c.ok for c in checks)
    ctx.emit({"command": "doctor", "ok": ok, "checks": [c.to_dict() for c in checks]}, render(checks))
    for c in checks:
        if not c.ok:
            ctx.warn(f"{c.name}: {c.detail}" + (f"\n  fix: {c.fix}" if c.fix else ""))
    return 0 if ok else 1


def region_switch(ctx, clients_for) -> list[readiness.Check]:
    """The ARC Region switch plans that name Holdfast's steps, and whether Holdfast is
    deployed in each of their Regions (holdfast.cli.region_switch)."""
    ctx.progress("reading Region switch plans")
    try:
        account = ctx.account()
    except AWS_ERRORS as err:
        return [readiness.Check("region-switch", True, f"not checked: the caller's account is unknown "
                                f"({error_summary(err)})", checked=False)]
    return region_switch_checks.checks(ctx.clients, clients_for, account)


def render(checks: list[readiness.Check]) -> str:
    rows = [("ok" if c.ok else "FAIL", c.name, c.detail) for c in checks]
    failed = sum(1 for c in checks if not c.ok)
    return table(("", "CHECK", "DETAIL"), rows) + f"\n{len(checks)} checks, {failed} failed"
