"""The deploy page's example of a first recommend-mode report (docs/deploy.md, "Where
recommend mode reports") is what the code writes: the detector's verdict on three launch
failures in three zones, one real reconciler tick in mode `recommend` against a fleet (the
real engine, ledger and SNS), the message the stage topic delivers to a queue, and
`holdfast plan` beside it. Nothing is written to a resource."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from holdfast.aws import Clients
from holdfast.clock import FakeClock
from holdfast.core.detector import evaluate
from holdfast.core.signals import parse_event
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.factory import launch, utc
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
T0 = utc(2025, 10, 20, 6, 48)


def first_report() -> tuple[str, str, bool]:
    """(the topic's message, `holdfast plan`'s table, whether every resource is as it was)."""
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    settings = Settings(mode="recommend")
    for leaf, value in (("ledger-table", DEFAULT_TABLE), ("settings", settings.to_json())):
        clients("ssm").put_parameter(Name=f"/holdfast/Holdfast/{leaf}", Value=value, Type="String")
    fleet = build_fleet(clients, asgs=2, esms=1, asyncs=1, nlbs=1, services=0, unselected=0, prefix="shop")
    before = snapshot(clients, fleet)
    sns, sqs = clients("sns"), clients("sqs")
    topic = sns.create_topic(Name="holdfast-stage-changes")["TopicArn"]
    url = sqs.create_queue(QueueName="stage-changes")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue, Attributes={"RawMessageDelivery": "true"})
    # The detector's own verdict on what EventBridge delivers: capacity failures in three zones.
    events = [launch(g, z, T0 + timedelta(seconds=10 * i))
              for i, (g, z) in enumerate([("web", "us-east-1a"), ("api", "us-east-1b"), ("etl", "us-east-1c")])]
    signals = [parse_event(e, region=REGION, settings=settings).signal for e in events]
    now = T0 + timedelta(minutes=1)
    verdict = evaluate(signals, None, settings, now)
    runtime = Runtime(clients=clients, settings=settings, table=DEFAULT_TABLE, clock=FakeClock(now),
                      controller_id="2025/10/20/[$LATEST]example", topic_arn=topic)
    tick(runtime, collect=lambda *_: verdict)
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    plan = cli_inprocess.run(["--region", REGION, "plan"])
    assert plan.returncode == 0, plan.stderr
    return json.dumps(json.loads(message["Body"]), indent=2), plan.stdout.rstrip(), snapshot(clients, fleet) == before


def page_block(name: str) -> str:
    text = PAGE.read_text()
    block = text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return block.split("```", 2)[1].strip("\n")


def test_the_deploy_page_shows_the_first_recommend_mode_report_as_the_code_writes_it(aws, aws_semantics, capsys):
    message, plan, unchanged = first_report()
    assert unchanged   # recommend: decided and reported, nothing written to a resource
    doc = json.loads(message)
    assert (doc["mode"], doc["stage"], doc["verdict"], doc["generation"]) == ("recommend", "hold", "impaired", 1)
    assert page_block("recommend-topic") == message
    assert page_block("recommend-plan") == plan
