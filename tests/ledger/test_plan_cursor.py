"""The persisted walk cursor: conditional on the plan generation, gone with a new one."""

from __future__ import annotations

from dataclasses import replace

from holdfast.core.policy import Plan
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan
from tests.support.harness import T0


def test_a_cursor_moves_only_under_its_generation_and_a_new_generation_starts_without(clients, ledger_table):
    dynamodb = clients("dynamodb")
    first = Plan(generation=1, stage="hold", entered_at=T0)
    ledger_plan.write(Ledger(dynamodb, ledger_table), first, controller_id="a", now=T0)
    assert ledger_plan.set_cursor(Ledger(dynamodb, ledger_table), 1, "nlb", "arn:b")
    assert ledger_plan.read(Ledger(dynamodb, ledger_table)).cursor == {"nlb": "arn:b"}

    ledger_plan.write(Ledger(dynamodb, ledger_table), replace(first, generation=2, cursor={}), controller_id="a", now=T0)
    assert ledger_plan.read(Ledger(dynamodb, ledger_table)).cursor == {}
    assert not ledger_plan.set_cursor(Ledger(dynamodb, ledger_table), 1, "nlb", "arn:z"), "a stale controller moved the cursor"
    assert ledger_plan.read(Ledger(dynamodb, ledger_table)).cursor == {}
