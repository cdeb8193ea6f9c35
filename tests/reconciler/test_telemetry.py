"""A tick's decision log lines and metrics are the Runtime's to switch (Telemetry): in
Lambda both go to stdout; `holdfast drill` and the demo, whose stdout is their own report,
turn them off in the runtime they tick with, not in the process environment."""

from __future__ import annotations

from pathlib import Path

from holdfast import reconciler
from holdfast.runtime import QUIET, Telemetry

ROOT = Path(__file__).resolve().parents[2]


def test_metrics_are_printed_unless_the_runtime_says_quiet(capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    result = reconciler.TickResult("hold", 3, ["plan:3"])
    reconciler.emit_metrics(result, Telemetry())
    printed = capsys.readouterr().out
    assert '"Namespace":"Holdfast"' in printed and "StageIndex" in printed
    reconciler.emit_metrics(result, QUIET)
    assert capsys.readouterr().out == ""


def test_the_decision_lines_are_the_runtimes_to_switch(caplog):
    class Rt:
        controller_id, settings = "x", type("S", (), {"mode": "enforce"})()

    tick = reconciler.Tick.__new__(reconciler.Tick)
    tick.runtime, tick.settings = Rt(), Rt.settings
    for telemetry, shown in ((Telemetry(), True), (QUIET, False)):
        Rt.telemetry = telemetry
        caplog.clear()
        with caplog.at_level("INFO", logger="holdfast-reconciler"):
            tick.log("decision", None, reasons=["r"])
        assert any(r.getMessage() == "decision" for r in caplog.records) is shown


def test_neither_the_drill_nor_the_demo_silences_the_controllers_through_the_environment():
    for path in ("functions/holdfast/cli/drill.py", "dev/holdfast_demo/__main__.py"):
        text = (ROOT / path).read_text()
        assert "POWERTOOLS_METRICS_DISABLED" not in text, path
        assert "telemetry=QUIET" in text, path
