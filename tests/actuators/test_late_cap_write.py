"""A mapping's cap write that lands late, after the next tick's: on moto with the real engine,
the slow UpdateEventSourceMapping held back and applied later (holdfast_fixtures.late_requests).

Tick A raises a mapping to 30; its UpdateEventSourceMapping times out, and AWS applies it
later (a request re-sent after a read timeout AWS had processed, or still being retried). Tick B reads A's record and cuts to 15;
A's 30 then lands. Each cap write is recorded in the ledger first, with its target and
time, only over the record version it was decided on (conditions.RECORD_VERSION_IS):

- while A's write may still land (not seen, sent less than LEASE_SECONDS ago) B waits:
  its write would race A's, and its restore would forget the record under a cap about to land;
- once that window has passed B writes, and A's target stays in the applied set until it
  is seen: a late 30 is Holdfast's, restored, never kept as the owner's;
- two ticks deciding from one read of the record: the second's write is refused.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from holdfast.aws import Clients
from holdfast.clock import FakeClock
from holdfast.core.model import FAILED, RAISED, REFUSED_STALE, RESTORED
from holdfast.core.tags import read_record
from holdfast.engine import Engine
from holdfast.ledger.leases import LEASE_SECONDS
from holdfast.ledger.resources import ResourceLedger
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_fixtures.late_requests import LateRequests
from tests.support.fleet import make_function, make_mapping

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
KEY = "MaximumConcurrency"
T0 = datetime(2025, 10, 20, 12, 0, tzinfo=timezone.utc)


class Controller:
    """One reconciler's ticks: its own clients (so its requests can be held), the shared clock."""

    def __init__(self, clock: FakeClock, table: str, name: str):
        self.clients = Clients(region="us-east-1")
        self.runtime = Runtime(clients=self.clients, settings=SETTINGS, table=table, clock=clock, controller_id=name)

    def engine(self) -> Engine:
        return Engine(self.runtime, kinds=("esm",))

    def relax(self, target):
        """One tick's relax walk of the mappings (a fresh ledger view, as each tick has)."""
        return self.engine().relax(kinds=("esm",), target_for=lambda _r: target).outcomes


def cap(clients, uuid) -> int | None:
    return (clients("lambda").get_event_source_mapping(UUID=uuid).get("ScalingConfig") or {}).get(KEY)


@pytest.fixture
def drained(clients, ledger_table):
    """A mapping with no owner cap, engaged to the floor and drained to 20; controllers A and B."""
    mapping = make_mapping(clients, make_function(clients, "consumer"), "q")
    clock = FakeClock(T0)
    a, b = Controller(clock, ledger_table, "A"), Controller(clock, ledger_table, "B")
    a.engine().engage(kinds=("esm",))
    [raised] = a.relax({KEY: 20})
    assert raised.action == RAISED and cap(clients, mapping["UUID"]) == 20
    return mapping, clock, a, b


def test_a_late_cap_write_after_the_next_ticks_is_holdfasts_and_the_restore_gives_the_owners_value_back(
        clients, ledger_table, drained):
    mapping, clock, a, b = drained
    uuid = mapping["UUID"]
    # GIVEN tick A raising to 30, its UpdateEventSourceMapping timing out, and AWS applying it late
    with LateRequests(a.clients("lambda"), "UpdateEventSourceMapping", timeout=True) as late:
        [outcome] = a.relax({KEY: 30})
        assert outcome.action == FAILED and "timeout" in outcome.error.lower() and cap(clients, uuid) == 20
        # WHEN tick B, past the window in which A's write lands or fails, cuts to 15
        clock.advance(LEASE_SECONDS + 1)
        [cut] = b.relax({KEY: 15})
        assert cut.action == RAISED and cap(clients, uuid) == 15
        # AND A's 30 lands after it
        assert late.land() == 1
    assert cap(clients, uuid) == 30
    # THEN 30 is Holdfast's: the drain goes on moving the cap (not "the owner set it while engaged")
    clock.advance(60)
    [again] = b.relax({KEY: 15})
    assert again.action == RAISED and cap(clients, uuid) == 15, again
    # AND with the late write landing again, the restore gives back the owner's value, no cap
    with LateRequests(a.clients("lambda"), "UpdateEventSourceMapping", timeout=True) as late:
        clock.advance(60)
        a.relax({KEY: 30})
        clock.advance(LEASE_SECONDS + 1)
        b.relax({KEY: 15})
        late.land()
    assert cap(clients, uuid) == 30
    clock.advance(60)
    [final] = b.relax(None)
    assert (final.action, final.drift) == (RESTORED, {}), final
    assert cap(clients, uuid) is None


def test_a_tick_waits_while_the_last_cap_write_may_still_land_and_never_forgets_the_record_under_it(
        clients, ledger_table, drained):
    mapping, clock, a, b = drained
    uuid, arn = mapping["UUID"], mapping["EventSourceMappingArn"]
    # GIVEN tick A raising to 30, its write timed out and not landed yet
    with LateRequests(a.clients("lambda"), "UpdateEventSourceMapping", timeout=True) as late:
        a.relax({KEY: 30})
        # WHEN tick B, 20 s later, restores the mapping (the drain gives the owner's value back)
        clock.advance(20)
        [waiting] = b.relax(None)
        # THEN B writes nothing and keeps the record: A's write may still land
        assert waiting.action == REFUSED_STALE and "may still land" in waiting.error, waiting
        assert cap(clients, uuid) == 20
        assert ResourceLedger(b.runtime.ledger()).get(arn) is not None
        assert read_record(clients("lambda").list_tags(Resource=arn)["Tags"]) is not None
        late.land()
    assert cap(clients, uuid) == 30
    # AND the next tick restores it: A's 30 is seen, Holdfast's, and put back to no cap
    clock.advance(40)
    [restored] = b.relax(None)
    assert (restored.action, restored.drift) == (RESTORED, {}), restored
    assert cap(clients, uuid) is None
    assert ResourceLedger(b.runtime.ledger()).get(arn) is None


def test_two_ticks_deciding_from_one_read_of_the_record_write_one_cap(clients, ledger_table, drained):
    mapping, clock, a, b = drained
    uuid = mapping["UUID"]
    clock.advance(60)
    # GIVEN both ticks' views of the ledger read before either writes
    a_engine, b_engine = a.engine(), b.engine()
    for e in (a_engine, b_engine):
        e.ledger.records()
    # WHEN A records and sends 30 (not applied yet), then B, from the same read, decides 15
    with LateRequests(a.clients("lambda"), "UpdateEventSourceMapping", timeout=True) as late:
        [first] = a_engine.relax(kinds=("esm",), target_for=lambda _r: {KEY: 30}).outcomes   # times out
        [second] = b_engine.relax(kinds=("esm",), target_for=lambda _r: {KEY: 15}).outcomes
        late.land()
    # THEN B's write is refused: the record moved on since its read; the cap is A's alone
    assert first.action == FAILED
    assert second.action == REFUSED_STALE and "changed since this tick read it" in second.error, second
    assert cap(clients, uuid) == 30
