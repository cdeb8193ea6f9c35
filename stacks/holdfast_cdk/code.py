"""The controllers' Lambda code: the installed `holdfast` package, without what never runs in Lambda.

The asset is built from wherever `holdfast` is imported from, a clone's `functions/` or
a wheel installed in site-packages, so a CDK user's app ships the same code as this
repository's. The package is copied into a directory of its own first (site-packages
holds far more than Holdfast), leaving out:

- `holdfast/cli`: the CLI runs on an operator's machine, with its checks (audit,
  doctor) and the drill's harness (the demo and the test support live outside the
  package, in dev/);
- caches and build metadata.

The copy's content alone decides the asset hash (CDK fingerprints relative paths and
file contents), so the same package gives the same asset from any location.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import holdfast

PACKAGE_DIR = Path(holdfast.__file__).resolve().parent
# Subpackages of `holdfast` left out of the Lambda asset.
NOT_IN_ASSET = ("cli",)
# The same rule as CDK exclude patterns (relative to the asset root), applied again when
# the asset is staged, so a file that slipped into the copy would still stay out.
ASSET_EXCLUDE = ["*.egg-info", "**/__pycache__", "**/*.pyc", *(f"holdfast/{name}" for name in NOT_IN_ASSET)]


def _ignore(directory: str, names: list[str]) -> set[str]:
    skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))}
    if Path(directory).resolve() == PACKAGE_DIR:
        skipped |= set(NOT_IN_ASSET) & set(names)
    return skipped


@functools.cache
def asset_dir() -> Path:
    """A directory holding `holdfast/` as Lambda imports it (handler `holdfast.handlers.….handler`)."""
    root = Path(tempfile.mkdtemp(prefix="holdfast-asset-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    shutil.copytree(PACKAGE_DIR, root / "holdfast", ignore=_ignore)
    return root
