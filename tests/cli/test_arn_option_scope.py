"""The options that name a queue act on exactly that queue, or on nothing: an
`--expired-queue-arn` or a `drain-estimate --queue-url` of another region or another
account than the command acts in is a usage error (exit 2, one line naming what differs),
refused before any call to SQS, CloudWatch or Lambda, by the same check as `release ARN`.

Before the check, `--expired-queue-arn` of another region became the on-failure
destination Holdfast wrote into this region's async configs, and `--queue-url` of another
region or account read this region's queue of the same name and its metrics.
`holdfast.cli.main` runs in-process against moto (account 123456789012, us-east-1), with
AWS's semantics where moto departs from them."""

from __future__ import annotations

import json

import pytest

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_function,
    make_queue,
)

ACCOUNT = "123456789012"
FOREIGN_REGION, FOREIGN_ACCOUNT = "eu-west-1", "210987654321"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:holdfast-expired-events"
FOREIGN = {"region": (f"arn:aws:sqs:{FOREIGN_REGION}:{ACCOUNT}:holdfast-expired-events",
                      f"https://sqs.{FOREIGN_REGION}.amazonaws.com/{ACCOUNT}/orders"),
           "account": (f"arn:aws:sqs:{REGION}:{FOREIGN_ACCOUNT}:holdfast-expired-events",
                       f"https://sqs.{REGION}.amazonaws.com/{FOREIGN_ACCOUNT}/orders")}


def run(capsys, *args) -> tuple[int, dict | None, str]:
    code = main(["--region", REGION, "--json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def refused(code, doc, err, where, named) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert doc["error"]["cause"] == "usage" and named in err and "nothing was done" in err
    assert (f"region {FOREIGN_REGION}" in err and f"--region {FOREIGN_REGION}" in err) if where == "region" \
        else f"account {FOREIGN_ACCOUNT}" in err


@pytest.fixture
def fleet(aws_semantics):
    """A selected function with an async config (2 retries, 7,200 s), this region's
    expired-events queue, and the queue `orders` with three messages."""
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    make_function(clients, "fn")
    clients("lambda").put_function_event_invoke_config(FunctionName="fn", MaximumRetryAttempts=2,
                                                       MaximumEventAgeInSeconds=7200)
    assert make_queue(clients, "holdfast-expired-events") == QUEUE
    make_queue(clients, "orders")
    url = clients("sqs").get_queue_url(QueueName="orders")["QueueUrl"]
    for i in range(3):
        clients("sqs").send_message(QueueUrl=url, MessageBody=str(i))
    return clients


@pytest.mark.parametrize("where", ["region", "account"])
@pytest.mark.parametrize("command", [("plan",), ("engage", "--yes"), ("audit",)])
def test_an_expired_queue_arn_of_another_region_or_account_is_refused(fleet, capsys, where, command):
    arn, _ = FOREIGN[where]
    calls = dict(fleet.calls)
    code, doc, err = run(capsys, *command, "--expired-queue-arn", arn)
    refused(code, doc, err, where, arn)
    assert "--expired-queue-arn" in err
    made = [op for op, n in fleet.calls.items() if n != calls.get(op, 0)]
    assert not [op for op in made if op.startswith(("lambda:", "sqs:"))], made
    config = fleet("lambda").get_function_event_invoke_config(FunctionName="fn")
    assert (config["MaximumRetryAttempts"], config.get("DestinationConfig")) == (2, None)


def test_an_expired_queue_arn_of_this_region_and_account_is_used(fleet, capsys):
    code, doc, err = run(capsys, "engage", "--yes", "--expired-queue-arn", QUEUE)
    assert code == 0, err
    assert doc["expired_queue"] == {"arn": QUEUE, "found_by": "--expired-queue-arn"}
    config = fleet("lambda").get_function_event_invoke_config(FunctionName="fn")
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == QUEUE


@pytest.mark.parametrize("where", ["region", "account"])
def test_drain_estimate_refuses_a_queue_url_of_another_region_or_account(fleet, capsys, where):
    _, url = FOREIGN[where]
    calls = dict(fleet.calls)
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", url, "--arrival-per-minute", "1",
                         "--consumer-per-minute", "3")
    refused(code, doc, err, where, url)
    assert "--queue-url" in err
    made = [op for op, n in fleet.calls.items() if n != calls.get(op, 0)]
    assert not [op for op in made if op.startswith(("sqs:", "cloudwatch:", "lambda:"))], made


@pytest.mark.parametrize("url", [f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://{REGION}.queue.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://queue.amazonaws.com/{ACCOUNT}/orders"])
def test_drain_estimate_reads_a_queue_url_of_this_region_and_account_in_each_form(fleet, capsys, url):
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", url, "--arrival-per-minute", "1",
                         "--consumer-per-minute", "3")
    assert code == 0, err
    assert doc["backlog_messages"] == 3


def test_a_queue_url_that_names_no_queue_is_a_usage_error(fleet, capsys):
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", "https://sqs.us-east-1.amazonaws.com/orders")
    assert code == 2 and "is not an SQS queue URL" in err, err


# The other forms of a queue URL on an AWS domain: FIPS, dual-stack and an interface VPC
# endpoint's (SQS's endpoints in the AWS General Reference; the SQS Developer Guide's
# "Internetwork traffic privacy" for vpce-ID.sqs.REGION.vpce.amazonaws.com).
OTHER_FORMS = ["https://sqs-fips.{region}.amazonaws.com/{account}/orders",
               "https://sqs-fips.{region}.api.aws/{account}/orders",
               "https://sqs.{region}.api.aws/{account}/orders",
               "https://vpce-1a2b.sqs.{region}.vpce.amazonaws.com/{account}/orders",
               "https://vpce-0a1b2c3d4e5f-abcd1234.sqs.{region}.vpce.amazonaws.com/{account}/orders"]


@pytest.mark.parametrize("form", OTHER_FORMS)
@pytest.mark.parametrize("region", ["eu-west-1", "us-east-2", "us-gov-west-1"])
def test_drain_estimate_takes_the_region_of_a_fips_dual_stack_or_vpc_endpoint_queue_url(fleet, capsys, form, region):
    url = form.format(region=region, account=ACCOUNT)
    calls = dict(fleet.calls)
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", url, "--arrival-per-minute", "1",
                         "--consumer-per-minute", "3")
    assert code == 2 and doc["error"]["cause"] == "usage", err
    assert f"region {region}" in err and f"--region {region}" in err and "--queue-url" in err
    made = [op for op, n in fleet.calls.items() if n != calls.get(op, 0)]
    assert not [op for op in made if op.startswith(("sqs:", "cloudwatch:", "lambda:"))], made


@pytest.mark.parametrize("form", OTHER_FORMS)
def test_drain_estimate_reads_a_fips_dual_stack_or_vpc_endpoint_queue_url_of_this_region(fleet, capsys, form):
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", form.format(region=REGION, account=ACCOUNT),
                         "--arrival-per-minute", "1", "--consumer-per-minute", "3")
    assert code == 0, err
    assert doc["backlog_messages"] == 3


@pytest.mark.parametrize("url", [f"https://sqs.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://vpce-1a2b.sqs.vpce.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://sqs.eu-west-1.us-east-1.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://lambda.{REGION}.amazonaws.com/{ACCOUNT}/orders",
                                 f"https://sqs.mars-north-1.amazonaws.com/{ACCOUNT}/orders"])
def test_a_queue_url_on_an_aws_domain_whose_region_cannot_be_told_is_a_usage_error(fleet, capsys, url):
    calls = dict(fleet.calls)
    code, doc, err = run(capsys, "drain-estimate", "--queue-url", url, "--arrival-per-minute", "1",
                         "--consumer-per-minute", "3")
    assert code == 2 and doc["error"]["cause"] == "usage" and err.count("\n") == 1, err
    assert "names no SQS endpoint of one region" in err and "nothing was done" in err
    made = [op for op, n in fleet.calls.items() if n != calls.get(op, 0)]
    assert not [op for op in made if op.startswith(("sqs:", "cloudwatch:", "lambda:"))], made


@pytest.mark.parametrize("url, partition, region", [
    (f"https://sqs.cn-north-1.amazonaws.com.cn/{ACCOUNT}/orders", "aws-cn", "cn-north-1"),
    (f"https://sqs.eusc-de-east-1.amazonaws.eu/{ACCOUNT}/orders", "aws-eusc", "eusc-de-east-1"),
    (f"https://sqs.us-iso-east-1.c2s.ic.gov/{ACCOUNT}/orders", "aws-iso", "us-iso-east-1"),
    (f"https://sqs-fips.us-gov-west-1.amazonaws.com/{ACCOUNT}/orders", "aws-us-gov", "us-gov-west-1"),
    (f"https://queue.amazonaws.com/{ACCOUNT}/orders", "aws", "us-east-1"),
    (f"http://localhost:4566/{ACCOUNT}/orders", "aws", REGION)])
def test_a_queue_url_names_its_partition_and_region(url, partition, region):
    """Every partition's domains and region names are botocore's partitions data; a
    host on no AWS domain (a local endpoint) is this region's."""
    from holdfast.cli.drain import queue_arn

    class Here:
        region, partition = REGION, "aws"

    assert queue_arn(url, Here()) == f"arn:{partition}:sqs:{region}:{ACCOUNT}:orders"
