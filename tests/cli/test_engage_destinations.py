"""`holdfast engage` from the console script never shortens an async event age without a
working destination, unless the owner opted in.

`holdfast.cli.main` runs in this process (tests/cli/cli_inprocess.py: its own stdin, stdout,
stderr and exit code, as the console script would have) against the session's moto server, whose
Lambda checks a destination against the function's execution role when it is written
(holdfast_fixtures.moto_patches, as AWS does). The CLI finds the deployed stack's
expired-events queue by itself, from the SSM parameter the stack writes."""

from __future__ import annotations

import json

import pytest

from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_function,
    role,
)

DEFAULT_AGE = 21600


def holdfast(server, *args: str) -> tuple[int, dict | None, str]:
    proc = cli_inprocess.run(["--endpoint-url", server.url, "--region", REGION, "--json", *args])
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr


def configs(clients, names) -> dict[str, dict | None]:
    lam, out = clients("lambda"), {}
    for name in names:
        try:
            c = lam.get_function_event_invoke_config(FunctionName=name)
            out[name] = {k: v for k, v in c.items() if k in ("MaximumEventAgeInSeconds", "MaximumRetryAttempts", "DestinationConfig")}
        except lam.exceptions.ResourceNotFoundException:
            out[name] = None
    return out


def age(config: dict | None) -> int:
    return (config or {}).get("MaximumEventAgeInSeconds", DEFAULT_AGE)


@pytest.fixture
def account(moto_server, aws_semantics):
    """Functions whose owners did, did not, and opted in: one role may send to any queue,
    one to none."""
    moto_server.reset()
    clients = moto_server.clients()
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName="HoldfastStack-ExpiredEvents1A2B")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    narrow = role(clients, "narrow", policy=None)
    make_function(clients, "granted")
    make_function(clients, "refused", role_arn=narrow)
    make_function(clients, "opted-in", role_arn=narrow, tags={"holdfast:expired-events": "discard"})
    clients("lambda").put_function_event_invoke_config(FunctionName="refused", MaximumEventAgeInSeconds=7200)
    return clients, queue


NAMES = ("granted", "refused", "opted-in")


def test_engage_finds_the_stacks_queue_and_shortens_ages_only_with_a_working_destination(account, moto_server):
    clients, queue = account
    clients("ssm").put_parameter(Name="/holdfast/HoldfastStack/expired-queue-arn", Value=queue, Type="String")
    before = configs(clients, NAMES)

    code, doc, err = holdfast(moto_server, "engage")
    assert code == 0, err
    assert doc["expired_queue"] == {"arn": queue, "found_by": "SSM parameter /holdfast/HoldfastStack/expired-queue-arn"}
    after = configs(clients, NAMES)
    for name in NAMES:
        destination = ((after[name] or {}).get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
        opted_in = name == "opted-in"
        # The rule: an age is shorter only where what expires is kept, or the owner opted in.
        if age(after[name]) < age(before[name]):
            assert destination == queue or opted_in, name
    assert age(after["granted"]) == 900 and after["granted"]["DestinationConfig"]["OnFailure"]["Destination"] == queue
    assert age(after["refused"]) == 7200 and after["refused"]["MaximumRetryAttempts"] == 1
    assert age(after["opted-in"]) == 900 and "DestinationConfig" not in after["opted-in"]
    refused = next(r for r in doc["resources"] if r["arn"].endswith(":refused"))
    assert refused["notes"]["destination"]["policy"]["Statement"][0] == {
        "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue}


def test_engage_with_no_queue_anywhere_keeps_every_age_but_the_opted_in(account, moto_server):
    clients, _ = account
    before = configs(clients, NAMES)
    code, doc, err = holdfast(moto_server, "engage")
    assert code == 0, err
    assert doc["expired_queue"]["arn"] is None and "no expired-events queue found" in doc["expired_queue"]["found_by"]
    after = configs(clients, NAMES)
    assert [age(after[n]) for n in NAMES] == [age(before["granted"]), 7200, 900]
    assert {after[n]["MaximumRetryAttempts"] for n in NAMES} == {1}


def test_the_option_wins_and_is_checked(account, moto_server):
    clients, queue = account
    code, doc, err = holdfast(moto_server, "plan", "--expired-queue-arn", "not-an-arn")
    assert code == 2 and "is not an SQS queue ARN" in err
    code, doc, err = holdfast(moto_server, "plan", "--expired-queue-arn", queue)
    assert code == 0 and doc["expired_queue"] == {"arn": queue, "found_by": "--expired-queue-arn"}
    clients("ssm").put_parameter(Name="/holdfast/A/expired-queue-arn", Value=queue, Type="String")
    clients("ssm").put_parameter(Name="/holdfast/B/expired-queue-arn", Value=queue + "-b", Type="String")
    code, doc, err = holdfast(moto_server, "plan")
    assert code == 2 and "several Holdfast stacks" in err and "--expired-queue-arn" in err
