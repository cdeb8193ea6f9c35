"""Races, as races: the October interleaving scripted call by call, crash points, the
kill switch and recommend mode. The plan ledger is real (DynamoDB on moto); resources
are the in-memory engine of fakes.py (see its docstring for why)."""

from __future__ import annotations

import threading

from holdfast.core.model import RAISED, REFUSED_STALE, RESTORED
from holdfast.core.policy import DRAIN, FRESH_WORK, HOLD, NORMAL
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan


def run_to(h, stage, *, limit=60):
    """Tick one controller, a minute apart, until the plan reaches `stage`."""
    for _ in range(limit):
        h.tick("solo")
        plan = h.plan()
        if plan and plan.stage == stage:
            return plan
        h.minutes(1)
    raise AssertionError(f"never reached {stage}; at {h.plan()}")


def test_a_full_event_engages_then_restores_every_resource(harness):
    h = harness
    h.stages.wait_ticks = 3   # the mappings' controllers give them back on their third drain tick
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)
    h.tick("solo")
    assert all(r.record is not None and r.value != r.true_original for r in h.world.resources.values())
    h.minutes(1)
    h.script.set("recovering", h.clock.now())
    seen = []
    for _ in range(200):
        h.minutes(1)
        h.tick("solo")
        label = h.plan().label
        if not seen or seen[-1] != label:
            seen.append(label)
        if h.plan().stage == NORMAL:
            break
    assert seen == ["hold", "drain", "replay", "fresh-work", "routing", "capacity", "normal"]
    assert not h.world.check()
    assert all(r.value == r.true_original and r.record is None for r in h.world.resources.values())


def recover(h):
    h.minutes(1)
    h.script.set("recovering", h.clock.now())


def test_october_a_stale_controller_cannot_relax_after_others_moved_on(harness):
    """A, under plan g (drain), is paused just before its first relaxing write: a
    mapping its controller gives back. B moves g+1..g+4 — a re-impairment that engages
    everything again, then recovery through the drain (where the mappings' controllers
    give them back and their records are forgotten: its clean-up) and the replay to
    fresh-work. A resumes its old walk: every write is refused and changes nothing."""
    h = harness
    h.stages.wait_ticks = 10**6   # the mappings stay engaged until A's tick
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)
    recover(h)
    h.minutes(11)
    run_to(h, DRAIN)
    h.minutes(11)

    h.stages.wait_ticks = 0
    paused, resume = threading.Event(), threading.Event()
    h.engine.pause_before_relax["A"] = (paused, resume)
    results = []
    a = threading.Thread(target=lambda: results.append(h.tick("A")), name="A")
    a.start()
    assert paused.wait(10), "A never reached a relaxing write"
    g = h.plan().generation
    assert h.plan().stage == DRAIN

    h.script.set("impaired", h.clock.now())
    h.tick("B")
    assert (h.plan().stage, h.plan().generation) == (HOLD, g + 1)
    recover(h)
    while h.plan().generation < g + 4:
        h.minutes(11)
        h.tick("B")
    h.tick("B")
    assert h.plan().stage == FRESH_WORK
    assert all(r.record is None for r in h.world.resources.values() if r.kind == "esm")
    snapshot = {arn: (r.value, dict(r.record) if r.record else None) for arn, r in h.world.resources.items()}
    writes = len(h.world.writes)

    resume.set()
    a.join(10)
    assert results and "stale" in results[0].actions
    assert results[0].count(REFUSED_STALE) >= 1 and results[0].count(RAISED, RESTORED) == 0
    assert {arn: (r.value, dict(r.record) if r.record else None) for arn, r in h.world.resources.items()} == snapshot
    assert len(h.world.writes) == writes
    assert not h.world.check()
    current = ledger_plan.read(Ledger(h.world.dynamodb, h.table))
    assert current.generation == g + 4 and current.stage == FRESH_WORK
    # the history of every generation is kept (expires by TTL, never deleted)
    items = h.world.dynamodb.query(TableName=h.table, KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                                   ExpressionAttributeValues={":p": {"S": "PLAN"}, ":g": {"S": "GEN#"}})["Items"]
    assert len(items) == g + 4 and all("expires_at" in i for i in items)
