"""`holdfast status` names each engaged resource's settings as an operator reads them.

The table's SETTING column says what a recorded key is on the resource (an Auto Scaling
process, a mapping's maximum concurrency, an NLB's DNS failover threshold) and its values
in words (`suspended`, `uncapped`, `off`), where it printed the actuators' own keys and
raw JSON (`dns_count`, `true`). The --json document keeps every field it had, with the
recorded keys and values, and adds `settings`, the same words. `holdfast.cli.main` runs
in-process against moto, with AWS's semantics where moto departs from them."""

from __future__ import annotations

import json

import pytest

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.core import kinds
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
    make_mapping,
    make_service_target,
    make_target_group,
)

# The actuators' recorded keys that are not names an operator knows from the console.
INTERNAL_KEYS = ("dns_count", "dns_pct", "routing_count", "routing_pct", "max_retries", "max_age", "on_failure")


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(["--region", REGION, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def engaged(aws_semantics, capsys):
    """One engaged resource of every kind: kind -> ARN."""
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    arns = {
        "asg": make_asg(clients, "web"),
        "esm": make_mapping(clients, make_function(clients, "consumer"), "q")["EventSourceMappingArn"],
        "async": make_function(clients, "fn"),
        "nlb": make_target_group(clients, "tg"),
        "scalable-target": make_service_target(clients, "svc"),
    }
    code, out, err = run(capsys, "--json", "engage", "--yes")
    assert code == 0, err
    assert set(arns.values()) <= {r["arn"] for r in json.loads(out)["resources"] if r["action"] == "engaged"}
    return arns


def _table(out: str) -> list[list[str]]:
    """The status table's rows, split on its column gaps (two spaces or more)."""
    import re
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("KIND"))
    rows = []
    for line in lines[start:]:
        if not line.strip() or re.match(r"^\d+ engaged", line):
            break
        rows.append(line)
    return rows


def test_the_status_table_says_each_setting_and_value_in_words(engaged, capsys):
    code, out, err = run(capsys, "--wide", "status")
    assert code == 0, err
    rows = _table(out)
    header = rows[0].split()
    assert header[:4] == ["KIND", "NAME", "ARN", "SETTING"] and "KEY" not in header
    # The resource by the name its owner gave it, beside the ARN.
    assert any(line.split()[:2] == ["scalable-target", "service/c/svc"] for line in rows), rows
    body = "\n".join(rows[1:])
    for key in INTERNAL_KEYS:
        assert key not in body, (key, body)
    # Each kind's setting by the name the console uses, its values in words.
    assert "process ReplaceUnhealthy" in body
    asg_line = next(line for line in rows if "process ReplaceUnhealthy" in line)
    assert asg_line.split()[-2:] == ["suspended", "suspended"] and "not suspended" in asg_line   # was false, true, true
    assert "maximum concurrency (cap)" in body and "uncapped" in body
    assert "DNS failover: minimum healthy targets" in body
    assert "unhealthy state routing: minimum healthy targets" in body
    assert "async retry attempts" in body and "2 (AWS's default)" in body
    assert "dynamic scale-in" in body
    assert "true" not in body.split() and "false" not in body.split() and "null" not in body.split()


def test_every_key_an_engaged_resource_records_is_one_its_kind_says(engaged, capsys):
    """The registry's check of `Kind.words` (tests/actuators/test_registry.py) covers the
    keys a kind declares; here every key an engaged resource of every kind records is one
    of them, so a new kind, or a new key, cannot print its raw keys unnoticed."""
    assert set(engaged) == set(kinds.KINDS), "engage one resource of every kind here"
    code, out, err = run(capsys, "--json", "status")
    assert code == 0, err
    recorded = [(r["kind"], key) for r in json.loads(out)["resources"] for key in r["original"]]
    assert {kind for kind, _ in recorded} == set(kinds.KINDS)
    assert [(kind, key) for kind, key in recorded if key not in kinds.BY_NAME[kind].words.keys] == []


def test_status_json_keeps_its_fields_and_adds_the_words(engaged, capsys):
    code, out, err = run(capsys, "--json", "status")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["arn"]: r for r in doc["resources"]}
    asg = rows[engaged["asg"]]
    # The fields a script reads are there, with the recorded keys and values, as before.
    assert {"kind", "arn", "name", "original", "applied", "current", "drift", "vanished", "recorded_in"} <= set(asg)
    assert asg["original"]["ReplaceUnhealthy"] is False and asg["current"]["ReplaceUnhealthy"] is True
    said = {s["key"]: s for s in asg["settings"]}
    assert said["ReplaceUnhealthy"] == {"key": "ReplaceUnhealthy", "setting": "process ReplaceUnhealthy",
                                        "original": "not suspended", "applied": "suspended", "current": "suspended",
                                        "drift": False}
    nlb = {s["key"]: s for s in rows[engaged["nlb"]]["settings"]}
    assert nlb["dns_count"]["setting"] == "DNS failover: minimum healthy targets"
    assert nlb["dns_count"]["current"] == "off" and rows[engaged["nlb"]]["current"]["dns_count"] == "off"
    esm = {s["key"]: s for s in rows[engaged["esm"]]["settings"]}
    assert esm["MaximumConcurrency"]["original"] == "uncapped"


def test_a_provisioned_mapping_is_planned_engaged_and_shown_by_its_pollers(aws_semantics, capsys):
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    arn = make_mapping(clients, make_function(clients, "consumer"), "q",
                       pollers={"MinimumPollers": 10, "MaximumPollers": 50})["EventSourceMappingArn"]
    code, out, err = run(capsys, "plan")
    assert code == 0, err
    assert "pollers at most 50 -> 2 (up to 20 concurrent batches)" in out and "pollers at least 10 -> 2" in out
    code, out, err = run(capsys, "--json", "engage", "--yes")
    assert code == 0, err
    (row,) = [r for r in json.loads(out)["resources"] if r["arn"] == arn]
    assert row["action"] == "engaged" and "provisioned" in row["notes"]
    code, out, err = run(capsys, "status")
    assert code == 0, err
    body = "\n".join(_table(out)[1:])
    assert "maximum pollers (provisioned mode)" in body and "minimum pollers (provisioned mode)" in body
    code, out, err = run(capsys, "--json", "status")
    said = {s["key"]: s for s in {r["arn"]: r for r in json.loads(out)["resources"]}[arn]["settings"]}
    assert (said["MaximumPollers"]["original"], said["MaximumPollers"]["current"]) == ("50", "2")
    assert set(said) <= set(kinds.ESM.words.keys)
