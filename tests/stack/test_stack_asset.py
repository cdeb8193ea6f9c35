"""The Lambda asset holds only what runs in Lambda: the controllers' code, no CLI, no
demo, no test support, none of the CLI-only checks (audit, doctor, the drill)."""

from __future__ import annotations

import json
from pathlib import Path


def asset_files(synthesized) -> set[str]:
    out = Path(synthesized.app.outdir)
    assets = json.loads(next(out.glob("*.assets.json")).read_text())["files"]
    dirs = {out / a["source"]["path"] for a in assets.values() if a["source"].get("packaging") == "zip"}
    (code,) = [d for d in dirs if (d / "holdfast").is_dir()]
    return {str(p.relative_to(code)) for p in code.rglob("*") if p.is_file()}


def test_the_asset_is_the_controllers_code_only(synthesized):
    files = asset_files(synthesized)
    for needed in ("holdfast/handlers/reconciler.py", "holdfast/handlers/detector.py", "holdfast/core/policy.py",
                   "holdfast/reconciler/steps.py", "holdfast/engine/fleet.py",
                   # the readiness function and the checks it runs on a schedule (doctor runs them too)
                   "holdfast/handlers/readiness.py", "holdfast/readiness.py"):
        assert needed in files
    shipped_tops = {f.split("/")[0] for f in files}
    assert shipped_tops == {"holdfast"}, shipped_tops          # no holdfast_demo, holdfast_fixtures
    assert not [f for f in files if f.startswith("holdfast/cli/")]
    assert not [f for f in files if f.rsplit("/", 1)[-1] in ("account_audit.py", "doctor.py", "drill.py")]
    assert not [f for f in files if f.endswith((".pyc", ".csv")) or "egg-info" in f or "__pycache__" in f]
