"""`holdfast engage` interrupted (Ctrl-C) mid-walk: it says what was done and what was not,
and the record of who engaged (CONTROL/HELD, the caller's IAM identity) is kept; an engage
that finds everything engaged writes that record where it is missing. `holdfast.cli.main`
in this process on moto, with AWS's semantics where moto departs from them."""

from __future__ import annotations

import pytest

from holdfast.actuators.async_config import AsyncConfigActuator
from holdfast.cli import EXIT_INTERRUPTED, main
from holdfast.ledger import Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.resources import ResourceLedger
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
)

pytestmark = pytest.mark.usefixtures("aws_semantics")
ENGAGE = ["--region", REGION, "engage", "--yes"]


@pytest.fixture
def fleet(clients, ledger_table):
    for name in ("web", "api"):
        make_asg(clients, name)
    for name in ("orders", "billing"):
        clients("lambda").put_function_event_invoke_config(FunctionName=make_function(clients, name),
                                                           MaximumRetryAttempts=2, MaximumEventAgeInSeconds=3600)
    return Ledger(clients("dynamodb"), ledger_table)


def held_by(ledger: Ledger) -> str | None:
    return ledger_control.read_control(ledger).held_by


def test_an_engage_interrupted_mid_walk_says_what_it_did_and_keeps_who_engaged(fleet, clients, capsys, monkeypatch):
    me = clients("sts").get_caller_identity()["Arn"]

    def interrupted(self, resources):
        raise KeyboardInterrupt()

    monkeypatch.setattr(AsyncConfigActuator, "engage_many", interrupted)   # Ctrl-C as the async configs' turn comes
    assert main(ENGAGE) == EXIT_INTERRUPTED
    said = capsys.readouterr().err
    monkeypatch.undo()

    engaged = ResourceLedger(fleet).records()
    assert {r.kind for r in engaged} == {"asg"} and len(engaged) == 2
    assert "engage interrupted: 2 resources are engaged now, each with its original recorded" in said, said
    assert "not reached are not engaged" in said and "`holdfast engage` again finishes it" in said
    assert held_by(fleet) is not None and me in held_by(fleet)

    # The second engage finishes the walk; the record of who engaged stays.
    assert main(ENGAGE) == 0
    assert len(ResourceLedger(fleet).records()) == 4 and me in held_by(fleet)


def test_an_engage_that_finds_everything_engaged_writes_who_engaged_where_it_is_missing(fleet, clients, capsys):
    assert main(ENGAGE) == 0
    ledger_control.set_held(fleet, False)                 # the record lost (an engage before it was kept)
    assert held_by(fleet) is None
    capsys.readouterr()

    assert main(["--json", *ENGAGE]) == 0                  # nothing left to engage
    assert held_by(fleet) is not None
    assert main(["--region", REGION, "status"]) == 0
    out = capsys.readouterr().out
    assert "by an earlier walk that left no record of who" not in out
