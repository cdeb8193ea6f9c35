"""How long a drain takes: the arithmetic at its start and on measured throughput."""

from __future__ import annotations

import math
from dataclasses import dataclass

from holdfast.core.drain.constants import DEFAULTS, Constants
from holdfast.core.drain.controller import describe_raises, raise_to
from holdfast.core.drain.inputs import Reading


@dataclass(frozen=True)
class Forecast:
    seconds: float | None   # None: no forecast (the reason says why)
    reason: str


def per_batch_rate(deleted_per_second: float | None, concurrency: float | None) -> float | None:
    """Messages one concurrent batch consumes a second, from before the event:
    NumberOfMessagesDeleted ÷ ConcurrentExecutions. None when either is unknown or zero."""
    if deleted_per_second is None or concurrency is None or concurrency <= 0 or deleted_per_second <= 0:
        return None
    return deleted_per_second / concurrency


def forecast(backlog: float | None, arrival_per_second: float | None, consumer_per_second: float | None) -> Forecast:
    """Time to drain = backlog ÷ (consumers − arrivals)."""
    for name, value in (("backlog", backlog), ("arrival rate", arrival_per_second), ("consumer throughput", consumer_per_second)):
        if value is None:
            return Forecast(None, f"no forecast: {name} unknown")
        if not math.isfinite(value) or value < 0:
            return Forecast(None, f"no forecast: {name} {value!r} is impossible")
    spare = consumer_per_second - arrival_per_second
    if spare <= 0:
        return Forecast(None, f"never drains: consumers {consumer_per_second:g}/s are no faster than arrivals {arrival_per_second:g}/s")
    seconds = backlog / spare
    return Forecast(seconds, f"{backlog:,.0f} messages at {spare:g}/s spare: {seconds / 60:,.1f} min")



def ramp_forecast(backlog: float | None, arrival_per_second: float | None, per_batch: float | None, start_cap: int,
                  step: int, top: int, constants: Constants = DEFAULTS, horizon_seconds: float = 14 * 86400) -> Forecast:
    """Time to drain if the controller raises as it would with the downstream keeping up:
    from `start_cap`, one raise by `raise_to` (the rule `decide` uses: slow start, every
    signal at its baseline) every `raise_interval_seconds`, up to the ceiling `top`, each
    batch consuming `per_batch` messages a second. An upper bound on the speed: a
    downstream with a knee below the ceiling stops the raises earlier, and the measured
    forecast (`measured_forecast`) then tells the truth."""
    for name, value in (("backlog", backlog), ("arrival rate", arrival_per_second), ("per-batch throughput", per_batch)):
        if value is None:
            return Forecast(None, f"no forecast: {name} unknown")
        if not math.isfinite(value) or value < 0:
            return Forecast(None, f"no forecast: {name} {value!r} is impossible")
    if per_batch * top <= arrival_per_second:
        return Forecast(None, f"never drains: even at the ceiling ({top}) consumers {per_batch * top:g}/s are no faster "
                              f"than arrivals {arrival_per_second:g}/s")
    left, t, cap = float(backlog), 0.0, start_cap
    dt = float(constants.period_seconds)
    next_raise = constants.raise_interval_seconds
    while left > 0 and t < horizon_seconds:
        spare = per_batch * cap - arrival_per_second
        if spare > 0 and left <= spare * dt:
            t += left / spare
            left = 0.0
            break
        left -= spare * dt
        t += dt
        if cap < top and t >= next_raise:
            cap = raise_to(cap, step, False, top, constants)
            next_raise += constants.raise_interval_seconds
    if left > 0:
        return Forecast(None, f"does not drain within {horizon_seconds / 86400:g} days at up to {top} batches")
    return Forecast(t, f"{backlog:,.0f} messages from cap {start_cap}, one raise every "
                       f"{constants.raise_interval_seconds / 60:g} min ({describe_raises(step, top, constants)}) "
                       f"at {per_batch:.3g}/s a batch, "
                       f"arrivals {arrival_per_second:g}/s: {t / 60:,.1f} min if the downstream keeps up")


def measured_forecast(reading: Reading, constants: Constants = DEFAULTS) -> Forecast:
    """Time to drain at the newest period's throughput: visible ÷ (deleted − sent)."""
    period = constants.period_seconds
    visible = reading.visible.value if reading.visible is not None else None
    sent = reading.sent.value / period if reading.sent is not None else None
    deleted = reading.deleted.value / period if reading.deleted is not None else None
    if deleted is None and visible is not None and sent is not None:
        deleted = 0.0 if visible > 0 else None
    return forecast(visible, sent, deleted)
