"""drain-estimate from numbers: the arithmetic, the cap steps, and every bad input."""

from __future__ import annotations

import json

import pytest

from holdfast.cli import main
from holdfast.core.drain import estimate as drain


@pytest.fixture(autouse=True)
def _aws(aws):
    """`main` looks for a deployed stack first (its SSM parameter, its ledger): in moto,
    where there is none, not in the account the machine's network might reach."""


PUBLISHED = ["--outage-minutes", "172", "--arrival-per-minute", "1200", "--consumer-per-minute", "1800"]


@pytest.mark.parametrize(
    "outage, arrival, consumer, backlog, minutes",
    [
        (172, 1200, 1800, 206_400, 344),     # the published October example
        (10, 100, 200, 1_000, 10),
        (1, 0.5, 1, 0, 0),                   # half a message rounds to none
        (3, 0.5, 1, 2, 4),                   # 1.5 messages round to 2, drained at 0.5/min
        (60, 1000, 1001, 60_000, 60_000),    # barely faster: drains, slowly
    ],
)
def test_backlog_and_drain_time_at_full_spare_capacity(outage, arrival, consumer, backlog, minutes):
    result = drain.estimate(drain.backlog_after(outage, arrival), arrival, consumer, caps=())
    assert (result.backlog_messages, result.drain_minutes) == (backlog, minutes)


@pytest.mark.parametrize(
    "cap, per_batch, rate, drain_minutes",
    [
        (2, 60, 120, None),      # 120/min against 1,200 arriving: never drains
        (20, 60, 1200, None),    # exactly arrivals: never drains
        (21, 60, 1260, 206_400 / 60),
        (100, 60, 1800, 344),    # 6,000/min of batches, but consumers top out at 1,800
        (300, None, 540, None),  # default model: 1,800 / 1,000 per batch
        (1000, None, 1800, 344),
    ],
)
def test_each_cap_consumes_at_most_its_batches_and_at_most_the_consumers(cap, per_batch, rate, drain_minutes):
    (step,) = drain.estimate(206_400, 1200, 1800, caps=(cap,), per_batch_per_minute=per_batch).steps
    assert step.consumer_per_minute == pytest.approx(rate)
    assert step.spare_per_minute == pytest.approx(rate - 1200)
    assert step.drain_minutes == (None if drain_minutes is None else pytest.approx(drain_minutes))


def test_fixed_caps_floor_first_and_the_controllers_drain(capsys):
    assert main(["--json", "drain-estimate", *PUBLISHED, "--per-batch-per-minute", "60"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"backlog_messages", "drain_minutes", "steps", "controller"}
    # The controller starts from the 20 batches the 1,200/min of arrivals need (what the
    # consumer ran at), +3 (1/8) per raise up to the 30 the 1,800/min need: never faster
    # than the bound, a few minutes of ramp slower.
    c = doc["controller"]
    assert (c["start_cap"], c["step"], c["ceiling"]) == (20, 3, 30)
    assert 344 < c["drain_minutes"] < 344 + 15, c
    assert (doc["backlog_messages"], doc["drain_minutes"]) == (206_400, 344)
    assert [s["cap"] for s in doc["steps"]] == [2, 5, 20, 100, 300]
    assert [s["drain_minutes"] for s in doc["steps"]] == [None, None, None, 344, 344]
    assert doc["steps"][0] == {"cap": 2, "consumer_per_minute": 120, "spare_per_minute": -1080, "drain_minutes": None}


def test_text_output_says_which_caps_never_drain(capsys):
    assert main(["drain-estimate", *PUBLISHED]) == 0
    out = capsys.readouterr().out
    assert "206,400 messages" in out
    assert "344 min (5 h 44 min)" in out
    assert out.count("never drains at this cap") == 5   # default model: 540/min at 300 batches
    assert "uncapped" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--outage-minutes", "172", "--arrival-per-minute", "1200", "--consumer-per-minute", "1200"],
         "consumers at 1,200/min are no faster than arrivals at 1,200/min: the backlog never drains"),
        (["--outage-minutes", "172", "--arrival-per-minute", "1200", "--consumer-per-minute", "900"],
         "consumers at 900/min are no faster than arrivals at 1,200/min"),
        (["--outage-minutes", "0", "--arrival-per-minute", "1200", "--consumer-per-minute", "1800"],
         "--outage-minutes must be a positive number, got 0"),
        (["--outage-minutes", "172", "--arrival-per-minute", "-5", "--consumer-per-minute", "1800"],
         "--arrival-per-minute must be a positive number, got -5"),
        (["--outage-minutes", "nan", "--arrival-per-minute", "1", "--consumer-per-minute", "2"],
         "--outage-minutes must be a positive number"),
        (["--outage-minutes", "inf", "--arrival-per-minute", "1", "--consumer-per-minute", "2"],
         "--outage-minutes must be a positive number"),
        (["--outage-minutes", "172", "--arrival-per-minute", "1200"], "--consumer-per-minute is required"),
        (["--arrival-per-minute", "1200", "--consumer-per-minute", "1800"], "--outage-minutes is required"),
        ([], "give --outage-minutes, --arrival-per-minute and --consumer-per-minute, or --queue-url"),
        (["--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "--outage-minutes", "172"],
         "give --queue-url or --outage-minutes, not both"),
        ([*PUBLISHED, "--per-batch-per-minute", "0"], "--per-batch-per-minute must be a positive number, got 0"),
        (["--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "--window-minutes", "2"],
         "--window-minutes must be from 5 to 1440, got 2"),
    ],
)
def test_invalid_input_exits_2_with_the_reason(argv, message, capsys):
    assert main(["drain-estimate", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_a_non_number_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["drain-estimate", "--outage-minutes", "a lot"])
    assert exit_.value.code == 2
    assert "invalid float value" in capsys.readouterr().err
