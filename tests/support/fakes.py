"""Doubles for the race tests: a scripted verdict, an in-memory engine that keeps the
engine interface (holdfast.engine.Engine: engage, relax), and a stepper that runs a controller's tick in a
thread and lets it pass one AWS call at a time.

Why an in-memory engine here: the race tests are about the plan ledger and the guard,
which stay real (DynamoDB on moto). Resources as plain values let a hypothesis run
check every invariant after every single call, thousands of times, in seconds; the
real engine and actuators are exercised against moto in test_event.py.

Every resource is one integer setting. Engaged posture: ESM caps at the settings'
floor; every other kind at 0 (owners use values >= 10). A record (original,
applied) is written before the first change (write-ahead), exactly as actuators do.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from holdfast.core import policy
from holdfast.core.detector import Verdict
from holdfast.core.model import (
    ALREADY,
    DRIFT_KEPT,
    ENGAGED,
    KINDS,
    LEAVE,
    PLANNED,
    RAISED,
    REFUSED_STALE,
    RESTORED,
    Outcome,
    StalePlan,
    no_guard,
)
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan


class Crash(BaseException):
    """The Lambda died here (BaseException: no `except Exception` in the code swallows it)."""


@dataclass
class Script:
    """The verdict every controller's collect() returns."""

    state: str = "normal"
    since: datetime | None = None
    last_capacity_failure: datetime | None = None
    last_successful_launch: datetime | None = None

    def set(self, state: str, now: datetime) -> None:
        if state != self.state:
            self.state, self.since = state, now
        if state == "impaired":
            self.last_capacity_failure = now
        else:
            self.last_successful_launch = now

    def collect(self, runtime, now, previous) -> Verdict:
        clients = runtime.clients
        gate = getattr(clients, "gate", None)
        if gate:
            gate()
        return Verdict(self.state, self.since or now, (f"scripted {self.state}",), self.last_capacity_failure, self.last_successful_launch)


@dataclass
class Res:
    kind: str
    value: int | None          # None: an ESM without a cap
    true_original: int | None  # what the owner wants back (updated by owner changes)
    record: dict[str, Any] | None = None


class World:
    """The resources, the write log, and the invariant checks."""

    def __init__(self, settings, dynamodb, table: str, per_kind: int = 2):
        self.settings, self.dynamodb, self.table = settings, dynamodb, table
        self.lock = threading.RLock()
        self.resources: dict[str, Res] = {}
        for kind in KINDS:
            for i in range(per_kind):
                original = (None if i % 2 else 50) if kind == "esm" else 10 + i
                self.resources[f"arn:{kind}:{i}"] = Res(kind, original, original)
        self.writes: list[tuple[str, str, Any]] = []   # (arn, verb, value)
        self.violations: list[str] = []

    def engaged_value(self, kind: str, current: int | None) -> int:
        if kind == "esm":
            return self.settings.esm_floor if current is None else min(current, self.settings.esm_floor)
        return 0

    def owner_change(self, arn: str, value: int) -> None:
        with self.lock:
            r = self.resources[arn]
            r.value = value
            r.true_original = value

    # ---- invariants: write-ahead, monotone, fresh plan, nothing in use deleted ---------------------------------------------------

    def check(self) -> list[str]:
        """Invariants that hold after every step; returns the violations found."""
        with self.lock:
            bad = list(self.violations)
            for arn, r in self.resources.items():
                if r.value != r.true_original and r.record is None:
                    bad.append(f"{arn}: changed to {r.value} but no original recorded (write-ahead)")
                if r.record and r.record["original"] != r.true_original and r.value == r.record["applied"]:
                    bad.append(f"{arn}: recorded original {r.record['original']} != owner's {r.true_original}")
                if r.kind == "esm" and r.value is not None and r.value < 1:
                    bad.append(f"{arn}: cap emptied")
        return bad

    def plan_now(self):
        return ledger_plan.read(Ledger(self.dynamodb, self.table))

    def relaxing_allowed(self, kind: str) -> bool:
        """Relaxing needs a fresh plan, checked at the moment of the write: the plan in force relaxes this kind."""
        plan = self.plan_now()
        return plan is not None and policy.posture(plan, self.settings).get(kind, policy.ENGAGE) != policy.ENGAGE


class FakeEngine:
    """engage_all / relax_all over a World. `gate(clients)` is called before every write."""

    def __init__(self, world: World):
        self.world = world
        self.mutations = 0
        # thread name -> (paused, resume): that thread stops just before its next relaxing write
        self.pause_before_relax: dict[str, tuple[threading.Event, threading.Event]] = {}
        # threads that reached a relaxing write and have not written yet (their guard is next)
        self.poised: set[str] = set()

    def _pause_point(self) -> None:
        self.poised.add(threading.current_thread().name)
        events = self.pause_before_relax.pop(threading.current_thread().name, None)
        if events:
            paused, resume = events
            paused.set()
            resume.wait(timeout=20)

    def _gate(self, clients) -> None:
        gate = getattr(clients, "gate", None)
        if gate:
            gate()

    def __call__(self, runtime, deadline=None) -> "_Bound":
        """The tick's engine factory: this world, walked with the tick's clients and deadline."""
        return _Bound(self, runtime.clients, deadline)

    def engage_all(self, clients, settings, table, *, kinds=KINDS, dry_run=False, progress=None, deadline=None,
                   skip=frozenset(), **_):
        report = _Report()
        w = self.world
        for arn, r in sorted(w.resources.items()):
            if r.kind not in kinds or arn in skip:
                continue
            if deadline and deadline():
                report.complete, report.unfinished = False, set(kinds)
                break
            with w.lock:
                posture = w.engaged_value(r.kind, r.value)
                in_posture = r.value == posture or (r.kind == "esm" and r.value is not None and r.value <= posture)
                # An owner change while engaged is the owner's decision: kept, never re-engaged.
                drifted = r.record is not None and r.value != r.record["applied"]
                if in_posture or drifted:
                    report.outcomes.append(Outcome(r.kind, arn, ALREADY))
                    continue
            if dry_run:
                report.outcomes.append(Outcome(r.kind, arn, PLANNED))
                continue
            self._gate(clients)
            with w.lock:
                if r.record is None:  # write-ahead
                    r.record = {"original": r.value, "applied": posture}
                    w.writes.append((arn, "record", r.value))
            self._gate(clients)
            with w.lock:
                if r.kind == "esm" and r.value is not None and posture > r.value:
                    w.violations.append(f"{arn}: engage raised the cap (protection is monotone)")
                r.value = posture
                r.record["applied"] = posture
                w.writes.append((arn, "engage", posture))
                self.mutations += 1
            report.outcomes.append(Outcome(r.kind, arn, ENGAGED))
        return report

    def relax_all(self, clients, settings, table, *, kinds=KINDS, target_for=None, guard=no_guard, progress=None, deadline=None, **_):
        report = _Report()
        w = self.world
        for arn, r in sorted(w.resources.items()):
            if r.kind not in kinds or r.record is None:
                continue
            if deadline and deadline():
                report.complete, report.unfinished = False, set(kinds)
                break
            target = target_for(arn) if target_for else None
            if target == LEAVE:
                report.outcomes.append(Outcome(r.kind, arn, ALREADY))
                continue
            try:
                report.outcomes.append(self._relax(clients, arn, r, target, guard))
            except StalePlan as err:
                report.outcomes.append(Outcome(r.kind, arn, REFUSED_STALE, error=str(err)))
        return report

    def _relax(self, clients, arn, r: Res, target, guard) -> Outcome:
        w = self.world
        if target is not None:
            cap = target["MaximumConcurrency"]
            original = r.record["original"]
            new = cap if original is None else min(cap, original)
            if r.value != r.record["applied"] or r.value == new or (r.value is not None and r.value >= new):
                return Outcome(r.kind, arn, ALREADY)
            self._pause_point()
            self._gate(clients)
            guard()
            self._write(arn, r, new, "raise")
            with w.lock:
                r.record["applied"] = new
            return Outcome(r.kind, arn, RAISED)
        drifted = r.value != r.record["applied"]
        original = r.record["original"]   # read before the guard, as an actuator reads it
        if not drifted and r.value != original:
            self._pause_point()
            self._gate(clients)
            guard()
            self._write(arn, r, original, "restore")
        self._gate(clients)
        guard()
        with w.lock:
            if r.record is None:   # another controller forgot it meanwhile (deleting twice is harmless)
                return Outcome(r.kind, arn, DRIFT_KEPT if drifted else RESTORED)
            if w.relaxing_allowed(r.kind) is False:
                w.violations.append(f"{arn}: record forgotten under a plan that holds {r.kind} (in use)")
            r.record = None
            w.writes.append((arn, "forget", None))
        return Outcome(r.kind, arn, DRIFT_KEPT if drifted else RESTORED)

    def _write(self, arn, r: Res, value, verb) -> None:
        self.poised.discard(threading.current_thread().name)
        w = self.world
        with w.lock:
            if not w.relaxing_allowed(r.kind):
                w.violations.append(f"{arn}: {verb} to {value} under a plan that holds {r.kind} (stale plan)")
            r.value = value
            w.writes.append((arn, verb, value))
            self.mutations += 1


@dataclass
class _Report:
    outcomes: list[Outcome] = field(default_factory=list)
    ledger_available: bool = True
    api_calls: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    refused: str | None = None
    cursor: dict[str, str | None] = field(default_factory=dict)   # this fake never resumes
    seen: dict[str, set[str]] = field(default_factory=dict)         # nor skips what a walk saw
    unfinished: set[str] = field(default_factory=set)               # the deadline cut every kind it walked
    refused_kinds: set[str] = field(default_factory=set)

    @property
    def failed(self):
        return [o for o in self.outcomes if o.action == "failed"]


class Stepper:
    """Runs `body()` in a thread that stops at every gate() until step() lets it pass.

    step() starts the body if idle, else lets it pass one gate, then waits until it is
    at its next gate or finished. step(crash=True) makes the pending gate raise Crash.
    """

    def __init__(self, name: str, body: Callable[[], Any]):
        self.name, self.body = name, body
        self.cv = threading.Condition()
        self.state = "idle"   # idle | running | waiting
        self.permits = 0
        self.crash_next = False
        self.error: BaseException | None = None
        self.results: list[Any] = []
        self.crashes = 0

    def gate(self) -> None:
        if threading.current_thread().name != self.name:
            return
        with self.cv:
            self.state = "waiting"
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.permits > 0)
            self.permits -= 1
            self.state = "running"
            if self.crash_next:
                self.crash_next = False
                raise Crash(self.name)

    def _run(self) -> None:
        try:
            self.results.append(self.body())
        except Crash:
            self.crashes += 1
        except BaseException as err:  # surfaced by step()
            self.error = err
        finally:
            with self.cv:
                self.state = "idle"
                self.cv.notify_all()

    def step(self, *, crash: bool = False) -> None:
        with self.cv:
            if self.state == "idle":
                if crash:
                    return
                self.state = "running"
                threading.Thread(target=self._run, name=self.name, daemon=True).start()
            else:
                self.crash_next = crash
                self.permits += 1
                self.cv.notify_all()
            if not self.cv.wait_for(lambda: self.permits == 0 and self.state != "running", timeout=30):
                raise TimeoutError(f"{self.name} neither reached a gate nor finished")
        if self.error:
            raise self.error

    def finish(self) -> None:
        while self.state != "idle":
            self.step()


class _Bound:
    """A FakeEngine as one tick sees it (the interface of holdfast.engine.Engine)."""

    def __init__(self, fake: FakeEngine, clients, deadline):
        self.fake, self.clients, self.deadline = fake, clients, deadline
        self.actuators = dict.fromkeys(KINDS)   # the kinds this engine serves

    def engage(self, *, kinds=KINDS, dry_run=False, after=None, stuck=(), seen=None, skip=frozenset()):
        return self.fake.engage_all(self.clients, None, None, kinds=kinds or KINDS, dry_run=dry_run, deadline=self.deadline,
                                    skip=skip)

    def engage_as_listed(self, *, kinds=KINDS, dry_run=False, after=None, stuck=(), seen=None, skip=frozenset(),
                         count_together=False):
        return self.engage(kinds=kinds, dry_run=dry_run, after=after, stuck=stuck, seen=seen, skip=skip)

    def relax(self, *, kinds=KINDS, target_for=None, guard=no_guard, only=None):
        return self.fake.relax_all(self.clients, None, None, kinds=kinds or KINDS, target_for=target_for, guard=guard,
                                   deadline=self.deadline)


class FakeStages:
    """The drain and the replay for the in-memory world. The plan, its guards and the walk
    are what these tests are about; the controller's decisions are tested in tests/core/drain
    and the real drain on moto in tests/stages. Here each controlled mapping waits for
    `wait_ticks` drain ticks, then gets its owner's original back (a full, guarded restore),
    and there is nothing to replay."""

    def __init__(self, wait_ticks: int = 0):
        self.wait_ticks = wait_ticks
        self.drain_ticks = 0
        self.replays = 0

    def drain(self, runtime, plan, now, *, dry_run):
        self.drain_ticks += 1
        restore = self.drain_ticks > self.wait_ticks
        return _Decided(None if restore else LEAVE)

    def in_drain(self, runtime, plan):
        return frozenset()

    def replay(self, runtime, plan, now, *, guard, dry_run):
        self.replays += 1
        return _Replayed()

    def capacity(self, runtime, plan, now, *, engine, guard, stuck=frozenset()):
        """Every group at once, as one guarded relax walk (the waves are tested on moto in
        tests/stages/test_capacity_stage.py)."""
        report = engine.relax(kinds=("asg",), guard=guard)
        return _Waved(report.outcomes, report.complete)


@dataclass
class _Waved:
    outcomes: list
    complete: bool
    notes: list = field(default_factory=list)

    @property
    def finished(self):
        return self.complete

    @property
    def step(self):
        from holdfast.core.capacity import Step, Waves
        return Step(Waves(0, 0), finished=self.finished)

    def summary(self):
        return {"wave": None, "finished": self.finished}


@dataclass
class _Decided:
    target: Any
    notes: list = field(default_factory=list)
    stalled: dict = field(default_factory=dict)      # none stalled
    new_stalls: list = field(default_factory=list)

    def target_for(self, _resource):
        return self.target

    def moving(self):
        return [] if self.target == LEAVE else ["every engaged mapping"]   # the fake walk ignores `only`

    @property
    def finished(self):
        return self.target is None

    def summary(self):
        return {"restore" if self.target is None else "wait": 1}


@dataclass
class _Replayed:
    outcomes: list = field(default_factory=list)
    finished: bool = True

    def summary(self):
        return {}
