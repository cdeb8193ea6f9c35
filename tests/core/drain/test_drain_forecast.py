"""The drain forecast: the arithmetic, and a check against the drain the recovery model runs."""

from __future__ import annotations

import pytest

from holdfast.core import drain as dc
from holdfast_fixtures.drain_strategies import Controller
from holdfast_fixtures.recovery_model import ARITHMETIC, caught_up_at, simulate


@pytest.mark.parametrize(
    "backlog, arrival, consumers, seconds, why",
    [
        (206_400, 20, 30, 20_640, "206,400 messages at 10/s spare: 344.0 min"),
        (0, 20, 30, 0, "0 messages"),
        (1000, 20, 20, None, "never drains"),
        (1000, 20, 10, None, "never drains"),
        (None, 20, 30, None, "backlog unknown"),
        (1000, None, 30, None, "arrival rate unknown"),
        (1000, 20, None, None, "consumer throughput unknown"),
        (-5, 20, 30, None, "impossible"),
        (float("nan"), 20, 30, None, "impossible"),
    ],
)
def test_forecast(backlog, arrival, consumers, seconds, why):
    f = dc.forecast(backlog, arrival, consumers)
    assert f.seconds == (None if seconds is None else pytest.approx(seconds))
    assert why in f.reason


@pytest.mark.parametrize(
    "deleted, concurrency, rate",
    [(20.0, 16.0, 1.25), (None, 16.0, None), (20.0, None, None), (20.0, 0.0, None), (0.0, 16.0, None)],
)
def test_per_batch_rate(deleted, concurrency, rate):
    assert dc.per_batch_rate(deleted, concurrency) == rate


def test_the_forecast_at_drain_start_is_within_15_percent_of_the_drain():
    """In the arithmetic scenario: the forecast the controller makes when the drain starts
    (visible messages then; arrivals and per-batch throughput from before the event; the
    controller's ceiling) against the time from that start until the age is back at baseline."""
    strategy = Controller(ARITHMETIC)
    model = simulate(ARITHMETIC, strategy)
    check = strategy.forecast
    assert check is not None and check.forecast_seconds is not None, check
    actual = caught_up_at(model) - check.started_at
    assert check.forecast_seconds == pytest.approx(actual, rel=0.15), (check, actual)
