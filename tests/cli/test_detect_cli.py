"""`holdfast detect EVENTS_FILE [--settings FILE] [--json]`: in-process, and once as the real
console script in a subprocess."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from holdfast.cli import main
from tests.support.factory import BAD_AMI, health, launch, utc

T0 = utc(2025, 10, 20, 6, 48)
MIN = timedelta(minutes=1)


def events_file(tmp_path: Path) -> Path:
    lines = [json.dumps(launch(g, z, T0 + i * 10 * timedelta(seconds=1)))
             for i, (g, z) in enumerate([("web", "us-east-1a"), ("api", "us-east-1b"), ("etl", "us-east-1c")])]
    lines.append(json.dumps(launch("reports", "us-east-1a", T0, message=BAD_AMI)))
    lines.append("{not json")
    lines.append(json.dumps(health("open", T0 + 3 * MIN)))
    lines.append(json.dumps(health("open", T0 + 3 * MIN, delivered_in="us-west-2")))  # backup-region copy
    lines.append(lines[0])  # an EventBridge redelivery
    lines.append(json.dumps(health("open", T0, region="eu-west-1")))
    lines.append("")
    lines.append(json.dumps(health("closed", T0 + 20 * MIN, communication="comm-9")))
    lines.append(json.dumps(launch("web", "us-east-1a", T0 + 25 * MIN, ok=True)))
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_json(capsys, *argv):
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_json_document(tmp_path, capsys):
    code, doc = run_json(capsys, "detect", str(events_file(tmp_path)), "--json")
    assert code == 0
    assert set(doc) == {"events", "verdicts"}
    assert [e["class"] for e in doc["events"]] == [
        "capacity", "capacity", "capacity", "configuration", "malformed", "health", "ignored", "ignored", "ignored",
        "health", "launch",
    ]
    assert all(set(e) == {"id", "class", "reason"} for e in doc["events"])
    assert doc["events"][4]["reason"].startswith("line 5:")
    assert "duplicate" in doc["events"][6]["reason"] and "duplicate" in doc["events"][7]["reason"]
    assert "eu-west-1" in doc["events"][8]["reason"]
    verdicts = doc["verdicts"]
    assert [v["verdict"] for v in verdicts] == ["impaired", "recovering", "normal"]
    assert verdicts[0]["time"] == "2025-10-20T06:49:00.000Z"  # the first tick after the third failure
    assert all(set(v) == {"time", "verdict", "reasons"} and v["reasons"] for v in verdicts)


def test_settings_after_the_command_and_as_a_global_option(tmp_path, capsys):
    events = str(events_file(tmp_path))
    strict = tmp_path / "cdk.json"  # a cdk.json: its context's `holdfast` object
    strict.write_text(json.dumps({"context": {"holdfast": {"detect_min_groups": 4}}}))
    defaults = tmp_path / "defaults.json"
    defaults.write_text(json.dumps({"holdfast": {}}))
    at_three_groups = "2025-10-20T06:49:00.000Z"
    at_health_issue = "2025-10-20T06:51:00.000Z"  # four groups needed: only the Health issue impairs

    _, doc = run_json(capsys, "detect", events, "--settings", str(strict), "--json")
    assert doc["verdicts"][0]["time"] == at_health_issue
    _, doc = run_json(capsys, "--settings", str(strict), "--json", "detect", events)
    assert doc["verdicts"][0]["time"] == at_health_issue
    # Given after the command, it wins over the global one.
    _, doc = run_json(capsys, "--settings", str(strict), "detect", events, "--settings", str(defaults), "--json")
    assert doc["verdicts"][0]["time"] == at_three_groups


@pytest.mark.parametrize("problem", ["missing", "bad-settings"])
def test_usage_errors_exit_2(tmp_path, capsys, problem):
    events = events_file(tmp_path)
    if problem == "missing":
        argv = ["detect", str(tmp_path / "nope.jsonl")]
    else:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"holdfast": {"detect_min_groups": 0}}))
        argv = ["detect", str(events), "--settings", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert ("cannot read events file" in err) if problem == "missing" else ("detect_min_groups" in err)


def test_text_output(tmp_path, capsys):
    assert main(["detect", str(events_file(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "11 events for us-east-1" in out and "line 5: not JSON" in out
    assert "impaired" in out and "recovering" in out


def test_console_script_in_a_subprocess(tmp_path):
    env = {**os.environ, "PYTHONPATH": "functions"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "holdfast"), "detect", str(events_file(tmp_path)), "--json"],
        capture_output=True, text=True, env=env, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert [v["verdict"] for v in json.loads(proc.stdout)["verdicts"]] == ["impaired", "recovering", "normal"]


def test_unknown_launch_failures_are_reported_and_never_impair(tmp_path, capsys):
    odd = "The widget reticulator is unhappy. Launching EC2 instance failed."
    lines = [json.dumps(launch(g, z, T0, message=odd)) for g, z in [("web", "us-east-1a"), ("api", "us-east-1b"),
                                                                     ("etl", "us-east-1c"), ("bi", "us-east-1a")]]
    lines.append(json.dumps(launch("db", "us-east-1b", T0, message="The device 'sda1' is used in more than one "
                                                                    "block-device mapping. Launching EC2 instance failed.")))
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, doc = run_json(capsys, "detect", str(path), "--json")
    assert code == 0 and doc["verdicts"] == []
    assert [e["class"] for e in doc["events"]] == ["unknown"] * 4 + ["configuration"]
    assert all(e["reason"].startswith(f"line {i + 1}:") and "reticulator" in e["reason"]
               and "not counted toward impairment" in e["reason"] for i, e in enumerate(doc["events"][:4]))
    assert main(["detect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 launch failures Holdfast cannot classify (never counted toward impairment):" in out
    assert "verdict normal throughout" in out
