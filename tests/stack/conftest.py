"""One synthesized app for the whole session, with cdk-nag's AwsSolutions checks on.

Synth takes seconds, so every stack test shares this one; tests that need another
configuration build only what they check. Each app is synthesized once (`checks.synth`):
its templates and its nag findings are read from that one cloud assembly.
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
from tests.stack.checks import Synth, synth

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
    synth: Synth
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
    done = synth(app)
    return Synthesized(app, stack, done.template(stack), Settings.from_mapping(CONTEXT["holdfast"]), done)


# ---- the organization's app: an OU and two regions ---------------------------------

ADMIN = "111111111111"
ORG_ID = "o-a1b2c3d4e5"
OU = "ou-ab12-cd345678"
ORG_REGIONS = ["us-east-1", "eu-west-1"]
ORG_CONTEXT = {
    "holdfast": {
        "org_organizational_unit_ids": [OU],
        "org_regions": ORG_REGIONS,
        "org_admin_account": ADMIN,
        "org_id": ORG_ID,
        "org_call_as": "DELEGATED_ADMIN",
    }
}


@dataclass
class OrgSynthesized:
    app: App
    stacks: dict[str, Stack]
    templates: dict[str, Template]
    member_template: dict
    settings: Settings
    synth: Synth

    def org(self) -> dict:
        return self.templates["HoldfastOrg"].to_json()


@pytest.fixture(scope="session")
def org_synthesized(tmp_path_factory) -> OrgSynthesized:
    app = build_app(ORG_CONTEXT, outdir=str(tmp_path_factory.mktemp("cdk.out.org")))
    Aspects.of(app).add(AwsSolutionsChecks())
    stacks = {c.node.id: c for c in app.node.children if isinstance(c, Stack)}
    done = synth(app)
    templates = {name: done.template(stack) for name, stack in stacks.items()}
    return OrgSynthesized(app, stacks, templates, stacks["HoldfastOrg"].member_template,
                          Settings.from_mapping(ORG_CONTEXT["holdfast"]), done)


# ---- a user's own stack that already has resources, with Holdfast added -------------

@dataclass
class Foreign:
    app: App
    stack: Stack
    holdfast: object
    template: Template
    key_stack: Stack
    key_holdfast: object
    key_template: Template
    synth: Synth


@pytest.fixture(scope="session")
def foreign(tmp_path_factory) -> Foreign:
    """`OrdersService`: a queue and a consumer function of the user's, then Holdfast, then the
    one-line grant; and a second stack whose expired-events queue uses a KMS key of the user's."""
    from aws_cdk import Duration, Environment
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sqs as sqs

    from holdfast_cdk import Holdfast

    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out.foreign")))
    Aspects.of(app).add(AwsSolutionsChecks())
    env = Environment(account=ACCOUNT, region=REGION)
    stack = Stack(app, "OrdersService", env=env)
    orders = sqs.Queue(stack, "Orders", visibility_timeout=Duration.minutes(2))
    consumer = lambda_.Function(
        stack,
        "Consumer",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )
    orders.grant_consume_messages(consumer)
    holdfast = Holdfast(stack, "Holdfast", settings=Settings.from_mapping({"mode": "recommend"}))
    holdfast.grant_expired_events_destination(consumer)
    stack.consumer, stack.orders = consumer, orders

    key_stack = Stack(app, "KeyedService", env=env)
    key = kms.Key(key_stack, "TeamKey", enable_key_rotation=True)
    worker = lambda_.Function(
        key_stack,
        "Worker",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )
    key_holdfast = Holdfast(key_stack, "Holdfast", expired_events_key=key, parameter_prefix="/holdfast/keyed")
    key_holdfast.grant_expired_events_destination(worker)
    key_stack.worker, key_stack.key = worker, key
    done = synth(app)
    return Foreign(app, stack, holdfast, done.template(stack), key_stack, key_holdfast, done.template(key_stack), done)


# ---- the stack with the game day on, from settings ----------------------------------

GAME_DAY_CONTEXT = {
    "holdfast": {
        "targets": [{"account": ACCOUNT, "region": REGION}],
        "selector": "team:holdfast=on",
        "game_day_stop_alarm": "orders-slo-breach",
        "game_day_duration_minutes": 30,
        "game_day_lambda_errors": True,
        "game_day_lambda_config_bucket": "fis-config-123456789012",
    }
}


@pytest.fixture(scope="session")
def game_day_synthesized(tmp_path_factory) -> Synthesized:
    app = build_app(GAME_DAY_CONTEXT, outdir=str(tmp_path_factory.mktemp("cdk.out.gameday")))
    Aspects.of(app).add(AwsSolutionsChecks())
    (stack,) = [c for c in app.node.children if isinstance(c, Stack)]
    done = synth(app)
    return Synthesized(app, stack, done.template(stack), Settings.from_mapping(GAME_DAY_CONTEXT["holdfast"]), done)
