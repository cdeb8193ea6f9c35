"""`make demo` in CI: the same replay, unpaced, on a smaller fleet.

GIVEN the October night replayed against an embedded AWS by the real detector handler
and reconciler, WHEN the plan is back to normal, THEN every selected resource equals
its pre-event snapshot except the owner's mid-event change, which is kept and reported;
every unselected resource is untouched; the report and the chart are written.
"""

from __future__ import annotations

import io

from holdfast_demo.__main__ import run


def test_the_replay_restores_every_resource_and_writes_the_report(tmp_path):
    out = io.StringIO()

    code = run(out_dir=tmp_path, fast=True, small=True, out=out)

    printed = out.getvalue()
    assert code == 0, printed
    summary = next(line for line in printed.splitlines() if line.startswith("End state"))
    assert "1 drift-kept" in summary and " 0 NOT restored" in summary, summary
    # Holdfast engaged during the impairment and stepped back to normal at the end.
    assert " hold " in printed and " drain " in printed and " replay " in printed and " capacity " in printed
    report = (tmp_path / "demo-report.md").read_text()
    assert "- NOT restored: 0" in report and "- owner changes kept (drift): 1" in report
    assert (tmp_path / "demo-timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
