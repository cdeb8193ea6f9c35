"""Every runtime that talks to AWS passes its calls through the account's rate budgets:
the Lambda controllers always, the CLI unless it talks to a loopback endpoint (a local
moto has no quotas) or is told otherwise."""

from __future__ import annotations

import pytest

from holdfast.cli import build_parser
from holdfast.cli.context import Context, _budgeted
from holdfast.handlers.shell import runtime_from_env


@pytest.mark.parametrize("choice, endpoint, governed", [
    ("auto", None, True),
    ("auto", "https://lambda.us-east-1.amazonaws.com", True),
    ("auto", "http://127.0.0.1:5000", False),
    ("auto", "http://localhost:4566", False),
    ("on", "http://127.0.0.1:5000", True),
    ("off", None, False),
])
def test_the_cli_keeps_the_quota_except_against_a_local_endpoint(choice, endpoint, governed):
    assert _budgeted(choice, endpoint) is governed


def test_a_cli_context_and_a_controller_runtime_install_the_governor(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    args = build_parser().parse_args(["--rate-budget", "on", "status"])
    ctx = Context.from_args(args)
    # The governor's hook among the clients' others (the CLI also counts answered calls).
    governed = lambda clients: any(h.__qualname__.startswith("Governor.") for h in clients._on_client)
    assert governed(ctx.clients), "the CLI's clients are not governed"
    runtime = runtime_from_env("test-controller", {"HOLDFAST_LEDGER_TABLE": "t"})
    assert governed(runtime.clients), "the controller's clients are not governed"
    off = Context.from_args(build_parser().parse_args(["--rate-budget", "off", "status"]))
    assert not governed(off.clients)
