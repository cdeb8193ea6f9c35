"""Backlog drain arithmetic for `holdfast drain-estimate`. Pure: no boto3, no clock.

A queue that keeps receiving A messages a minute while its consumers are down for M
minutes holds M × A messages when they come back. Consumers that manage C a minute
drain it at the spare rate C − A: drain time = backlog / (C − A). October's example:
172 min × 1,200/min = 206,400 messages, drained at 1,800 − 1,200 = 600/min in 344 min.

During Holdfast's drain an SQS event source mapping runs capped by its feedback
controller (holdfast.core.drain): from what it ran at before the event, raised a
step per fresh OK datapoint, cut on a downstream alarm. `controller` forecasts that
drain if the downstream keeps up (the controller's own forecast at the start of a drain).
A cap of k concurrent batches consumes at most min(C, k × P), where P is one batch's
throughput in messages a minute; `steps` shows the drain at a few fixed caps. The model is linear in concurrency up to the consumers' full rate, which is
all a queue's metrics can support. Unless told P, we assume C is what an uncapped
mapping reaches at its full concurrency of about 1,000 batches (Lambda's SQS scaling limits), so
P = C / 1,000: a pessimistic figure for consumers that reach C with fewer batches.
Measure P as batch size / batch duration (10 messages in 1 s is 600/min) and pass it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from holdfast.core import drain as dc

# An uncapped SQS event source mapping scales to about 1,000 concurrent batches.
FULL_CONCURRENCY = 1000
# The fixed caps `drain-estimate` shows besides the controller (the floor comes first).
FIXED_CAPS = (5, 20, 100, 300)


class DrainInputError(ValueError):
    """Numbers that give no meaningful estimate; the message says why."""


class NeverDrains(DrainInputError):
    """Consumers no faster than arrivals."""


@dataclass(frozen=True)
class Step:
    """Draining at one ESM cap: `drain_minutes` is None when it never drains."""

    cap: int
    consumer_per_minute: float
    spare_per_minute: float
    drain_minutes: float | None

    def to_dict(self) -> dict:
        return {
            "cap": self.cap,
            "consumer_per_minute": _round(self.consumer_per_minute),
            "spare_per_minute": _round(self.spare_per_minute),
            "drain_minutes": None if self.drain_minutes is None else _round(self.drain_minutes),
        }


@dataclass(frozen=True)
class Controlled:
    """The drain under the feedback controller, if the downstream keeps up."""

    start_cap: int
    step: int
    ceiling: int
    drain_minutes: float | None
    reason: str

    def to_dict(self) -> dict:
        return {"start_cap": self.start_cap, "step": self.step, "ceiling": self.ceiling,
                "drain_minutes": None if self.drain_minutes is None else _round(self.drain_minutes), "reason": self.reason}


@dataclass(frozen=True)
class Estimate:
    backlog_messages: int
    arrival_per_minute: float
    consumer_per_minute: float
    per_batch_per_minute: float
    drain_minutes: float
    steps: tuple[Step, ...]
    controller: Controlled | None = None

    def to_dict(self) -> dict:
        return {
            "backlog_messages": self.backlog_messages,
            "drain_minutes": _round(self.drain_minutes),
            "steps": [s.to_dict() for s in self.steps],
            "controller": None if self.controller is None else self.controller.to_dict(),
        }


def fmt(n: float) -> str:
    """1200 -> '1,200'; 3.6 -> '3.6'."""
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def _round(n: float) -> float | int:
    n = round(n, 1)
    return int(n) if float(n).is_integer() else n


def positive(name: str, value: float | None) -> float:
    """A number the operator gave: it must be there and above zero."""
    if value is None:
        raise DrainInputError(f"{name} is required")
    if not (value > 0 and math.isfinite(value)):  # also rejects NaN and infinity
        raise DrainInputError(f"{name} must be a positive number, got {value:g}")
    return float(value)


def backlog_after(outage_minutes: float, arrival_per_minute: float) -> int:
    """Messages that pile up during an outage, in whole messages."""
    return round(positive("--outage-minutes", outage_minutes) * positive("--arrival-per-minute", arrival_per_minute))


def estimate(
    backlog_messages: int,
    arrival_per_minute: float,
    consumer_per_minute: float,
    caps: Sequence[int],
    per_batch_per_minute: float | None = None,
    constants: dc.Constants = dc.DEFAULTS,
) -> Estimate:
    """Drain time at full spare capacity and at each cap in `caps` (the plan's order)."""
    if backlog_messages < 0:
        raise DrainInputError(f"a backlog of {backlog_messages:,} messages is impossible")
    if arrival_per_minute < 0:
        raise DrainInputError(f"arrivals of {fmt(arrival_per_minute)}/min are impossible")
    if not consumer_per_minute > arrival_per_minute:
        raise NeverDrains(
            f"consumers at {fmt(consumer_per_minute)}/min are no faster than arrivals at "
            f"{fmt(arrival_per_minute)}/min: the backlog never drains"
        )
    per_batch = (
        consumer_per_minute / FULL_CONCURRENCY
        if per_batch_per_minute is None
        else positive("--per-batch-per-minute", per_batch_per_minute)
    )
    steps = tuple(_step(cap, backlog_messages, arrival_per_minute, consumer_per_minute, per_batch) for cap in caps)
    return Estimate(
        backlog_messages=backlog_messages,
        arrival_per_minute=arrival_per_minute,
        consumer_per_minute=consumer_per_minute,
        per_batch_per_minute=per_batch,
        drain_minutes=backlog_messages / (consumer_per_minute - arrival_per_minute),
        steps=steps,
        controller=controlled(backlog_messages, arrival_per_minute, consumer_per_minute, per_batch, constants),
    )


def controlled(backlog: int, arrival_per_minute: float, consumer_per_minute: float, per_batch_per_minute: float,
               constants: dc.Constants = dc.DEFAULTS) -> Controlled:
    """The controller's drain: it starts from the batches the arrivals need (what the
    consumer ran at before the event), raises by its step every raise interval, up to the
    batches the consumers' full rate needs (never above Lambda's 1,000)."""
    start = max(constants.floor, math.ceil(arrival_per_minute / per_batch_per_minute))
    ceiling = min(FULL_CONCURRENCY, max(start, math.ceil(consumer_per_minute / per_batch_per_minute)))
    start = min(start, ceiling)
    step = max(constants.raise_min, math.ceil(constants.raise_fraction * start))
    # Batches above the consumers' full rate add nothing: the rate is the lesser of the two.
    per_batch = per_batch_per_minute / 60
    f = dc.ramp_forecast(backlog, arrival_per_minute / 60, per_batch, start, step, ceiling, constants)
    return Controlled(start, step, ceiling, None if f.seconds is None else f.seconds / 60, f.reason)


def _step(cap: int, backlog: int, arrival: float, consumer: float, per_batch: float) -> Step:
    rate = min(consumer, cap * per_batch)
    spare = rate - arrival
    return Step(cap, rate, spare, backlog / spare if spare > 0 else None)
