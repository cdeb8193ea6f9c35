"""DynamoDB answers TransactionConflict when a single write meets another request's open
transaction on the same item (DynamoDB Developer Guide, "Transaction conflict handling":
"TransactionConflictException ... a PutItem, UpdateItem or DeleteItem request on an item
that is part of an ongoing TransactWriteItems request"), and botocore does not retry it.
Overlapping ticks meet it on the plan item, whose guard is a transaction. It is
contention, not a lost ledger: the tick stops there and the next one carries on, and no
tick runs as if the ledger were gone. Moto never answers it; a
botocore hook answers it, once, with the codes AWS uses."""

from __future__ import annotations

from botocore.exceptions import ClientError

from holdfast.core.policy import HOLD


class Conflict:
    """Answer the first call of `operation` with DynamoDB's conflict error."""

    def __init__(self, client, operation: str):
        self.client, self.operation, self.fired = client, operation, 0
        client.meta.events.register("before-call.dynamodb", self)

    def __call__(self, model, **_):
        if model.name != self.operation or self.fired:
            return None
        self.fired += 1
        if self.operation == "TransactWriteItems":
            error = {"Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled, please refer "
                               "cancellation reasons for specific reasons [None, TransactionConflict]"},
                     "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict",
                                                                "Message": "Transaction is ongoing for the item"}]}
        else:
            error = {"Error": {"Code": "TransactionConflictException",
                               "Message": "Transaction is ongoing for the item"}}
        raise ClientError(error, model.name)

    def remove(self):
        self.client.meta.events.unregister("before-call.dynamodb", self)


def test_a_progress_mark_that_meets_a_transaction_is_contention_and_the_next_tick_finishes(harness):
    h = harness
    h.script.set("impaired", h.clock.now())
    conflict = Conflict(h.observer("dynamodb"), "UpdateItem")
    result = h.tick("A")
    conflict.remove()
    assert conflict.fired == 1
    assert "contention" in result.actions and "ledger-unavailable" not in result.actions
    assert result.complete is False
    assert h.plan().stage == HOLD
    h.tick("A")
    assert h.plan().stage == HOLD and set(h.plan().done) >= {"asg", "esm"}


def test_a_plan_write_that_meets_a_transaction_is_contention_not_a_tick_without_ledger(harness):
    h = harness
    h.script.set("impaired", h.clock.now())
    conflict = Conflict(h.observer("dynamodb"), "TransactWriteItems")
    result = h.tick("A")
    conflict.remove()
    assert conflict.fired == 1
    assert result.actions == ["contention"]
    assert "engaged-without-ledger" not in result.actions and h.engine.mutations == 0
    h.tick("A")
    assert h.plan().stage == HOLD and h.plan().generation == 1
