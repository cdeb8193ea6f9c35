"""The wheel: the function code, the construct and its policies in one package; a CDK app
that has only the wheel synthesizes Holdfast from it, with the construct kept out of the
Lambda asset.

The release is built as `make dist` builds it: `python -m build` (an sdist, then the wheel
from the sdist) from a copy of the sources (pyproject.toml, README.md, LICENSE, functions/,
stacks/ and policies/), with the venv's own setuptools and no network (`--no-isolation`),
once for the module; `twine check --strict` must accept both, and the wheel's metadata
names the license, the distribution's name, one version and the project's URLs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The tree's shipped folders and where each lands in the wheel.
SHIPPED = {"functions": "", "stacks": "", "policies": "holdfast_cdk/policies/"}


def tree_files() -> set[str]:
    """What the wheel must hold: every module and policy file of the shipped folders."""
    found = set()
    for folder, prefix in SHIPPED.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path) \
                    and path.suffix in (".py", ".json", ".md"):
                found.add(prefix + str(path.relative_to(ROOT / folder)))
    return found


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source)
    for folder in SHIPPED:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "SOURCE_DATE_EPOCH": "1764806400"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (built,) = dist.glob("holdfast_aws-*.whl")
    return built


def test_the_release_is_a_wheel_and_an_sdist_the_index_accepts(dist):
    import holdfast

    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"holdfast_aws-{holdfast.__version__}-py3-none-any.whl", f"holdfast_aws-{holdfast.__version__}.tar.gz"]
    twine = Path(sys.executable).with_name("twine")
    check = subprocess.run([str(twine), "check", "--strict", *map(str, dist.iterdir())], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.count("PASSED") == 2, check.stdout + check.stderr


def test_the_wheel_carries_the_apache_license_and_the_metadata_an_index_shows(wheel):
    import holdfast

    archive = zipfile.ZipFile(wheel)
    info = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
    assert archive.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    fields = [line.split(": ", 1) for line in archive.read(f"{info}/METADATA").decode().split("\n\n", 1)[0].splitlines()
              if ": " in line]
    meta: dict[str, list[str]] = {}
    for key, value in fields:
        meta.setdefault(key, []).append(value)
    assert meta["Name"] == ["holdfast-aws"] and meta["Version"] == [holdfast.__version__]
    assert meta["License-Expression"] == ["Apache-2.0"] and meta["License-File"] == ["LICENSE"]
    assert {"Programming Language :: Python :: 3.11", "Framework :: AWS CDK :: 2",
            "Intended Audience :: System Administrators"} <= set(meta["Classifier"])
    urls = dict(u.split(", ", 1) for u in meta["Project-URL"])
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls) and all(u.startswith("https://") for u in urls.values())
    assert meta["Description-Content-Type"] == ["text/markdown"]
    assert set(meta["Requires-Dist"]) >= {"boto3", "aws-lambda-powertools"}


def test_the_wheel_holds_the_function_code_the_construct_and_its_policies(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = tree_files()
    assert {"holdfast/handlers/reconciler.py", "holdfast_cdk/construct.py", "holdfast_cdk/policies/reconciler.json",
            "holdfast_cdk/policies/README.md"} <= expected  # the tree is where this test thinks it is
    assert expected - names == set(), "in the tree but not in the wheel (pyproject.toml's packages)"
    shipped = {n for n in names if ".dist-info/" not in n}
    assert shipped - expected == set(), "in the wheel but not in the tree"
    # One copy of the policies: the wheel's are the repository's.
    for role in ("detector", "reconciler", "readonly"):
        packaged = json.loads(zipfile.ZipFile(wheel).read(f"holdfast_cdk/policies/{role}.json"))
        assert packaged == json.loads((ROOT / "policies" / f"{role}.json").read_text())
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Provides-Extra: cdk" in text and "aws-cdk-lib" in text
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


SYNTH_FROM_THE_WHEEL = """
import json, sys, zipfile
from pathlib import Path
import aws_cdk as cdk
import holdfast
from holdfast_cdk import Holdfast
assert holdfast.__file__.startswith(sys.argv[1]), holdfast.__file__
app = cdk.App(outdir=sys.argv[2])
stack = cdk.Stack(app, "UsersOwn", env=cdk.Environment(account="123456789012", region="eu-west-1"))
Holdfast(stack, "Holdfast")
assembly = app.synth()
template = assembly.get_stack_by_name("UsersOwn").template
keys = {r["Properties"]["Code"]["S3Key"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"}
(key,) = keys
asset = Path(sys.argv[2]) / ("asset." + key.removesuffix(".zip"))
print(json.dumps(sorted(str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file())))
"""


def test_a_cdk_app_with_only_the_wheel_synthesizes_holdfast_and_its_asset_leaves_the_construct_out(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # CDK_VALIDATION=false: aws-cdk-lib's own template validation (its bundled rules, a WASM
    # engine that takes seconds to start) stays out of this process. Without
    # @aws-cdk/core:validateAgainstDefaultRules it only prints warnings and never fails a
    # synth, and this test reads neither: what it checks (the synth succeeds from the wheel
    # alone, what the asset holds) is the same with it off.
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1", "CDK_VALIDATION": "false"}
    result = subprocess.run(
        [sys.executable, "-c", SYNTH_FROM_THE_WHEEL, str(site), str(tmp_path / "cdk.out")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    files = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"holdfast/handlers/detector.py", "holdfast/handlers/reconciler.py", "holdfast/settings.py"} <= set(files)
    assert not [f for f in files if f.startswith(("holdfast_cdk/", "holdfast/cli/"))]
    assert not [f for f in files if f.endswith(".dist-info") or ".dist-info/" in f]
