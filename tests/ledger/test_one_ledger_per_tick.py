"""One ledger per tick: the tick's readers (the engine's walks, the built-in evidence, the
drain stage) share what one Query of the resource records read.

GIVEN a small fleet through a whole event on moto, with the real engine, evidence and
drain stage, WHEN each tick runs through the public `tick`, THEN no tick Queries the
resource records' partition more than once; and a Query that fails in one reader is that
reader's, as it would be with a ledger of its own: the next reader reads again.
"""

from __future__ import annotations

from collections import Counter

from holdfast.clock import FakeClock
from holdfast.core.model import Record
from holdfast.core.policy import NORMAL
from holdfast.ledger.resources import PARTITION
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet
from tests.actuators.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)
from tests.reconciler.conftest import T0
from tests.reconciler.fakes import Script

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


def test_each_tick_of_an_event_queries_the_resource_records_once_at_most(clients, ledger_table, aws_semantics):
    build_fleet(clients, asgs=1, esms=2, asyncs=1, nlbs=1, services=1)
    clock, script = FakeClock(T0), Script()
    queries = count_resource_queries(clients("dynamodb"))
    per_stage: dict[str, list[int]] = {}

    def run():
        before = queries["queries"]
        result = tick(Runtime(clients, SETTINGS, ledger_table, clock, controller_id="solo"), collect=script.collect)
        per_stage.setdefault(result.stage, []).append(queries["queries"] - before)
        return result

    script.set("impaired", clock.now())
    run()
    clock.advance(60)
    script.set("recovering", clock.now())
    for _ in range(120):
        clock.advance(60)
        if run().stage == NORMAL:
            break
    print(f"\nresource-record Queries: {queries['queries']} in {sum(map(len, per_stage.values()))} ticks; per tick, by stage:",
          {s: (min(n), max(n)) for s, n in per_stage.items()})
    assert {"hold", "drain", "routing", "capacity", NORMAL} <= set(per_stage)
    assert max(max(n) for n in per_stage.values()) == 1, per_stage


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
