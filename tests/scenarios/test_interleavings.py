"""Random interleavings (hypothesis, stateful): 2–3 controllers advance one AWS call at
a time, crash between any two calls, see duplicate signals, an owner changes resources
while engaged, time jumps. After every step: write-ahead, monotone engaging, fresh-plan relaxing, records in use kept (World.check, and
the checks the in-memory engine makes at the moment of each write); at the end, after
the region recovers for good: nothing lost (every resource back to its original, or to
its owner's later change)."""

from __future__ import annotations

from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from moto import mock_aws

from holdfast.aws import Clients
from holdfast.core.policy import NORMAL
from holdfast.ledger.table import ensure_table
from tests.support.harness import Harness

EXAMPLES = 15
STEPS = 30
RUNS = {"examples": 0, "steps": 0}


class Interleavings(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        clients = Clients(region="us-east-1")
        ensure_table(clients("dynamodb"), "ledger")
        self.h = Harness(clients, "ledger", per_kind=1)
        self.controllers = []
        self.highest = 0
        RUNS["examples"] += 1

    @initialize(n=st.integers(min_value=2, max_value=3), drained=st.booleans())
    def start(self, n, drained):
        """Begin at the impairment, or mid-recovery with drain under way, where relaxing
        writes (the racy ones) are plentiful."""
        h = self.h
        h.script.set("impaired", h.clock.now())
        if drained:
            h.stages.wait_ticks = 10**6   # the mappings' controllers keep them engaged through the setup
            h.tick("setup")
            h.minutes(1)
            h.script.set("recovering", h.clock.now())
            for _ in range(10):
                if h.plan().stage == "drain":
                    break
                h.minutes(11)
                h.tick("setup")
            assert h.plan().stage == "drain", h.plan()
            # the setup controller died right after writing the drain plan: its walk is to do,
            # and the mappings' controllers give them back a few ticks later
            h.world.dynamodb.update_item(TableName="ledger", Key={"pk": {"S": "PLAN"}, "sk": {"S": "CURRENT"}},
                                         UpdateExpression="REMOVE done")
            h.stages.wait_ticks = h.stages.drain_ticks + 3
        self.controllers = [h.controller(f"C{i}") for i in range(n)]

    @rule(i=st.integers(0, 2))
    def tick_through(self, i):
        """A controller runs to the end of its current (or a whole new) tick."""
        c = self.controllers[i % len(self.controllers)]
        c.step()
        while c.state != "idle":
            RUNS["steps"] += 1
            c.step()

    @rule(i=st.integers(0, 2), calls=st.integers(1, 20), crash=st.booleans())
    def step(self, i, calls, crash):
        """A controller makes `calls` more AWS calls (fewer if its tick ends), then
        stops at its next one, or crashes there."""
        c = self.controllers[i % len(self.controllers)]
        for n in range(calls):
            RUNS["steps"] += 1
            c.step(crash=crash and n == calls - 1)
            if c.state == "idle":
                break

    @rule(i=st.integers(0, 2))
    def until_relaxing(self, i):
        """A controller runs until it is about to make a relaxing write: its guard is
        the next call (the moment October's enactor was paused at)."""
        c = self.controllers[i % len(self.controllers)]
        self.h.engine.poised.discard(c.name)
        while True:
            RUNS["steps"] += 1
            c.step()
            if c.state == "idle" or c.name in self.h.engine.poised:
                break

    @rule(state=st.sampled_from(["impaired", "recovering"]), minutes=st.sampled_from([1, 11, 31]))
    def signal(self, state, minutes):
        """Time passes and the verdict is `state`; the same state again is a duplicate event."""
        self.h.minutes(minutes)
        self.h.script.set(state, self.h.clock.now())

    @rule(index=st.integers(0, 4), value=st.integers(10, 99))
    def owner_changes(self, index, value):
        arn = sorted(self.h.world.resources)[index]
        self.h.world.owner_change(arn, value)

    @invariant()
    def invariants_hold(self):
        if not self.controllers:
            return
        assert self.h.world.check() == []
        plan = self.h.plan()
        generation = plan.generation if plan else 0
        assert generation >= self.highest, "the active plan went back a generation or vanished (the active plan is never deleted)"
        self.highest = generation

    def teardown(self):
        try:
            for c in self.controllers:
                c.finish()
            h = self.h
            h.minutes(1)
            h.script.set("recovering", h.clock.now())
            for _ in range(40):
                h.minutes(11)
                h.tick("final")
                if h.plan() and h.plan().stage == NORMAL:
                    break
            assert h.world.check() == []
            if h.plan():
                assert h.plan().stage == NORMAL
            for arn, r in h.world.resources.items():
                assert r.value == r.true_original and r.record is None, (arn, r)
        finally:
            self.mock.stop()


Interleavings.TestCase.settings = hsettings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None,
)


class TestInterleavings(Interleavings.TestCase):
    @classmethod
    def tearDownClass(cls):
        print(f"\nhypothesis interleavings: {RUNS['examples']} examples, {RUNS['steps']} controller steps")
