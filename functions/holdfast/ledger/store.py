"""The ledger of one tick (or one command): the table, the DynamoDB client it is reached
through, and what the tick has read of it.

The Runtime builds one per tick (`Runtime.ledger()`), and the tick hands it to each of
its readers: the engine's walks, the built-in evidence and the drain stage. What the
ledger knows of an item family lives with the family's module (ledger/resources.py for
the resource records: the item's wire format, its conditions, what a failure means);
this object holds what the readers of one tick share, so the resource records' partition
is Queried once a tick, not once per reader.
"""

from __future__ import annotations

from holdfast.ledger.resources import ResourceLedger, Shared


class Ledger:
    def __init__(self, dynamodb, table: str):
        self.dynamodb = dynamodb
        self.table = table
        self._records = Shared()

    def resources(self) -> ResourceLedger:
        """A reader's view of the resource records: its own `available` and `error`, the
        tick's one Query shared with the other views (holdfast.ledger.resources)."""
        return ResourceLedger(self.dynamodb, self.table, shared=self._records)
