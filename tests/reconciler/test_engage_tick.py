"""Time to safe posture in the controller: one tick walks every engaging
kind in one engine call (services at once), keeps walking while it engages and has Lambda
time (`tick(engage_seconds=)`), claims that long walk so the schedule's overlapping ticks
leave it alone, and stops it when the plan moves on. Relaxing keeps the short budget."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

from holdfast.clock import FakeClock
from holdfast.core.model import ENGAGED, KINDS, Outcome
from holdfast.engine import Engine, Report
from holdfast.handlers import reconciler as handler_module
from holdfast.ledger import Ledger
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler import PLAN_CHECK_SECONDS, TickDeadline, tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet
from tests.scenarios.test_event import ENGAGED_MARKS, SETTINGS
from tests.support.fakes import Script
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)
from tests.support.harness import T0

SHORT = Settings.from_mapping({**SETTINGS.to_mapping(), "tick_budget_seconds": 10})


class Spy:
    """The real engine, with every engage walk's kinds recorded."""

    def __init__(self):
        self.engages: list[tuple[str, ...]] = []

    def __call__(self, runtime, deadline):
        engine = Engine(runtime, deadline=deadline, writers=1)
        real = engine.engage_as_listed

        def engage(*, kinds=None, **options):
            self.engages.append(tuple(kinds) if kinds is not None else tuple(engine.actuators))
            return real(kinds=kinds, **options)

        engine.engage_as_listed = engage
        return engine


def _slow_calls(clients, clock: FakeClock, seconds: float) -> None:
    """Every AWS call moves the fake clock: a tick's budget is spent after so many calls."""
    for service in ("autoscaling", "lambda", "elbv2", "application-autoscaling", "dynamodb", "resourcegroupstaggingapi"):
        clients(service).meta.events.register("before-call", lambda **_: clock.advance(seconds))


def test_a_tick_walks_every_engaging_kind_in_one_engine_call(clients, ledger_table, aws_semantics):
    build_fleet(clients, asgs=2, esms=2, asyncs=2, nlbs=2, services=2, unselected=0, workers=1)
    clock, script, spy = FakeClock(T0), Script(), Spy()
    script.set("impaired", clock.now())
    result = tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo"), collect=script.collect,
                  engine=spy)
    # One call: the engine walks Auto Scaling, ELB and Application Auto Scaling beside Lambda.
    assert spy.engages == [tuple(KINDS)]
    assert result.complete and ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done >= ENGAGED_MARKS
    assert {o.kind for o in result.outcomes if o.action == ENGAGED} == set(KINDS)


class CutEngine:
    """An engine whose engage walk finished every kind but `cut` (the deadline stopped it after `at`)."""

    def __init__(self, cut: str, at: str):
        self.cut, self.at = cut, at
        self.calls: list[dict] = []
        self.actuators = dict.fromkeys(KINDS)

    def __call__(self, runtime, deadline):
        return self

    def engage_as_listed(self, *, kinds, after=None, **options):
        self.calls.append({"kinds": tuple(kinds), "after": dict(after or {})})
        report = Report(complete=False, unfinished={self.cut})
        for kind in kinds:
            report.outcomes.append(Outcome(kind, f"arn:{kind}:0", ENGAGED))
            report.api_calls[kind] = 2
            report.cursor[kind] = self.at if kind == self.cut else None
            report.seen[kind] = {f"arn:{kind}:0"}
        return report

    engage = engage_as_listed

    def relax(self, **_):
        return Report()


def test_each_kind_of_one_walk_is_finished_on_its_own_marker(clients, ledger_table):
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    engine = CutEngine("async", "arn:async:0")
    runtime = Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo")
    first = tick(runtime, collect=script.collect, engine=engine)
    plan = ledger_plan.read(Ledger(clients("dynamodb"), ledger_table))
    assert not first.complete
    # The kinds the deadline did not cut are done; the cut one keeps its cursor.
    assert plan.done >= {"asg", "esm/engaged", "nlb", "scalable-target"} and "async" not in plan.done
    assert plan.cursor == {"async": "arn:async:0"}
    clock.advance(60)
    tick(runtime, collect=script.collect, engine=engine)
    assert engine.calls[-1] == {"kinds": ("async",), "after": {"async": "arn:async:0"}}


def test_an_engaging_tick_keeps_walking_past_the_tick_budget_while_it_has_time(clients, ledger_table, aws_semantics):
    build_fleet(clients, asgs=6, esms=6, asyncs=6, nlbs=6, services=6, unselected=0, workers=1)
    clock, script = FakeClock(T0), Script()
    _slow_calls(clients, clock, 0.5)   # the 10 s budget is 20 calls: far from the fleet's
    script.set("impaired", clock.now())
    runtime = Runtime(clients, SHORT, ledger_table, clock, controller_id="solo")
    short = tick(runtime, collect=script.collect)
    assert not short.complete and not ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done >= ENGAGED_MARKS

    clock.advance(60)
    long = tick(runtime, collect=script.collect, engage_seconds=3600)
    # (The drain's step after it has the short budget again, so the tick may end incomplete.)
    assert not [o for o in long.outcomes if o.action == "failed"]
    assert ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done >= ENGAGED_MARKS
    engaged = Counter(o.arn for o in short.outcomes + long.outcomes if o.action == ENGAGED)
    assert engaged and max(engaged.values()) == 1
    # Given back when its walk ended: the next tick may claim it.
    assert clients("dynamodb").get_item(TableName=ledger_table, Key={"pk": {"S": "PLAN"}, "sk": {"S": "ENGAGE-WALK"}}
                                        ).get("Item") is None


def test_a_relaxing_tick_keeps_the_short_budget(clients, ledger_table):
    runtime = Runtime(clients, SHORT, ledger_table, FakeClock(T0), controller_id="solo")
    deadline = TickDeadline(runtime, engage_seconds=3600)
    runtime.clock.advance(SHORT.tick_budget_seconds)
    assert deadline(), "relaxing (no engage walk) has the tick budget"


def test_ticks_overlapping_a_long_engage_walk_leave_it_to_its_holder(clients, ledger_table):
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    dynamodb = clients("dynamodb")
    first = CutEngine("async", "arn:async:0")
    tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="a"), collect=script.collect, engine=first)
    plan = ledger_plan.read(Ledger(dynamodb, ledger_table))
    assert ledger_claims.take_engage_walk(Ledger(dynamodb, ledger_table), generation=plan.generation, controller_id="holder",
                                          now=clock.now(), until=clock.now().replace(hour=clock.now().hour + 1))
    clock.advance(60)
    other = CutEngine("async", "arn:async:0")
    result = tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="b"), collect=script.collect,
                  engine=other, engage_seconds=600)
    assert "engage-walk-held" in result.actions and not result.complete and other.calls == []

    # Without a long budget (the CLI, the demo) a tick does not claim and is not held back.
    short = CutEngine("async", "arn:async:0")
    tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="c"), collect=script.collect, engine=short)
    assert len(short.calls) == 1


def test_an_engage_claim_expires_and_a_newer_generation_takes_it_over(clients, ledger_table):
    dynamodb, now = clients("dynamodb"), T0
    from datetime import timedelta
    take = lambda who, g, at, until: ledger_claims.take_engage_walk(
        Ledger(dynamodb, ledger_table), generation=g, controller_id=who, now=at, until=until)
    assert take("a", 3, now, now + timedelta(minutes=10))
    held = take("b", 3, now + timedelta(minutes=1), now + timedelta(minutes=11))
    assert not held and held.holder == "a"
    assert take("a", 3, now + timedelta(minutes=1), now + timedelta(minutes=11)), "its holder renews it"
    assert take("b", 4, now + timedelta(minutes=2), now + timedelta(minutes=12)), "a newer plan's walk wins"
    assert not take("a", 3, now + timedelta(minutes=3), now + timedelta(minutes=13))
    assert take("c", 4, now + timedelta(minutes=12), now + timedelta(minutes=20)), "expired at its until"


def test_a_long_engage_walk_stops_when_the_plan_moves_on(clients, ledger_table):
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    runtime = Runtime(clients, SETTINGS, ledger_table, clock, controller_id="a")
    tick(runtime, collect=script.collect, engine=CutEngine("async", "arn:async:0"))
    dynamodb = clients("dynamodb")
    plan = ledger_plan.read(Ledger(dynamodb, ledger_table))
    deadline = TickDeadline(runtime, engage_seconds=3600)
    with deadline.engaging(plan) as walking:
        assert walking
        clock.advance(SETTINGS.tick_budget_seconds + 1)
        assert not deadline(), "an engaging tick goes past the tick budget"
        ledger_plan.write(Ledger(dynamodb, ledger_table), replace(plan, generation=plan.generation + 1, done=frozenset(),
                                                          cursor={}), controller_id="b", now=clock.now())
        clock.advance(PLAN_CHECK_SECONDS)
        assert deadline(), "the plan moved on: the walk stops"
    assert deadline(), "and so does the rest of the tick"


def test_the_handler_gives_an_engaging_tick_its_remaining_lambda_time():
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 900_000)
    assert handler_module.engage_seconds(context) == 900 - handler_module.MARGIN_SECONDS
    assert handler_module.engage_seconds(object()) is None


def test_the_engine_says_which_kinds_the_deadline_cut(clients, ledger_table, aws_semantics):
    from holdfast.aws import CALL_TAG

    build_fleet(clients, asgs=2, esms=2, asyncs=2, nlbs=2, services=2, unselected=0, workers=1)
    runtime = Runtime(clients, SETTINGS, ledger_table, FakeClock(T0), controller_id="solo")
    # A deadline that has passed only for the target groups' walk.
    engine = Engine(runtime, deadline=lambda: CALL_TAG.get() == "nlb", writers=1)
    report = engine.engage_as_listed(kinds=KINDS)
    assert not report.complete and report.unfinished == {"nlb"}
    assert {o.kind for o in report.outcomes if o.action == ENGAGED} == set(KINDS) - {"nlb"}


def test_each_kind_is_counted_against_the_blast_radius_on_its_own(clients, ledger_table, aws_semantics):
    build_fleet(clients, asgs=3, esms=2, asyncs=2, nlbs=2, services=2, unselected=0, workers=1)
    settings = Settings.from_mapping({**SETTINGS.to_mapping(), "max_resources": 2})
    runtime = Runtime(clients, settings, ledger_table, FakeClock(T0), controller_id="solo")
    report = Engine(runtime, writers=1).engage_as_listed(kinds=KINDS)
    # Only the kind with more than max_resources is refused, and nothing of it is written.
    assert report.refused_kinds == {"asg"} and "asg" in report.refused
    assert not [o for o in report.outcomes if o.kind == "asg"]
    assert {o.kind for o in report.outcomes if o.action == ENGAGED} >= {"nlb", "scalable-target"}
    # Counted together (the CLI's walk), the selection is refused whole.
    together = Engine(runtime, writers=1).engage(kinds=KINDS)
    assert together.refused and not together.outcomes
