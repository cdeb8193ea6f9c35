"""The engage walk's claim is a lease its holder renews: a holder killed outright (no
`finally`, no `__exit__`: out of memory, a runtime crash, a sandbox reset) holds the
engage of the fleet for at most one schedule period, a live holder keeps it for as long
as it walks, and a holder whose lease another controller took over stops walking.

The holder here is a tick in a thread whose engine stops at a barrier inside its walk:
it never returns, so nothing of the tick after the walk runs, as when Lambda kills it.
Time is a FakeClock the test moves; each step the holder takes is one deadline check,
as an engine makes before each resource."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from holdfast.clock import FakeClock
from holdfast.core.model import ENGAGED, Outcome
from holdfast.engine import Report
from holdfast.ledger import Ledger
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler import PLAN_CHECK_SECONDS, tick
from holdfast.runtime import Runtime
from tests.scenarios.test_event import SETTINGS
from tests.support.fakes import Script
from tests.support.harness import T0

ENGAGE_SECONDS = 870   # what the handler gives an engaging tick: 900 s less its margin
PERIOD = SETTINGS.schedule_minutes * 60


class Recording:
    """An engine that engages one resource of each kind at once and says so."""

    def __init__(self):
        self.engages = 0

    def __call__(self, runtime, deadline):
        return self

    def engage_as_listed(self, *, kinds, **_):
        self.engages += 1
        report = Report()
        for kind in kinds:
            report.outcomes.append(Outcome(kind, f"arn:{kind}:0", ENGAGED))
        return report

    def relax(self, **_):
        return Report()


class Reaped(BaseException):
    """Unwinds a killed holder's thread once the test is over."""


class Holder:
    """A tick whose engine walks step by step on the test's say, checking its deadline at
    each step, and which is never let finish: `kill()` leaves it stopped for good (until
    the test is over: `reap()` then unwinds its thread)."""

    def __init__(self, runtime: Runtime, script: Script):
        self.runtime, self.script = runtime, script
        self.deadline = None
        self.walking = threading.Event()
        self.go = threading.Semaphore(0)
        self.stepped = threading.Semaphore(0)
        self.saw: list[bool] = []
        self.dead = False
        self.reaped = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)

    def __call__(self, runtime, deadline):
        self.deadline = deadline
        return self

    def engage_as_listed(self, **_):
        self.walking.set()
        while True:
            self.go.acquire()
            if self.dead:
                self.reaped.wait()   # killed: runs nothing more while the test runs
                raise Reaped()
            self.saw.append(self.deadline())
            self.stepped.release()

    def relax(self, **_):
        return Report()

    def _tick(self):
        try:
            tick(self.runtime, collect=self.script.collect, engine=self, engage_seconds=ENGAGE_SECONDS)
        except Reaped:
            pass

    def start(self):
        self.thread.start()
        assert self.walking.wait(30), "the holder reached its walk"

    def step(self) -> bool:
        """One deadline check of the holder's walk: True when it says stop."""
        self.go.release()
        assert self.stepped.acquire(timeout=30)
        return self.saw[-1]

    def kill(self):
        self.dead = True
        self.go.release()

    def reap(self):
        if self.thread.is_alive():
            self.dead = True
            self.go.release()
            self.reaped.set()
            self.thread.join(30)


@pytest.fixture
def holders(clients, ledger_table):
    made: list[Holder] = []

    def make(clock, script, name) -> Holder:
        holder = Holder(controller(clients, ledger_table, clock, name), script)
        made.append(holder)
        holder.start()
        return holder

    yield make
    for holder in made:   # before the mocked AWS goes away
        holder.reap()


def claim(clients, table) -> dict | None:
    return clients("dynamodb").get_item(TableName=table, Key={"pk": {"S": "PLAN"}, "sk": {"S": "ENGAGE-WALK"}}
                                        ).get("Item")


def controller(clients, table, clock, name):
    return Runtime(clients, SETTINGS, table, clock, controller_id=name)


def test_a_killed_holder_blocks_the_engage_for_at_most_one_schedule_period(clients, ledger_table, holders):
    # GIVEN a tick that claimed the engage walk and was killed inside it
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    holder = holders(clock, script, "killed")
    assert claim(clients, ledger_table)["holder"]["S"] == "killed"
    holder.kill()

    # WHEN the schedule's next tick comes, one period later
    clock.advance(PERIOD)
    engine = Recording()
    result = tick(controller(clients, ledger_table, clock, "next"), collect=script.collect, engine=engine,
                  engage_seconds=ENGAGE_SECONDS)

    # THEN it engages: the dead holder's claim lapsed
    assert "engage-walk-held" not in result.actions
    assert engine.engages == 1 and result.count(ENGAGED) > 0
    assert ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).done >= {"asg", "nlb", "scalable-target"}


def test_a_live_holder_keeps_its_claim_past_the_lease_and_loses_it_once_killed(clients, ledger_table, holders):
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    holder = holders(clock, script, "holder")
    # The holder walks for five schedule periods, checking its deadline as it goes: it renews.
    for _ in range(5 * PERIOD // PLAN_CHECK_SECONDS):
        clock.advance(PLAN_CHECK_SECONDS)
        assert holder.step() is False
        other = Recording()
        held = tick(controller(clients, ledger_table, clock, "other"), collect=script.collect, engine=other,
                    engage_seconds=ENGAGE_SECONDS)
        assert "engage-walk-held" in held.actions and other.engages == 0
    renewed = int(claim(clients, ledger_table)["until"]["N"])
    assert renewed == int((clock.now() + timedelta(seconds=ledger_claims.lease_seconds(SETTINGS.schedule_minutes))
                           ).timestamp())

    holder.kill()
    clock.advance(PERIOD)
    engine = Recording()
    result = tick(controller(clients, ledger_table, clock, "next"), collect=script.collect, engine=engine,
                  engage_seconds=ENGAGE_SECONDS)
    assert "engage-walk-held" not in result.actions and engine.engages == 1


def test_a_holder_whose_lease_was_taken_over_stops_walking(clients, ledger_table, holders):
    """Two controllers, scripted: A stalls past its lease (a call that hung), B takes the
    claim over; A's next renewal fails (the conditional put finds B's live lease) and A
    stops, leaving the engage to B; B's renewals keep A out."""
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())
    a = holders(clock, script, "a")
    clock.advance(PERIOD)   # A made no call and checked no deadline for a whole period
    b = holders(clock, script, "b")
    assert claim(clients, ledger_table)["holder"]["S"] == "b"

    clock.advance(PLAN_CHECK_SECONDS)
    assert b.step() is False, "B renews its own claim"
    assert a.step() is True, "A's renewal fails: it stops"
    assert claim(clients, ledger_table)["holder"]["S"] == "b"


def test_a_walk_that_makes_calls_renews_its_claim_without_a_deadline_check(clients, ledger_table):
    """A long listing (one ListFunctionEventInvokeConfigs per function) checks no deadline:
    every AWS call of the walk renews the claim when it is due."""
    clock, script = FakeClock(T0), Script()
    script.set("impaired", clock.now())

    class Listing(Recording):
        def engage_as_listed(self, *, kinds, **options):
            lam = clients("lambda")
            generation = ledger_plan.read(Ledger(clients("dynamodb"), ledger_table)).generation
            for _ in range(4 * PERIOD // PLAN_CHECK_SECONDS):
                clock.advance(PLAN_CHECK_SECONDS)
                lam.list_functions()
                assert claim(clients, ledger_table)["holder"]["S"] == "lister"
                assert not ledger_claims.take_engage_walk(
                    Ledger(clients("dynamodb"), ledger_table), generation=generation, controller_id="other", now=clock.now(),
                    until=clock.now() + timedelta(seconds=45))
            return super().engage_as_listed(kinds=kinds, **options)

    engine = Listing()
    result = tick(controller(clients, ledger_table, clock, "lister"), collect=script.collect, engine=engine,
                  engage_seconds=ENGAGE_SECONDS)
    assert engine.engages == 1 and "engage-walk-held" not in result.actions
    assert claim(clients, ledger_table) is None, "released when its walk ended"


def test_the_lease_is_shorter_than_the_schedule_period_and_longer_than_two_renewals():
    for minutes in (1, 2, 5, 60):
        lease = ledger_claims.lease_seconds(minutes)
        assert 2 * PLAN_CHECK_SECONDS <= lease < minutes * 60
