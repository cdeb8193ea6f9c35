"""One synthesized app for the whole session, with cdk-nag's AwsSolutions checks on.

Synth takes seconds, so every stack test shares this one; tests that need another
configuration build only what they check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from aws_cdk import App, Aspects, Stack
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from app import build_app
from holdfast.settings import Settings

ACCOUNT = "123456789012"
REGION = "us-east-1"
CONTEXT = {
    "holdfast": {
        "targets": [{"account": ACCOUNT, "region": REGION}],
        "notification_email": "oncall@example.com",
        "log_retention_days": 30,
        "tick_budget_seconds": 50,
        "health_services": ["EC2", "DYNAMODB"],
    }
}


@dataclass
class Synthesized:
    app: App
    stack: Stack
    template: Template
    settings: Settings
    account: str = ACCOUNT
    region: str = REGION

    def resources(self, cfn_type: str) -> dict[str, dict]:
        return self.template.find_resources(cfn_type)

    def json(self) -> str:
        return json.dumps(self.template.to_json())


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> Synthesized:
    app = build_app(CONTEXT, outdir=str(tmp_path_factory.mktemp("cdk.out")))
    Aspects.of(app).add(AwsSolutionsChecks())
    (stack,) = [c for c in app.node.children if isinstance(c, Stack)]
    return Synthesized(app, stack, Template.from_stack(stack), Settings.from_mapping(CONTEXT["holdfast"]))
