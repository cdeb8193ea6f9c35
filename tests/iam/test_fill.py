"""One `fill` puts a deployment's values into policies/<role>.json (holdfast.iam.fill): the
construct renders with it at synth, the fixtures and the tests enforce and check what it
renders, so none of them can fill a placeholder another way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from holdfast.iam import fill
from holdfast_cdk import role_policies

ROOT = Path(__file__).resolve().parents[2]


def test_fill_fills_names_passes_iam_variables_and_names_an_unknown_one():
    doc = {"Resource": ["arn:${Partition}:sqs:*:${Account}:q"], "Condition": {"StringEquals": {
        "aws:ResourceTag/${SelectorKey}": "${aws:username}"}}}
    values = {"Partition": "aws", "Account": "123456789012", "SelectorKey": "holdfast:protect"}
    assert fill(doc, values) == {"Resource": ["arn:aws:sqs:*:123456789012:q"], "Condition": {"StringEquals": {
        "aws:ResourceTag/holdfast:protect": "${aws:username}"}}}
    with pytest.raises(ValueError, match=r"\$\{Region\} is not one of: Account, Partition"):
        fill("arn:${Partition}:sqs:${Region}:${Account}:q", {"Partition": "aws", "Account": "1"})
    assert fill("${Region}:${Account}", {"Account": "1"}, strict=False) == "${Region}:1"


def test_the_construct_renders_with_it():
    assert role_policies.fill is fill


def fills_of_their_own(roots: list[Path]) -> list[str]:
    """Functions named `fill`, and placeholder patterns (`\\$\\{([A-Za-z]...`), anywhere but holdfast.iam."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path in (ROOT / "functions" / "holdfast" / "iam.py", Path(__file__).resolve()) or ".venv" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == "fill" or (
                        isinstance(node, ast.Constant) and isinstance(node.value, str) and r"\$\{([A-Za-z]" in node.value):
                    found.append(f"{path}:{node.lineno}")
    return found


def test_no_other_fill_is_written(tmp_path):
    assert fills_of_their_own([ROOT / d for d in ("functions", "stacks", "dev", "tests")]) == []
    (tmp_path / "mine.py").write_text("def fill(node, values):\n    return node\n")
    (tmp_path / "other.py").write_text('PLACEHOLDER = re.compile(r"\\$\\{([A-Za-z][A-Za-z0-9]*)\\}")\n')
    assert len(fills_of_their_own([tmp_path])) == 2
