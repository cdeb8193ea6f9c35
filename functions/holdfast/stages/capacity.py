"""The capacity stage, one tick: Auto Scaling groups get their processes back in waves.

    stepped = step(runtime, plan, now, engine=engine, guard=guard, ledger=ledger)

holdfast.core.capacity decides (why: its docstring); this module reads what it needs and
carries the decision out, in this order:

1. Read: the groups Holdfast holds (its records, on their tags or in the ledger) and the
   groups of the stage's waves, in bulk (DescribeAutoScalingGroups: their instances'
   HealthStatus and target groups); each group's latest capacity-class launch failure
   from the detector's signals (one ledger Query); the stage's record (pk `WAVES`).
2. Decide. When a wave is due, read the health of the marked instances of the groups it
   may take (DescribeInstanceStatus; DescribeTargetHealth per target group of a group
   that uses ELB health checks: holdfast.actuators.asg.AsgActuator.healthy_now), and
   decide again with it.
3. Keep the record (holdfast.ledger.drain.write, partition WAVES): conditional on the plan
   generation and the version read, before any write to a group. A crash after it leaves
   a recorded wave the next tick finishes (decide says so); a crash before it, nothing
   changed. Another controller's record since the read (Conflict) leaves the stage for
   a tick; a plan that moved on (StalePlan) stops the tick's relaxing.
4. Step back (engage again, monotone: no guard) the groups whose replacements failed;
   set Healthy the instances whose checks pass now (SetInstanceHealth, protective: no
   guard); then resume the wave's groups through the guarded relax walk
   (Engine.relax(only=...)), which restores exactly what Holdfast suspended. A group
   whose reset failed is not resumed this tick (resuming would terminate it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.actuators.asg import unhealthy
from holdfast.aws import error_text
from holdfast.core import capacity
from holdfast.core.classify import CAPACITY as CAPACITY_CLASS
from holdfast.core.errors import Conflict
from holdfast.core.model import ALREADY, DRIFT_KEPT, FAILED, RESTORED, VANISHED, Guard, Outcome
from holdfast.ledger import Ledger
from holdfast.ledger import drain as records
from holdfast.ledger import signals as ledger_signals

KIND = "asg"


def record_key(generation: int) -> str:
    return f"capacity#{generation:012d}"


@dataclass
class Stepped:
    """One tick of the capacity stage: what it decided and what its writes did."""

    step: capacity.Step
    outcomes: list[Outcome] = field(default_factory=list)
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    last_wave: bool = False   # this tick's wave resumed every group still held

    @property
    def finished(self) -> bool:
        return self.step.finished or self.last_wave

    def summary(self) -> dict[str, Any]:
        wave = self.step.wave
        return {
            "wave": wave.to_dict() if wave else None,
            "resumed": len(self.step.resume), "stepped_back": len(self.step.step_back),
            "reset": sum(len(v) for v in self.step.resets.values()),
            "waiting": self.step.waiting, "finished": self.step.finished,
            "totals": self.step.record.totals(),
        }


def read_record(ledger: Ledger, generation: int) -> tuple[capacity.Waves | None, int]:
    """The stage's record for this generation and its version (0: none yet)."""
    item = records.read_all(ledger, records.WAVES).get(record_key(generation))
    if item is None:
        return None, 0
    try:
        return capacity.Waves.from_dict(item.doc["waves"]), item.version
    except (KeyError, TypeError, ValueError):
        return None, item.version   # unreadable: the stage starts its waves again, over it


def step(runtime, plan, now: datetime, *, engine, guard: Guard, ledger: Ledger,
         stuck: frozenset[str] = frozenset()) -> Stepped:
    """This tick's step (the module docstring). `stuck`: groups whose restore failed on
    several walks; they hold no wave and no finish back (a tick retries them later)."""
    settings = runtime.settings
    act = engine.actuators[KIND]
    record, version = read_record(ledger, plan.generation)
    held_arns = {r.arn for r in engine.ledger.records() if r.kind == KIND}
    listed = {c.arn: dict(c.listed) for c in act.candidates()}
    for c_arn, group in list(listed.items()):
        if act.resource_of(group).record is not None:
            held_arns.add(c_arn)
    # Groups held (recorded) but no longer selected, and the groups of earlier waves.
    wanted = held_arns | {a for w in (record.waves if record else ()) for a in w.groups}
    missing = sorted(a for a in wanted if a not in listed)
    if missing:
        listed.update(act.groups(missing))
    for arn, group in listed.items():
        if arn not in held_arns and act.resource_of(group).record is not None:
            held_arns.add(arn)
    failed = _capacity_failures(ledger, plan, now, settings)
    groups = [capacity.Group(arn, g["AutoScalingGroupName"], held=arn in held_arns,
                             marked=unhealthy(g) if arn in held_arns else (),
                             failed_at=failed.get(g["AutoScalingGroupName"]))
              for arn, g in sorted(listed.items()) if arn in wanted]
    decided = capacity.decide(groups, record, now, settings, generation=plan.generation, stuck=stuck)
    if decided.read_health:
        health = act.healthy_now({a: listed[a] for a in decided.read_health})
        groups = [replace(g, healthy_now=health.get(g.arn, ())) if g.arn in decided.read_health else g for g in groups]
        decided = capacity.decide(groups, record, now, settings, generation=plan.generation, stuck=stuck)
    out = Stepped(decided)
    if decided.write:
        try:
            records.write(ledger, records.WAVES, record_key(plan.generation), {"waves": decided.record.to_dict()},
                          generation=plan.generation, read_version=version, controller_id=runtime.controller_id,
                          now=now)
        except Conflict as err:   # another controller's wave: act on it next tick
            out.complete = False
            out.notes.append(str(err))
            return out
    if decided.step_back:
        out.outcomes += act.engage_many([act.resource_of(listed[a]) for a in decided.step_back])
    not_reset: set[str] = set()
    for arn, instances in decided.resets.items():
        try:
            act.set_healthy(instances)
        except (ClientError, BotoCoreError) as err:
            not_reset.add(arn)
            out.outcomes.append(Outcome(KIND, arn, FAILED, error=f"not resumed: an instance healthy now could not be "
                                                                   f"set Healthy again ({error_text(err)})"))
    resume = [a for a in decided.resume if a not in not_reset]
    if resume:
        report = engine.relax(kinds=(KIND,), guard=guard, only=resume)
        out.outcomes += report.outcomes
        out.complete = report.complete
        back = {o.arn for o in report.outcomes if o.action in (RESTORED, DRIFT_KEPT, VANISHED, ALREADY)}
        still = {g.arn for g in groups if g.held and g.arn not in stuck}
        out.last_wave = report.complete and not decided.step_back and still <= back
    if not_reset:
        out.complete = False
    return out


def _capacity_failures(ledger: Ledger, plan, now: datetime, settings) -> dict[str, datetime]:
    """Group name -> its latest capacity-class launch failure, from the stage's start (and
    at least one wave hold back)."""
    since = min(plan.entered_at or now, now - timedelta(minutes=settings.capacity_wave_minutes))
    latest: dict[str, datetime] = {}
    for s in ledger_signals.recent(ledger, since, now):
        if s.klass == CAPACITY_CLASS and s.group and (s.group not in latest or s.time > latest[s.group]):
            latest[s.group] = s.time
    return latest
