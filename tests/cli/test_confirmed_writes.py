"""Writes with a second look.

Outside a loopback endpoint every writing command shows what it will change and asks, or
takes --yes; with no terminal and no --yes it refuses (exit 2) and writes nothing;
--dry-run shows and writes nothing; a deployed recommend mode refuses resource writes
unless --force-mode; `status` and `stage` say who holds resources by hand.

The session's moto server listens on 127.0.0.1, which the CLI rightly treats as a local
sandbox. To be "not loopback" the CLI is pointed at `http://aws.holdfast.test:<port>` (a
reserved name, RFC 2606, that resolves nowhere) through HTTP_PROXY set to the moto server:
botocore sends every request through the proxy, so the requests reach moto while the
endpoint the CLI judges is a remote one, as a LocalStack on another host would be.
A terminal is a pseudo-terminal on the child's stdin (the question goes to stderr): the
installed console script runs in a subprocess for the terminal's question and for the
`stage` table; every other run is `main` in this process (tests/cli/cli_inprocess.py), with
stdin that is no terminal, as /dev/null is, and the proxy variables set for the call.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.table import ensure_table
from holdfast_demo.fleet import build_fleet, snapshot
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

HOLDFAST = Path(sys.executable).with_name("holdfast")


def remote(server) -> dict[str, str]:
    port = urlparse(server.url).port
    return {"endpoint": f"http://aws.holdfast.test:{port}", "HTTP_PROXY": server.url, "NO_PROXY": "", "no_proxy": ""}


def run(server, *args: str, far: bool = True, answer: str | None = None) -> tuple[int, dict | None, str]:
    """`holdfast --json ...`: exit code, stdout's document, stderr. `far`: through the
    remote-looking endpoint. `answer`: typed on a terminal (the console script, its stdin
    a pty); else `main` in this process, stdin no terminal."""
    env = {}
    endpoint = server.url
    if far:
        r = remote(server)
        endpoint = r.pop("endpoint")
        env.update(r)
    argv = ["--endpoint-url", endpoint, "--region", REGION, "--rate-budget", "off", "--json", *args]
    if answer is None:
        proc = cli_inprocess.run(argv, env=env)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    else:
        argv, env = [str(HOLDFAST), *argv], {**os.environ, **env}
        leader, follower = pty.openpty()
        child = subprocess.Popen(argv, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        os.close(follower)
        os.write(leader, answer.encode() + b"\n")
        out, err = child.communicate(timeout=120)
        os.close(leader)
        code = child.returncode
    return code, json.loads(out) if out.strip() else None, err


@pytest.fixture
def fleet(moto_server, aws_semantics):
    moto_server.reset()
    clients = moto_server.clients()
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    built = build_fleet(clients, asgs=2, esms=1, asyncs=1, nlbs=1, services=1, unselected=0)
    return clients, built


def engaged_records(clients) -> int:
    from holdfast.ledger.resources import ResourceLedger

    return len(ResourceLedger(Ledger(clients("dynamodb"), DEFAULT_TABLE)).records())


def test_without_a_terminal_or_yes_every_write_refuses_with_exit_2_and_writes_nothing(moto_server, fleet):
    # GIVEN a fleet, seen through an endpoint that is not loopback
    clients, built = fleet
    before = snapshot(clients, built)
    some_arn = built.selected["asg"][0]

    # WHEN each writing command runs with no terminal and no --yes THEN exit 2, saying --yes, nothing written
    for args in (("engage",), ("pause", "--reason", "x"), ("ledger-init",)):
        code, doc, err = run(moto_server, *args)
        assert code == 2, (args, err)
        assert "--yes" in err and "no terminal" in err
        assert doc["error"]["exit_code"] == 2 and doc["error"]["cause"] == "usage"
    assert snapshot(clients, built) == before and engaged_records(clients) == 0
    assert ledger_control.read_control(Ledger(clients("dynamodb"), DEFAULT_TABLE)).paused is False

    # (engaged by hand with --yes, so there is something to restore)
    assert run(moto_server, "engage", "--yes")[0] == 0
    engaged = snapshot(clients, built)
    for args in (("resume", "--now"), ("release", some_arn), ("unpause",)):
        code, doc, err = run(moto_server, *args)
        assert code == 2 and "--yes" in err, (args, err)
    assert snapshot(clients, built) == engaged

    # AND on a loopback endpoint nothing is asked: the same resume goes ahead without --yes
    code, doc, err = run(moto_server, "resume", "--now", far=False)
    assert code == 0, err
    assert snapshot(clients, built) == before


def test_on_a_terminal_engage_shows_the_plan_in_plain_words_and_asks(moto_server, fleet):
    clients, built = fleet
    before = snapshot(clients, built)

    # WHEN the operator answers no THEN the plan was shown, nothing written, exit 2
    code, doc, err = run(moto_server, "engage", answer="n")
    assert code == 2, err
    assert "[y/N]" in err and "ReplaceUnhealthy suspended" in err and "DNS failover off" in err
    assert "not confirmed" in doc["error"]["message"]
    assert snapshot(clients, built) == before

    # WHEN yes THEN engaged
    code, doc, err = run(moto_server, "engage", answer="y")
    assert code == 0, err
    assert {r["action"] for r in doc["resources"]} == {"engaged"}
    assert snapshot(clients, built) != before


def test_dry_run_shows_every_write_and_writes_nothing(moto_server, fleet):
    clients, built = fleet
    before = snapshot(clients, built)

    code, doc, _ = run(moto_server, "engage", "--dry-run")
    assert code == 0 and doc["dry_run"] is True and doc["command"] == "engage"
    assert {r["action"] for r in doc["resources"]} == {"planned"}
    code, doc, _ = run(moto_server, "pause", "--dry-run")
    assert code == 0 and doc["dry_run"] is True
    assert snapshot(clients, built) == before and engaged_records(clients) == 0
    assert ledger_control.read_control(Ledger(clients("dynamodb"), DEFAULT_TABLE)).paused is False

    assert run(moto_server, "engage", "--yes")[0] == 0
    engaged = snapshot(clients, built)
    code, doc, _ = run(moto_server, "resume", "--now", "--dry-run")
    assert code == 0 and doc["dry_run"] is True
    groups = {r["arn"]: r for r in doc["resources"] if r["kind"] == "asg"}
    assert set(groups) == set(built.selected["asg"])
    assert all(r["changes"]["ReplaceUnhealthy"] == {"from": True, "to": False} for r in groups.values())
    arn = built.selected["nlb"][0]
    code, doc, _ = run(moto_server, "release", arn, "--dry-run")
    assert code == 0 and [r["arn"] for r in doc["resources"]] == [arn]
    assert doc["resources"][0]["changes"]["dns_count"] == {"from": "off", "to": "1"}
    assert snapshot(clients, built) == engaged


def test_a_deployed_recommend_mode_is_honoured_unless_force_mode(moto_server, fleet, tmp_path):
    clients, built = fleet
    before = snapshot(clients, built)
    clients("ssm").put_parameter(Name="/holdfast/Holdfast/settings", Value=json.dumps({"mode": "recommend"}),
                                 Type="String")

    code, doc, err = run(moto_server, "engage", "--yes")
    assert code == 2 and "mode=recommend (SSM parameter /holdfast/Holdfast/settings)" in err
    assert "--force-mode" in doc["error"]["message"]
    assert snapshot(clients, built) == before

    code, doc, err = run(moto_server, "engage", "--yes", "--force-mode")
    assert code == 0, err
    assert "--force-mode: writing although mode=recommend" in err
    assert snapshot(clients, built) != before

    # A --settings file that says recommend is honoured too, even on a loopback endpoint.
    clients("ssm").delete_parameter(Name="/holdfast/Holdfast/settings")
    settings = tmp_path / "cdk.json"
    settings.write_text(json.dumps({"context": {"holdfast": {"mode": "recommend"}}}))
    code, _, err = run(moto_server, "--settings", str(settings), "resume", "--now", far=False)
    assert code == 2 and f"mode=recommend (--settings {settings})" in err


def test_status_and_stage_say_who_holds_resources_by_hand(moto_server, fleet):
    clients, built = fleet
    code, doc, _ = run(moto_server, "status", far=False)
    assert code == 0 and doc["held"] is None

    assert run(moto_server, "engage", "--yes")[0] == 0

    code, doc, _ = run(moto_server, "status")
    assert code == 0
    held = doc["held"]
    assert held["engaged"] == built.count() and held["command"] == "holdfast engage"
    assert held["by"].startswith("arn:aws:") and "account 123456789012" in held["by"] and held["at"]
    code, doc, _ = run(moto_server, "stage")
    assert code == 0 and doc["stage"] == "normal" and doc["held"]["by"] == held["by"]
    proc = subprocess.run([str(HOLDFAST), "--endpoint-url", moto_server.url, "--region", REGION, "stage"],
                          capture_output=True, text=True, timeout=60)
    assert f"held        {built.count()} resources engaged with no plan in force, by {held['by']}" in proc.stdout

    # AND a complete resume --now ends the hold by hand
    assert run(moto_server, "resume", "--now", "--yes")[0] == 0
    code, doc, _ = run(moto_server, "status")
    assert code == 0 and doc["held"] is None and doc["resources"] == []
