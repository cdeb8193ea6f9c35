"""`make demo`: Holdfast's whole job on 19–20 October 2025, from 23:30 to the end of the
event at 14:20 and its lift after it, in under two minutes.

    python -m holdfast_demo [--fast] [--small] [--out DIR]

1. Starts an embedded AWS (moto's server on 127.0.0.1, demo/embedded.py), creates the
   ledger, the expired-events queue and the stage-change topic as the stack would,
   and builds a fleet through the AWS APIs (demo/fleet.py); snapshots it.
2. Replays the event (demo/scenario.py: the timeline's phases; demo/world.py: what AWS's
   services publish and what the account's automation does, given the fleet's state) on
   a fake clock moved one tick at a time, on a cadence per phase (printed): each
   EventBridge event goes to the real detector's intake, each DNS change to the resolver
   the real probes use, the services' metrics into the embedded CloudWatch, the owner's
   mid-event change to AWS; each tick is the real reconciler's, with the stack's default
   settings. Nothing here decides anything; it watches and prints the verdict, the
   stage, what was engaged, raised or restored, and what the stage waits for.
3. Stops when the plan is back to normal after the recovery (or at SAFETY_END),
   compares every resource with its snapshot (demo/check.py), writes the report, the
   chart and out/demo-report.json (demo/report.py), and exits 1 if anything is not
   restored.

`--fast` (or HOLDFAST_DEMO_FAST=1) drops the wall-time pacing, for CI; `--small`
builds a smaller fleet. Both run the same code path.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any, Iterator, TextIO

from holdfast.aws import Clients
from holdfast.core.model import DRIFT_KEPT, ENGAGED, FAILED, RAISED, REFUSED_STALE, RESTORED, VANISHED
from holdfast.core.policy import CONTROLLED, STAGES
from holdfast.core.progress import held_marker
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.runtime import QUIET, Runtime
from holdfast.settings import Settings
from holdfast_demo import check, report, scenario, world
from holdfast_demo.embedded import moto_server, session
from holdfast_demo.fleet import KINDS, batches, build_fleet, snapshot
from holdfast_demo.scenario import PDT

FULL = dict(asgs=40, esms=25, asyncs=10, nlbs=6, services=5)
SMALL = dict(asgs=6, esms=4, asyncs=3, nlbs=2, services=2)
UNSELECTED = {"full": 3, "small": 1}
SAFETY_END = datetime(2025, 10, 20, 16, 30, tzinfo=PDT)
BACKUP_REGION = "us-west-2"
DRIFT_CAP = 40
CONTROLLER = "demo-reconciler"
# A line every so often even when nothing happens, so the hold is seen counting down.
HEARTBEAT = timedelta(minutes=60)
# Signals that arrive all night long; a tick that saw only these is not worth a line.
ROUTINE = {"capacity", "configuration", "launch", "elb-termination"}
# The timeline's short name of a kind where its own name is long; every other kind by its name.
SHORT = {"scalable-target": "ecs"}
SHOWN_ACTIONS = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT, VANISHED, FAILED, REFUSED_STALE)
EVIDENCE = "evidence: "
# A hold's engage walks done: a controlled kind's mark is `<kind>/engaged` (holdfast.core.policy).
ENGAGED_MARKS = {held_marker(k, k not in CONTROLLED) for k in KINDS}


def pdt(text: str) -> str:
    """The controllers say times in UTC ("20:49Z"); the demo tells the night in PDT."""
    return re.sub(r"\b(\d\d):(\d\d)Z\b",
                  lambda m: (datetime(2025, 10, 20, int(m[1]), int(m[2]), tzinfo=timezone.utc).astimezone(PDT)
                             .strftime("%H:%M PDT")), text)


class Resolver:
    """The DNS the probes see: every host answers, except those the scenario empties."""

    def __init__(self) -> None:
        self.empty: set[str] = set()

    def __call__(self, host: str) -> list:
        if host in self.empty:
            return []
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("192.0.2.10", 443))]


@contextmanager
def quiet(*loggers) -> Iterator[None]:
    """The controllers log a JSON line per decision and emit metrics to stdout, as they
    should in Lambda; in the terminal the demo's own timeline is the output. The
    reconciler's are off in the demo's runtime (Telemetry QUIET, holdfast.runtime); other
    loggers given here say only their warnings."""
    with ExitStack() as stack:
        for log in loggers:
            level = log.log_level
            log.setLevel("WARNING")
            stack.callback(log.setLevel, level)
        yield


class Replay:
    """Feeds the scenario and the world to the real handlers and ticks the real reconciler; watches."""

    def __init__(self, *, runtime: Runtime, watcher: Clients, fleet, steps: list[scenario.Step], the_world: world.World,
                 fast: bool, out: TextIO):
        from holdfast.observation import collect

        # The controllers' runtime: their own clients (their calls are counted apart), the
        # stack's defaults, the replay's clock, the embedded stack's topic and queue.
        self.runtime, self.watcher = runtime, watcher
        self.settings, self.table, self.clock = runtime.settings, runtime.table, runtime.clock
        self.fleet, self.steps, self.world, self.fast, self.out = fleet, steps, the_world, fast, out
        self.resolver = Resolver()
        self.collect = partial(collect, resolver=self.resolver)
        self.mappings = {fleet.handles[arn]: arn for arn in fleet.selected["esm"]}
        self.groups = [fleet.handles[a] for a in fleet.selected["asg"] + fleet.unselected["asg"]]
        self.live = out.isatty()
        # What the replay saw, for the chart, the report and the end check.
        self.samples: list[report.Sample] = []
        self.stage_changes: list[tuple[datetime, str, str]] = []
        self.lifts: list[report.Lift] = []
        self.engaged: dict[str, str] = {}  # ARN -> kind, from the reconciler's outcomes
        self.engaged_at: dict[str, datetime] = {}  # kind -> first engaged
        self.drift_reported: dict[str, Any] = {}
        self.owner_changes: dict[str, dict[str, Any]] = {}
        self.failures: list[str] = []
        self.ticks = 0
        self.first_signal: datetime | None = None
        self.posture_at: datetime | None = None
        self.posture_seconds: float | None = None
        self.compressions: list[tuple[datetime, str]] = []
        self.phase_walls: list[float] = []   # wall clock when each compression began
        self.milestones = scenario.load_milestones()
        self.clock_seen = runtime.clock.now() - timedelta(minutes=1)

    def run(self) -> None:
        from holdfast.ledger import plan as ledger_plan
        from holdfast.ledger import verdict as ledger_verdict
        from holdfast.reconciler import tick

        wall_start, wall_due = time.monotonic(), 0.0
        last_line, last_state, last_label, cadence = None, None, "normal", None
        while True:
            now = self.clock.now()
            minutes, pace, label_of_pace = scenario.cadence(now)
            if label_of_pace != cadence:
                cadence = label_of_pace
                self.compressions.append((now, label_of_pace))
                self.phase_walls.append(time.monotonic())
                self.show(f"{now.astimezone(PDT):%H:%M}  ·· {label_of_pace}, {pace:g} s of wall time per event hour", keep=True)
            caps = self.caps()
            state = world.State(caps=caps, suspended=self.suspended() if self.world.reads_processes(now) else {},
                                dns_failover=self.dns_failover() if self.world.reads_target_groups(now) else {})
            signals, notes = self.deliver(now, self.world.advance(now, state))
            tick_started = time.monotonic()
            result = tick(self.runtime, collect=self.collect)
            tick_wall = time.monotonic() - tick_started
            self.ticks += 1
            watched = Ledger(self.watcher("dynamodb"), self.table)
            plan = ledger_plan.read(watched)
            raw = ledger_verdict.read_verdict(watched) or {}
            verdict = raw.get("state", "?")
            changes = self.account(result, now)
            stage = plan.stage if plan else "normal"
            label = plan.label if plan else "normal"
            if any(a.startswith("plan:") for a in result.actions):
                self.stage_changes.append((now, label, "; ".join(result.reasons)))
                self.note_lift(now, last_label, label, result.reasons)
                last_label = label
            if self.posture_at is None and stage == "hold" and plan.done >= ENGAGED_MARKS:
                self.posture_at = now
                if self.first_signal is None:
                    self.failures.append(f"full posture at {now.astimezone(PDT):%H:%M} PDT before any capacity-class "
                                         f"signal ({'; '.join(result.reasons) or 'no reason given'})")
                else:
                    # The clock stands still during a tick: its wall time is its event time.
                    self.posture_seconds = (now - self.first_signal).total_seconds() + tick_wall
            self.samples.append(report.Sample(now, stage, list(caps.values()), dict(Counter(self.engaged.values())),
                                              verdict, raw.get("failure_share"), groups=self.by_group(caps)))

            line_state = (verdict, label, tuple(result.gates))  # a hold counting down is a new line
            notable = (notes or set(signals) - ROUTINE or changes or line_state != last_state or last_line is None
                       or now - last_line >= HEARTBEAT)
            events = ["events " + ", ".join(f"{k}×{n}" for k, n in sorted(signals.items()))] if signals else []
            self.show(self.line(now, verdict, label, changes, result.gates, events + notes), keep=notable)
            if notable:
                last_line, last_state = now, line_state
            if plan and plan.generation and stage == "normal":
                break
            if now >= SAFETY_END:
                self.failures.append(f"the plan was not back to normal by {SAFETY_END:%H:%M} PDT (stage {label})")
                break
            self.clock.advance(minutes * 60)
            wall_due += minutes / 60 * pace
            if not self.fast:
                time.sleep(max(0.0, wall_start + wall_due - time.monotonic()))
        self.phase_walls.append(time.monotonic())
        if self.live:
            self.out.write("\n")

    def phase_seconds(self) -> list[float]:
        return [b - a for a, b in zip(self.phase_walls, self.phase_walls[1:])]

    def note_lift(self, now: datetime, before: str, after: str, reasons) -> None:
        """A plan that moved forward lifted a stage: when, and the evidence its gate saw."""
        order = lambda label: (STAGES.index(label.split(" ")[0]), int(label.split(" ")[-1]) if " step " in label else 0)
        if after == "normal" or order(after) <= order(before) or after == "hold":
            return
        self.lifts.append(report.Lift(after, now, [pdt(r[len(EVIDENCE):]) for r in reasons if r.startswith(EVIDENCE)],
                                      "; ".join(r for r in reasons if not r.startswith(EVIDENCE))))

    # ---- feeding the scenario -----------------------------------------------------

    def deliver(self, now: datetime, world_events: list[dict]) -> tuple[Counter, list[str]]:
        """Everything due by `now`: signal classes the detector's intake recorded, and notes."""
        from holdfast.observation.intake import receive

        notes, signals = [], Counter()
        notes += [f"◆ {m.text}" for m in self.milestones if self.clock_seen < m.time <= now]
        self.clock_seen = now
        due = []
        while self.steps and self.steps[0].time <= now:
            due.append(self.steps.pop(0))
        due += [scenario.Step(now, "event", e) for e in world_events]
        for step in due:
            if step.kind == "event":
                got = receive(self.runtime, step.payload)
                signals[got.klass if got.outcome == "recorded" else got.outcome] += 1
                if self.first_signal is None and got.klass == "capacity":
                    self.first_signal = step.time
            elif step.kind == "dns":
                host = step.payload["host"]
                (self.resolver.empty.discard if step.payload["resolves"] else self.resolver.empty.add)(host)
                notes.append(f"DNS {host} {'resolves again' if step.payload['resolves'] else 'answers empty'}")
            elif step.kind == "drift":
                notes.append(self.owner_drift(step.payload))
        return signals, notes

    @uses("lambda:UpdateEventSourceMapping", by=("cli",))
    def owner_drift(self, payload: dict[str, Any]) -> str:
        """The owner raises one mapping's cap by hand, through the API, mid-event."""
        arn, cap = payload["arn"], payload["MaximumConcurrency"]
        self.watcher("lambda").update_event_source_mapping(UUID=self.fleet.handles[arn], ScalingConfig={"MaximumConcurrency": cap})
        self.owner_changes[arn] = {"ScalingConfig": {"MaximumConcurrency": cap}}
        return f"owner sets mapping {self.fleet.handles[arn][:8]}… to MaximumConcurrency {cap} by hand"

    # ---- watching -----------------------------------------------------------------

    def account(self, result, now: datetime) -> Counter:
        """Keep the engaged set from the reconciler's outcomes; this tick's writes by (action, kind)."""
        changes: Counter = Counter()
        for o in result.outcomes:
            if o.action not in SHOWN_ACTIONS:
                continue
            changes[(o.action, o.kind)] += 1
            if o.action == ENGAGED:
                self.engaged[o.arn] = o.kind
                self.engaged_at.setdefault(o.kind, now)
            elif o.action in (RESTORED, DRIFT_KEPT, VANISHED):
                self.engaged.pop(o.arn, None)
            if o.action == DRIFT_KEPT:
                self.drift_reported[o.arn] = o.drift
            if o.action in (FAILED, REFUSED_STALE):
                self.failures.append(f"{now.astimezone(PDT):%H:%M} {o.action} {o.arn}: {o.error}")
        return changes

    def by_group(self, caps: dict[str, int | None]) -> dict[str, list[int | None]]:
        """The caps by consumer group (world.consumer_group: the owner's own cap before the event)."""
        owners = {q.mapping: q.original for q in self.world.queues}
        out: dict[str, list[int | None]] = {}
        for arn, cap in caps.items():
            out.setdefault(world.consumer_group(owners.get(arn)), []).append(cap)
        return out

    @uses("lambda:ListEventSourceMappings", by=("cli",))
    def caps(self) -> dict[str, int | None]:
        """Every selected mapping's cap in concurrent batches now (None = uncapped; a provisioned
        one's, what its pollers carry: fleet.batches), by ARN."""
        caps = {}
        for page in self.watcher("lambda").get_paginator("list_event_source_mappings").paginate():
            for m in page["EventSourceMappings"]:
                if m["UUID"] in self.mappings:
                    caps[self.mappings[m["UUID"]]] = batches(m)
        return caps

    @uses("autoscaling:DescribeAutoScalingGroups", by=("cli",))
    def suspended(self) -> dict[str, frozenset[str]]:
        """The groups' suspended processes (read while the world's models need them)."""
        out = {}
        for page in self.watcher("autoscaling").get_paginator("describe_auto_scaling_groups").paginate(
                AutoScalingGroupNames=self.groups, PaginationConfig={"PageSize": 100}):
            for g in page["AutoScalingGroups"]:
                out[g["AutoScalingGroupName"]] = frozenset(p["ProcessName"] for p in g["SuspendedProcesses"])
        return out

    @uses("elasticloadbalancing:DescribeTargetGroupAttributes", by=("cli",))
    def dns_failover(self) -> dict[str, str]:
        key = "target_group_health.dns_failover.minimum_healthy_targets.count"
        out = {}
        for arn in self.world.target_groups:
            attrs = self.watcher("elbv2").describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]
            out[arn] = next((a["Value"] for a in attrs if a["Key"] == key), "off")
        return out

    def line(self, now: datetime, verdict: str, label: str, changes: Counter, gates, notes: list[str]) -> str:
        done = "; ".join(
            f"{action} " + ", ".join(f"{n} {SHORT.get(kind, kind)}" for (a, kind), n in sorted(changes.items()) if a == action)
            for action in SHOWN_ACTIONS if any(a == action for a, _ in changes)
        )
        waiting = "; ".join(g for g in gates if not g.endswith("walk not finished"))
        parts = [f"{now.astimezone(PDT):%H:%M}", f"{verdict:<10}", f"{label:<13}", f"held {len(self.engaged):>3}"]
        if done:
            parts.append(done)
        if waiting and not done:
            parts.append(f"waits: {pdt(waiting)[:170]}")
        if notes:
            parts.append("| " + "; ".join(notes))
        return "  ".join(parts)

    def show(self, text: str, *, keep: bool) -> None:
        if self.live:
            self.out.write("\r\033[K" + text + ("\n" if keep else ""))
        elif keep:
            self.out.write(text + "\n")
        self.out.flush()


@uses("sqs:CreateQueue", "sqs:GetQueueAttributes", "sns:CreateTopic", "sts:GetCallerIdentity", by=("cli",))
def stack_resources(clients: Clients) -> tuple[str, str]:
    """What the stack creates besides the ledger: the expired-events queue and the topic."""
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName="holdfast-expired-events")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = clients("sns").create_topic(Name="holdfast-stage-changes")["TopicArn"]
    return queue, topic


def region_switch_step(runtime: Runtime, account: str) -> str:
    """The engage step an ARC Region switch plan runs in the Region it leaves
    (holdfast.region_switch; holdfast_cdk.RegionSwitchSteps builds it), invoked on this
    Region with the payload and metadata Region switch sends, in mode recommend: what it
    would write, and nothing written, so the replay below runs on Holdfast's own evidence."""
    from holdfast import region_switch

    region = runtime.clients.region
    event = {"holdfast": {"step": "engage", "region": region, "account": account, "mode": "recommend"},
             "InvokedBy": "arc-region-switch", "PlanArn": f"arn:aws:arc-region-switch::{account}:plan/demo-evacuate:abc123",
             "ExecutionId": "demo-execution-1", "StepName": "holdfast-engage"}
    result = region_switch.run(runtime, event, f"arn:aws:lambda:{region}:{account}:function:holdfast-region-switch")
    return (f"Region switch engage step invoked on {region} (the deactivating Region), mode recommend: "
            f"{result['status']}: {result['detail']}.")


def run(*, out_dir: Path, fast: bool, small: bool, out: TextIO = sys.stdout) -> int:
    from holdfast.clock import FakeClock
    from holdfast.ledger.resources import ResourceLedger
    from holdfast.ledger.table import ensure_table

    say = lambda text="": print(text, file=out, flush=True)
    started = time.monotonic()
    settings = Settings(mode="auto")   # the demo shows Holdfast acting
    sizes = SMALL if small else FULL
    with quiet(), moto_server() as url:
        watcher = Clients(session(), endpoint_url=url)   # the owner's calls and the demo's own reads
        holdfast = Clients(session(), endpoint_url=url)  # the controllers' calls, counted apart
        ensure_table(watcher("dynamodb"), DEFAULT_TABLE)
        expired_queue, topic = stack_resources(watcher)
        fleet = build_fleet(watcher, **sizes, unselected=UNSELECTED["small" if small else "full"], workers=16,
                            provisioned=1)
        before = snapshot(watcher, fleet)
        built = time.monotonic() - started
        selected = {k: len(v) for k, v in fleet.selected.items()}
        say(f"Embedded AWS at {url}; ledger, expired-events queue and stage topic created.")
        say(f"Fleet built through the AWS APIs in {built:.1f} s: {sum(selected.values())} selected "
            f"({', '.join(f'{n} {SHORT.get(k, k)}' for k, n in selected.items())}) across {', '.join(fleet.zones)}, "
            f"plus {sum(len(v) for v in fleet.unselected.values())} unselected; "
            f"{sum(1 for arn in fleet.selected['esm'] if (before[arn] or {}).get('ProvisionedPollerConfig'))} mapping(s) "
            "in provisioned mode, held through their pollers; snapshot taken.")

        # The first mapping (by its consumer's name, stable across runs) capped above DRIFT_CAP.
        drift_target = min((arn for arn in fleet.selected["esm"]
                            if ((before[arn] or {}).get("ScalingConfig") or {}).get("MaximumConcurrency", 0) > DRIFT_CAP),
                           key=lambda arn: int(before[arn]["FunctionArn"].rsplit("-", 1)[-1]))
        groups = [fleet.handles[arn] for arn in fleet.selected["asg"]]
        account = holdfast.account_id()
        steps = scenario.build(
            account=account, region=holdfast.region, backup_region=BACKUP_REGION,
            groups=groups, zones=fleet.zones, noisy_group=groups[-1],
            drift_target=drift_target, drift_cap=DRIFT_CAP, end=SAFETY_END,
        )
        the_world = world.World(account=account, region=holdfast.region, fleet=fleet, before=before, steps=steps,
                                start=scenario.START)
        say(f"Replaying {scenario.START:%d %b %H:%M} PDT to the end of the event ({scenario.EVENT_ENDS:%H:%M}) and "
            f"Holdfast's lift after it: {len(steps)} scheduled events and changes, plus the health-check terminations "
            f"and the metrics AWS's services publish as the night goes (demo/world.py). "
            f"{'No pacing (--fast). ' if fast else ''}Default settings (hold {settings.hold_minutes} min, capacity hold "
            f"{settings.capacity_hold_minutes} min, ESM floor {settings.esm_floor}, the drain "
            f"by each mapping's controller, cut x{settings.drain_cut_factor:g} on a downstream alarm, launch shares: impair at {settings.detect_failure_share:.0%}, "
            f"recover at {settings.recover_success_share:.0%} success).")
        say()
        say("time   verdict     stage          held   this tick | what happened")
        runtime = Runtime(clients=holdfast, settings=settings, table=DEFAULT_TABLE, clock=FakeClock(scenario.START),
                          controller_id=CONTROLLER, topic_arn=topic, expired_queue_arn=expired_queue, telemetry=QUIET)
        replay = Replay(runtime=runtime, watcher=watcher, fleet=fleet, steps=steps, the_world=the_world, fast=fast, out=out)
        say(region_switch_step(runtime, account))
        replay_started = time.monotonic()
        # SQS message moves (the replay stage), which moto lacks, emulated on the replay's clock.
        from holdfast_fixtures.message_moves import MessageMoves

        with MessageMoves(runtime.clock).installed():
            replay.run()
        replay_wall = time.monotonic() - replay_started

        after = snapshot(watcher, fleet)
        left_in_ledger = ResourceLedger(Ledger(watcher("dynamodb"), DEFAULT_TABLE)).records()
        holdfast_calls = sum(holdfast.calls.values())
        metric_calls = holdfast.calls["cloudwatch:GetMetricData"]

    kinds = {arn: fleet.kind_of(arn) for arn in fleet.arns()}
    selected_arns = {arn for arns in fleet.selected.values() for arn in arns}
    rows = check.end_state(before, after, kinds=kinds, selected=selected_arns,
                           owner_changes=replay.owner_changes, reported_drift=replay.drift_reported)
    rows += [{"resource": r.arn, "kind": r.kind, "result": "ledger record left", "detail": "original still in the ledger"}
             for r in left_in_ledger]
    bad = check.failed(rows)
    tally = Counter(r["result"] for r in rows)

    say()
    say(f"End state against the pre-event snapshot ({len(rows)} resources): "
        + ", ".join(f"{tally[k]} {k}" for k in check.OK) + f", {len(bad)} NOT restored.")
    for r in rows:
        if r["result"] != "restored" and r["result"] != "untouched":
            say(f"  {r['result']}: {r['kind']} {r['resource']}\n    {r.get('detail', '')}")
    for problem in replay.failures:
        say(f"  problem: {problem}")

    say()
    say(f"Full posture {replay.posture_seconds:.0f} s after the first qualifying signal "
        f"({replay.first_signal.astimezone(PDT):%H:%M:%S} PDT)." if replay.posture_seconds is not None else
        "Full posture never reached.")
    say("Stages lifted, and the evidence that allowed each:")
    for lift in replay.lifts:
        say(f"  {lift.time.astimezone(PDT):%H:%M}  {lift.stage:<13} " + ("; ".join(lift.evidence) or lift.why)[:200])
    cf, actual = the_world.without.to_dict(), the_world.actual.to_dict()
    say("Without Holdfast, from the same inputs, the account's own automation would have: "
        f"replaced {cf['instances_replaced']} instances (ELB health checks), rebalanced zones {cf['zones_rebalanced']} times, "
        f"failed {cf['target_group_zone_failovers']} target-group zones out of DNS ({cf['target_groups_failed_out_of_dns']} "
        f"target groups), and run {cf['peak_consumer_concurrency']:,} concurrent consumer batches at the peak "
        f"(with Holdfast: {actual['instances_replaced']}, {actual['zones_rebalanced']}, {actual['target_group_zone_failovers']}, "
        f"{actual['peak_consumer_concurrency']:,}).")

    last = replay.samples[-1].time if replay.samples else scenario.START
    wall = time.monotonic() - started
    figures = {
        "fleet": f"{sum(selected.values())} selected resources ({', '.join(f'{n} {k}' for k, n in selected.items())}), "
                 f"{sum(len(v) for v in fleet.unselected.values())} unselected, Auto Scaling groups across {len(fleet.zones)} zones",
        "settings": "the stack's defaults, in mode auto (Settings(mode=\"auto\"))",
        "event time replayed": f"{scenario.START:%H:%M} to {last.astimezone(PDT):%H:%M} PDT, {replay.ticks} reconciler ticks",
        "full posture": (f"{replay.posture_at.astimezone(PDT):%H:%M} PDT, {replay.posture_seconds:.0f} s after the first "
                         f"qualifying signal" if replay.posture_seconds is not None else
                         f"{replay.posture_at.astimezone(PDT):%H:%M} PDT, before any qualifying signal" if replay.posture_at
                         else "never"),
        "back to normal at": f"{last.astimezone(PDT):%H:%M} PDT" if not replay.failures else "not reached",
        "AWS API calls by the controllers (probes' own clients not counted)": f"{holdfast_calls} ({metric_calls} GetMetricData)",
        "end state": f"{tally['restored']} restored exactly, {tally['drift-kept']} owner change kept and reported, "
                     f"{tally['untouched']} unselected untouched, {len(bad)} NOT restored",
        "wall time": f"{wall:.1f} s (fleet {built:.1f} s, replay {replay_wall:.1f} s{', no pacing' if fast else ''}; "
                     f"by phase {' / '.join(f'{x:.0f}' for x in replay.phase_seconds())} s)",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    milestones = scenario.load_milestones()
    chart_path, report_path, json_path = out_dir / "demo-timeline.png", out_dir / "demo-report.md", out_dir / "demo-report.json"
    report.chart(
        replay.samples, milestones, chart_path, the_world,
        lifts=replay.lifts, engaged_at=replay.engaged_at,
        spans=[(scenario.IMPAIRMENT, scenario.DNS_RESTORED, "red", "DynamoDB endpoint resolves empty"),
               (scenario.IMPAIRMENT, scenario.LAUNCHES_RESUME, "orange", "EC2 launches fail (insufficient capacity)"),
               (scenario.NETWORK_LAG, scenario.NETWORK_NORMAL, "purple", "network state propagation lags")],
        cap_notes=[(scenario.OWNER_DRIFT, change["ScalingConfig"]["MaximumConcurrency"],
                    "an owner raises one cap by hand: kept")
                   for change in replay.owner_changes.values()],
        subtitle=(f"{sum(selected.values())} resources on an embedded AWS, driven by Holdfast's own detector and reconciler "
                  f"with the default settings; AWS's Health issue open {scenario.HEALTH_OPENED:%H:%M}–"
                  f"{scenario.EVENT_ENDS:%H:%M}"),
        footnote=(f"Without Holdfast: {cf['instances_replaced']} instances replaced, {cf['zones_rebalanced']} zone "
                  f"rebalances, {cf['target_group_zone_failovers']} target-group zones failed out of DNS, a peak of "
                  f"{cf['peak_consumer_concurrency']:,} consumer batches. With it: {actual['instances_replaced']}, "
                  f"{actual['zones_rebalanced']}, {actual['target_group_zone_failovers']}, "
                  f"{actual['peak_consumer_concurrency']:,}. End state: {tally['restored']} restored, "
                  f"{tally['drift-kept']} owner change kept, {len(bad)} not restored."),
        warning_ratio=settings.drain_duration_warning_ratio,
    )
    report_path.write_text(report.markdown(
        stage_changes=replay.stage_changes, milestones=milestones, final_check=rows,
        drift=[{"arn": arn, "drift": d} for arn, d in replay.drift_reported.items()],
        figures=figures, chart_name=chart_path.name, lifts=replay.lifts, engaged_at=replay.engaged_at,
        first_signal=replay.first_signal, posture_seconds=replay.posture_seconds,
        counterfactual=cf, actual=actual, compressions=replay.compressions,
    ))
    json_path.write_text(report.json_document(lifts=replay.lifts, posture_seconds=replay.posture_seconds,
                                              counterfactual=cf, actual=actual))
    say(f"Wrote {report_path}, {json_path} and {chart_path}.")
    say(f"Wall time: {time.monotonic() - started:.1f} s.")
    return 1 if bad or replay.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m holdfast_demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", default=os.environ.get("HOLDFAST_DEMO_FAST") == "1",
                        help="no wall-time pacing (also HOLDFAST_DEMO_FAST=1)")
    parser.add_argument("--small", action="store_true", help="a smaller fleet, for CI")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the report and chart go (default: out)")
    args = parser.parse_args(argv)
    # As the stack sets it for the controllers (stacks/holdfast_cdk/constructs/controllers.py), before they are imported.
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Holdfast")
    return run(out_dir=args.out, fast=args.fast, small=args.small)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is written; freeing the embedded AWS's state object by object would take
    # the interpreter longer than the event's last hour took to replay.
    os._exit(status)
