"""One ledger per tick: the tick's readers (the engine's walks, the built-in evidence, the
drain and the replay stages) share what one Query of the resource records read, and what
one Query of the drain's records read.

GIVEN a small fleet through a whole event on moto, with the real engine, evidence and
stages, WHEN each tick runs through the public `tick`, THEN no tick Queries the resource
records' partition, nor the drain records' partition, more than once; and a Query that
fails in one reader is that reader's, as it would be with a ledger of its own: the next
reader reads again.
"""

from __future__ import annotations

from collections import Counter

from holdfast.clock import FakeClock
from holdfast.core.model import Record
from holdfast.core.policy import NORMAL
from holdfast.ledger.drain import DRAIN
from holdfast.ledger.resources import PARTITION
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet
from tests.support.fakes import Script
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)
from tests.support.harness import T0

SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "lambda_writes_per_second": 15})


def count_resource_queries(dynamodb) -> Counter:
    """Queries of the resource records' partition made through this client, counted."""
    seen: Counter = Counter()

    def on_query(params, **_):
        if params.get("ExpressionAttributeValues", {}).get(":pk") == {"S": PARTITION}:
            seen["queries"] += 1

    dynamodb.meta.events.register("provide-client-params.dynamodb.Query", on_query)
    return seen


def count_queries_by_partition(dynamodb) -> Counter:
    """Queries made through this client, counted by the partition they read."""
    seen: Counter = Counter()

    def on_query(params, **_):
        seen[params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S")] += 1

    dynamodb.meta.events.register("provide-client-params.dynamodb.Query", on_query)
    return seen


def test_each_tick_of_an_event_queries_the_resource_and_the_drain_records_once_at_most(clients, ledger_table,
                                                                                      aws_semantics):
    """The engine's walks, the built-in evidence and the drain stage read the resource
    records; the engine's walk (which mappings are in drain), the drain stage and the
    replay stage read the DRAIN partition. One tick reads each once, its writes kept in
    that read."""
    build_fleet(clients, asgs=1, esms=2, asyncs=1, nlbs=1, services=1)
    clock, script = FakeClock(T0), Script()
    queries = count_queries_by_partition(clients("dynamodb"))
    per_stage: dict[str, list[tuple[int, int]]] = {}

    def run():
        before = Counter(queries)
        result = tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo"), collect=script.collect)
        per_stage.setdefault(result.stage, []).append((queries[PARTITION] - before[PARTITION],
                                                       queries[DRAIN] - before[DRAIN]))
        return result

    script.set("impaired", clock.now())
    run()
    clock.advance(60)
    script.set("recovering", clock.now())
    for _ in range(120):
        clock.advance(60)
        if run().stage == NORMAL:
            break
    print(f"\nDRAIN Queries: {queries[DRAIN]}, RES Queries: {queries[PARTITION]}, in {sum(map(len, per_stage.values()))} ticks;"
          " per tick, by stage, (min, max) of RES / DRAIN:",
          {s: ((min(r for r, _ in n), max(r for r, _ in n)), (min(d for _, d in n), max(d for _, d in n)))
           for s, n in per_stage.items()})
    assert {"hold", "drain", "routing", "capacity", NORMAL} <= set(per_stage)
    assert any(d for n in per_stage.values() for _, d in n), "no tick read the drain records: the test proves nothing"
    assert max(d for n in per_stage.values() for _, d in n) == 1, per_stage
    assert max(r for n in per_stage.values() for r, _ in n) == 1, per_stage


class FailingOnce:
    """A DynamoDB client whose first Query fails (an unreachable table), then answers."""

    def __init__(self, dynamodb):
        self.dynamodb, self.failed = dynamodb, False

    def get_paginator(self, name):
        if name == "query" and not self.failed:
            self.failed = True
            return self

        return self.dynamodb.get_paginator(name)

    def paginate(self, **_):
        from botocore.exceptions import EndpointConnectionError
        raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    def __getattr__(self, name):
        return getattr(self.dynamodb, name)


def test_a_failed_query_is_the_failing_readers_and_the_next_reader_reads_again(clients, ledger_table):
    from holdfast.ledger import Ledger

    record = Record("esm", "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:m", {"MaximumConcurrency": None},
                    {"MaximumConcurrency": 2})
    Ledger(clients("dynamodb"), ledger_table).resources().put_original(record, "m")
    queries = count_resource_queries(clients("dynamodb"))
    ledger = Ledger(FailingOnce(clients("dynamodb")), ledger_table)
    evidence, engine, drain = ledger.resources(), ledger.resources(), ledger.resources()

    assert evidence.records() == [] and not evidence.available       # as a ledger of its own would
    assert engine.records() == [record] and engine.available        # not marked by the other's failure
    assert drain.records() == [record] and drain.holds(record.arn)  # shares the engine's read
    assert queries["queries"] == 1                                  # the failed one never reached the table


def test_the_drain_records_read_is_kept_with_the_ledgers_own_writes_and_dropped_on_a_refused_one(clients, ledger_table):
    """One read of the DRAIN partition a ledger: this ledger's writes are kept in it (what a
    Query would answer now); a write refused because another controller wrote the record
    since (Conflict) drops it, so the next reader reads what that controller wrote."""
    import pytest

    from holdfast.core.errors import Conflict
    from holdfast.core.policy import HOLD, Plan
    from holdfast.ledger import Ledger
    from holdfast.ledger import drain as records
    from holdfast.ledger import plan as ledger_plan

    arn = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:m"
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), Plan(generation=1, stage=HOLD, entered_at=T0),
                      controller_id="a", now=T0)
    queries = count_queries_by_partition(clients("dynamodb"))
    mine, other = Ledger(clients("dynamodb"), ledger_table), Ledger(clients("dynamodb"), ledger_table)

    assert records.read_all(mine, records.DRAIN) == {}
    written = records.write(mine, records.DRAIN, arn, {"n": 1}, generation=1, read_version=0, controller_id="a", now=T0)
    assert records.read_all(mine, records.DRAIN) == {arn: written}          # its own write, without a Query
    assert queries[DRAIN] == 1

    theirs = records.write(other, records.DRAIN, arn, {"n": 2}, generation=1, read_version=1, controller_id="b", now=T0)
    assert records.read_all(mine, records.DRAIN)[arn].version == 1         # a tick's read: the other's write unseen
    with pytest.raises(Conflict):
        records.write(mine, records.DRAIN, arn, {"n": 3}, generation=1, read_version=1, controller_id="a", now=T0)
    assert records.read_all(mine, records.DRAIN) == {arn: theirs}          # read again after the refusal
    assert queries[DRAIN] == 2                                              # the first read, and the one after the refusal
