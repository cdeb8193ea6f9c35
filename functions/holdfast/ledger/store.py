"""The ledger of one tick (or one command): the table, the DynamoDB client it is reached
through, the storage calls every item family makes, and what the tick has read of it.

As Powertools' idempotency layer splits its persistence (the logic above, the storage hooks
below), the item families (ledger/plan.py, control.py, ...) keep their item format, their
conditions and what a failure means, and make their calls through this object: each
family function takes the `Ledger` (`plan.read(ledger)`, `control.set_paused(ledger, ...)`),
never a client and a table name. The hooks below are the only place the table's name is
bound into a request (`TableName`, in a transaction's items too); they pass DynamoDB's
answer and its errors (botocore's ClientError and BotoCoreError) up unchanged, so each
family turns them into its own outcome as before. The hooks declare no IAM action: the
`@uses` of the family function that makes each call does (tests/iam/test_ledger_calls.py
checks every hook call against the @uses that covers it).

The Runtime builds one per tick (`Runtime.ledger()`), and the tick hands it to each of
its readers: the engine's walks, the built-in evidence, the drain and the replay stages.
Two partitions are read once a tick, not once per reader: the resource records
(ledger/resources.py, `resources()`), and the drain's and the replay's records
(ledger/drain.py, `read_all`), which the engine (the mappings in drain), the drain stage
and the replay stage all read.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Iterator

from holdfast.ledger.resources import ResourceLedger, Shared


class Ledger:
    def __init__(self, dynamodb, table: str, clock=None):
        self._db = dynamodb
        self.table = table
        # The tick's clock (holdfast.clock), for the times the ledger's items carry that
        # its families stamp themselves (a mapping's last cap write); None: not known.
        self.clock = clock
        self._records = Shared()
        # The engagement in force (its start, ISO 8601) while a plan holds resources: an
        # engage's write-ahead is written only while its resource has no release mark of it
        # (holdfast.ledger.control.not_released). None: no condition (no hold, or a command).
        self.engagement: str | None = None
        # ledger/drain.py: partition -> what the tick's one Query of it read (and its writes since).
        self.partitions: dict[str, dict[str, Any]] = {}
        self.partitions_lock = threading.Lock()

    def resources(self) -> ResourceLedger:
        """A reader's view of the resource records: its own `available` and `error`, the
        tick's one Query shared with the other views (holdfast.ledger.resources)."""
        return ResourceLedger(self, shared=self._records)

    # ---- storage hooks: the table name bound, DynamoDB's answer and errors unchanged ----

    def get_item(self, **request) -> dict[str, Any] | None:
        """The item at `Key`, or None."""
        return self._db.get_item(TableName=self.table, **request).get("Item")

    def put_item(self, **request) -> dict[str, Any]:
        return self._db.put_item(TableName=self.table, **request)

    def update_item(self, **request) -> dict[str, Any]:
        return self._db.update_item(TableName=self.table, **request)

    def delete_item(self, **request) -> dict[str, Any]:
        return self._db.delete_item(TableName=self.table, **request)

    def query(self, **request) -> dict[str, Any]:
        """One page of a Query (the caller pages on, with ExclusiveStartKey)."""
        return self._db.query(TableName=self.table, **request)

    def query_pages(self, **request) -> Iterator[dict[str, Any]]:
        """Every page of a Query, each read as the iteration reaches it."""
        return iter(self._db.get_paginator("query").paginate(TableName=self.table, **request))

    def transact_write_items(self, items: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """One transaction of `items` ({"Put": {...}}, {"ConditionCheck": {...}}, ...), each
        on this table."""
        bound = [{op: {"TableName": self.table, **body} for op, body in item.items()} for item in items]
        return self._db.transact_write_items(TransactItems=bound)

    def describe_table(self) -> dict[str, Any]:
        return self._db.describe_table(TableName=self.table)
