"""Global options follow the AWS CLI's convention: accepted before or after the command."""

from __future__ import annotations

import json

import pytest

from holdfast.cli import main

EXAMPLE = ["--outage-minutes", "172", "--arrival-per-minute", "1200", "--consumer-per-minute", "1800"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "drain-estimate", *EXAMPLE],
        ["drain-estimate", *EXAMPLE, "--json"],
    ],
)
def test_json_before_or_after_the_command_prints_one_document(capsys, argv):
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["backlog_messages"], document["drain_minutes"]) == (206400, 344)


def test_a_bad_selector_after_the_command_is_a_usage_error(capsys):
    assert main(["drain-estimate", *EXAMPLE, "--selector", "no-equals-sign"]) == 2
    assert "holdfast.selector" in capsys.readouterr().err


def test_without_json_the_output_is_text(capsys):
    assert main(["drain-estimate", *EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "206,400" in out or "206400" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
