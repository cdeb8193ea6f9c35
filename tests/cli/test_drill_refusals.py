"""`holdfast drill` refuses, with exit 2 and a message naming the problem, before it injects
anything: mode off, a plan not normal, the kill switch, resources still engaged, too few
groups or zones for the detector, a missing ledger. Each case checks that the ledger
holds nothing new and every resource is as it was.

On the embedded moto server (a local endpoint, so no --yes is needed), in-process.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from holdfast.cli import main
from holdfast.core import policy
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.table import ensure_table
from holdfast_demo.fleet import build_fleet, snapshot
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def endpoint(moto_server, aws_semantics):
    moto_server.reset()
    clients = moto_server.clients()
    fleet = build_fleet(clients, asgs=3, esms=1, asyncs=0, nlbs=0, services=0, unselected=0)
    return moto_server, clients, fleet


def _items(clients) -> list[dict]:
    try:
        return clients("dynamodb").scan(TableName=DEFAULT_TABLE)["Items"]
    except clients("dynamodb").exceptions.ResourceNotFoundException:
        return []


def _drill(server, tmp_path, settings: dict | None = None, *extra: str) -> list[str]:
    argv = ["--endpoint-url", server.url, "--region", REGION]
    if settings is not None:
        path = tmp_path / "settings.json"
        path.write_text(json.dumps(settings))
        argv += ["--settings", str(path)]
    return argv + ["drill", "--out", str(tmp_path / "out"), *extra]


CASES = {
    "mode off": (lambda c: None, {"mode": "off"},
                 "Holdfast runs in mode=off here (settings from --settings"),
    "plan active": (lambda c: ledger_plan.write(
        Ledger(c("dynamodb"), DEFAULT_TABLE), policy.Plan(generation=1, stage=policy.HOLD, entered_at=NOW, reasons=("a real event",)),
        controller_id="reconciler", now=NOW), None,
        "a plan is active: generation 1, stage hold since 2026-03-01T12:00:00+00:00 (a real event)"),
    "paused": (lambda c: ledger_control.set_paused(Ledger(c("dynamodb"), DEFAULT_TABLE), True, by="oncall", reason="deploy", now=NOW),
               None, "the kill switch is set (paused by oncall"),
    "mode recommend": (lambda c: None, {"mode": "recommend"},
                       "Holdfast runs in mode=recommend here (settings from --settings"),
    "too few groups": (lambda c: None, {"mode": "auto", "detect_min_groups": 4},
                       "the selector holdfast:protect=true matches 3 Auto Scaling groups in 3 zones"),
    "one zone": (lambda c: None, {"mode": "auto", "detect_min_zones": 4}, "across 4 zones (detect_min_groups, detect_min_zones)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_drill_is_refused_before_anything_is_injected(endpoint, tmp_path, capsys, case):
    server, clients, fleet = endpoint
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    setup, settings, message = CASES[case]
    setup(clients)
    items, before = _items(clients), snapshot(clients, fleet)

    code = main(_drill(server, tmp_path, settings))

    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert _items(clients) == items and snapshot(clients, fleet) == before
    assert not (tmp_path / "out").exists()


def test_resources_still_engaged_are_refused(endpoint, tmp_path, capsys):
    server, clients, fleet = endpoint
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    assert main(["--endpoint-url", server.url, "--region", REGION, "engage"]) == 0
    items, before = _items(clients), snapshot(clients, fleet)

    code = main(_drill(server, tmp_path))

    err = capsys.readouterr().err
    assert code == 2 and "resources are engaged with no plan in force" in err and "holdfast resume --now" in err
    assert _items(clients) == items and snapshot(clients, fleet) == before


def test_a_missing_ledger_is_refused(endpoint, tmp_path, capsys):
    server, clients, fleet = endpoint

    code = main(_drill(server, tmp_path))

    err = capsys.readouterr().err
    assert code == 2 and f"ledger table {DEFAULT_TABLE} does not exist in {REGION}" in err
    assert _items(clients) == []


def test_bad_numbers_are_usage_errors(endpoint, tmp_path, capsys):
    server, _, _ = endpoint
    with pytest.raises(SystemExit) as exit_:
        main(_drill(server, tmp_path, None, "--duration-minutes", "0"))
    assert exit_.value.code == 2 and "0 must be at least 1" in capsys.readouterr().err
