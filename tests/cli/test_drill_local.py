"""`holdfast drill` on a local endpoint: the embedded moto server, the console script in a
subprocess, fast mode (short holds through --settings).

GIVEN a fleet of every kind with hard owner states, WHEN the drill injects the launch
failures FIS would cause and runs the real reconciler to the end, THEN it reports the
time to full posture and from the experiment's end to normal, every resource is exactly
as before (checked here independently, through the demo's fuller snapshot), and the
report is written. A second drill on the same endpoint works too (it must not be
confused by the first one's ledger, written on a faster clock), and a resource that
does not come back (an owner's change, kept) is named and fails it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from unittest import mock

from holdfast.cli import main
from holdfast.cli.drill import LocalDrill
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast_demo.fleet import build_fleet, snapshot
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

HOLDFAST = Path(sys.executable).with_name("holdfast")
# Fast mode: one-minute holds and a three-minute detection window, so the whole rehearsal
# is about fifteen ticks of the drill clock.
FAST = {"mode": "auto", "hold_minutes": 1, "capacity_hold_minutes": 1, "recover_quiet_minutes": 1, "detect_window_minutes": 3,
        "drain_restore_after_minutes": 1, "capacity_wave_groups_percent": 100, "capacity_wave_instances_percent": 100}


def _drill(server, settings: Path, out: Path, *extra: str, json_output: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(HOLDFAST), "--endpoint-url", server.url, "--region", REGION, "--settings", str(settings),
         *(["--json"] if json_output else []), "drill", "--duration-minutes", "2", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=300,
    )


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_drill_on_the_embedded_endpoint_engages_recovers_and_restores_exactly(moto_server, aws_semantics, tmp_path):
    moto_server.reset()
    clients = moto_server.clients()
    fleet = build_fleet(clients, asgs=3, esms=3, asyncs=4, nlbs=2, services=3)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    before = snapshot(clients, fleet)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(FAST))

    done = _drill(moto_server, settings, tmp_path / "one", json_output=False)

    # The console prints the two times and the restore result.
    assert done.returncode == 0, done.stderr[-3000:]
    print("\n" + done.stdout)
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert lines[0].startswith(f"drill PASSED on {moto_server.url} ({REGION}, account 123456789012, mode auto)")
    assert "first failure -> full posture: 1 min (drill clock; 1 tick)" in lines
    assert any(line.startswith("experiment end -> normal:") and "min (drill clock;" in line for line in lines)
    assert any(line.startswith("restore:") and line.endswith("no write-ahead record left on a tag or in the ledger")
               for line in lines)
    report = json.loads((tmp_path / "one" / "drill-report.json").read_text())
    assert report["result"] == "passed" and report["problems"] == []
    assert report["target"]["where"] == moto_server.url and report["mode"] == "auto"
    selected = {k: len(v) for k, v in fleet.selected.items()}
    assert report["selected"] == selected
    f = report["figures"]
    # The first tick comes one schedule period (1 min) after the first failure and engages everything.
    assert (f["minutes_to_full_posture"], f["ticks_to_full_posture"], f["hold_generation"]) == (1.0, 1, 1)
    # The experiment lasts --duration-minutes on the drill clock; the recovery is what the settings make it.
    assert (_t(f["experiment_end_at"]) - _t(f["first_failure_at"])).total_seconds() == 120
    assert f["minutes_end_to_normal"] == (_t(f["normal_at"]) - _t(f["experiment_end_at"])).total_seconds() / 60
    stages = [e["stage"] for e in report["timeline"]]
    assert stages.index("hold") < stages.index("drain") < stages.index("capacity") < len(stages) - 1
    assert stages[-1] == "normal"
    # From the end: the last failure came a minute before it, and the verdict stays impaired
    # for the detection window (3 min) after it, so up to +2 min; then the hold (1 min), the
    # drain (2: moto publishes no queue metrics, so each mapping's drain starts with the stage
    # and is given back the next tick, its queue empty for the 1-min restore period), the
    # replay (1: nothing to replay, no hold of its own), fresh-work, routing and capacity
    # (1 each): +7, a tick per stage still to lift after at most the quiet window.
    assert 7 <= f["minutes_end_to_normal"] <= 2 + 7
    restore = report["restore"]
    assert restore["exact"] is True and restore["not_restored"] == []
    assert restore["resources"] == restore["restored"] == sum(selected.values())
    # Independently of the drill's own check: every resource, selected or not, as before.
    assert snapshot(clients, fleet) == before
    md = (tmp_path / "one" / "drill-report.md").read_text()
    assert "**first failure → full posture** | **1 min" in md and "exact:" in md

    # A second drill on the same endpoint, during which an owner sets their own cap on a
    # held mapping (the owner's change is kept). The drill names it as not back, and exits 1.
    mapping = next(a for a in fleet.selected["esm"] if "ScalingConfig" not in before[a])
    changed = []
    original_inject = LocalDrill.inject

    def inject(self, rt, at, wave, *, ok, groups=None):
        if not changed and self.posture_at is not None:
            clients("lambda").update_event_source_mapping(UUID=fleet.handles[mapping], ScalingConfig={"MaximumConcurrency": 7})
            changed.append(at)
        return original_inject(self, rt, at, wave, ok=ok, groups=groups)

    with mock.patch.object(LocalDrill, "inject", inject):
        code = main(["--endpoint-url", moto_server.url, "--region", REGION, "--settings", str(settings), "--json",
                     "drill", "--duration-minutes", "2", "--out", str(tmp_path / "two")])

    second = json.loads((tmp_path / "two" / "drill-report.json").read_text())
    assert changed and code == 1 and second["result"] == "failed"
    # Its clock starts after everything the first drill wrote; its generations follow on.
    assert _t(second["figures"]["first_failure_at"]) > _t(f["normal_at"])
    assert second["figures"]["hold_generation"] == report["timeline"][-1]["generation"] + 1
    assert second["figures"]["minutes_to_full_posture"] == 1.0
    rows = second["restore"]["not_restored"]
    assert [r["arn"] for r in rows] == [mapping]
    assert "MaximumConcurrency" in rows[0]["problem"] and "7" in rows[0]["problem"]
    assert rows[0]["owner_change_reported"]  # Holdfast reported the owner's change it kept
    assert mapping in (tmp_path / "two" / "drill-report.md").read_text()
    assert snapshot(clients, fleet) == {**before, mapping: {**before[mapping], "ScalingConfig": {"MaximumConcurrency": 7}}}


def test_after_a_local_drill_the_ledger_holds_no_time_ahead_of_the_wall_clock(moto_server, aws_semantics, tmp_path,
                                                                             capsys):
    """The drill's clock runs minutes ahead of its in-process wall time; what it leaves in
    the ledger (the plan, the verdict) must read as past afterwards: `holdfast stage` once
    said "in stage -90.7 min"."""
    from datetime import timezone

    moto_server.reset()
    clients = moto_server.clients()
    build_fleet(clients, asgs=3, esms=1, asyncs=1, nlbs=0, services=0)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(FAST))
    common = ["--endpoint-url", moto_server.url, "--region", REGION, "--settings", str(settings), "--json"]
    assert main([*common, "drill", "--duration-minutes", "2", "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()

    assert main([*common, "stage"]) == 0
    stage = json.loads(capsys.readouterr().out)
    now = datetime.now(timezone.utc)
    assert stage["stage"] == "normal" and stage["minutes_in_stage"] >= 0, stage
    assert _t(stage["entered_at"]) <= now
    from holdfast.ledger import Ledger
    from holdfast.ledger import verdict as ledger_verdict

    verdict = ledger_verdict.read_verdict(Ledger(clients("dynamodb"), DEFAULT_TABLE)) or {}
    stamps = [verdict[k] for k in ("since", "last_capacity_failure", "last_successful_launch") if verdict.get(k)]
    assert stamps and all(_t(t) <= now for t in stamps), stamps
