"""One output layer for every command: `--output table|json|text`, `--query` (JMESPath),
`--json` as `--output json`, tables that fit 120 columns (`--wide` for ARNs), and a
mistyped command, option or choice told the nearest one.

Every command runs against `make serve`'s sample fleet (holdfast_demo.serve: what a deploy
leaves, and the fleet of every kind), in this process (tests/cli/cli_inprocess.py), in the
order an operator would: plan, engage, status, ..., resume."""

from __future__ import annotations

import json
import re

import pytest

from holdfast.cli import build_parser, output
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet
from holdfast_demo.serve import SAMPLE, stack_resources
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

WIDTH = 120


@pytest.fixture
def sample(moto_server, aws_semantics, tmp_path):
    moto_server.reset()
    clients = moto_server.clients()
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    stack_resources(clients, Settings(mode="auto"))
    fleet = build_fleet(clients, **SAMPLE, prefix="sample")
    events = tmp_path / "events.jsonl"
    events.write_text('{"source": "aws.autoscaling"}\nnot json\n')
    folder = tmp_path / "out" / "111122223333" / REGION
    folder.mkdir(parents=True)
    (folder / "status.json").write_text(json.dumps({"command": "status", "account": "111122223333",
                                                    "region": REGION, "stage": "normal", "error": None}))
    return {"url": moto_server.url, "fleet": fleet, "events": str(events), "out": str(tmp_path / "out"),
            "drill_out": str(tmp_path / "drill")}


RULE = re.compile(r"^ *-+( +-+)*$")


def table_lines(out: str) -> list[str]:
    """Each table's header and rule (the dashes under it, as wide as its columns): every
    row is padded to the rule's columns, so the rule is the table's width."""
    lines = out.splitlines()
    return [line for i, rule in enumerate(lines) if RULE.match(rule) and i > 0 for line in (lines[i - 1], rule)]


def document(stdout: str):
    """The JSON document on stdout. moto, answering in this process, prints "Unable to find
    appropriate backend for ..." (for an API it lacks, which `doctor` calls) on this same
    stdout; a CLI in its own process never sees that line."""
    return json.loads(re.sub(r"Unable to find appropriate backend[^\n]*\n", "", stdout))


def run(sample, *args):
    return cli_inprocess.run(["--endpoint-url", sample["url"], "--region", REGION, *args])


def commands() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return set(sub.choices)


def every_command(sample) -> list[tuple[str, ...]]:
    """Each command with the arguments it needs here, in an operator's order (engage before
    status and release, resume last); `advance` has no hold to skip (exit 1, its document
    an error document)."""
    return [
        ("ledger-init",), ("plan",), ("engage",), ("status",), ("stage",), ("release", RELEASED),
        ("resume", "--now", "--dry-run"), ("pause", "--reason", "freeze"), ("unpause",), ("advance",),
        ("detect", sample["events"]), ("audit",), ("doctor",),
        ("drain-estimate", "--outage-minutes", "172", "--arrival-per-minute", "1200", "--consumer-per-minute", "1800"),
        ("report", "--output-dir", sample["out"]), ("resume", "--now"),
        ("drill", "--dry-run", "--out", sample["drill_out"]),   # refused while resources are held by hand
    ]


def test_the_list_here_is_every_command():
    assert {args[0] for args in every_command({"fleet": _Fleet(), "events": "", "out": "", "drill_out": ""})} == commands()


class _Fleet:
    selected = {"asg": ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/g"]}


# `release` forgets what it restores: each of its runs below releases another engaged resource.
RELEASED = "<an engaged resource>"


def test_every_command_prints_json_text_a_query_and_a_table_that_fits_120_columns(sample):
    problems = []
    engaged = iter([arn for kind in ("asg", "esm", "async") for arn in sample["fleet"].selected[kind]])

    for command in every_command(sample):
        name = command[0]

        def again(*options):
            return run(sample, *options, *[next(engaged) if a == RELEASED else a for a in command])

        # json: one document (an error document for a command that fails without one)
        as_json = again("--output", "json")
        doc = document(as_json.stdout)
        # --json is the alias it always was: the same document
        if name not in ("engage", "release", "resume", "pause", "unpause", "ledger-init"):
            assert set(document(again("--json").stdout)) == set(doc), name
        table, text = again(), again("--output", "text")
        key = next(iter(doc))
        picked = again("--output", "json", "--query", key)
        if "error" in doc:   # an error document is never queried, and text has none (the line is on stderr)
            if document(picked.stdout) != doc or text.stdout or "holdfast: " not in text.stderr:
                problems.append((name, "error", picked.stdout, text.stdout))
            continue
        if as_json.returncode != table.returncode or table.returncode not in (0, 1):
            problems.append((name, "exit", as_json.returncode, table.returncode, table.stderr[-300:]))
        if key not in ("command", "findings") and document(picked.stdout) != doc[key]:
            problems.append((name, "query", key))
        if key == "command" and document(picked.stdout) != name:
            problems.append((name, "query", picked.stdout))
        wide = [line for line in table_lines(table.stdout) if len(line) > WIDTH]
        if wide:
            problems.append((name, "a table wider than 120", wide[:2]))
        if not text.stdout.strip() or text.stdout.lstrip().startswith(("{", "[")):
            problems.append((name, "text", text.stdout[:200]))
        if name in ("plan", "status"):   # names, not ARNs; the ARNs with --wide
            arns = [arn for arns in sample["fleet"].selected.values() for arn in arns]
            if [a for a in arns if a in table.stdout] or "NAME" not in table.stdout.splitlines()[0]:
                problems.append((name, "ARNs in the table", table.stdout[:300]))
            if not all(a in again("--wide").stdout for a in arns):
                problems.append((name, "no ARNs with --wide"))
    assert not problems, "\n".join(map(repr, problems))


def test_a_query_selects_from_the_document_in_each_format(sample):
    mappings = sample["fleet"].selected["esm"]
    query = "resources[?kind=='esm'].[name, action]"
    as_json = run(sample, "--output", "json", "--query", query, "plan")
    assert as_json.returncode == 0, as_json.stderr
    rows = json.loads(as_json.stdout)
    assert len(rows) == len(mappings) and {action for _, action in rows} == {"planned"}
    # text: a line per resource, tab-separated, for `while read name action`
    text = run(sample, "--output", "text", "--query", query, "plan").stdout.splitlines()
    assert sorted(line.split("\t") for line in text) == sorted(rows)
    # table: the selection as a table
    table = run(sample, "--query", "resources[?kind=='esm'].{name: name, action: action}", "plan").stdout
    assert table.splitlines()[0].split() == ["NAME", "ACTION"] and all(n in table for n, _ in rows)


def test_a_query_that_selects_nothing_prints_null_or_nothing_and_exits_0(sample):
    as_json = run(sample, "--output", "json", "--query", "resources[?kind=='nothing'] | [0]", "plan")
    assert as_json.returncode == 0 and as_json.stdout.strip() == "null"
    for fmt in ("text", "table"):
        proc = run(sample, "--output", fmt, "--query", "no_such_key", "plan")
        assert proc.returncode == 0 and proc.stdout == "" and "--query selected nothing" in proc.stderr, fmt


@pytest.mark.parametrize("args", [("plan",), ("engage", "--yes"), ("drain-estimate", "--outage-minutes", "1")])
def test_a_malformed_query_is_exit_2_with_one_line_before_anything_runs(args):
    # No endpoint answers here: the query is refused before the command makes a call.
    proc = cli_inprocess.run(["--region", REGION, "--endpoint-url", "http://127.0.0.1:9", "--query", "resources[?", *args])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("holdfast: error: --query 'resources[?' is not a JMESPath expression")
    as_json = cli_inprocess.run(["--region", REGION, "--output", "json", "--query", "[", *args])
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"]["cause"] == "usage"


def test_json_and_a_different_output_together_are_a_usage_error():
    proc = cli_inprocess.run(["--region", REGION, "--json", "--output", "table", "drain-estimate"])
    assert proc.returncode == 2 and "--json is --output json" in proc.stderr


def test_the_text_format_is_the_aws_clis():
    doc = {"rows": [{"b": 2, "a": 1, "tags": ["x", "y"]}, {"a": 3, "c": None}], "n": 2}
    # Scalars of each object in the sorted keys of all of them; nested values on lines led by their key.
    assert output.text(doc).splitlines() == ["2", "ROWS\t1\t2\tNone", "TAGS\tx", "TAGS\ty", "ROWS\t3\tNone\tNone"]
    assert output.text([1, "a"]) == "1\ta" and output.text("one") == "one"


def test_a_long_cell_wraps_under_itself_within_120_columns_and_the_arn_column_waits_for_wide():
    cell = "; ".join(f"change number {i} said in words" for i in range(12))
    text = output.table(("KIND", "NAME", "ARN", "CHANGES"), [("asg", "orders", "arn:aws:x" * 30, cell)])
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines) and "ARN" not in lines[0]
    start = lines[0].index("CHANGES")
    assert len(lines) > 3 and all(line[:start].strip() == "" for line in lines[3:])
    assert re.sub(r"\s+", " ", " ".join(line[start:] for line in lines[2:])) == cell
    token = output.set_wide(True)
    try:
        assert "arn:aws:x" * 30 in output.table(("KIND", "ARN"), [("asg", "arn:aws:x" * 30)])
    finally:
        output.reset_wide(token)
    assert "ARN" not in output.table(("KIND", "ARN"), [("asg", "arn")])


@pytest.mark.parametrize("argv, wanted", [
    (["stauts"], "did you mean 'status'?"),
    (["engage", "--dry"], "did you mean '--dry-run'?"),
    (["plan", "--wdie"], "did you mean '--wide'?"),
    (["--output", "tabel", "plan"], "did you mean 'table'?"),
])
def test_a_typo_is_a_usage_error_that_names_the_nearest_command_option_or_choice(argv, wanted):
    proc = cli_inprocess.run(argv)
    assert proc.returncode == 2 and wanted in proc.stderr, proc.stderr


def test_options_are_never_abbreviated():
    # --dry was taken as --dry-run, --all as --all-accounts, --out as --output-dir
    for argv in (["engage", "--dry"], ["status", "--all"], ["plan", "--all-accounts", "--output-d", "x"]):
        assert cli_inprocess.run(argv).returncode == 2, argv
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert parser.allow_abbrev is False and all(p.allow_abbrev is False for p in sub.choices.values())
