"""`holdfast status` shows the evacuation holds: a Region switch plan whose engage step
holds this Region (holdfast.region_switch) is listed with who wrote the hold, since when
and for which plan and execution, in the text and in the --json document, until the
plan's post-recovery step lifts it. `holdfast.cli.main` runs in-process against moto."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

PLAN = "arn:aws:arc-region-switch::123456789012:plan/evacuate:abc123"
OTHER = "arn:aws:arc-region-switch::123456789012:plan/dr-drill:def456"
BY = f"region-switch {PLAN} execution exec-7"
AT = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)


def status(capsys, *args) -> tuple[int, str]:
    code = main(["--region", REGION, "status", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, out


def test_status_lists_each_evacuation_hold_with_who_when_and_plan_until_it_is_lifted(aws_semantics, capsys):
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    ledger = Ledger(clients("dynamodb"), DEFAULT_TABLE)
    _, out = status(capsys)
    assert "evacuation hold" not in out

    assert ledger_control.hold_for_evacuation(ledger, PLAN, execution_id="exec-7", by=BY, now=AT)
    assert ledger_control.hold_for_evacuation(ledger, OTHER, execution_id=None, by="region-switch drill", now=AT)
    _, out = status(capsys)
    lines = [line for line in out.splitlines() if line.startswith("evacuation hold")]
    assert len(lines) == 2, out
    mine = next(line for line in lines if PLAN in line)
    assert "execution exec-7" in mine and AT.isoformat() in mine and BY in mine
    assert "post-recovery step lifts it" in mine
    assert "execution -" in next(line for line in lines if OTHER in line)

    code = main(["--region", REGION, "--json", "status"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted(doc["evacuations"], key=lambda e: e["plan_arn"]) == sorted([
        {"plan_arn": PLAN, "execution_id": "exec-7", "by": BY, "at": AT.isoformat()},
        {"plan_arn": OTHER, "execution_id": "-", "by": "region-switch drill", "at": AT.isoformat()},
    ], key=lambda e: e["plan_arn"])

    assert ledger_control.lift_evacuation(ledger, PLAN)
    _, out = status(capsys)
    assert PLAN not in out and OTHER in out
