"""app.py: settings from context, one stack per target, a bad setting stops synth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import Stack

from app import build_app
from holdfast.settings import SettingsError

ROOT = Path(__file__).resolve().parents[2]


def _stacks(app) -> dict[str, Stack]:
    return {c.node.id: c for c in app.node.children if isinstance(c, Stack)}


def test_each_target_gets_its_own_stack(tmp_path):
    targets = [{"account": "111111111111", "region": "us-east-1"}, {"account": "222222222222", "region": "eu-west-1"}]
    stacks = _stacks(build_app({"holdfast": {"targets": targets}}, outdir=str(tmp_path)))
    assert {name: (s.account, s.region) for name, s in stacks.items()} == {
        "Holdfast-111111111111-us-east-1": ("111111111111", "us-east-1"),
        "Holdfast-222222222222-eu-west-1": ("222222222222", "eu-west-1"),
    }


def test_without_targets_one_stack_uses_the_cli_default_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "333333333333")
    monkeypatch.setenv("CDK_DEFAULT_REGION", "ap-southeast-2")
    stacks = _stacks(build_app({"holdfast": {}}, outdir=str(tmp_path)))
    assert {name: (s.account, s.region) for name, s in stacks.items()} == {"Holdfast": ("333333333333", "ap-southeast-2")}


def test_settings_passed_on_the_command_line_as_a_json_string_are_read(tmp_path):
    (stack,) = _stacks(build_app({"holdfast": json.dumps({"mode": "auto"})}, outdir=str(tmp_path))).values()
    assert stack.settings.mode == "auto"


def test_a_bad_setting_fails_building_the_app_naming_the_key(tmp_path):
    with pytest.raises(SettingsError, match=r"holdfast\.esm_floor = 1: must be an integer from 2 to 1000"):
        build_app({"holdfast": {"esm_floor": 1}}, outdir=str(tmp_path))


def test_a_bad_setting_fails_synth_with_the_key_in_the_message(tmp_path):
    """What `cdk synth` runs: app.py, context in CDK_CONTEXT_JSON as the CLI passes it."""
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"holdfast": {"async_max_retry_attempts": 5}}),
        "CDK_OUTDIR": str(tmp_path),
    }
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "holdfast.async_max_retry_attempts = 5: must be an integer from 0 to 2" in result.stderr
    assert "Traceback" not in result.stderr
