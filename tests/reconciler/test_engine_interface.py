"""The engine a tick drives is typed: holdfast.engine.TickEngine (engage, engage_as_listed,
relax, the kinds it serves) and WalkReport (what the tick reads of a walk). The real Engine and Report and
the in-memory fakes the tick tests inject all satisfy it, so the tick reads the report's
fields directly and never probes for one a fake might lack. And the tick reads as its
steps: no class of the holdfast.reconciler package is longer than a screen or two."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

from holdfast import reconciler
from holdfast.core.progress import Marker, held_marker
from holdfast.engine import Engine, Report, TickEngine, WalkReport
from tests.reconciler.test_engage_tick import CutEngine
from tests.support.fakes import FakeEngine, World, _Bound, _Report

# Every module of the reconciler package: the steps, the state, the deadline, the releases, the announcements.
RECONCILER = sorted(Path(reconciler.__file__).parent.glob("*.py"))


def _trees():
    return {path.name: ast.parse(path.read_text()) for path in RECONCILER}


def _keywords(fn) -> set[str]:
    return {n for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("cls", [Engine, _Bound, CutEngine])
def test_every_engine_a_tick_is_given_takes_the_interfaces_arguments(cls):
    for method in ("engage", "engage_as_listed", "relax"):
        wanted = _keywords(getattr(TickEngine, method))
        has = inspect.signature(getattr(cls, method)).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in has.values())
        assert wanted <= _keywords(getattr(cls, method)) or takes_any, f"{cls.__name__}.{method}"


def test_the_fakes_are_tick_engines_and_their_reports_walk_reports():
    class Settings:
        esm_floor = 2

    bound = FakeEngine(World(Settings(), None, "t", per_kind=0))(type("R", (), {"clients": None})())
    assert isinstance(bound, TickEngine)
    assert isinstance(CutEngine("asg", "x"), TickEngine)
    fields = typing.get_type_hints(WalkReport)
    for report in (Report(), _Report(), bound.engage(kinds=())):
        missing = [f for f in fields if not hasattr(report, f)]
        assert not missing, f"{type(report).__name__} lacks {missing}"


def test_the_tick_reads_no_field_of_the_engine_or_its_report_by_getattr():
    probes = [f"{name}:{node.lineno}" for name, tree in _trees().items() for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")]
    assert not probes, f"getattr/hasattr at {probes}"


def test_no_class_of_the_reconciler_is_over_120_lines():
    long = {f"{name}:{n.name}": n.end_lineno - n.lineno + 1 for name, tree in _trees().items() for n in tree.body
            if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > 120}
    assert not long, long


def test_the_tick_sets_its_state_in_init_only():
    trees = _trees()
    tick = next(n for n in trees["state.py"].body if isinstance(n, ast.ClassDef) and n.name == "Tick")
    assigned_in_init = {t.attr for fn in tick.body if isinstance(fn, ast.FunctionDef) and fn.name == "__init__"
                        for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AnnAssign))
                        for tgt in (node.targets if isinstance(node, ast.Assign) else [node.target])
                        for t in ast.walk(tgt) if isinstance(t, ast.Attribute)}
    assigned_elsewhere = {node.attr for tree in trees.values() for node in ast.walk(tree)
                          if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                          and isinstance(node.value, ast.Name) and node.value.id == "t"}
    assert assigned_elsewhere <= assigned_in_init, assigned_elsewhere - assigned_in_init


def test_walk_markers_are_built_and_read_in_one_place():
    assert str(Marker("esm", hold_engage=True)) == "esm/engaged"
    assert Marker.parse("esm/engaged") == Marker("esm", True) and Marker.parse("asg") == Marker("asg")
    assert held_marker("asg", True) == "asg" and held_marker("esm", False) == "esm/engaged"
    with pytest.raises(ValueError):
        Marker.parse("esm/other")
    source = "\n".join(path.read_text() for path in RECONCILER)
    assert '"/engaged"' not in source and "/engaged\"" not in source and 'split("/")' not in source
