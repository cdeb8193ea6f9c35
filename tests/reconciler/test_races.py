"""Races, as races: the October interleaving scripted call by call, crash points, the
kill switch and recommend mode. The plan ledger is real (DynamoDB on moto); resources
are the in-memory engine of fakes.py (see its docstring for why)."""

from __future__ import annotations

import threading

from holdfast.core.model import RAISED, REFUSED_STALE, RESTORED
from holdfast.ledger import plan as ledger_plan
from holdfast.core.policy import DRAIN, FRESH_WORK, HOLD, NORMAL

from tests.reconciler.conftest import T0


def run_to(h, stage, *, step=None, limit=60):
    """Tick one controller, a minute apart, until the plan reaches `stage`."""
    for _ in range(limit):
        h.tick("solo")
        plan = h.plan()
        if plan and plan.stage == stage and (step is None or plan.drain_step == step):
            return plan
        h.minutes(1)
    raise AssertionError(f"never reached {stage}; at {h.plan()}")


def test_a_full_event_engages_then_restores_every_resource(harness):
    h = harness
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
    assert seen == ["hold", "drain step 0", "drain step 1", "drain step 2", "fresh-work", "routing", "capacity", "normal"]
    assert not h.world.check()
    assert all(r.value == r.true_original and r.record is None for r in h.world.resources.values())


def recover(h):
    h.minutes(1)
    h.script.set("recovering", h.clock.now())


def test_october_a_stale_controller_cannot_relax_after_others_moved_on(harness):
    """A writes plan g (drain step 1) and is paused just before its first relaxing write.
    B moves g+1..g+5 — a re-impairment that engages everything again, then recovery
    through the drain steps to fresh-work, relaxing and forgetting the mappings' records
    (its clean-up). A resumes its old walk: every write is refused and changes nothing."""
    h = harness
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)
    recover(h)
    h.minutes(11)
    run_to(h, DRAIN, step=0)
    h.tick("solo")
    h.minutes(11)

    paused, resume = threading.Event(), threading.Event()
    h.engine.pause_before_relax["A"] = (paused, resume)
    results = []
    a = threading.Thread(target=lambda: results.append(h.tick("A")), name="A")
    a.start()
    assert paused.wait(10), "A never reached a relaxing write"
    g = h.plan().generation
    assert (h.plan().stage, h.plan().drain_step) == (DRAIN, 1)

    h.script.set("impaired", h.clock.now())
    h.tick("B")
    assert (h.plan().stage, h.plan().generation) == (HOLD, g + 1)
    recover(h)
    while h.plan().generation < g + 5:
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
    current = ledger_plan.read(h.world.dynamodb, h.table)
    assert current.generation == g + 5 and current.stage == FRESH_WORK
    # the history of every generation is kept (expires by TTL, never deleted)
    items = h.world.dynamodb.query(TableName=h.table, KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                                   ExpressionAttributeValues={":p": {"S": "PLAN"}, ":g": {"S": "GEN#"}})["Items"]
    assert len(items) == g + 5 and all("expires_at" in i for i in items)
