"""The drain, one tick: every controlled mapping's cap from its own controller.

    decided = decide(runtime, plan, now)
    engine.relax(kinds=("esm",), target_for=decided.target_for, guard=guard)

From the hold on (holdfast.core.policy: the CONTROL posture), per engaged mapping (one
with an original in the resource ledger):

1. Read in bulk: ListEventSourceMappings (the caps in force), the drain records (one ledger
   Query); for a mapping new to this hold, once, its consumer facts (GetFunction, ListTags)
   and its pre-event metrics (a baseline that ends before the first impairment signal, the
   plan's engagement and the consumer's own first anomaly); then, for all, DescribeAlarms and GetMetricData
   (holdfast.observation.drain_inputs).
2. Decide: holdfast.core.drain.advance — wait for the dependency, start from the
   pre-event concurrency, raise, hold, cut, and give the owner's original back.
3. Keep the record (holdfast.ledger.drain.write): conditional on the plan generation and on
   the version read, *before* the cap is written. The record is the intent the walk
   converges to: a crash between the two leaves a record whose cap the next tick writes
   (the same target, idempotent); a crash before it leaves nothing changed. A record the
   plan no longer allows (StalePlan) stops the tick's relaxing, as every guard does; one
   another controller wrote since it was read (Conflict) leaves that mapping for a tick.
4. Give the walk its targets: `{"MaximumConcurrency": n}`, None (restore: the owner's
   original, a cap or none) or LEAVE (still waiting, or the cap in force is the one
   decided: nothing to write). The walk reads and writes only the mappings that move.
   A mapping in provisioned mode is decided in concurrent batches like any other: the
   actuator writes a cap as pollers, and its pollers are read back as a cap here
   (`in_force`, `owner_cap`; holdfast.core.pollers).

A mapping's record belongs to one hold (`since` = the plan's `impaired_at`): a new
impairment starts every drain again from the floor.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from holdfast.core import drain as dc
from holdfast.core import kinds, policy, pollers
from holdfast.core.drain import share
from holdfast.core.errors import Conflict
from holdfast.core.model import LEAVE, Resource
from holdfast.ledger import Ledger
from holdfast.ledger import drain as records
from holdfast.observation import drain_inputs

logger = logging.getLogger(__name__)

# The kind this controller drives: the one kind declared `controlled` (holdfast.core.kinds).
(KIND,) = sorted(kinds.CONTROLLED)
KEY = "MaximumConcurrency"


def hold_started(plan: policy.Plan) -> datetime:
    """When the hold the drains belong to began."""
    return plan.impaired_at or plan.entered_at


@dataclass
class Decided:
    """One tick's decisions: per mapping ARN, its step and the walk's target."""

    steps: dict[str, dc.Step] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)
    consumers: dict[str, drain_inputs.Consumer] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def target_for(self, resource: Resource) -> Any:
        return self.targets.get(resource.arn, LEAVE)

    engaged: set[str] = field(default_factory=set)
    # Mappings reported stalled (ARN -> (since, why)): they keep their cap and no longer
    # hold the later stages; `new_stalls`: those whose stall this tick reports first.
    stalled: dict[str, tuple[datetime | None, str]] = field(default_factory=dict)
    new_stalls: list[str] = field(default_factory=list)

    def moving(self) -> list[str]:
        """The mappings the walk has something for (not waiting), by ARN."""
        return sorted(arn for arn, t in self.targets.items() if t != LEAVE)

    @property
    def finished(self) -> bool:
        """Every engaged mapping's owner's original is coming back (or it is gone), or its
        drain is reported stalled: a drain that cannot finish is a finding, not a wait (as a
        stuck resource no longer holds its kind back)."""
        return all(arn in self.stalled or (arn in self.targets and self.targets[arn] is None) for arn in self.engaged)

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps.values():
            out[s.action] = out.get(s.action, 0) + 1
        return out


def owner_cap(original) -> int | None:
    """The owner's own cap from a mapping's recorded original: its MaximumConcurrency, or
    the batches a provisioned one's MaximumPollers carry (holdfast.core.pollers)."""
    if pollers.MAX_KEY in original:
        return pollers.owner_cap(original, dc.LAMBDA_MAX_CONCURRENCY)
    return original.get(KEY)


def in_force(listed: drain_inputs.Listed, drain: dc.Drain) -> int | None:
    """The cap a mapping shows its controller: its MaximumConcurrency, or a provisioned
    one's pollers read back as the cap the drain last wrote when they are its pollers
    (holdfast.core.pollers.shown_cap), so a cap rounded down to pollers is not taken for
    one set by someone else."""
    if listed.pollers is None:
        return listed.cap
    return pollers.shown_cap(listed.pollers, drain.state.history[-1][1] if drain.state else None)


def same_pollers(listed: drain_inputs.Listed, cap: int | None) -> bool:
    """Whether a provisioned mapping already runs the pollers `cap` is written as."""
    return listed.pollers is not None and isinstance(cap, int) and cap >= 1 and pollers.pollers_for(cap) == listed.pollers


def within_functions(steps: dict[str, dc.Step], drains: dict[str, dc.Drain],
                     listed: dict[str, drain_inputs.Listed], now: datetime) -> dict[str, dc.Step]:
    """The steps lowered so one function's mappings together stay within what the function
    carried before the event plus the search's step (holdfast.core.drain.share.allot): the
    function's ConcurrentExecutions is one figure for all its mappings, and each drain
    alone would start from it and probe above it. Mappings of the function that Holdfast
    does not drive count with their cap in force; one without a cap makes the function's
    budget unknowable, and nothing is lowered (said in the step)."""
    by_function: dict[str, list[str]] = {}
    for arn, m in listed.items():
        by_function.setdefault(drain_inputs.function_name(m.function_arn), []).append(arn)
    out: dict[str, dc.Step] = {}
    for function, arns in by_function.items():
        mine = [a for a in arns if a in steps]
        if len(arns) < 2 or not mine:
            continue
        carried = [drains[a].facts.pre_event_concurrency for a in mine]
        if any(c is None for c in carried) or any(listed[a].cap is None for a in arns if a not in steps):
            continue
        stepping = max((drains[a].state.step for a in mine if drains[a].state is not None), default=1)
        for a in mine:
            s = steps[a]
            if s.drain.state is not None:
                stepping = max(stepping, s.drain.state.step)
        budget = sum(carried) + stepping
        wants = [share.Want(a, listed[a].cap, steps[a].cap if a in steps and not steps[a].restore else None)
                 if a in steps else share.Want(a, listed[a].cap, None) for a in arns]
        for arn, cap in share.allot(budget, wants).items():
            out[arn] = _lowered(steps[arn], cap, budget, function, now)
    return out


def _lowered(step: dc.Step, cap: int, budget: float, function: str, now: datetime) -> dc.Step:
    """`step` with its cap lowered to `cap`, in its record too (a probe above it is given up)."""
    why = (f"lowered to {cap}: the mappings of {function} together stay within {budget:g}, what it carried "
           "before the event plus the search's step")
    d = step.drain
    state = d.state
    if state is not None and state.cap == step.cap:
        history = state.history[:-1] + ((state.history[-1][0], cap),)
        probe = state.probe_from is not None and state.probe_from >= cap
        state = replace(state, cap=cap, history=history,
                        **({"probe_at": None, "probe_from": None} if probe else {}))
    reasons = step.reasons + (why,)
    last = None if d.last is None else replace(d.last, cap=cap, reasons=reasons)
    return replace(step, cap=cap, reasons=reasons, drain=replace(d, state=state, last=last))


def baseline_until(plan: policy.Plan, settings) -> tuple[datetime, str]:
    """Where the pre-event window ends, before the consumer's own anomaly is looked for:
    the earliest of the first impairment signal (the signals that made the verdict lie in
    the detector's window before the hold began) and the plan's engagement."""
    since = hold_started(plan)
    return dc.baseline_end({
        "the first impairment signal": since - timedelta(minutes=settings.detect_window_minutes),
        "the plan's engagement": since,
    })


def current_records(ledger: Ledger, plan: policy.Plan,
                    every: dict[str, records.Item] | None = None) -> dict[str, records.Item]:
    """The drain records of this plan's hold, by mapping ARN (older holds' are ignored)."""
    since = hold_started(plan)
    out = {}
    every = records.read_all(ledger, records.DRAIN) if every is None else every
    for arn, item in every.items():
        try:
            drain = dc.Drain.from_dict(item.doc["drain"])
        except (KeyError, ValueError):
            continue
        if since is not None and drain.since == since:
            out[arn] = item
    return out


def stalled(ledger: Ledger, plan: policy.Plan) -> frozenset[str]:
    """Mappings whose drain in this hold is reported stalled and not given back: the
    restore after the drain stage leaves them at the cap last judged safe."""
    out = set()
    for arn, item in current_records(ledger, plan).items():
        d = dc.Drain.from_dict(item.doc["drain"])
        if d.stalled_why and not d.restored:
            out.add(arn)
    return frozenset(out)


def in_drain(ledger: Ledger, plan: policy.Plan) -> frozenset[str]:
    """Mappings whose drain has started in this hold: a walk of the hold's engage again (one
    that did not finish, a mode change, a re-walk) must leave them to their controller —
    re-engaging would put a raised cap back at the floor, or take an owner's original away
    again. A mapping still waiting for its dependency is held like any other: a re-walk
    puts it back at the floor if an IaC apply reset it."""
    return frozenset(arn for arn, item in current_records(ledger, plan).items()
                     if dc.Drain.from_dict(item.doc["drain"]).state is not None)


def decide(runtime, plan: policy.Plan, now: datetime, *, dry_run: bool = False, ledger: Ledger | None = None) -> Decided:
    """Read, decide and record every engaged mapping's step (nothing recorded with dry_run).
    `ledger`: the tick's (holdfast.ledger.store), whose one Query of the resource records the
    walks share (a ledger of its own without one).
    Raises StalePlan (the plan moved on) and LedgerUnavailable."""
    clients, settings = runtime.clients, runtime.settings
    ledger = ledger or runtime.ledger()
    constants = dc.constants_from(settings)
    since = hold_started(plan)
    out = Decided()

    engaged = {r.arn: r for r in ledger.resources().records() if r.kind == KIND}
    out.engaged = set(engaged)
    if not engaged:
        return out
    listed = drain_inputs.mappings(clients)
    shared = share.shares({arn: share.Member(arn, drain_inputs.function_name(m.function_arn), m.queue_arn, m.cap)
                           for arn, m in listed.items()})
    every = records.read_all(ledger, records.DRAIN)
    held = current_records(ledger, plan, every)

    drains: dict[str, dc.Drain] = {}
    versions: dict[str, int] = {}
    fresh: list[drain_inputs.Consumer] = []
    for arn in sorted(engaged):
        if arn not in listed:
            out.notes.append(f"{arn}: not listed (deleted?): the walk forgets it")
            out.targets[arn] = None   # the walk finds it gone and forgets its record
            continue
        item = held.get(arn)
        if item is not None:
            drains[arn] = dc.Drain.from_dict(item.doc["drain"])
            # Whether the mapping publishes its own metrics is the listing's, every tick.
            out.consumers[arn] = replace(drain_inputs.Consumer.from_dict(item.doc["consumer"]),
                                         event_counts=listed[arn].event_counts)
            versions[arn] = item.version
        else:
            c = drain_inputs.consumer(clients, settings, listed[arn])
            out.consumers[arn] = c
            fresh.append(c)
            versions[arn] = every[arn].version if arn in every else 0   # a record of an older hold is overwritten
    if fresh:
        caps = {c.arn: owner_cap(engaged[c.arn].original) for c in fresh}
        until, why = baseline_until(plan, settings)
        facts = drain_inputs.pre_event(clients, fresh, until, why, settings.drain_pre_event_minutes, caps,
                                       shares=shared)
        for c in fresh:
            drains[c.arn] = dc.Drain(since=since, facts=facts[c.arn])

    # The queue's live depth stands in for a missing age only once a drain has started.
    started = {arn for arn, d in drains.items() if d.state is not None}
    wanted = {arn: m for arn, d in drains.items() if (m := d.wanted_minute(constants)) is not None}
    reading = drain_inputs.readings(clients, [out.consumers[a] for a in drains], now,
                                    stale_seconds=constants.stale_seconds, live_for=started, minutes=wanted)
    steps: dict[str, dc.Step] = {}
    for arn, drain in drains.items():
        drain = replace(drain, facts=replace(drain.facts, share=shared[arn].least))
        drains[arn] = drain
        steps[arn] = dc.advance(drain, share.apportion(reading[arn], shared[arn]), in_force(listed[arn], drain), now,
                                constants, fallback=plan.stage == policy.DRAIN)
    steps.update(within_functions(steps, drains, listed, now))
    for arn, step in steps.items():
        drain = drains[arn]
        shown = in_force(listed[arn], drain)
        unchanged = (arn in held and step.action == dc.WAIT and drain.last is not None
                     and (drain.last.action, drain.last.reasons) == (step.action, step.reasons))
        announced = (held[arn].doc.get("stall_announced") if arn in held else None)
        stalled_since = step.drain.stalled_since.isoformat() if step.drain.stalled_since else None
        if stalled_since is not None and announced != stalled_since:
            out.new_stalls.append(arn)   # reported once per stall (the reconciler publishes it)
            announced = stalled_since
        if not dry_run and not unchanged:   # a wait that says what it said is not written again
            doc = {"drain": step.drain.to_dict(), "consumer": out.consumers[arn].to_dict(),
                   "name": f"{out.consumers[arn].function}<-{out.consumers[arn].queue}",
                   "stall_announced": announced}
            try:
                records.write(ledger, records.DRAIN, arn, doc, generation=plan.generation,
                              read_version=versions[arn], controller_id=runtime.controller_id, now=now)
            except Conflict as err:
                out.notes.append(f"{arn}: {err}; acting next tick")
                if arn in out.new_stalls:
                    out.new_stalls.remove(arn)
                continue
        out.steps[arn] = step
        if step.stalled:
            out.stalled[arn] = (step.drain.stalled_since, step.stalled)
        if step.action == dc.WAIT or (not step.restore and (step.cap == shown or same_pollers(listed[arn], step.cap))):
            out.targets[arn] = LEAVE   # nothing to write: no reads for it either
        elif step.restore:
            out.targets[arn] = None
        else:
            out.targets[arn] = {KEY: step.cap}
    logger.info("drain decided", extra={"generation": plan.generation, "actions": out.summary(),
                                        "notes": out.notes[:20]})
    return out
