"""The functional core imports no AWS SDK and reads no clock: checked on the source."""

import ast
from pathlib import Path

import pytest

import holdfast.detection

CORE = ("classify.py", "signals.py", "detector.py", "replay.py")
ALLOWED = {"__future__", "bisect", "collections", "dataclasses", "datetime", "email.utils", "json", "re", "typing"}


@pytest.mark.parametrize("name", CORE)
def test_core_modules_are_pure(name):
    tree = ast.parse((Path(holdfast.detection.__file__).parent / name).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module)
        elif isinstance(node, ast.Attribute) and node.attr in ("now", "utcnow", "today", "time", "monotonic"):
            assert not (isinstance(node.value, ast.Name) and node.value.id in ("datetime", "time", "date")), \
                f"{name} reads the clock at line {node.lineno}"
    assert imported <= ALLOWED, f"{name} imports {sorted(imported - ALLOWED)}"
