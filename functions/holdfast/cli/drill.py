"""`holdfast drill`: a rehearsal of a regional launch impairment, end to end.

    holdfast drill [--yes] [--out DIR] [--stack-name NAME | --parameter-prefix PATH]
                   [--experiment-template-id ID] [--duration-minutes N]
                   [--timeout-minutes N] [--poll-seconds N]

What it does, in both places it can run:

1. Refuses, with exit 2 and before anything is injected or started: outside a local
   endpoint without `--yes`; a ledger that is missing or unreachable; `mode=off` (or a
   mode it cannot establish); a plan not `normal` (a real event's plan is active);
   the kill switch set; resources still engaged (records on tags or in the ledger);
   fewer selected Auto Scaling groups or zones than the detector needs to see a
   regional impairment (`detect_min_groups`, `detect_min_zones`); against AWS, a
   missing FIS experiment template, one without the launch-failure action, or a
   template whose role does not exist.
2. Snapshots every selected resource through the actuators' read paths.
3. Causes the impairment. Against AWS: fis:StartExperiment with the game-day template
   (`--experiment-template-id`, or the SSM parameter `<prefix>/experiment-template-id`
   the GameDay construct publishes; the prefix is `/holdfast/<stack name>`, the stack
   `--stack-name`, else the one stack in the region that published a template, else
   `Holdfast`);
   the deployed controllers do the rest and the drill polls the plan in the ledger,
   and fis:GetExperiment until the experiment ends. On a local endpoint (127.0.0.1,
   localhost: the embedded moto server) there is no deployed controller: the drill
   feeds the same "EC2 Instance Launch Unsuccessful" events FIS's
   aws:ec2:asg-insufficient-instance-capacity-error would cause (InsufficientInstanceCapacity,
   every selected group, rotating through each group's zones, one wave per schedule
   period) through the detector's own intake, runs the real reconciler ticks in-process
   on a fake clock moved one `schedule_minutes` per tick, and at `--duration-minutes`
   ends the "experiment" with successful launches.
4. Measures the time from the first injected failure to full posture (every kind the
   hold stage engages walked for the hold generation) and from the experiment's end
   to the plan's return to `normal`; snapshots again and checks that every resource
   came back exactly: its values as before, no write-ahead record on its tags or in
   the ledger.
5. Writes `drill-report.json` and `drill-report.md` to `--out` (default `out/`), prints
   the two times and the restore result (the JSON document with `--json`).

Times on a local endpoint are on the drill's clock (ticks of `schedule_minutes`, the
first one period after the first failure: the schedule's worst case), which runs behind
the wall clock (it starts `--timeout-minutes` before now), so what the drill leaves in
the ledger reads as past to every real-time view afterwards; against AWS they
are wall-clock, observed by polling every `--poll-seconds`, so they are late by at most
one poll. Exit codes: 0 passed, 1 the drill ran and something did not come back (or
was not reached), 2 refused.

The deployed mode (against AWS) comes from the SSM parameter `<prefix>/settings` (the
deployed settings' JSON) when it exists, else from `--settings FILE` (reported as not
confirmed against the deployment); with neither the drill refuses, since it cannot
tell that Holdfast is not `off`.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError

from holdfast import reconciler
from holdfast.aws import error_code, error_text
from holdfast.cli import EXIT_FAILED, EXIT_OK, drill_report
from holdfast.cli.context import PARAMETER_ROOT, SETTINGS_PARAMETER, Context, UsageError, operator_name, published
from holdfast.clock import FakeClock, SystemClock
from holdfast.core import policy
from holdfast.core.classify import CAPACITY
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.model import AUTO, DRIFT_KEPT, FAILED, REFUSED_STALE, changes_nothing
from holdfast.core.progress import held_marker
from holdfast.core.signals import iso
from holdfast.engine import Engine
from holdfast.iam import uses
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger.signals import recent
from holdfast.ledger.table import describe as describe_ledger
from holdfast.observation import collect as fresh_verdict
from holdfast.observation.intake import receive
from holdfast.runtime import QUIET, Runtime
from holdfast.settings import Settings, SettingsError

DEFAULT_STACK = "Holdfast"
TEMPLATE_PARAMETER = "experiment-template-id"   # published by holdfast_cdk.GameDay
ASG_ICE_ACTION = "aws:ec2:asg-insufficient-instance-capacity-error"
# ExperimentStatus values after which FIS injects nothing more (FIS API reference, ExperimentState).
ENDED = frozenset({"completed", "stopped", "failed", "cancelled"})
LOOPBACK = frozenset({"localhost", "::1"})
DEFAULT_TIMEOUT_MINUTES = 360
DEFAULT_POLL_SECONDS = 15.0
# After the experiment ends, how many schedule periods to wait for a hold that never came.
GRACE_PERIODS = 3
# A documentation address (RFC 5737): what the local drill's DNS answers for every host.
ANSWER = "192.0.2.10"

CAPACITY_STATUS = (
    "Launching a new EC2 instance. Status Reason: Could not launch On-Demand Instances. "
    "InsufficientInstanceCapacity - We currently do not have sufficient capacity in the Availability Zone "
    "you requested ({zone}). Our system will be working on provisioning additional capacity. "
    "Launching EC2 instance failed."
)


def register(sub) -> None:
    p = sub.add_parser("drill", help="rehearse a regional launch impairment end to end and write a drill report")
    p.add_argument("--yes", action="store_true", help="required outside a local endpoint: this injects real launch failures")
    p.add_argument("--dry-run", action="store_true",
                   help="run every refusal check and show the fleet and the experiment; inject and start nothing")
    p.add_argument("--out", default="out", help="directory for drill-report.md and drill-report.json (default: out)")
    p.add_argument("--stack-name", default=None,
                   help="the Holdfast stack whose SSM parameters (/holdfast/<stack name>/...) name the FIS template and "
                        "settings (default: the one stack in the region that has a game day, else "
                        f"{DEFAULT_STACK})")
    p.add_argument("--parameter-prefix", default=None,
                   help="SSM path of Holdfast's parameters (default: /holdfast/<stack name>)")
    p.add_argument("--experiment-template-id", default=None,
                   help="the FIS experiment template to start (default: from <prefix>/experiment-template-id)")
    p.add_argument("--duration-minutes", type=_positive_int, default=None,
                   help="local endpoint only: how long launches fail, on the drill clock (default: the "
                        "game_day_duration_minutes setting, as the game day's FIS template)")
    p.add_argument("--timeout-minutes", type=_positive_int, default=DEFAULT_TIMEOUT_MINUTES,
                   help=f"give up (and stop the experiment) after this long (default: {DEFAULT_TIMEOUT_MINUTES})")
    p.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS,
                   help=f"against AWS: how often to read the plan and the experiment (default: {DEFAULT_POLL_SECONDS:g})")
    p.set_defaults(func=drill)


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


# ---- the command ------------------------------------------------------------------------

def drill(ctx: Context, args, *, clock=None, sleep: Callable[[float], None] = time.sleep) -> int:
    """`clock` and `sleep` drive the AWS path's polling (tests inject both)."""
    where = endpoint(ctx)
    local = where is not None and is_local(where)
    if not local and not args.yes and not args.dry_run:
        raise UsageError(
            f"a drill against {where or 'AWS'} ({ctx.clients.region}) injects real launch failures into the "
            "selected Auto Scaling groups through AWS FIS; run it again with --yes to go ahead"
        )
    if args.poll_seconds <= 0:
        raise UsageError(f"--poll-seconds must be above 0, got {args.poll_seconds:g}")
    _require_ledger(ctx)
    prefix = None if local else parameter_prefix(ctx, args)
    if local:
        # A local drill acts on emulated resources only: without --settings it rehearses
        # the controller in mode auto (the defaults' mode, recommend, would change nothing).
        settings, source = (ctx.settings, f"--settings {args.settings}") if args.settings else \
            (Settings.from_mapping({**ctx.settings.to_mapping(), "mode": AUTO}), "the defaults, in mode auto")
    else:
        settings, source = _deployed_settings(ctx, args, prefix)
    if changes_nothing(settings.mode):
        raise UsageError(f"Holdfast runs in mode={settings.mode} here (settings from {source}): it would change no "
                         f"resource, so there is nothing to rehearse; a drill never runs in mode={settings.mode} accounts "
                         "(deploy with \"mode\": \"auto\" first)")
    runtime = ctx.runtime.but(settings=settings)
    fleet = preflight(runtime)
    template = None if local else cover_zones(ctx, check_template(ctx, _template_id(ctx, args, prefix)), fleet.zones)
    account = _account(ctx)
    if args.dry_run:
        what = (f"AWS FIS experiment from template {template['id']}" if template else
                f"local injection for {args.duration_minutes or settings.game_day_duration_minutes} min (drill clock)")
        ctx.emit({"command": "drill", "dry_run": True, "where": where or "AWS", "region": ctx.clients.region,
                  "account": account, "mode": settings.mode, "settings_source": source,
                  "fleet_summary": fleet.summary(), "experiment": what},
                 f"drill (dry run) on {where or 'AWS'} ({ctx.clients.region}, account {account}, mode {settings.mode}): "
                 f"every check passed; would run {what}\n  fleet: {fleet.summary()}\nnothing injected or started")
        return EXIT_OK
    common = dict(ctx=ctx, runtime=runtime, fleet=fleet, source=source, account=account,
                  timeout=timedelta(minutes=args.timeout_minutes))
    if local:
        minutes = args.duration_minutes or settings.game_day_duration_minutes
        run = LocalDrill(**common, where=where, duration=timedelta(minutes=minutes))
    else:
        run = FisDrill(**common, where=where or "AWS", template=template, poll_seconds=args.poll_seconds,
                       clock=clock or SystemClock(), sleep=sleep)
    report = run.run()
    paths = drill_report.write(report, Path(args.out))
    ctx.emit(report, drill_report.render_text(report, paths))
    return EXIT_OK if report["result"] == "passed" else EXIT_FAILED


def endpoint(ctx: Context) -> str | None:
    """The endpoint the CLI's requests go to (from --endpoint-url, AWS_ENDPOINT_URL or the
    profile), or None for AWS's own. Mixed (some services local, some not) is refused."""
    urls = {s: ctx.clients(s).meta.endpoint_url for s in ("dynamodb", "autoscaling")}
    local = {s: is_local(u) for s, u in urls.items()}
    if len(set(local.values())) > 1:
        raise UsageError(f"some services go to a local endpoint and some do not ({urls}); a drill needs one or the other")
    url = urls["dynamodb"]
    return url if local["dynamodb"] or _custom(url) else None


def _custom(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return not host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def is_local(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in LOOPBACK or host.startswith("127.")


@uses("sts:GetCallerIdentity", by=("cli",))
def _account(ctx: Context) -> str:
    return ctx.clients("sts").get_caller_identity()["Account"]


# ---- preflight: every refusal, before anything is injected or started -------------------

def _require_ledger(ctx: Context) -> None:
    try:
        describe_ledger(ctx.ledger())
    except ClientError as err:
        if error_code(err) == "ResourceNotFoundException":
            raise UsageError(f"ledger table {ctx.ledger_table} does not exist in {ctx.clients.region}: deploy Holdfast "
                             "there (or `holdfast ledger-init` on a local endpoint) before a drill") from err
        raise UsageError(f"ledger table {ctx.ledger_table} cannot be read ({error_text(err)}): a drill needs the ledger") from err
    except BotoCoreError as err:
        raise UsageError(f"ledger table {ctx.ledger_table} is unreachable ({error_text(err)}): a drill needs the ledger") from err


@uses("ssm:GetParametersByPath", by=("cli",))
def parameter_prefix(ctx: Context, args) -> str:
    """--parameter-prefix, else /holdfast/<--stack-name>, else the one stack in the region
    that published a game-day template (several: the operator must choose)."""
    if args.parameter_prefix:
        return args.parameter_prefix.rstrip("/")
    if args.stack_name:
        return f"{PARAMETER_ROOT}/{args.stack_name}"
    try:
        names = list(published(ctx.clients, TEMPLATE_PARAMETER))
    except (ClientError, BotoCoreError) as err:
        ctx.warn(f"cannot list SSM parameters under {PARAMETER_ROOT} ({error_text(err)}); assuming stack {DEFAULT_STACK}")
        names = []
    found = sorted(n.rsplit("/", 1)[0] for n in names if n.endswith(f"/{TEMPLATE_PARAMETER}"))
    if len(found) > 1:
        raise UsageError(f"{len(found)} Holdfast stacks in {ctx.clients.region} have a game day ({', '.join(found)}): "
                         "choose one with --stack-name")
    return found[0] if found else f"{PARAMETER_ROOT}/{DEFAULT_STACK}"


@uses("ssm:GetParameter", by=("cli",))
def _parameter(ctx: Context, name: str) -> str | None:
    """The parameter's value; None when it does not exist."""
    try:
        return ctx.clients("ssm").get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as err:
        if error_code(err) == "ParameterNotFound":
            return None
        raise


def _deployed_settings(ctx: Context, args, prefix: str) -> tuple[Settings, str]:
    name = f"{prefix}/{SETTINGS_PARAMETER}"
    try:
        text = _parameter(ctx, name)
        why = f"no SSM parameter {name}"
    except (ClientError, BotoCoreError) as err:
        text, why = None, f"SSM parameter {name} unreadable: {error_text(err)}"
    if text is not None:
        try:
            return Settings.from_json(text), f"SSM parameter {name}"
        except SettingsError as err:
            raise UsageError(f"SSM parameter {name} does not hold valid settings: {err}") from err
    if args.settings:
        return ctx.settings, f"--settings {args.settings} (not confirmed against the deployment: {why})"
    raise UsageError(
        f"cannot tell the deployed controller's mode ({why}): a drill never runs in mode=off accounts; "
        "pass --settings with the settings you deployed (your cdk.json), or --stack-name if this is not the stack"
    )


@dataclass
class Fleet:
    groups: list[tuple[str, tuple[str, ...]]]    # selected Auto Scaling groups and their zones
    zones: tuple[str, ...]
    before: drill_report.Snapshot
    generation: int                              # the plan's generation before the drill (0: none)

    def summary(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.before.count().items() if n)
        return (f"{len(self.before.resources)} selected resources ({counts or 'none'}); "
                f"{len(self.groups)} Auto Scaling groups across {len(self.zones)} zones ({', '.join(self.zones)})")


def preflight(runtime: Runtime) -> Fleet:
    """The plan, the kill switch, what is engaged and what is selected, each refused with
    what to do about it; then the snapshot the drill ends by comparing against."""
    settings, ledger = runtime.settings, runtime.ledger()
    try:
        plan = ledger_plan.read(ledger)
        control = ledger_control.read_control(ledger)
    except LedgerUnavailable as err:
        raise UsageError(f"{err}: a drill needs the ledger") from err
    if plan is not None and plan.stage != policy.NORMAL:
        since = plan.entered_at.isoformat() if plan.entered_at else "?"
        raise UsageError(
            f"a plan is active: generation {plan.generation}, stage {plan.label} since {since} "
            f"({'; '.join(plan.reasons) or 'no reason recorded'}). A drill never runs while a real event's plan is "
            "active; `holdfast stage` shows when it is back to normal"
        )
    if control.paused:
        raise UsageError(f"the kill switch is set (paused by {control.paused_by} at {control.paused_at}: "
                         f"{control.reason or 'no reason'}): the controller would not act; `holdfast unpause` first")
    records = ResourceLedger(ledger).records()
    if records:
        raise UsageError(
            f"{len(records)} resources are engaged with no plan in force (e.g. {records[0].arn}): the drill's recovery "
            "would restore them too; `holdfast status` lists them and `holdfast resume --now` restores them"
        )
    engine = Engine(runtime)
    try:
        listed = engine.actuators["asg"].candidates()
    except (ClientError, BotoCoreError) as err:
        raise UsageError(f"cannot list the selected Auto Scaling groups: {error_text(err)}") from err
    groups = [(c.listed["AutoScalingGroupName"], tuple(sorted(c.listed.get("AvailabilityZones") or ()))) for c in listed]
    zones = tuple(sorted({z for _, zs in groups for z in zs}))
    if len(groups) < settings.detect_min_groups or len(zones) < settings.detect_min_zones:
        raise UsageError(
            f"the selector {settings.selector} matches {len(groups)} Auto Scaling groups in {len(zones)} zones "
            f"({', '.join(zones) or 'none'}); Holdfast sees a regional impairment only in launch failures from at "
            f"least {settings.detect_min_groups} groups across {settings.detect_min_zones} zones "
            "(detect_min_groups, detect_min_zones), so this drill could not engage anything"
        )
    before = drill_report.take(engine)
    if before.errors:
        raise UsageError("cannot read the fleet before the drill: "
                         + "; ".join(f"{k}: {e}" for k, e in before.errors.items()))
    tagged = [arn for arn, r in before.resources.items() if r["tagged"]]
    if tagged:
        raise UsageError(
            f"{len(tagged)} resources carry Holdfast's write-ahead record on their tags (e.g. {tagged[0]}): they are "
            "engaged; `holdfast resume --now` restores them before a drill"
        )
    return Fleet(groups, zones, before, plan.generation if plan else 0)


def _template_id(ctx: Context, args, prefix: str) -> str:
    if args.experiment_template_id:
        return args.experiment_template_id
    name = f"{prefix}/{TEMPLATE_PARAMETER}"
    try:
        value = _parameter(ctx, name)
    except (ClientError, BotoCoreError) as err:
        raise UsageError(f"cannot read SSM parameter {name} ({error_text(err)}); pass --experiment-template-id") from err
    if not value:
        raise UsageError(
            f"no FIS experiment template: SSM parameter {name} does not exist in {ctx.clients.region}. Deploy Holdfast "
            "with the game day (the game_day_stop_alarm setting) or pass --experiment-template-id"
        )
    return value


@uses("fis:GetExperimentTemplate", "iam:GetRole", by=("cli",))
def check_template(ctx: Context, template_id: str) -> dict[str, Any]:
    """The template, if it exists, fails launches of Auto Scaling groups and has a role
    that exists. A role the caller may not read is a warning: FIS itself then says."""
    try:
        template = ctx.clients("fis").get_experiment_template(id=template_id)["experimentTemplate"]
    except ClientError as err:
        if error_code(err) == "ResourceNotFoundException":
            raise UsageError(f"FIS experiment template {template_id} does not exist in {ctx.clients.region}") from err
        raise UsageError(f"cannot read FIS experiment template {template_id}: {error_text(err)}") from err
    actions = {name: a.get("actionId") for name, a in (template.get("actions") or {}).items()}
    if ASG_ICE_ACTION not in actions.values():
        raise UsageError(
            f"FIS experiment template {template_id} has no {ASG_ICE_ACTION} action (it has "
            f"{', '.join(sorted(set(actions.values()))) or 'none'}): it would not fail any launch"
        )
    role_arn = template.get("roleArn")
    if not role_arn:
        raise UsageError(f"FIS experiment template {template_id} names no role: FIS could not run it")
    try:
        ctx.clients("iam").get_role(RoleName=role_arn.rsplit("/", 1)[-1])
    except ClientError as err:
        if error_code(err) == "NoSuchEntity":
            raise UsageError(f"the FIS role {role_arn} of experiment template {template_id} does not exist: "
                             "FIS could not inject anything; redeploy the game day or fix the template's role") from err
        ctx.warn(f"could not check the FIS role {role_arn} ({error_text(err)}); FIS checks it when the experiment starts")
    return template


# A zone ID (use1-az1) rather than a name (us-east-1a): the same in every account.
_ZONE_ID = re.compile(r"^[a-z]{2,4}\d-(?:[a-z0-9]+-)?az\d+$")


@uses("fis:UpdateExperimentTemplate", by=("cli",))
def cover_zones(ctx: Context, template: dict[str, Any], zones: tuple[str, ...]) -> dict[str, Any]:
    """Make the launch-failure action name every zone of the selected groups.

    A game day deployed without `game_day_availability_zones` lists `Fn::GetAZs`, which
    in an account with a default VPC is only the zones that have a default subnet:
    groups in the others would keep launching and the detector would see a partial
    failure. The drill writes the groups' zones into the action before it starts the
    experiment (the next deploy sets the template back). Zone IDs in the template are
    left as they are (matching them to the groups' zone names would need EC2's zone map);
    named zones are then the fix the message gives."""
    name, action = next((n, a) for n, a in template["actions"].items() if a.get("actionId") == ASG_ICE_ACTION)
    listed = [z for z in (action.get("parameters") or {}).get("availabilityZoneIdentifiers", "").split(",") if z]
    missing = sorted(set(zones) - set(listed))
    if not missing:
        return template
    if any(_ZONE_ID.match(z) for z in listed):
        raise UsageError(f"FIS experiment template {template['id']} fails launches in {', '.join(listed)}, zone IDs; the "
                         f"selected groups launch in {', '.join(zones)}: set game_day_availability_zones to every "
                         "zone of the selected groups and deploy again")
    parameters = {**action.get("parameters", {}), "availabilityZoneIdentifiers": ",".join(zones)}
    updated = {k: v for k, v in action.items() if k in ("actionId", "description", "targets", "startAfter")}
    try:
        template = ctx.clients("fis").update_experiment_template(
            id=template["id"], actions={name: {**updated, "parameters": parameters}})["experimentTemplate"]
    except ClientError as err:
        raise UsageError(f"FIS experiment template {template['id']} fails launches in {', '.join(listed) or 'no zone'}, "
                         f"not in {', '.join(missing)} where selected groups launch, and updating it failed "
                         f"({error_text(err)}): set game_day_availability_zones and deploy again") from err
    ctx.warn(f"FIS experiment template {template['id']}: launch failures now in {', '.join(zones)} (the selected "
             f"groups' zones; it listed {', '.join(listed) or 'none'})")
    return template


# ---- measuring, shared by both runs -----------------------------------------------------

def engaging_kinds(plan: policy.Plan, settings: Settings) -> list[str]:
    """The hold's engage walks' done marks: a kind's, or `<kind>/engaged` for one its drain
    controller drives from the hold on (holdfast.core.policy.CONTROL)."""
    return [held_marker(k, v == policy.ENGAGE) for k, v in policy.posture(plan, settings).items()
            if v in (policy.ENGAGE, policy.CONTROL)]


def full_posture(plan: policy.Plan | None, settings: Settings) -> bool:
    """Hold, and every kind the hold stage engages walked (marked done) for this generation."""
    return bool(plan and plan.stage == policy.HOLD and all(k in plan.done for k in engaging_kinds(plan, settings)))


class _Run:
    """What both runs record: the timeline, the figures, the problems; and the report."""

    def __init__(self, *, ctx: Context, runtime: Runtime, fleet: Fleet, source: str, account: str, timeout: timedelta,
                 where: str):
        self.ctx, self.runtime, self.fleet, self.source = ctx, runtime, fleet, source
        self.settings = runtime.settings
        self.account, self.timeout, self.where = account, timeout, where
        self.timeline: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.drift: dict[str, Any] = {}
        self.seen: tuple[int, str] = (fleet.generation, policy.NORMAL)   # (generation, stage label) last seen
        self.first_failure: datetime | None = None
        self.posture_at: datetime | None = None
        self.first_hold: int | None = None
        self.hold_generation: int | None = None
        self.ended_at: datetime | None = None
        self.normal_at: datetime | None = None
        self.experiment: dict[str, Any] = {}
        # Gates a stage passed with nothing to judge ("no evidence: ..."), by stage: marked
        # in the report, not shown as a pass on evidence.
        self.unproven: list[dict[str, Any]] = []
        self.clock_name = "wall clock"
        self.wall_started = time.monotonic()
        self.started_at = datetime.now(timezone.utc)

    def say(self, at: datetime, stage: str, generation: int | None, note: str) -> None:
        self.timeline.append({"at": iso(at), "stage": stage, "generation": generation, "note": note})
        if not self.ctx.json:
            when = f"{at:%H:%M:%S}" + (" drill clock" if self.clock_name == "drill clock" else "")
            self.ctx.err.write(f"drill {when}  {stage:<13} gen {generation if generation is not None else '-':<4} {note}\n")
            self.ctx.err.flush()

    def observe(self, plan: policy.Plan | None, now: datetime) -> None:
        """Note a new plan; mark full posture and the return to normal."""
        if plan is None:
            return
        if (plan.generation, plan.label) != self.seen:
            self.seen = (plan.generation, plan.label)
            self.say(now, plan.label, plan.generation, "; ".join(plan.reasons)[:300])
            for reason in plan.reasons:
                if "no evidence:" in reason:
                    self.unproven.append({"stage": plan.label, "generation": plan.generation, "at": iso(now),
                                          "evidence": reason.removeprefix("evidence: ")})
        if plan.stage == policy.HOLD and self.first_hold is None:
            self.first_hold = plan.generation
        if self.posture_at is None and full_posture(plan, self.settings):
            self.posture_at, self.hold_generation = now, plan.generation
            self.say(now, plan.label, plan.generation, f"full posture: {', '.join(engaging_kinds(plan, self.settings))} walked")
        if (self.ended_at is not None and self.first_hold is not None and self.normal_at is None
                and plan.stage == policy.NORMAL and plan.generation > self.first_hold):
            self.normal_at = now

    def verify(self) -> dict[str, Any] | None:
        engine = Engine(self.runtime)
        after = drill_report.take(engine)
        ledger = ResourceLedger(self.runtime.ledger())
        left = [r.arn for r in ledger.records()]
        if not ledger.available:
            self.problems.append(f"the ledger could not be read after the drill ({ledger.error}): records left unknown")
        return drill_report.compare(self.fleet.before, after, left, drift_reported=self.drift)

    def report(self, *, kind: str, clock_name: str, clock_note: str, ticks: dict[str, int | None]) -> dict[str, Any]:
        restore = self.verify()
        if self.posture_at is None:
            self.problems.append("Holdfast never reached full posture")
        if self.first_hold is not None and self.normal_at is None:
            self.problems.append(
                f"the plan did not return to normal during the drill (last seen: generation {self.seen[0]}, "
                f"{self.seen[1]}): the controller goes on recovering on its own; `holdfast stage` shows where it is")
        passed = not self.problems and restore is not None and restore["exact"]
        return {
            "command": "drill",
            "result": "passed" if passed else "failed",
            "target": {"where": self.where, "region": self.runtime.clients.region, "account": self.account,
                       "ledger_table": self.runtime.table},
            "mode": self.settings.mode,
            "settings_source": self.source,
            "started_at": iso(self.started_at),
            "finished_at": iso(datetime.now(timezone.utc)),
            "wall_seconds": round(time.monotonic() - self.wall_started, 1),
            "clock": {"name": clock_name, "note": clock_note},
            "unproven_gates": self.unproven,
            "fleet_summary": self.fleet.summary(),
            "selected": self.fleet.before.count(),
            "groups": [{"name": g, "zones": list(z)} for g, z in self.fleet.groups],
            "experiment": {"kind": kind, **self.experiment},
            "figures": {
                "first_failure_at": iso(self.first_failure) if self.first_failure else None,
                "full_posture_at": iso(self.posture_at) if self.posture_at else None,
                "hold_generation": self.hold_generation,
                "minutes_to_full_posture": drill_report.minutes(self.first_failure, self.posture_at),
                "ticks_to_full_posture": ticks.get("posture"),
                "experiment_end_at": iso(self.ended_at) if self.ended_at else None,
                "normal_at": iso(self.normal_at) if self.normal_at else None,
                "minutes_end_to_normal": drill_report.minutes(self.ended_at, self.normal_at),
                "ticks_end_to_normal": ticks.get("normal"),
            },
            "restore": restore,
            "timeline": self.timeline,
            "problems": self.problems,
        }


# ---- on a local endpoint: the events, and the reconciler in-process ---------------------

def answering_resolver(host: str) -> list:
    """The local drill's DNS: every host answers (a local endpoint has no regional DNS to lose)."""
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ANSWER, 443))]


def launch_event(*, drill_id: str, account: str, region: str, group: str, zone: str, at: datetime, ok: bool) -> dict:
    """An Auto Scaling launch result as EventBridge delivers it (the Auto Scaling user
    guide's "EC2 Instance Launch Successful/Unsuccessful" events), as FIS's
    aws:ec2:asg-insufficient-instance-capacity-error makes the group's launches fail."""
    activity = str(uuid.uuid5(uuid.NAMESPACE_URL, f"holdfast-drill:{drill_id}:{group}:{zone}:{at.isoformat()}:{ok}"))
    stamp = at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "version": "0",
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"event:{activity}")),
        "detail-type": "EC2 Instance Launch Successful" if ok else "EC2 Instance Launch Unsuccessful",
        "source": "aws.autoscaling",
        "account": account,
        "time": stamp,
        "region": region,
        "resources": [f"arn:aws:autoscaling:{region}:{account}:autoScalingGroup:{activity}:autoScalingGroupName/{group}"],
        "detail": {
            "StatusCode": "InProgress" if ok else "Failed",
            "AutoScalingGroupName": group,
            "ActivityId": activity,
            "Details": {"Availability Zone": zone},
            "RequestId": activity,
            "StatusMessage": "" if ok else CAPACITY_STATUS.format(zone=zone),
            "EndTime": stamp,
            "StartTime": stamp,
            "Cause": f"At {stamp} an instance was started in response to a difference between desired and actual capacity.",
            "Origin": "EC2",
            "Destination": "AutoScalingGroup",
        },
    }


@contextmanager
def quiet_controllers(err) -> Iterator[None]:
    """The reconciler's warnings go to stderr while the drill ticks it: in the CLI stdout
    is the report. (Its decision lines and EMF metrics, which in Lambda go to stdout, are
    off in the drill's runtime: Telemetry, holdfast.runtime.)"""
    handler = reconciler.logger.registered_handler
    stream = getattr(handler, "stream", None)
    if stream is not None:
        handler.setStream(err)
    try:
        yield
    finally:
        if stream is not None:
            handler.setStream(stream)


class LocalDrill(_Run):
    def __init__(self, *, duration: timedelta, **kwargs):
        super().__init__(**kwargs)
        self.duration = duration
        self.period = timedelta(minutes=self.settings.schedule_minutes)
        self.drill_id = uuid.uuid4().hex[:12]

    def start_time(self) -> datetime:
        """Where the drill clock starts: far enough before now that it cannot pass the wall
        clock (the drill stops at `--timeout-minutes` on its clock, a period at most after
        it), so every time it leaves in the ledger — the plan's, the verdict's, the signals'
        — is in the past once it ends, and real-time views (`holdfast stage`'s time in
        stage, a reconciler on the endpoint) read them as past; or just after anything an
        earlier drill on this endpoint left, if later: signals and plans from the drill
        clock's future would otherwise be seen again as this drill's clock passes them."""
        ledger = self.runtime.ledger()
        times = [datetime.now(timezone.utc) - self.timeout - 2 * self.period]
        plan = ledger_plan.read(ledger)
        if plan:
            times += [t for t in (plan.entered_at, plan.impaired_at) if t]
        verdict = ledger_verdict.read_verdict(ledger) or {}
        for key in ("since", "last_capacity_failure", "last_successful_launch"):
            if verdict.get(key):
                times.append(datetime.fromisoformat(verdict[key].replace("Z", "+00:00")))
        return max(times).replace(microsecond=0) + timedelta(minutes=1)

    def inject(self, rt: Runtime, at: datetime, wave: int, *, ok: bool, groups=None) -> int:
        region = rt.clients.region
        count = 0
        for i, (group, zones) in enumerate(groups if groups is not None else self.fleet.groups):
            zone = zones[(i + wave) % len(zones)] if zones else f"{region}a"
            got = receive(rt, launch_event(drill_id=self.drill_id, account=self.account, region=region,
                                           group=group, zone=zone, at=at, ok=ok))
            if got.outcome != "recorded":
                self.problems.append(f"the detector's intake did not record a drill event ({got.outcome}: {got.reason})")
            count += 1
        return count

    def account_outcomes(self, result) -> None:
        for o in result.outcomes:
            if o.action == DRIFT_KEPT:
                self.drift[o.arn] = o.drift
            elif o.action in (FAILED, REFUSED_STALE):
                self.problems.append(f"{o.action} {o.kind} {o.arn}: {o.error}")

    def run(self) -> dict[str, Any]:
        self.clock_name = "drill clock"
        clock = FakeClock(self.start_time())
        rt = self.runtime.but(clock=clock, controller_id=f"drill:{operator_name()}:{self.drill_id}", telemetry=QUIET)
        collect = partial(fresh_verdict, resolver=answering_resolver)
        t0 = clock.now()
        end = t0 + self.duration
        self.first_failure = t0
        self.experiment = {"id": f"local-{self.drill_id}", "duration_minutes": self.duration / timedelta(minutes=1),
                           "action": ASG_ICE_ACTION}
        ticks = ticks_at_end = 0
        ticks_to = {"posture": None, "normal": None}
        with quiet_controllers(self.ctx.err):
            sent = self.inject(rt, t0, 0, ok=False)
            self.say(t0, policy.NORMAL, self.fleet.generation,
                     f"experiment starts: {sent} launches fail with InsufficientInstanceCapacity "
                     f"({len(self.fleet.groups)} groups, zones {', '.join(self.fleet.zones)})")
            wave = 0
            while True:
                clock.advance(self.period.total_seconds())
                now, wave = clock.now(), wave + 1
                if now < end:
                    self.inject(rt, now, wave, ok=False)
                elif self.ended_at is None:
                    self.ended_at, ticks_at_end = end, ticks
                    self.experiment["state"] = "completed"
                    sent = self.inject(rt, now, wave, ok=True)
                    self.say(end, self.seen[1], self.seen[0], f"experiment ends; {sent} launches succeed")
                else:
                    # A recovered region: every group's launches succeed (recovery is judged
                    # over the region's launch outcomes, not on one success: core/detector.py).
                    self.inject(rt, now, wave, ok=True)
                try:
                    result = reconciler.tick(rt, collect=collect)
                    ticks += 1
                    self.account_outcomes(result)
                    plan = ledger_plan.read(rt.ledger())
                except LedgerUnavailable as err:
                    self.problems.append(f"the ledger became unreachable mid-drill: {err}")
                    break
                had_posture = self.posture_at is not None
                self.observe(plan, now)
                if not had_posture and self.posture_at is not None:
                    ticks_to["posture"] = ticks
                if self.normal_at is not None:
                    ticks_to["normal"] = ticks - ticks_at_end
                    self.say(now, policy.NORMAL, plan.generation, "back to normal")
                    break
                if self.ended_at is not None and self.first_hold is None and now - self.ended_at >= GRACE_PERIODS * self.period:
                    break
                if now - t0 >= self.timeout:
                    self.problems.append(f"timed out after {self.timeout / timedelta(minutes=1):g} minutes on the drill clock "
                                         f"(stage {plan.label if plan else '-'})")
                    break
        note = (f"fake, one reconciler tick per schedule_minutes ({self.settings.schedule_minutes} min), the first one "
                f"period after the first failure; {ticks} ticks in-process against {self.where}")
        return self.report(kind="local injection (no FIS on a local endpoint)", clock_name="drill clock",
                           clock_note=note, ticks=ticks_to)


# ---- against AWS: the FIS experiment, the deployed controller ---------------------------

@uses("fis:StartExperiment", by=("cli",))
def start_experiment(fis, template_id: str, token: str) -> dict[str, Any]:
    return fis.start_experiment(clientToken=token, experimentTemplateId=template_id)["experiment"]


@uses("fis:GetExperiment", by=("cli",))
def get_experiment(fis, experiment_id: str) -> dict[str, Any]:
    return fis.get_experiment(id=experiment_id)["experiment"]


@uses("fis:StopExperiment", by=("cli",))
def stop_experiment(fis, experiment_id: str) -> dict[str, Any]:
    return fis.stop_experiment(id=experiment_id)["experiment"]


class FisDrill(_Run):
    def __init__(self, *, template: dict[str, Any], poll_seconds: float, clock, sleep, **kwargs):
        super().__init__(**kwargs)
        self.template, self.poll, self.clock, self.sleep = template, poll_seconds, clock, sleep
        self.fis = self.ctx.clients("fis")

    def first_capacity_failure(self, since: datetime, now: datetime) -> datetime | None:
        """The earliest capacity-class launch failure the detector recorded since the
        experiment was requested: the first injected failure."""
        try:
            signals = recent(self.runtime.ledger(), since, now)
        except LedgerUnavailable:
            return None
        times = [s.time for s in signals if s.klass == CAPACITY and s.time >= since]
        return min(times) if times else None

    def run(self) -> dict[str, Any]:
        template_id = self.template["id"]
        requested = self.clock.now()
        try:
            experiment = start_experiment(self.fis, template_id, f"holdfast-drill-{uuid.uuid4()}")
        except ClientError as err:
            # Nothing was started: a refusal, as every check before it.
            raise UsageError(f"FIS did not start experiment template {template_id}: {error_text(err)}") from err
        exp_id = experiment["id"]
        self.experiment = {"id": exp_id, "template_id": template_id, "state": experiment["state"]["status"],
                           "action": ASG_ICE_ACTION}
        self.say(requested, policy.NORMAL, self.fleet.generation, f"FIS experiment {exp_id} started from {template_id}")
        period = timedelta(minutes=self.settings.schedule_minutes)
        polls = 0
        try:
            while True:
                now = self.clock.now()
                polls += 1
                if self.first_failure is None:
                    self.first_failure = self.first_capacity_failure(requested, now)
                    if self.first_failure:
                        self.say(self.first_failure, self.seen[1], self.seen[0], "first injected launch failure recorded")
                if self.ended_at is None:
                    self.poll_experiment(exp_id, now)
                try:
                    self.observe(ledger_plan.read(self.runtime.ledger()), now)
                except LedgerUnavailable as err:
                    self.say(now, "?", None, f"ledger unreachable this poll: {err}")
                if self.normal_at is not None:
                    self.say(self.normal_at, policy.NORMAL, self.seen[0], "back to normal")
                    break
                if self.ended_at is not None and self.first_hold is None and now - self.ended_at >= GRACE_PERIODS * period:
                    break
                if now - requested >= self.timeout:
                    self.problems.append(f"timed out after {self.timeout / timedelta(minutes=1):g} minutes")
                    self.stop(exp_id, "timed out")
                    break
                self.sleep(self.poll)
        except KeyboardInterrupt:
            self.problems.append("interrupted by the operator")
            self.stop(exp_id, "interrupted")
        if self.first_failure is None and self.posture_at is not None:
            self.problems.append("no capacity-class launch failure was recorded in the ledger, yet Holdfast engaged: "
                                 "the time to posture is unknown")
        note = (f"wall clock; the plan and the experiment read every {self.poll:g} s ({polls} polls), so each time "
                "is late by at most one poll")
        return self.report(kind="AWS FIS experiment", clock_name="wall clock", clock_note=note, ticks={})

    def poll_experiment(self, exp_id: str, now: datetime) -> None:
        try:
            experiment = get_experiment(self.fis, exp_id)
        except (ClientError, BotoCoreError) as err:
            self.say(now, self.seen[1], self.seen[0], f"fis:GetExperiment failed this poll: {error_text(err)}")
            return
        state = experiment.get("state") or {}
        self.experiment["state"], self.experiment["reason"] = state.get("status"), state.get("reason")
        if state.get("status") in ENDED:
            self.ended_at = experiment.get("endTime") or now
            self.say(self.ended_at, self.seen[1], self.seen[0], f"experiment {state.get('status')}"
                     + (f": {state.get('reason')}" if state.get("reason") else ""))
            if state.get("status") != "completed":
                self.problems.append(f"the experiment ended {state.get('status')}: {state.get('reason') or 'no reason given'}")

    def stop(self, exp_id: str, why: str) -> None:
        if self.ended_at is not None:
            return
        try:
            stop_experiment(self.fis, exp_id)
            self.experiment["state"] = "stopping"
            self.say(self.clock.now(), self.seen[1], self.seen[0], f"{why}: experiment {exp_id} stopped")
        except (ClientError, BotoCoreError) as err:
            self.problems.append(f"could not stop experiment {exp_id} ({error_text(err)}): stop it in the FIS console")
