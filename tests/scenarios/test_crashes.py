"""Crash points (holdfast.reconciler's docstring), one test each, on moto with the real
engine and actuators, so the AWS/ledger write order under test is the shipped one.

A crash is the Lambda dying: `Crash` (a BaseException, so no `except Exception` takes
it) is raised from a botocore hook at one operation's n-th call, before it is sent or
after its answer came back; from then on every call of that tick dies too, as nothing
of a killed process reaches AWS. The next ticks run unhooked and must recover: the tick
completes, every engaged resource has its record on its tag and the same one in the
ledger, nothing is written to a resource twice within the plan generation, each plan
is announced at least once, and after the event is driven to normal every resource
equals its snapshot.

The engine writes with one thread here. A real crash stops every thread at once; a hook
stops only the thread that makes the armed call, so with several writers whether
another thread's write had already passed the hook depended on scheduling (a flake: on a busy machine a second mapping's tag write landed after the "crash"). With
one writer the tick dies exactly at the armed call; the case where another write is in
flight when the process dies is its own test below, made deterministic by arming the
crash after that write.

One fleet (2 of each kind) serves the module: each test starts and ends at normal with
the fleet equal to its snapshot, so a fleet is built once, not per test.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from holdfast.aws import Clients
from holdfast.clock import FakeClock
from holdfast.core.model import ALREADY, ENGAGED, FAILED, KINDS
from holdfast.core.policy import CONTROLLED, NORMAL
from holdfast.engine import Engine
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import leases as ledger_leases
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger.table import ensure_table
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from holdfast_fixtures.moto_patches import aws_semantics
from tests.support import walks
from tests.support.fakes import Crash, Script
from tests.support.harness import T0

SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "lambda_writes_per_second": 15})
SERVICES = ("autoscaling", "lambda", "elbv2", "application-autoscaling", "ecs", "dynamodb",
            "resourcegroupstaggingapi", "sns", "cloudwatch")
MUTATING = ("Create", "Put", "Update", "Delete", "Suspend", "Resume", "Tag", "Untag", "Modify", "Register",
            "AddTags", "RemoveTags", "Publish", "TransactWrite")
# The parameter that names the resource a write goes to, per operation family.
TARGET_KEYS = ("AutoScalingGroupName", "UUID", "FunctionName", "TargetGroupArn", "ResourceARN", "Resource",
               "ResourceId", "TopicArn")


@dataclass
class Point:
    """Where the tick dies: `when` "before" (not sent) or "after" (done, answer lost) the
    `nth` call of `operation` whose parameters satisfy `where`."""

    when: str
    operation: str
    where: Callable[[dict], bool] = lambda _params: True
    nth: int = 1


def target(service: str, params: dict) -> str:
    if service == "dynamodb":
        item = params.get("Item") or params.get("Key") or {}
        return f"{item.get('pk', {}).get('S')}/{item.get('sk', {}).get('S')}"
    if "ResourceArns" in params:
        return params["ResourceArns"][0]
    if service == "autoscaling" and "Tags" in params:
        return params["Tags"][0]["ResourceId"]
    return next((str(params[k]) for k in TARGET_KEYS if k in params), "?")


class Tap:
    """Hooks on every client a tick uses: `done` counts each mutating call that
    completed, by (service:Operation, resource); an armed Point kills the tick."""

    def __init__(self, clients):
        self._lock = threading.Lock()
        self.done: Counter = Counter()
        self.point: Point | None = None
        self.seen = 0
        self.dead = False
        for service in SERVICES:
            events = clients(service).meta.events
            events.register("before-parameter-build", self._params)
            events.register("before-call", self._before)
            events.register("after-call", self._after)

    def arm(self, point: Point) -> None:
        self.point, self.seen, self.dead = point, 0, False

    def disarm(self) -> None:
        self.point, self.dead = None, False

    @property
    def fired(self) -> bool:
        return self.dead

    def _params(self, params, model, context, **_):
        context["tap"] = dict(params)
        point = self.point
        if point and not self.dead and model.name == point.operation and point.where(params):
            with self._lock:
                self.seen += 1
                if self.seen == point.nth:
                    context["tap-crash"] = point.when

    def _before(self, model, context, **_):
        if self.dead or context.get("tap-crash") == "before":
            self.dead = True
            raise Crash(f"died before {model.name}")

    def _after(self, model, context, http_response, **_):
        if http_response.status_code < 300 and model.name.startswith(MUTATING):
            service = model.service_model.service_name
            with self._lock:
                self.done[(f"{service}:{model.name}", target(service, context.get("tap", {})))] += 1
        if context.get("tap-crash") == "after":
            self.dead = True
            raise Crash(f"died after {model.name}")

    def resource_writes(self, since: Counter) -> Counter:
        """Completed writes to resources (the ledger's and SNS's excluded) since `since`."""
        return Counter({k: n for k, n in (self.done - since).items()
                        if not k[0].startswith(("dynamodb:", "sns:"))})


class Event:
    """The shared fleet, ledger, topic, clock and verdict; ticks and checks."""

    def __init__(self):
        self.clients = Clients(region="us-east-1")
        ensure_table(self.clients("dynamodb"), DEFAULT_TABLE)
        self.table = DEFAULT_TABLE
        self.fleet = build_fleet(self.clients, asgs=2, esms=2, asyncs=2, nlbs=2, services=2, workers=1)
        self.before = snapshot(self.clients, self.fleet)
        self.topic = self.clients("sns").create_topic(Name="holdfast")["TopicArn"]
        self.clock, self.script = FakeClock(T0), Script()
        self.tap = Tap(self.clients)

    def tick(self, controller: str = "solo"):
        return tick(Runtime(self.clients, SETTINGS, self.table, self.clock, controller_id=controller, topic_arn=self.topic),
                    collect=self.script.collect, engine=lambda rt, deadline: Engine(rt, deadline=deadline, writers=1))

    def crash(self, point: Point, *, minutes: float = 11, limit: int = 12):
        """Tick (a verdict already set) until the tick dies at `point`; that tick's clock."""
        self.tap.arm(point)
        try:
            for _ in range(limit):
                try:
                    self.tick()
                except Crash:
                    return
                self.clock.advance(minutes * 60)
            raise AssertionError(f"never reached {point}")
        finally:
            self.tap.disarm()

    def impaired(self) -> None:
        self.clock.advance(60)
        self.script.set("impaired", self.clock.now())

    def recovering(self) -> None:
        self.clock.advance(60)
        self.script.set("recovering", self.clock.now())

    def plan(self):
        return ledger_plan.read(Ledger(self.clients("dynamodb"), self.table))

    def item(self) -> dict:
        return ledger_plan.read_item(Ledger(self.clients("dynamodb"), self.table))

    def records(self) -> tuple[dict, dict]:
        """(records on tags, records in the ledger): ARN -> (original, applied)."""
        ledger = ResourceLedger(Ledger(self.clients("dynamodb"), self.table))
        tags = {r.arn: (r.record.original, r.record.applied)
                for act in walks.actuators(self.clients, SETTINGS, ledger).values()
                for r in act.discover() if r.record is not None}
        return tags, {r.arn: (r.original, r.applied) for r in ledger.records()}

    def assert_records_agree(self) -> None:
        tags, ledger = self.records()
        assert tags == ledger, "a record on a tag and its copy in the ledger differ (or one is missing)"

    def published(self) -> int:
        return sum(n for (op, _), n in self.tap.done.items() if op == "sns:Publish")

    def to_normal(self, limit: int = 20) -> None:
        """Recover and tick until normal; every tick completes; the fleet is as before."""
        if self.script.state != "recovering":
            self.recovering()
        for _ in range(limit):
            self.clock.advance(11 * 60)
            result = self.tick()
            assert result.complete and not result.count(FAILED), result.outcomes
            if result.stage == NORMAL and self.plan().done == frozenset():
                break
        else:
            raise AssertionError(f"never reached normal; at {self.plan()}")
        assert snapshot(self.clients, self.fleet) == self.before
        assert self.records() == ({}, {})
        assert self.item()["notified"]["BOOL"]


class Shared:
    """One fleet for the module, rebuilt from scratch when a test left it changed: a test
    that fails midway must not make the tests after it fail too."""

    def __init__(self):
        self._stack: ExitStack | None = None
        self.event: Event | None = None

    def clean(self) -> Event:
        ev = self.event
        if ev is None or snapshot(ev.clients, ev.fleet) != ev.before or ev.records() != ({}, {}) or \
                (ev.plan() is not None and ev.plan().stage != NORMAL):
            self.close()
            self._stack = ExitStack()
            self._stack.enter_context(mock_aws())
            self._stack.enter_context(aws_semantics())
            self.event = ev = Event()
        ev.tap.disarm()
        return ev

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self.event = None


@pytest.fixture(scope="module")
def shared():
    holder = Shared()
    yield holder
    holder.close()


@pytest.fixture
def event(shared):
    """An event at normal with the fleet equal to its snapshot: the module's one, unless an
    earlier test left it otherwise, then a new one."""
    return shared.clean()


# The engage walks' done marks of a hold: a controlled kind's is `<kind>/engaged` (the kind
# itself is done only once every mapping is back at its owner's value).
ENGAGED_MARKS = (set(KINDS) - CONTROLLED) | {f"{k}/engaged" for k in CONTROLLED}


def engaged_fully(ev: Event) -> None:
    """Tick, impaired, until every kind's engage walk is done; each tick completes."""
    for _ in range(5):
        result = ev.tick()
        assert not result.count(FAILED)
        if ev.plan().done >= ENGAGED_MARKS:
            return
        ev.clock.advance(60)
    raise AssertionError(f"engage never finished: {ev.plan()}")


def resource_put(params: dict) -> bool:
    return params.get("Item", {}).get("pk", {}).get("S") == "RES"


def resource_delete(params: dict) -> bool:
    return params.get("Key", {}).get("pk", {}).get("S") == "RES"


def plan_write(params: dict) -> bool:
    return "Put" in params["TransactItems"][0]


def guard_write(params: dict) -> bool:
    items = params["TransactItems"]
    return "ConditionCheck" in items[0] and items[1]["Put"]["Item"]["sk"]["S"].startswith("LEASE#")


def mark_done(params: dict) -> bool:
    return params.get("UpdateExpression", "").startswith("ADD done")


# ---- the plan and its announcement -----------------------------------------------------


def test_before_the_plan_write_nothing_was_persisted_and_the_next_tick_decides_again(event):
    generation = event.plan().generation if event.plan() else 0
    event.impaired()
    event.crash(Point("before", "TransactWriteItems", plan_write))
    assert (event.plan().generation if event.plan() else 0) == generation
    assert snapshot(event.clients, event.fleet) == event.before
    start = Counter(event.tap.done)
    engaged_fully(event)
    assert event.plan().generation == generation + 1 and event.published() >= 1
    assert max(event.tap.resource_writes(start).values()) == 1
    event.assert_records_agree()
    event.to_normal()


def test_after_the_plan_write_the_next_tick_announces_it(event):
    generation = event.plan().generation if event.plan() else 0
    published = event.published()
    event.impaired()
    event.crash(Point("after", "TransactWriteItems", plan_write))
    assert event.plan().generation == generation + 1 and not event.item()["notified"]["BOOL"]
    assert event.published() == published
    engaged_fully(event)
    assert event.plan().generation == generation + 1, "the plan was decided again instead of announced"
    assert event.published() == published + 1 and event.item()["notified"]["BOOL"]
    event.assert_records_agree()
    event.to_normal()


def test_after_the_publish_before_it_is_marked_the_next_tick_announces_again(event):
    published = event.published()
    event.impaired()
    event.crash(Point("after", "Publish"))
    assert event.published() == published + 1 and not event.item()["notified"]["BOOL"]
    engaged_fully(event)
    assert event.published() == published + 2 and event.item()["notified"]["BOOL"]  # at least once
    event.to_normal()


# ---- an engage walk: tag -> ledger -> resource (a mapping: ledger -> resource -> tag) ------


def mapping_tag(params: dict) -> bool:
    return params.get("Resource", "").split(":")[5] == "event-source-mapping"


ENGAGE_POINTS = {
    "after the tag, before the ledger": Point("after", "CreateOrUpdateTags"),
    "after the ledger, before the AWS write": Point("before", "UpdateEventSourceMapping"),
    "after a mapping's ledger record and cap, before its deferred tag": Point("before", "TagResource", mapping_tag),
    "after the ledger (2nd resource of a later kind), before the AWS write": Point("before", "ModifyTargetGroupAttributes", nth=2),
    "after the AWS write": Point("after", "SuspendProcesses"),
}


@pytest.mark.parametrize("point", ENGAGE_POINTS.values(), ids=ENGAGE_POINTS.keys())
def test_a_crash_in_an_engage_walk_is_finished_by_the_next_tick(event, point):
    event.impaired()
    start = Counter(event.tap.done)
    event.crash(point)
    tags, ledger = event.records()
    # Write-ahead: the tag first, but for a mapping while the ledger answers (its record
    # there first, its tag in the walk's second pass); nothing changed without a record.
    assert {a for a in set(ledger) - set(tags) if ":event-source-mapping:" not in a} == set(), \
        "a ledger record without its tag: the tag is written first"
    current = snapshot(event.clients, event.fleet)
    changed = {a for a in current if _settings(current[a]) != _settings(event.before[a])}
    assert changed <= set(tags) | set(ledger), "a resource changed with no record of its original"
    engaged_fully(event)
    writes = event.tap.resource_writes(start)
    assert max(writes.values()) == 1, [k for k, n in writes.items() if n > 1]
    event.assert_records_agree()
    selected = set(sum(event.fleet.selected.values(), []))
    assert set(event.records()[0]) | already_in_posture(event) == selected
    event.to_normal()


def _mapping_caps(ev: Event) -> dict[str, int | None]:
    lam = ev.clients("lambda")
    return {arn: (lam.get_event_source_mapping(UUID=ev.fleet.handles[arn]).get("ScalingConfig") or {}).get(
        "MaximumConcurrency") for arn in ev.fleet.selected["esm"]}


def test_a_crash_before_a_mappings_deferred_tag_restores_from_the_ledger_and_a_later_tick_tags_it(event):
    """The mappings' write-ahead is the ledger's record while it answers, their tags the
    walk's second pass: a tick that dies between the two leaves capped mappings recorded in
    the ledger only. A restore then works from that record alone, and the next engage
    tick writes the missing tags without writing any cap again."""
    event.impaired()
    event.crash(Point("before", "TagResource", mapping_tag))
    tags, ledger = event.records()
    capped = {a for a, cap in _mapping_caps(event).items() if cap == SETTINGS.esm_floor}
    recorded_in_ledger_only = {a for a in capped if a in ledger and a not in tags}
    assert recorded_in_ledger_only, "the crash point is after a mapping's ledger record and cap, before its tag"
    # A restore now has only the ledger's record of those mappings: it is enough.
    walks.relax_all(event.clients, SETTINGS, event.table, kinds=("esm",), writers=1)
    after = snapshot(event.clients, event.fleet)
    assert all(after[a] == event.before[a] for a in event.fleet.selected["esm"])
    assert not set(event.records()[1]) & set(event.fleet.selected["esm"])
    # Engaged again: the next ticks cap and tag every mapping, each once since the crash.
    event.clock.advance(60)
    engaged_fully(event)
    event.assert_records_agree()
    assert set(event.fleet.selected["esm"]) <= set(event.records()[0]) | already_in_posture(event)
    event.to_normal()


def test_after_a_crash_before_a_mappings_deferred_tag_the_next_tick_writes_it_and_nothing_twice(event):
    event.impaired()
    event.crash(Point("before", "TagResource", mapping_tag))
    tags, ledger = event.records()
    untagged = {a for a in ledger if ":event-source-mapping:" in a and a not in tags}
    assert untagged
    start = Counter(event.tap.done)
    engaged_fully(event)
    writes = event.tap.resource_writes(start)
    uuids = {a.rsplit(":", 1)[1] for a in untagged}   # UpdateEventSourceMapping names its mapping by UUID
    assert {k[1] for k in writes if k[0] == "lambda:UpdateEventSourceMapping"}.isdisjoint(uuids), \
        "a capped mapping was capped again"
    assert {k[1] for k in writes if k[0] == "lambda:TagResource"} >= untagged
    event.assert_records_agree()
    event.to_normal()


def _settings(state: dict | None) -> dict | None:
    """A snapshot entry without its tags: what Holdfast changes when it engages."""
    return None if state is None else {k: v for k, v in state.items() if k != "Tags"}


def already_in_posture(ev: Event) -> set[str]:
    """Selected resources whose owner settings are already Holdfast's posture (no record)."""
    ledger = ResourceLedger(Ledger(ev.clients("dynamodb"), ev.table))
    return {r.arn for act in walks.actuators(ev.clients, SETTINGS, ledger).values()
            for r in act.discover() if r.record is None and act.plan(r).action == ALREADY}


# ---- a relax: guard, resource -> guard, untag -> guard, forget ----------------------------

RELAX_POINTS = {
    "after the AWS write, before untag": Point("after", "ModifyTargetGroupAttributes"),
    "after untag, before forgetting the ledger record": Point("before", "DeleteItem", resource_delete),
    "after a guard's lease write, before the AWS write it guarded": Point("after", "TransactWriteItems", guard_write, nth=3),
}


@pytest.mark.parametrize("point", RELAX_POINTS.values(), ids=RELAX_POINTS.keys())
def test_a_crash_in_a_relax_is_finished_by_the_next_tick(event, point):
    event.impaired()
    engaged_fully(event)
    event.recovering()
    event.crash(point)
    generation = event.plan().generation
    start = Counter(event.tap.done)
    event.clock.advance(60)
    result = event.tick()
    assert event.plan().generation == generation, "the recovering tick must run under the crashed tick's plan"
    assert result.complete and not result.count(FAILED), result.outcomes
    writes = event.tap.resource_writes(start)
    assert max(writes.values(), default=1) == 1
    event.to_normal()


def test_a_lease_left_by_a_crash_only_delays_another_controllers_done_mark(event):
    event.impaired()
    engaged_fully(event)
    event.recovering()
    event.crash(Point("after", "TransactWriteItems", guard_write))
    relaxed_under = event.plan().generation
    event.clock.advance(10)  # within LEASE_SECONDS of the lease
    event.script.set("impaired", event.clock.now())
    first = event.tick("other")
    assert event.plan().generation == relaxed_under + 1 and not first.complete
    assert not ENGAGED_MARKS & event.plan().done
    event.clock.advance(ledger_leases.LEASE_SECONDS)
    engaged = event.tick("other")
    assert engaged.complete and event.plan().done >= ENGAGED_MARKS
    event.assert_records_agree()
    event.to_normal()


def test_a_raise_grows_the_ledger_first_so_a_tag_write_landing_as_the_tick_dies_still_agrees(event):
    """The crash-timing flake, closed for the drain's controller. Its caps are decided as it
    goes, so a raise to a cap not recorded yet grows the record: the ledger's copy first,
    then the tag, then the cap (TaggedActuator._raise). A tick that dies right after the
    tag write landed leaves both copies holding the new cap; a new impairment's re-engage
    and the restore find them agreeing, and the event restores exactly."""
    event.impaired()
    engaged_fully(event)
    start = Counter(event.tap.done)
    event.tap.arm(Point("after", "TagResource", lambda params: params.get("Resource", "").split(":")[5] == "event-source-mapping"))
    try:
        with pytest.raises(Crash):
            # One writer: the crash stops only the thread that made the armed call, and a
            # second writer's raise may have grown the ledger before its own tag write
            # (ledger first, by design: a record that holds more than the tag is safe).
            walks.relax_all(event.clients, SETTINGS, event.table, kinds=("esm",),
                            target_for=lambda _r: {"MaximumConcurrency": 7}, writers=1)
    finally:
        event.tap.disarm()
    tagged = [k for k in event.tap.resource_writes(start) if k[0] == "lambda:TagResource"]
    assert tagged and not [k for k in event.tap.resource_writes(start) if k[0] == "lambda:UpdateEventSourceMapping"]
    event.assert_records_agree()
    event.clock.advance(10)
    event.script.set("impaired", event.clock.now())
    event.tick()
    event.clock.advance(ledger_leases.LEASE_SECONDS)
    engaged_fully(event)
    event.assert_records_agree()
    event.to_normal()


# ---- progress ---------------------------------------------------------------------------


def test_after_a_walk_before_mark_done_the_next_tick_walks_again_and_writes_nothing(event):
    event.impaired()
    event.crash(Point("before", "UpdateItem", mark_done, nth=2))
    done = event.plan().done
    assert len(done) == 1
    start = Counter(event.tap.done)
    result = event.tick()
    walked_again = {o.kind for o in result.outcomes} - done
    assert walked_again >= set(KINDS) - done
    second = KINDS[1] if KINDS[0] in done else KINDS[0]
    assert not [k for k in event.tap.resource_writes(start) if k[1] in event.fleet.selected[second]]
    assert not [o for o in result.outcomes if o.kind == second and o.action == ENGAGED]
    event.assert_records_agree()
    event.to_normal()


# ---- the ledger unreachable -------------------------------------------------------------

OUTAGES = {
    "an error answer": lambda: ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, "op"),
    "no connection": lambda: EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com/"),
}


@pytest.mark.parametrize("outage", [
    OUTAGES["an error answer"],
    OUTAGES["no connection"],
], ids=OUTAGES.keys())
def test_with_the_ledger_unreachable_engaging_proceeds_and_nothing_is_relaxed(event, outage):
    def down(**_):
        raise outage()

    dynamodb = event.clients("dynamodb").meta.events
    event.impaired()
    engaged_fully(event)
    event.recovering()
    event.clock.advance(11 * 60)
    before_outage = snapshot(event.clients, event.fleet)
    dynamodb.register_first("before-call", down)
    try:
        result = event.tick()
        assert "ledger-unavailable" in result.actions and not result.count(FAILED)
        assert snapshot(event.clients, event.fleet) == before_outage, "relaxed without a plan"
        event.impaired()
        result = event.tick()
        assert "engaged-without-ledger" in result.actions and not result.count(FAILED)
    finally:
        dynamodb.unregister("before-call", down)
    assert snapshot(event.clients, event.fleet) == before_outage  # already in posture: nothing to add
    event.clock.advance(60)
    assert event.tick().complete
    event.to_normal()
