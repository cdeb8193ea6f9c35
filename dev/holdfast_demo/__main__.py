"""`make demo`: Holdfast's whole job on the night of 19–20 October 2025, in two minutes.

    python -m holdfast_demo [--fast] [--small] [--out DIR]

1. Starts an embedded AWS (moto's server on 127.0.0.1, demo/embedded.py), creates the
   ledger, the expired-events queue and the stage-change topic as the stack would,
   and builds a fleet through the AWS APIs (demo/fleet.py); snapshots it.
2. Replays the night (demo/scenario.py) on a fake clock moved one reconciler period
   per tick, about one event hour per 10 s of wall time: each EventBridge event goes
   to the real detector handler, each DNS change to the resolver the real probes use,
   the owner's mid-event change to AWS; each tick is the real reconciler's, with the
   stack's default settings. Nothing here decides anything; it only watches and
   prints: the verdict, the stage, what was engaged, raised or restored, and what the
   stage still waits for (the hold counting down).
3. Stops when the plan is back to normal after the recovery (or at SAFETY_END),
   compares every resource with its snapshot (demo/check.py), writes the report and
   the chart (demo/report.py), and exits 1 if anything is not restored.

`--fast` (or HOLDFAST_DEMO_FAST=1) drops the wall-time pacing, for CI; `--small`
builds a smaller fleet. Both run the same code path.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Iterator, TextIO
from unittest import mock

from holdfast.core.model import DRIFT_KEPT, ENGAGED, FAILED, RAISED, REFUSED_STALE, RESTORED, VANISHED
from holdfast.aws import Clients
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo import check, report, scenario
from holdfast_demo.embedded import moto_server, session
from holdfast_demo.fleet import KINDS, build_fleet, snapshot
from holdfast_demo.scenario import PDT

FULL = dict(asgs=40, esms=25, asyncs=10, nlbs=6, services=5)
SMALL = dict(asgs=6, esms=4, asyncs=3, nlbs=2, services=2)
UNSELECTED = {"full": 3, "small": 1}
SECONDS_PER_EVENT_HOUR = 10.0
# The stack ticks every settings.schedule_minutes (1). Against moto one tick costs about
# 0.4 s of wall time (its response serializer is slow on the ledger's signal reads), so
# a tick a minute cannot replay the night in two minutes; the demo runs one tick per
# TICK_MINUTES of event time instead. The reconciler is level-triggered and measures
# holds in time, not ticks: a skipped tick costs nothing but up to TICK_MINUTES of delay.
TICK_MINUTES = 5
SAFETY_END = datetime(2025, 10, 20, 9, 0, tzinfo=PDT)
BACKUP_REGION = "us-west-2"
DRIFT_CAP = 40
CONTROLLER = "demo-reconciler"
TIMELINE = Path(__file__).with_name("oct2025-timeline.csv")  # a copy of shared/data/oct2025-timeline.csv
# A line every so often even when nothing happens, so the hold is seen counting down.
HEARTBEAT = timedelta(minutes=30)
# Signals that arrive all night long; a tick that saw only these is not worth a line.
ROUTINE = {"capacity", "configuration", "launch"}
SHORT = {"asg": "asg", "esm": "esm", "async": "async", "nlb": "nlb", "scalable-target": "ecs"}
SHOWN_ACTIONS = (ENGAGED, RAISED, RESTORED, DRIFT_KEPT, VANISHED, FAILED, REFUSED_STALE)


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
    should in Lambda; in the terminal the demo's own timeline is the output."""
    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, {
            "POWERTOOLS_METRICS_NAMESPACE": "Holdfast", "POWERTOOLS_METRICS_DISABLED": "true",
        }))
        for log in loggers:
            level = log.log_level
            log.setLevel("WARNING")
            stack.callback(log.setLevel, level)
        yield


class Replay:
    """Feeds the scenario to the real handlers and ticks the real reconciler; watches."""

    def __init__(self, *, runtime: Runtime, watcher: Clients, fleet, steps: list[scenario.Step], fast: bool, out: TextIO):
        from holdfast.observation import collect

        # The controllers' runtime: their own clients (their calls are counted apart), the
        # stack's defaults, the replay's clock, the embedded stack's topic and queue.
        self.runtime, self.watcher = runtime, watcher
        self.holdfast, self.settings, self.table, self.clock = runtime.clients, runtime.settings, runtime.table, runtime.clock
        self.fleet, self.steps, self.fast, self.out = fleet, steps, fast, out
        self.resolver = Resolver()
        self.collect = partial(collect, resolver=self.resolver)
        self.mappings = {fleet.handles[arn] for arn in fleet.selected["esm"]}
        self.live = out.isatty()
        # What the replay saw, for the chart, the report and the end check.
        self.samples: list[report.Sample] = []
        self.stage_changes: list[tuple[datetime, str, str]] = []
        self.engaged: dict[str, str] = {}  # ARN -> kind, from the reconciler's outcomes
        self.drift_reported: dict[str, Any] = {}
        self.owner_changes: dict[str, dict[str, Any]] = {}
        self.failures: list[str] = []
        self.ticks = 0
        self.fully_engaged_at: datetime | None = None
        self.wall_to_engage: float | None = None

    def run(self) -> None:
        from holdfast.ledger import plan as ledger_plan
        from holdfast.ledger import verdict as ledger_verdict
        from holdfast.reconciler import tick

        period = timedelta(minutes=TICK_MINUTES)
        wall_per_tick = period / timedelta(hours=1) * SECONDS_PER_EVENT_HOUR
        wall_start = time.monotonic()
        last_line, last_state = None, None
        impaired_wall = None
        while True:
            now = self.clock.now()
            signals, notes = self.deliver(now)
            tick_started = time.monotonic()
            result = tick(self.runtime, collect=self.collect)
            self.ticks += 1
            plan = ledger_plan.read(self.watcher("dynamodb"), self.table)
            verdict = (ledger_verdict.read_verdict(self.watcher("dynamodb"), self.table) or {}).get("state", "?")
            changes = self.account(result)
            stage = plan.stage if plan else "normal"
            label = plan.label if plan else "normal"
            if any(a.startswith("plan:") for a in result.actions):
                self.stage_changes.append((now, label, "; ".join(result.reasons)))
            if stage != "normal" and impaired_wall is None:
                impaired_wall = tick_started
            if self.fully_engaged_at is None and stage == "hold" and plan.done >= set(KINDS):
                self.fully_engaged_at, self.wall_to_engage = now, time.monotonic() - impaired_wall
            self.samples.append(report.Sample(now, stage, self.caps(), dict(Counter(self.engaged.values()))))

            state = (verdict, label, tuple(result.gates))  # a hold counting down is a new line
            notable = notes or set(signals) - ROUTINE or changes or state != last_state or last_line is None or now - last_line >= HEARTBEAT
            events = ["events " + ", ".join(f"{k}×{n}" for k, n in sorted(signals.items()))] if signals else []
            self.show(self.line(now, verdict, label, changes, result.gates, events + notes), keep=notable)
            if notable:
                last_line, last_state = now, state
            if plan and plan.generation and stage == "normal":
                break
            if now >= SAFETY_END:
                self.failures.append(f"the plan was not back to normal by {SAFETY_END:%H:%M} PDT (stage {label})")
                break
            self.clock.advance(period.total_seconds())
            if not self.fast:
                time.sleep(max(0.0, wall_start + self.ticks * wall_per_tick - time.monotonic()))
        if self.live:
            self.out.write("\n")

    # ---- feeding the scenario -----------------------------------------------------

    def deliver(self, now: datetime) -> tuple[Counter, list[str]]:
        """Everything due by `now`: signal classes the detector's intake recorded, and notes."""
        from holdfast.observation.intake import receive

        notes, signals = [], Counter()
        while self.steps and self.steps[0].time <= now:
            step = self.steps.pop(0)
            if step.kind == "event":
                got = receive(self.runtime, step.payload)
                signals[got.klass if got.outcome == "recorded" else got.outcome] += 1
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

    def account(self, result) -> Counter:
        """Keep the engaged set from the reconciler's outcomes; this tick's writes by (action, kind)."""
        changes: Counter = Counter()
        for o in result.outcomes:
            if o.action not in SHOWN_ACTIONS:
                continue
            changes[(o.action, o.kind)] += 1
            if o.action == ENGAGED:
                self.engaged[o.arn] = o.kind
            elif o.action in (RESTORED, DRIFT_KEPT, VANISHED):
                self.engaged.pop(o.arn, None)
            if o.action == DRIFT_KEPT:
                self.drift_reported[o.arn] = o.drift
            if o.action in (FAILED, REFUSED_STALE):
                self.failures.append(f"{self.clock.now().astimezone(PDT):%H:%M} {o.action} {o.arn}: {o.error}")
        return changes

    @uses("lambda:ListEventSourceMappings", by=("cli",))
    def caps(self) -> list[int | None]:
        """Every selected mapping's MaximumConcurrency now (None = uncapped)."""
        caps = []
        for page in self.watcher("lambda").get_paginator("list_event_source_mappings").paginate():
            caps += [(m.get("ScalingConfig") or {}).get("MaximumConcurrency")
                     for m in page["EventSourceMappings"] if m["UUID"] in self.mappings]
        return caps

    def line(self, now: datetime, verdict: str, label: str, changes: Counter, gates, notes: list[str]) -> str:
        done = "; ".join(
            f"{action} " + ", ".join(f"{n} {SHORT[kind]}" for (a, kind), n in sorted(changes.items()) if a == action)
            for action in SHOWN_ACTIONS if any(a == action for a, _ in changes)
        )
        waiting = "; ".join(g for g in gates if not g.endswith("walk not finished"))
        parts = [f"{now.astimezone(PDT):%H:%M}", f"{verdict:<10}", f"{label:<13}", f"held {len(self.engaged):>3}"]
        if done:
            parts.append(done)
        if waiting and not done:
            parts.append(f"waits: {waiting}")
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


def run(*, out_dir: Path, fast: bool, small: bool, out: TextIO = sys.stdout) -> int:
    from holdfast import reconciler
    from holdfast.clock import FakeClock
    from holdfast.ledger.resources import ResourceLedger
    from holdfast.ledger.table import ensure_table

    say = lambda text="": print(text, file=out, flush=True)
    started = time.monotonic()
    settings = Settings()
    sizes = SMALL if small else FULL
    with quiet(reconciler.logger), moto_server() as url:
        watcher = Clients(session(), endpoint_url=url)   # the owner's calls and the demo's own reads
        holdfast = Clients(session(), endpoint_url=url)  # the controllers' calls, counted apart
        ensure_table(watcher("dynamodb"), DEFAULT_TABLE)
        expired_queue, topic = stack_resources(watcher)
        fleet = build_fleet(watcher, **sizes, unselected=UNSELECTED["small" if small else "full"], workers=16)
        before = snapshot(watcher, fleet)
        built = time.monotonic() - started
        selected = {k: len(v) for k, v in fleet.selected.items()}
        say(f"Embedded AWS at {url}; ledger, expired-events queue and stage topic created.")
        say(f"Fleet built through the AWS APIs in {built:.1f} s: {sum(selected.values())} selected "
            f"({', '.join(f'{n} {SHORT[k]}' for k, n in selected.items())}) across {', '.join(fleet.zones)}, "
            f"plus {sum(len(v) for v in fleet.unselected.values())} unselected; snapshot taken.")

        drift_target = next(arn for arn in fleet.selected["esm"]
                            if ((before[arn] or {}).get("ScalingConfig") or {}).get("MaximumConcurrency", 0) > DRIFT_CAP)
        groups = [fleet.handles[arn] for arn in fleet.selected["asg"]]
        steps = scenario.build(
            account=holdfast.account_id(), region=holdfast.region, backup_region=BACKUP_REGION,
            groups=groups, zones=fleet.zones, noisy_group=groups[-1],
            drift_target=drift_target, drift_cap=DRIFT_CAP, end=SAFETY_END,
        )
        say(f"Replaying {scenario.START:%d %b %H:%M} PDT onwards: {len(steps)} events and changes, one reconciler "
            f"tick per {TICK_MINUTES} event minutes, {'no pacing (--fast)' if fast else f'{SECONDS_PER_EVENT_HOUR:g} s per event hour'}; "
            f"default settings (hold {settings.hold_minutes} min, capacity hold {settings.capacity_hold_minutes} min, "
            f"ESM floor {settings.esm_floor}, cap steps {'/'.join(map(str, settings.esm_cap_steps))}).")
        say()
        say("time   verdict     stage          held   this tick | what happened")
        runtime = Runtime(clients=holdfast, settings=settings, table=DEFAULT_TABLE, clock=FakeClock(scenario.START),
                          controller_id=CONTROLLER, topic_arn=topic, expired_queue_arn=expired_queue)
        replay = Replay(runtime=runtime, watcher=watcher, fleet=fleet, steps=steps, fast=fast, out=out)
        replay_started = time.monotonic()
        replay.run()
        replay_wall = time.monotonic() - replay_started

        after = snapshot(watcher, fleet)
        left_in_ledger = ResourceLedger(watcher("dynamodb"), DEFAULT_TABLE).records()
        holdfast_calls = sum(holdfast.calls.values())

    kinds = {arn: fleet.kind_of(arn) for arn in fleet.arns()}
    selected_arns = {arn for arns in fleet.selected.values() for arn in arns}
    rows = check.end_state(before, after, kinds=kinds, selected=selected_arns,
                           owner_changes=replay.owner_changes, reported_drift=replay.drift_reported)
    rows += [{"resource": r.arn, "kind": r.kind, "result": "ledger record left", "detail": "original still in the ledger"}
             for r in left_in_ledger]
    bad = check.failed(rows)
    wall = time.monotonic() - started
    tally = Counter(r["result"] for r in rows)

    say()
    say(f"End state against the pre-event snapshot ({len(rows)} resources): "
        + ", ".join(f"{tally[k]} {k}" for k in check.OK) + f", {len(bad)} NOT restored.")
    for r in rows:
        if r["result"] != "restored" and r["result"] != "untouched":
            say(f"  {r['result']}: {r['kind']} {r['resource']}\n    {r.get('detail', '')}")
    for problem in replay.failures:
        say(f"  problem: {problem}")

    last = replay.samples[-1].time if replay.samples else scenario.START
    figures = {
        "fleet": f"{sum(selected.values())} selected resources ({', '.join(f'{n} {k}' for k, n in selected.items())}), "
                 f"{sum(len(v) for v in fleet.unselected.values())} unselected, Auto Scaling groups across {len(fleet.zones)} zones",
        "settings": "the stack's defaults (Settings())",
        "event time replayed": f"{scenario.START:%H:%M} to {last.astimezone(PDT):%H:%M} PDT, {replay.ticks} reconciler ticks",
        "everything engaged at": (f"{replay.fully_engaged_at.astimezone(PDT):%H:%M} PDT "
                                  f"({replay.wall_to_engage:.1f} s of wall time after the first engaging tick began)"
                                  if replay.fully_engaged_at else "never"),
        "back to normal at": f"{last.astimezone(PDT):%H:%M} PDT" if not replay.failures else "not reached",
        "AWS API calls by the controllers (probes' own clients not counted)": str(holdfast_calls),
        "end state": f"{tally['restored']} restored exactly, {tally['drift-kept']} owner change kept and reported, "
                     f"{tally['untouched']} unselected untouched, {len(bad)} NOT restored",
        "wall time": f"{wall:.1f} s (fleet {built:.1f} s, replay {replay_wall:.1f} s{', no pacing' if fast else ''})",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    milestones = scenario.load_milestones(TIMELINE)
    chart_path, report_path = out_dir / "demo-timeline.png", out_dir / "demo-report.md"
    report.chart(
        replay.samples, milestones, chart_path,
        spans=[(scenario.IMPAIRMENT, scenario.DNS_RESTORED, "red", "DynamoDB endpoint resolves empty"),
               (scenario.IMPAIRMENT, scenario.LAUNCHES_RESUME, "orange", "EC2 launches fail (capacity)")],
        cap_notes=[(scenario.OWNER_DRIFT, change["ScalingConfig"]["MaximumConcurrency"],
                    "an owner raises one cap by hand: kept through the drain and the restore")
                   for change in replay.owner_changes.values()],
        subtitle=(f"{sum(selected.values())} resources on an embedded AWS, driven by Holdfast's own detector and reconciler "
                  f"with the default settings (one tick per {TICK_MINUTES} event minutes)"),
        footnote=(f"End state: {tally['restored']} restored exactly, {tally['drift-kept']} owner change kept and reported, "
                  f"{tally['untouched']} unselected untouched, {len(bad)} not restored. In October AWS reported EC2 "
                  f"launches normal at 13:50; the demo closes its Health issue at 05:28 (see the report)."),
    )
    report_path.write_text(report.markdown(
        stage_changes=replay.stage_changes, milestones=milestones, final_check=rows,
        drift=[{"arn": arn, "drift": d} for arn, d in replay.drift_reported.items()],
        figures=figures, chart_name=chart_path.name,
    ))
    say(f"Wrote {report_path} and {chart_path}.")
    say(f"Wall time: {time.monotonic() - started:.1f} s.")
    return 1 if bad or replay.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m holdfast_demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", default=os.environ.get("HOLDFAST_DEMO_FAST") == "1",
                        help="no wall-time pacing (also HOLDFAST_DEMO_FAST=1)")
    parser.add_argument("--small", action="store_true", help="a smaller fleet, for CI")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the report and chart go (default: out)")
    args = parser.parse_args(argv)
    # As the stack sets it for the controllers (stacks/constructs/controllers.py), before they are imported.
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Holdfast")
    return run(out_dir=args.out, fast=args.fast, small=args.small)


if __name__ == "__main__":
    sys.exit(main())
