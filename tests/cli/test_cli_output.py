"""Help and output a person can read: help pages, `--version`, each command's own usage
error, one exit code per cause, JSON errors, progress lines when stderr is not a
terminal, and the CHANGES column in plain words.

`--version`, the top-level help, an unknown option and the plan run the installed
console script (its entry point, its exit codes); the help page of every command, the
writing commands' pages and the unreachable endpoint of every command run `main` in this
process (tests/cli/cli_inprocess.py), which prints and exits the same way."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from holdfast.cli import build_parser
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast_demo.fleet import build_fleet
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

HOLDFAST = Path(sys.executable).with_name("holdfast")


def holdfast(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(HOLDFAST), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def in_process(*args: str) -> subprocess.CompletedProcess:
    return cli_inprocess.run(args)


def commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)


def test_version_prints_the_package_version():
    proc = holdfast("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"holdfast {metadata.version('holdfast-aws')}"


def test_every_command_page_has_a_description_and_an_example_and_no_global_options():
    for name in commands():
        proc = in_process(name, "--help")
        assert proc.returncode == 0, name
        page = proc.stdout
        head = page.split("\n\n")[1]   # after the usage line: the description
        assert len(head) > 40, (name, head)
        assert "example:\n  holdfast " in page, name
        options = page.split("options:", 1)[1]
        assert not re.search(r"^\s+--(endpoint-url|ledger-table|region)\b", options, re.M), name
    from holdfast.cli import EXIT_CODES

    top = holdfast("--help").stdout
    assert "--endpoint-url" in top and "exit codes:" in top
    for code, what in EXIT_CODES.items():   # one exit code per cause, documented where --help is
        assert re.search(rf"^  {code}\s+{re.escape(what)}$", top, re.M), (code, top)


def test_writing_commands_say_they_write():
    for name in ("engage", "resume", "release", "pause", "unpause", "advance", "ledger-init"):
        page = in_process(name, "--help").stdout
        assert "WRITES" in page and "--yes" in page and "--dry-run" in page, name
    assert "WRITES" not in in_process("plan", "--help").stdout


def test_an_unknown_option_shows_that_commands_usage():
    proc = holdfast("plan", "--bogus")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: holdfast plan") and "unrecognized arguments: --bogus" in proc.stderr
    proc = holdfast("--json", "plan", "--bogus")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["cause"] == "usage"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", [("plan",), ("status",), ("stage",), ("pause", "--yes"), ("engage", "--yes"),
                                  ("resume", "--now", "--yes"), ("drill",)])
def test_an_endpoint_that_is_down_is_exit_3_for_every_command_with_a_json_error(args):
    url = f"http://127.0.0.1:{_closed_port()}"
    proc = in_process("--endpoint-url", url, "--region", REGION, "--json", *args)
    assert proc.returncode == 3, (args, proc.stderr[-500:])
    doc = json.loads(proc.stdout)
    assert doc["error"]["cause"] == "unreachable" and doc["error"]["exit_code"] == 3
    assert url in doc["error"]["message"]
    assert "Traceback" not in proc.stderr


@pytest.fixture
def fleet(moto_server, aws_semantics):
    moto_server.reset()
    clients = moto_server.clients()
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    return build_fleet(clients, asgs=3, esms=1, asyncs=1, nlbs=1, services=1, unselected=0)


def test_plan_says_changes_in_plain_words_and_progress_shows_without_a_terminal(moto_server, fleet):
    proc = holdfast("--endpoint-url", moto_server.url, "--region", REGION, "--progress-seconds", "0", "plan")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for words in ("ReplaceUnhealthy suspended", "AZRebalance suspended", "DNS failover off (was below 1)",
                  "dynamic scale-in suspended", "concurrency capped at 2 (was uncapped)",
                  "async retries 2 (AWS's default) -> 1"):
        assert words in out, (words, out)
    assert "-> true" not in out and "dns_count" not in out
    # stderr is a pipe here: progress lines, each with the time elapsed, and an estimate
    lines = [line for line in proc.stderr.splitlines() if line.startswith("holdfast: progress: ")]
    assert any(re.search(r"plan asg: 1/3 \(\d+ s elapsed, about \d+ (s|min)", line) for line in lines), lines
    assert any("plan asg: 3/3" in line and "asg done" in line for line in lines), lines
    assert "\r" not in proc.stderr
