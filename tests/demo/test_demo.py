"""`make demo` in CI: the same replay, unpaced, on a smaller fleet.

GIVEN the October event replayed against an embedded AWS by the real detector intake and
reconciler, to the end of the event (14:20 PDT) and the lift after it,
WHEN the plan is back to normal,
THEN each stage lifted only on its evidence and after the timeline says it could:
- no stage lifts during the mixed phase (launches succeeding, many throttled, until
  11:23 "EC2 request throttles begin to relax"): the drain starts after it;
- routing (NLB thresholds) only after target health was stable past 10:36 "Network
  propagation back to normal" and launches were healthy for a hold, which they were
  not before 13:50 "All EC2 APIs and new instance launches normal";
- capacity (ASG processes, scale-in) last, only after 13:50 plus the capacity hold;
and the account's automation removed no capacity from the selected resources, while the
counterfactual from the same inputs shows what it would have done; every selected
resource equals its pre-event snapshot except the owner's mid-event change, which is
kept and reported; every unselected resource is untouched; the report, the chart and
out/demo-report.json are written.
"""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from holdfast.settings import Settings
from holdfast_demo import scenario
from holdfast_demo.__main__ import run

S = Settings()
DEMO_PAGE = Path(__file__).resolve().parents[2] / "docs" / "demo.md"
HOLD, CAPACITY_HOLD = timedelta(minutes=S.hold_minutes), timedelta(minutes=S.capacity_hold_minutes)


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    code = run(out_dir=out_dir, fast=True, small=True, out=out)
    return code, out.getvalue(), out_dir


@pytest.fixture(scope="module")
def document(replay):
    return json.loads((replay[2] / "demo-report.json").read_text())


def lifted(document, stage) -> datetime:
    return datetime.fromisoformat(document["stages"][stage]["lifted_at"])


def test_the_replay_restores_every_resource_and_writes_the_report(replay):
    code, printed, out_dir = replay
    assert code == 0, printed
    summary = next(line for line in printed.splitlines() if line.startswith("End state"))
    assert "1 drift-kept" in summary and " 0 NOT restored" in summary, summary
    report = (out_dir / "demo-report.md").read_text()
    assert "- NOT restored: 0" in report and "- owner changes kept (drift): 1" in report
    assert "## Stages lifted, and the evidence that allowed each" in report and "## Without Holdfast" in report
    assert (out_dir / "demo-timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The whole event is replayed: the Health issue closes at 14:20 and the plan ends after it.
    assert "health-closed×1" in printed and "◆ ECS EKS and Fargate recovered; event ends" in printed


def test_the_json_document_has_the_issues_shape(document):
    assert set(document) == {"stages", "time_to_posture_seconds", "counterfactual"}
    assert list(document["stages"]) == ["drain", "replay", "fresh-work", "routing", "capacity"]
    for stage, entry in document["stages"].items():
        assert set(entry) == {"lifted_at", "evidence"} and entry["evidence"], stage
        assert datetime.fromisoformat(entry["lifted_at"]).utcoffset() == timedelta(hours=-7)  # PDT, as the timeline
    assert isinstance(document["time_to_posture_seconds"], int)


def test_full_posture_comes_within_the_onset_minute_and_its_walk(document):
    # The first failures land at 23:48:00-23:48:03; the tick of 23:49 is the first to see
    # three groups in two zones, and engages everything in that tick.
    assert 60 <= document["time_to_posture_seconds"] <= 60 + 90


def test_no_stage_lifts_before_the_throttles_relax(document):
    assert min(lifted(document, s) for s in document["stages"]) > scenario.THROTTLES_RELAX
    assert lifted(document, "replay") - lifted(document, "drain") >= HOLD
    # The drain stage ends on the consumers' errors and throttles; each mapping's cap is its controller's.
    assert "consumers over 10 min: errors at most" in " ".join(document["stages"]["replay"]["evidence"])
    assert "under its own controller" in " ".join(document["stages"]["drain"]["evidence"])


def test_routing_lifts_only_on_stable_target_health_after_1036_and_healthy_launches(document):
    routing = lifted(document, "routing")
    assert routing >= scenario.NETWORK_NORMAL + HOLD
    assert routing >= scenario.EC2_NORMAL - timedelta(minutes=1) + HOLD   # the last throttled burst, plus a hold
    evidence = " ".join(document["stages"]["routing"]["evidence"])
    assert "target health stable for 10 min: 2 target groups" in evidence
    assert "no ELB health-check terminations across groups since 10:3" in evidence
    assert "launches healthy for" in evidence
    assert lifted(document, "fresh-work") < routing - HOLD   # it waited on the evidence, not on its hold


def test_capacity_lifts_last_after_1350_plus_the_capacity_hold(document):
    capacity = lifted(document, "capacity")
    assert capacity >= scenario.EC2_NORMAL + CAPACITY_HOLD
    assert capacity == max(lifted(document, s) for s in document["stages"])
    assert "launches healthy for 3" in " ".join(document["stages"]["capacity"]["evidence"])


def test_the_accounts_automation_removed_no_capacity_and_would_have_without_holdfast(document):
    without = document["counterfactual"]
    with_holdfast = without["with_holdfast"]
    for key in ("instances_replaced", "zones_rebalanced", "target_group_zone_failovers", "target_groups_failed_out_of_dns"):
        assert with_holdfast[key] == 0, key
        assert without[key] > 0, key
    assert without["target_groups_failed_out_of_dns"] == 2   # both selected target groups, in the small fleet
    assert without["peak_consumer_concurrency"] > 2 * with_holdfast["peak_consumer_concurrency"]
    # Without Holdfast the consumers surge the minute Lambda's SQS polling comes back.
    assert datetime.fromisoformat(without["peak_consumer_concurrency_at"]) == scenario.POLLING_RESTORED


def test_the_region_switch_engage_step_is_invoked_on_the_deactivating_region_and_reports(replay):
    """The engage step a Region switch plan runs in the Region it leaves, in mode recommend:
    what it would write, nothing written (the replay then runs on Holdfast's own evidence)."""
    code, printed, _ = replay
    line = next(line for line in printed.splitlines() if line.startswith("Region switch engage step"))
    assert "(the deactivating Region), mode recommend: reported: mode recommend: would hold" in line, line
    assert "plan/demo-evacuate:abc123" in line and "nothing written" in line


def documented_lift_times() -> dict[str, str]:
    """docs/demo.md's table of when each stage lifted: {stage: "HH:MM"}."""
    text = DEMO_PAGE.read_text()
    block = text.split("<!-- demo-stages:start -->", 1)[1].split("<!-- demo-stages:end -->", 1)[0]
    return dict(re.findall(r"^\| ([a-z-]+) \| (\d\d:\d\d) \|", block, re.M))


def test_the_demo_page_gives_each_stages_lift_time_as_the_replay_does(document):
    """The times docs/demo.md quotes are this run's: a change that moves a lift fails here
    until the page says so."""
    replayed = {stage: lifted(document, stage).strftime("%H:%M") for stage in document["stages"]}
    assert documented_lift_times() == replayed, (
        f"docs/demo.md's table of lift times differs from the replay: {replayed}")

