"""Rules the code states about itself, kept true by reading the source (no AWS, no import
of the package beyond the listing of its modules):

- every DynamoDB `ConditionExpression` in holdfast is a named condition of
  holdfast.ledger.conditions, and each name there has the comment that says its race;
- no AWS error code (nor any other part of a service's answer) is read outside holdfast.aws:
  the rest calls its helpers (`error_code`, `error_message`, `condition_failed` ...);
- the import-layers contract in .importlinter names every top-level module of holdfast;
- the index docstrings of holdfast.core and holdfast.ledger list every module of theirs.

Each rule is a function over source text, and each is also tried on a source that breaks
it, so a rule that silently stopped looking would fail here too.
"""

from __future__ import annotations

import ast
import configparser
import pkgutil
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "functions" / "holdfast"
CONDITIONS = PACKAGE / "ledger" / "conditions.py"
AWS = PACKAGE / "aws.py"
CONDITIONS_MODULE = "holdfast.ledger.conditions"


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


# ---- every ConditionExpression is a named condition -----------------------------------


def _imported_from(tree: ast.Module, module: str) -> set[str]:
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == module for alias in node.names}


def _named(value: ast.expr, names: set[str]) -> bool:
    """A condition's value is a name of holdfast.ledger.conditions, one of two such names
    (`A if x else B`), or the condition a helper there built (`clause["ConditionExpression"]`)."""
    if isinstance(value, ast.Name):
        return value.id in names
    if isinstance(value, ast.IfExp):
        return _named(value.body, names) and _named(value.orelse, names)
    if isinstance(value, ast.Subscript):
        return isinstance(value.slice, ast.Constant) and value.slice.value == "ConditionExpression"
    return False


def unnamed_conditions(source: str, where: str = "<source>") -> list[str]:
    """Each `ConditionExpression` written in `source` whose value is not a named condition."""
    tree = ast.parse(source)
    names = _imported_from(tree, CONDITIONS_MODULE)
    values: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "ConditionExpression":
            values.append(node.value)
        elif isinstance(node, ast.Dict):
            values += [v for k, v in zip(node.keys, node.values)
                       if isinstance(k, ast.Constant) and k.value == "ConditionExpression"]
        elif isinstance(node, ast.Assign):
            values += [node.value for t in node.targets if isinstance(t, ast.Subscript)
                       and isinstance(t.slice, ast.Constant) and t.slice.value == "ConditionExpression"]
    return [f"{where}:{v.lineno}: {ast.unparse(v)[:80]}" for v in values if not _named(v, names)]


def unexplained_conditions(source: str) -> list[str]:
    """Each condition named in conditions.py (an upper-case string constant there) whose
    comment, the block just above it or above the run of names it begins, does not name it."""
    lines = source.splitlines()
    tree = ast.parse(source)
    missing = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        value = node.value
        is_text = isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp)) and not (
            isinstance(value, ast.Constant) and not isinstance(value.value, str))
        if not name.isupper() or not is_text or name in ("PLAN_PK", "CURRENT"):
            continue
        i = node.lineno - 2
        while i >= 0 and lines[i] and not lines[i].startswith("#"):   # a run of names under one comment
            i -= 1
        comment = []
        while i >= 0 and lines[i].startswith("#"):
            comment.append(lines[i])
            i -= 1
        if not any(re.search(rf"\b{name}\b", line) for line in comment) or len(" ".join(comment)) < len(name) + 40:
            missing.append(name)
    return missing


def test_every_condition_expression_is_a_named_condition():
    found = []
    for path in _sources():
        if path == CONDITIONS:
            continue
        found += unnamed_conditions(path.read_text(), str(path.relative_to(PACKAGE)))
    assert found == [], "write these as named conditions in ledger/conditions.py:\n" + "\n".join(found)


def test_every_named_condition_says_the_race_it_prevents():
    assert unexplained_conditions(CONDITIONS.read_text()) == []


@pytest.mark.parametrize("source", [
    'ledger.put_item(Item=i, ConditionExpression="attribute_not_exists(pk)")',
    'ledger.put_item(Item=i, ConditionExpression=f"attribute_exists({PK})")',
    'item = {"Put": {"Item": i, "ConditionExpression": "#a = :a"}}',
    'put["ConditionExpression"] = MINE',
    'from holdfast.ledger.conditions import A\nx(ConditionExpression=A if y else "#b = :b")',
])
def test_an_inline_condition_is_found(source):
    assert unnamed_conditions(source) != []


def test_named_conditions_pass_and_a_query_is_not_a_condition():
    source = ('from holdfast.ledger.conditions import A, B, version_is\n'
              'x(ConditionExpression=A)\nx(ConditionExpression=A if y else B)\n'
              'x(ConditionExpression=version_is(3)["ConditionExpression"])\n'
              'x(KeyConditionExpression="#pk = :pk")\n{"ConditionExpression": B}\n')
    assert unnamed_conditions(source) == []


def test_a_condition_without_its_race_is_found():
    source = CONDITIONS.read_text() + '\nUNSAID = "#x = :x"\n'
    assert unexplained_conditions(source) == ["UNSAID"]


# ---- AWS error codes are read in aws.py only ------------------------------------------


def answer_reads(source: str, where: str = "<source>") -> list[str]:
    """Each read of a service's answer on an exception (`err.response`) in `source`."""
    return [f"{where}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "response" and isinstance(node.ctx, ast.Load)]


def test_no_aws_error_code_is_read_outside_aws_py():
    found = []
    for path in _sources():
        if path != AWS:
            found += answer_reads(path.read_text(), str(path.relative_to(PACKAGE)))
    assert found == [], "use holdfast.aws's error_code / error_message / condition_failed ...:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    'if err.response["Error"]["Code"] == "ValidationError": pass',
    'code = err.response.get("Error", {}).get("Code")',
    'reasons = err.response.get("CancellationReasons") or []',
])
def test_a_raw_error_read_is_found(source):
    assert answer_reads(source) != []
    assert answer_reads("code = error_code(err)") == []


# ---- the layers contract names every top-level module ---------------------------------


def top_level_modules() -> list[str]:
    return sorted(f"holdfast.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE)]))


def unlayered(config_text: str, modules: list[str]) -> list[str]:
    config = configparser.ConfigParser()
    config.read_string(config_text)
    layers = config["importlinter:contract:layers"]["layers"]
    named = {name.strip() for line in layers.splitlines() for name in line.split("|") if name.strip()}
    return [m for m in modules if m not in named]


def test_the_layers_contract_names_every_top_level_module():
    modules = top_level_modules()
    assert "holdfast.core" in modules and "holdfast.aws" in modules and len(modules) > 10
    assert unlayered((ROOT / ".importlinter").read_text(), modules) == []


def test_a_module_on_no_layer_is_found():
    assert unlayered((ROOT / ".importlinter").read_text(), [*top_level_modules(), "holdfast.newcomer"]) \
        == ["holdfast.newcomer"]


# ---- the index docstrings list their package's modules ---------------------------------


def unlisted(package: Path, dotted: str) -> list[str]:
    """The modules and subpackages of `package` its docstring does not name (as `x.py`,
    `x/` or `<dotted>.x`), and the `x.py` it names that do not exist."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    modules = [m.name for m in pkgutil.iter_modules([str(package)])]
    missing = [m for m in modules if not re.search(rf"(?<![\w.])({re.escape(m)}\.py|{re.escape(m)}/)|"
                                                   rf"\b{re.escape(dotted)}\.{re.escape(m)}\b", doc)]
    stale = [f"{name}.py" for name in re.findall(r"(?<![\w./])(\w+)\.py\b", doc)
             if name not in modules and not (package / name).is_dir()]
    return missing + stale


@pytest.mark.parametrize("package", ["core", "ledger"])
def test_the_package_index_lists_every_module(package):
    assert unlisted(PACKAGE / package, package) == []


def test_a_module_missing_from_the_index_is_found(tmp_path):
    copy = tmp_path / "core"
    copy.mkdir()
    (copy / "__init__.py").write_text('"""The core:\n\n- model.py  the model\n- gone.py  removed\n"""\n')
    (copy / "model.py").write_text("")
    (copy / "newcomer.py").write_text("")
    assert unlisted(copy, "core") == ["newcomer", "gone.py"]
