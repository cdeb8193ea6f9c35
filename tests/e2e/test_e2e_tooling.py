"""The opt-in end-to-end run's own tooling, without a real account: `make e2e` skips with
one line when no sandbox is named, and the fleet, snapshot, comparison and clean-up work
(against moto, which is laxer than AWS but runs the same calls)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e  # noqa: E402

PREFIX, SELECTOR = "hf-e2e-test", "holdfast-e2e:protect=hf-e2e-test"


@pytest.mark.parametrize("missing", ["HOLDFAST_E2E_ACCOUNT", "HOLDFAST_E2E_REGION", "AWS_PROFILE"])
def test_without_a_sandbox_make_e2e_prints_one_skip_line_and_succeeds(missing):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLDFAST_E2E_") and k != "AWS_PROFILE"}
    env.update({"HOLDFAST_E2E_ACCOUNT": "123456789012", "HOLDFAST_E2E_REGION": "eu-west-1", "AWS_PROFILE": "sandbox"})
    del env[missing]
    result = subprocess.run(["make", "-s", "e2e"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "e2e: skipped: set HOLDFAST_E2E_ACCOUNT, HOLDFAST_E2E_REGION and AWS_PROFILE to run against a sandbox account"
    ]
    assert result.stderr == ""


def test_preflight_refuses_credentials_of_another_account(aws):
    with pytest.raises(SystemExit, match="refusing to run: the credentials are account 123456789012, HOLDFAST_E2E_ACCOUNT is 999999999999"):
        e2e.preflight("999999999999", "us-east-1")


@pytest.fixture
def fleet(aws):
    made = e2e.prepare(PREFIX, SELECTOR, ami="ami-12c6146b", instance_type="t3.micro", desired=0)
    return made


def test_a_snapshot_of_an_untouched_fleet_compares_equal_and_holds_the_owner_states(fleet):
    before = e2e.snapshot(PREFIX)
    assert e2e.compare(before, e2e.snapshot(PREFIX)) == []
    assert before[f"asg:{PREFIX}-asg-0"]["SuspendedProcesses"] == ["AZRebalance"]
    assert before[f"asg:{PREFIX}-asg-1"]["SuspendedProcesses"] == ["ScheduledActions"]
    assert before[f"async:{PREFIX}-owned-async"]["MaximumRetryAttempts"] == 0
    assert before[f"async:{PREFIX}-bare-async"] is None
    assert len([k for k in before if k.startswith("asg:")]) == 4


def test_the_comparison_names_every_setting_not_put_back(fleet):
    before = e2e.snapshot(PREFIX)
    asg = e2e.client("autoscaling")
    asg.resume_processes(AutoScalingGroupName=f"{PREFIX}-asg-0", ScalingProcesses=["AZRebalance"])
    asg.create_or_update_tags(Tags=[{"ResourceId": f"{PREFIX}-asg-2", "ResourceType": "auto-scaling-group", "Key": "holdfast:original",
                                     "Value": "x", "PropagateAtLaunch": False}])
    e2e.client("lambda").delete_function_event_invoke_config(FunctionName=f"{PREFIX}-owned-async")
    differences = e2e.compare(before, e2e.snapshot(PREFIX))
    assert [d.split(":", 2)[0] + ":" + d.split(":", 2)[1] for d in differences] == [
        f"asg:{PREFIX}-asg-0", f"asg:{PREFIX}-asg-2", f"async:{PREFIX}-owned-async"
    ]
    assert 'before ["AZRebalance"]' not in differences[0] and '"AZRebalance"' in differences[0]


def test_clean_up_removes_the_whole_fleet_and_tolerates_a_second_run(fleet):
    removed = e2e.destroy(PREFIX, {"AWS::DynamoDB::Table": ["gone-already"], "AWS::Logs::LogGroup": [], "AWS::KMS::Key": []})
    assert f"{PREFIX}-asg-0" in removed and f"{PREFIX}-consumer" in removed and f"{PREFIX}-fn" in removed
    assert e2e.snapshot(PREFIX) == {}
    e2e.destroy(PREFIX)
