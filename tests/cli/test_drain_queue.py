"""drain-estimate --queue-url, against moto.

SQS in moto publishes no CloudWatch metrics, so each test puts the datapoints SQS
would publish (AWS/SQS, dimension QueueName) with PutMetricData. Real CloudWatch
refuses PutMetricData into an AWS/ namespace; moto accepts it, and GetMetricData
then reads them exactly as it would read SQS's own.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from holdfast.cli import main
from holdfast.cli.drain import QueueReadError, read_queue

NOW = datetime(2025, 10, 20, 9, 2, 30, tzinfo=timezone.utc)   # window ends at 09:00, the last whole period


@pytest.fixture
def queue(clients):
    url = clients("sqs").create_queue(QueueName="orders")["QueueUrl"]
    clients("sqs").send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "m"} for i in range(7)]
    )
    return url


def put(clients, metric: str, minutes_before_end: int, value: float) -> None:
    clients("cloudwatch").put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[{
            "MetricName": metric,
            "Dimensions": [{"Name": "QueueName", "Value": "orders"}],
            "Timestamp": NOW.replace(minute=0, second=0) - timedelta(minutes=minutes_before_end),
            "Value": value,
            "Unit": "Count",
        }],
    )


def test_backlog_is_the_queue_now_arrivals_the_mean_and_consumers_the_busiest_period(clients, queue):
    for minutes in range(1, 60, 5):                     # one datapoint in each of the 12 periods
        put(clients, "NumberOfMessagesSent", minutes, 6_000)
    put(clients, "NumberOfMessagesDeleted", 7, 4_500)     # 900/min: the consumers' best
    put(clients, "NumberOfMessagesDeleted", 2, 500)
    put(clients, "NumberOfMessagesSent", 70, 1_000_000)   # before the window: ignored
    put(clients, "NumberOfMessagesDeleted", -1, 99_000)    # the current, partial period: ignored

    figures = read_queue(clients, queue, NOW, window_minutes=60)

    assert figures.name == "orders"
    assert figures.backlog_messages == 7
    assert figures.arrival_per_minute == pytest.approx(12 * 6_000 / 60)
    assert figures.consumer_per_minute == pytest.approx(900)


def test_periods_without_datapoints_count_as_no_arrivals(clients, queue):
    put(clients, "NumberOfMessagesSent", 10, 3_000)
    figures = read_queue(clients, queue, NOW, window_minutes=30)
    assert figures.arrival_per_minute == pytest.approx(100)
    assert figures.consumer_per_minute == 0


def test_a_missing_queue_is_named(clients):
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/gone"
    with pytest.raises(QueueReadError, match="queue .*/gone does not exist in us-east-1"):
        read_queue(clients, url, NOW, window_minutes=60)


def test_cli_takes_the_backlog_from_the_queue_and_given_rates(aws, queue, capsys):
    argv = ["--json", "drain-estimate", "--queue-url", queue, "--arrival-per-minute", "1", "--consumer-per-minute", "3"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["backlog_messages"], doc["drain_minutes"]) == (7, 3.5)


def test_cli_explains_consumers_that_never_ran_in_the_window(aws, queue, capsys):
    # No metrics at all: arrivals 0, consumers 0 per minute, measured.
    assert main(["drain-estimate", "--queue-url", queue]) == 2
    err = capsys.readouterr().err
    assert "consumers at 0/min are no faster than arrivals at 0/min: the backlog never drains" in err
    assert "pass --consumer-per-minute" in err


def test_cli_exits_1_when_the_queue_cannot_be_read(aws, capsys):
    assert main(["drain-estimate", "--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/gone"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_one_batchs_throughput_is_measured_from_the_consumers_concurrency(clients, queue, capsys):
    """The same metrics the drain's forecast reads: deleted messages of the busiest period ÷
    the ConcurrentExecutions of the functions whose mappings read the queue, then."""
    from tests.support.fleet import make_function

    fn = make_function(clients, "orders-consumer")
    queue_arn = clients("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    clients("lambda").create_event_source_mapping(FunctionName=fn, EventSourceArn=queue_arn, Enabled=False)
    for minutes in range(1, 60, 5):
        put(clients, "NumberOfMessagesSent", minutes, 6_000)
    put(clients, "NumberOfMessagesDeleted", 7, 9_000)      # 1,800/min: the busiest period
    clients("cloudwatch").put_metric_data(Namespace="AWS/Lambda", MetricData=[{
        "MetricName": "ConcurrentExecutions", "Dimensions": [{"Name": "FunctionName", "Value": "orders-consumer"}],
        "Timestamp": NOW.replace(minute=0, second=0) - timedelta(minutes=7), "Value": 24.0}])

    figures = read_queue(clients, queue, NOW, window_minutes=60)
    assert figures.functions == ("orders-consumer",)
    assert figures.consumer_per_minute == pytest.approx(1800)
    assert figures.per_batch_per_minute == pytest.approx(75)   # 1,800/min over 24 batches

    import holdfast.cli.context as context
    from holdfast.clock import FakeClock
    original = context.SystemClock
    context.SystemClock = lambda: FakeClock(NOW)
    try:
        assert main(["--json", "drain-estimate", "--queue-url", queue]) == 0
    finally:
        context.SystemClock = original
    doc = json.loads(capsys.readouterr().out)
    assert doc["controller"]["start_cap"] == 16 and doc["controller"]["ceiling"] == 24   # 1,200/min and 1,800/min at 75 a batch
