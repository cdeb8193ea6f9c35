"""The layering docs/architecture.md describes, and what import-linter cannot see.

- The contracts in .importlinter hold, and they do fail on the imports that once broke them
  (the stage policy importing the actuators, the detector importing the probes, the
  core importing botocore): each is written into a copy of the package and must break.
- Nothing below the three entry points (handlers, cli, the demo) reads the environment.
- The core reads no clock: `now` is always an argument.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "functions" / "holdfast"
LINT = Path(sys.executable).with_name("lint-imports")


def lint(functions: Path, dev: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--config", str(ROOT / ".importlinter"), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": f"{functions}:{dev}", "PATH": "/usr/bin:/bin"})


def test_the_import_contracts_hold():
    done = lint(ROOT / "functions", ROOT / "dev")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("core/policy.py", "from holdfast.actuators import REGISTRY", "imports no SDK"),
    ("core/detector.py", "from holdfast.observation import probes", "imports no SDK"),
    ("core/model.py", "import botocore", "imports no SDK"),
    ("ledger/plan.py", "from holdfast import reconciler", "Shell layers"),
    ("cli/control.py", "from holdfast.handlers import detector", "Shell layers"),
])
def test_the_contracts_break_on_a_forbidden_import(tmp_path, module, line, contract):
    copy = tmp_path / "functions" / "holdfast"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    done = lint(tmp_path / "functions", ROOT / "dev")
    assert done.returncode != 0
    broken = done.stdout.split("Contracts:")[0]
    assert f"{contract}" in broken and "BROKEN" in broken, done.stdout[-2000:]


def _sources(*parts: str):
    base = PACKAGE.joinpath(*parts)
    return sorted(base.rglob("*.py")) if base.is_dir() else [base]


ENTRY_POINTS = ("handlers", "cli")


def test_nothing_below_the_entry_points_reads_the_environment():
    readers = []
    for path in _sources():
        if path.relative_to(PACKAGE).parts[0] in ENTRY_POINTS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            text = ast.unparse(node) if isinstance(node, (ast.Attribute, ast.Call)) else ""
            if text.startswith(("os.environ", "os.getenv")):
                readers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text}")
    assert readers == []


def test_the_core_reads_no_clock():
    reads = []
    for path in _sources("core"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name.endswith((".now", ".utcnow", ".today", "time.time", "time.monotonic")):
                    reads.append(f"{path.name}:{node.lineno}: {name}")
    assert reads == []
