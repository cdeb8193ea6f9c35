"""Every reference in the repository's text is one a clone can follow.

A comment, docstring, README or docs/ line that names a file, a module or a rule points at
something this tree has: a path that exists, a `holdfast...` dotted name that resolves.
In the Markdown pages a folder named bare (`handlers/`, `core/drain/`) exists too, and a
link goes to a page and a heading that exist.
Nothing cites a document the repository does not ship (a design card, a style guide),
a numbered invariant or finding of one, or an issue or review by number: what such a
note stood for is stated where it is used.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".cfg", ".txt", ".yml", ".yaml", ".ini"}
TEXT_NAMES = {"Makefile", ".importlinter", "cdk.json"}
SKIPPED = {"package-lock.json", "package.json"}

# Citations of what a clone does not have. A reference to another project's issue is
# written as its URL (github.com/<owner>/<repo>/issues/N), which none of these match.
CITATIONS = {
    "a design card the repository does not ship": re.compile(r"DESIGN\.md"),
    "a style guide the repository does not ship": re.compile(r"STYLE\.md"),
    "a numbered invariant": re.compile(r"\binvariants? \(?\d", re.I),
    "an issue by number": re.compile(r"\bissues? \d+", re.I),
    "a finding by number": re.compile(r"\bfindings? \d+", re.I),
    "a numbered item of an issue": re.compile(r"\bissue \d+,? items? \d+", re.I),
}

TOP = ("functions", "stacks", "policies", "tests", "dev", "docs")
# A path into the tree: starts at a top-level folder (or at the holdfast package) and
# has at least one more segment.
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*[\w/]|holdfast/[\w/]+\.py)" % "|".join(TOP))
# A dotted name of one of our packages, written as code (between backticks).
DOTTED = re.compile(r"`((?:holdfast|holdfast_cdk|holdfast_demo|holdfast_fixtures)(?:\.\w+)+)")
PACKAGE_ROOTS = {"holdfast": ROOT / "functions", "holdfast_cdk": ROOT / "stacks",
                 "holdfast_demo": ROOT / "dev", "holdfast_fixtures": ROOT / "dev"}
SETTINGS = ROOT / "functions" / "holdfast" / "settings.py"


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    files = []
    for name in out:
        path = ROOT / name
        if path.name in SKIPPED or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
            files.append(path)
    return files


def documents() -> list[Path]:
    """README.md and every page of docs/, read whether git tracks them yet or not."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def lines():
    for path in dict.fromkeys([*tracked(), *documents()]):
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            yield path.relative_to(ROOT), number, line


def path_exists(ref: str) -> bool:
    ref = ref.rstrip("/.")
    if any(ch in ref for ch in "*{<"):
        return True                     # a pattern, not a path
    candidates = [ROOT / ref]
    if ref.startswith("holdfast/"):
        candidates.append(ROOT / "functions" / ref)
    return any(c.exists() for c in candidates)


@cache
def module_names(path: Path) -> frozenset[str]:
    """The names a module defines at its top level and in its classes."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def dotted_resolves(ref: str) -> bool:
    parts = ref.split(".")
    if parts[0] == "holdfast" and len(parts) == 2 and parts[1] in module_names(SETTINGS):
        return True                     # a setting's context key (holdfast.<field>)
    base = PACKAGE_ROOTS[parts[0]] / parts[0]
    i = 1
    while i < len(parts) and ((base / parts[i]).is_dir() or (base / f"{parts[i]}.py").is_file()):
        base = base / parts[i]
        i += 1
    rest = parts[i:]
    if not rest:
        return True
    module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not module.is_file():
        return False
    return all(name in module_names(module) for name in rest)


# A folder named bare in Markdown: `cdk/`, `handlers/`, `core/drain/`, `dev/holdfast_demo/`.
FOLDER = re.compile(r"`([A-Za-z_.][\w.-]*(?:/[\w.-]+)*/)`")
# Where a bare folder name may be rooted: the tree, the packages' own folders.
FOLDER_BASES = (ROOT, ROOT / "functions", ROOT / "functions" / "holdfast", ROOT / "stacks",
                ROOT / "stacks" / "holdfast_cdk", ROOT / "dev")
# A Markdown link: [text](target), the target a page of the tree with an optional #heading.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@cache
def made_by_a_command() -> frozenset[str]:
    """The folders a command makes and git ignores (`out/`, `dist/`): named, never in the tree."""
    return frozenset(line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()
                     if line.strip().endswith("/"))


def folder_exists(ref: str) -> bool:
    return ref in made_by_a_command() or any((base / ref.rstrip("/")).is_dir() for base in FOLDER_BASES)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)   # a `#` in a code block is no heading
    return frozenset(slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M))


def link_resolves(page: Path, target: str) -> bool:
    if re.match(r"[a-z]+:", target):
        return True                     # https:, mailto:: not a page of the tree
    name, _, anchor = target.partition("#")
    dest = (page.parent / name).resolve() if name else page
    if not dest.exists():
        return False
    return not anchor or (dest.suffix != ".md" or anchor in anchors(dest))


def test_no_citation_of_what_the_repository_does_not_have():
    found = [f"{path}:{number}: {what}: {line.strip()[:120]}"
             for path, number, line in lines()
             for what, pattern in CITATIONS.items() if pattern.search(line)]
    assert not found, "\n".join(found)


def test_every_path_named_in_the_text_exists():
    missing = [f"{path}:{number}: {ref}" for path, number, line in lines()
               for ref in PATH.findall(line) if not path_exists(ref)]
    assert not missing, "\n".join(missing)


def test_every_folder_named_in_the_docs_exists():
    """README.md's layout once named a `cdk/` folder the tree no longer had."""
    missing = [f"{path}:{number}: {ref}" for path, number, line in lines() if path.suffix == ".md"
               for ref in FOLDER.findall(line) if not folder_exists(ref)]
    assert not missing, "\n".join(missing)


def test_every_link_in_the_docs_goes_to_a_page_and_heading_that_exist():
    broken = [f"{path}:{number}: {target}" for path, number, line in lines() if path.suffix == ".md"
              for target in LINK.findall(line) if not link_resolves(ROOT / path, target)]
    assert not broken, "\n".join(broken)


def test_every_page_of_the_docs_is_read():
    read = {ROOT / path for path, _, _ in lines()}
    assert (ROOT / "README.md") in read and set((ROOT / "docs").glob("*.md")) <= read


def test_every_dotted_name_in_the_text_resolves():
    missing = [f"{path}:{number}: {ref}" for path, number, line in lines()
               for ref in DOTTED.findall(line) if not dotted_resolves(ref)]
    assert not missing, "\n".join(missing)


def test_the_checks_catch_what_they_are_for():
    """The scanners find each kind of stale reference (so an empty result means something)."""
    assert CITATIONS["a numbered invariant"].search("the record (invariant 1).")
    assert CITATIONS["an issue by number"].search("the fleet of issue 12")
    assert CITATIONS["a finding by number"].search("issue 11, finding 6")
    assert not any(p.search("https://github.com/aws-cloudformation/cfn-lint/issues/4674")
                   for p in CITATIONS.values())
    assert PATH.findall("set by stacks/constructs/controllers.py: x") == ["stacks/constructs/controllers.py"]
    assert not path_exists("stacks/constructs/controllers.py")
    assert path_exists("stacks/holdfast_cdk/constructs/controllers.py")
    assert not dotted_resolves("holdfast.aws.translate")
    assert dotted_resolves("holdfast.aws.error_code")
    assert dotted_resolves("holdfast.core.kinds")
    assert dotted_resolves("holdfast.esm_floor") and not dotted_resolves("holdfast.no_such_setting")
    assert FOLDER.findall("| `cdk/` (the construct), `core/drain/` and `x.py`") == ["cdk/", "core/drain/"]
    assert not folder_exists("cdk/") and not folder_exists("functions/holdfast/no_such/")
    assert folder_exists("handlers/") and folder_exists("core/drain/") and folder_exists("out/")
    assert folder_exists("stacks/holdfast_cdk/") and folder_exists("dev/holdfast_demo/")
    assert slug("A local sandbox: `make serve`") == "a-local-sandbox-make-serve"
    assert slug("The organization's view: `holdfast status --all-accounts`") == \
        "the-organizations-view-holdfast-status---all-accounts"
    readme = ROOT / "README.md"
    assert link_resolves(readme, "docs/cli.md#a-local-sandbox-make-serve")
    assert not link_resolves(readme, "docs/cli.md#no-such-heading")
    assert not link_resolves(readme, "docs/no-such-page.md")
    assert link_resolves(readme, "https://github.com/cdklabs/cdk-nag")
