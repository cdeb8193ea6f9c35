"""The controller's modes are declared once (holdfast.core.model: AUTO, RECOMMEND, OFF)
and read through its predicates (`acts`, `recommends_only`, `is_off`,
`changes_nothing`): no module compares a mode with a string literal of its own, so a
mode renamed or added is one edit, and a comparison cannot drift from the declaration
(`mode in ("off", "recommend")` here, `mode != "auto"` there)."""

from __future__ import annotations

import ast
from pathlib import Path

from holdfast.core import model
from holdfast.settings import MODES, Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "functions" / "holdfast"
SHIPPED = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "stacks").rglob("*.py")])
DECLARED = PACKAGE / "core" / "model.py"


def _literals(node: ast.AST) -> set[str]:
    """The mode names a comparison operand spells as literals: a string, or a tuple, list
    or set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(MODES)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in MODES}
    return set()


def _mentions_mode(node: ast.AST) -> bool:
    """Whether an operand is a mode: a name or attribute called *mode*, or a .get("mode")."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and "mode" in n.id.lower():
            return True
        if isinstance(n, ast.Attribute) and "mode" in n.attr.lower():
            return True
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == "mode":
            return True
    return False


def raw_mode_comparisons(source: str) -> list[int]:
    """Lines comparing a mode with a mode literal (==, !=, in, not in)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(_literals(o) for o in operands) and any(_mentions_mode(o) for o in operands if not _literals(o)):
            found.append(node.lineno)
    return found


def test_no_module_compares_a_mode_with_a_literal():
    found = {str(path.relative_to(ROOT)): lines for path in SHIPPED
             if path != DECLARED and (lines := raw_mode_comparisons(path.read_text()))}
    assert not found, f"compare modes through holdfast.core.model's predicates (acts, recommends_only, is_off): {found}"


def test_the_check_finds_the_comparisons_it_forbids():
    for bad in ('if settings.mode == "off": pass', 'x = plan.mode != "auto"', 'y = mode in ("off", "recommend")',
                'z = body.get("mode", AUTO) == "auto"', 'w = "recommend" == self.settings.mode'):
        assert raw_mode_comparisons(bad), bad
    for fine in ('if is_off(settings.mode): pass', 'x = choice != "auto"', 'y = retry_mode == "standard"',
                 'z = mode not in (AUTO, RECOMMEND)'):
        assert not raw_mode_comparisons(fine), fine


def test_the_modes_are_the_settings_modes_and_the_predicates_split_them():
    assert MODES == model.MODES == (model.AUTO, model.RECOMMEND, model.OFF)
    assert Settings().mode == model.RECOMMEND
    assert [m for m in MODES if model.acts(m)] == [model.AUTO]
    assert [m for m in MODES if model.recommends_only(m)] == [model.RECOMMEND]
    assert [m for m in MODES if model.is_off(m)] == [model.OFF]
    assert [m for m in MODES if model.changes_nothing(m)] == [model.RECOMMEND, model.OFF]
    assert not any(p("enforce") for p in (model.acts, model.recommends_only, model.is_off, model.changes_nothing))


def test_the_modes_are_spelled_once():
    """"recommend" names nothing but the mode, so a literal of it anywhere else in what runs
    in Lambda and the CLI is a second declaration (a tuple of quiet modes, a default)."""
    spelled = {str(path.relative_to(ROOT)): [n.lineno for n in ast.walk(ast.parse(path.read_text()))
                                             if isinstance(n, ast.Constant) and n.value == model.RECOMMEND]
               for path in sorted(PACKAGE.rglob("*.py")) if path != DECLARED}
    assert not {p: lines for p, lines in spelled.items() if lines}, "use holdfast.core.model.RECOMMEND"
