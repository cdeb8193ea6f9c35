"""Three controllers ticking at the same time (threads, one moto server) through a full
event. The in-memory engine checks at the moment of every write that engaging only
protects and relaxing has the current plan; after every round of ticks World.check covers
write-ahead and records in use; at the end, that nothing was lost.

The server runs with the fixtures' AWS semantics: moto rolls back a failed transaction by
restoring a copy of the whole table taken when it began, which would erase another
controller's plan written meanwhile (DynamoDB's writes are serializable and a failed
transaction changes nothing). Without them, a busy machine loses a plan generation."""

from __future__ import annotations

import threading

from holdfast.core.policy import NORMAL
from holdfast.ledger.table import ensure_table
from holdfast.reconciler import tick
from holdfast_fixtures.moto_patches import aws_semantics
from tests.support.harness import Harness


def test_three_controllers_at_once_through_a_full_event(moto_server):
    with aws_semantics():
        three_controllers_through_a_full_event(moto_server)


def three_controllers_through_a_full_event(moto_server):
    moto_server.reset()
    observer = moto_server.clients()
    ensure_table(observer("dynamodb"), "ledger")
    h = Harness(observer, "ledger", per_kind=3)
    controllers = [moto_server.clients() for _ in range(3)]
    errors = []

    def one(name, clients):
        try:
            tick(h.runtime(name, clients).but(table="ledger"), collect=h.script.collect, engine=h.engine, stages=h.stages)
        except Exception as err:  # surfaced below
            errors.append(err)

    h.script.set("impaired", h.clock.now())
    for round_ in range(200):
        if round_ == 2:
            h.minutes(1)
            h.script.set("recovering", h.clock.now())
        threads = [threading.Thread(target=one, args=(f"C{i}", c)) for i, c in enumerate(controllers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert h.world.check() == []
        if h.plan().stage == NORMAL:
            break
        h.minutes(1)
    for arn, r in h.world.resources.items():
        assert r.value == r.true_original and r.record is None, arn
    # Every generation was written exactly once, by one of the three, and the stages went
    # in order. Read from the plan's history, not from the plan seen after each round: two
    # controllers of one round may each advance a stage (which one reads the plan after the
    # other's write is the threads' order, not Holdfast's).
    items = observer("dynamodb").query(TableName="ledger", KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                                       ExpressionAttributeValues={":p": {"S": "PLAN"}, ":g": {"S": "GEN#"}})["Items"]
    history = sorted((int(i["generation"]["N"]), i["stage"]["S"]) for i in items)
    stages = [stage for _, stage in history]
    assert [generation for generation, _ in history] == list(range(1, len(history) + 1))
    assert stages == ["hold", "drain", "replay", "fresh-work", "routing", "capacity", "normal"], stages
