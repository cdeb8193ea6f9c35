"""What the drain is given: the facts of a mapping from before the event, and one tick's reading."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from holdfast.core.drain.constants import (
    ALARM_STATES,
    CRITICAL,
    LAMBDA_MAX_CONCURRENCY,
    LAMBDA_MIN_CAP,
    WARNING,
)


@dataclass(frozen=True)
class Datapoint:
    """One CloudWatch datapoint: `at` is the start of its period, as GetMetricData gives it."""

    at: datetime
    value: float

    def __post_init__(self):
        if not isinstance(self.value, (int, float)) or isinstance(self.value, bool) or not math.isfinite(self.value):
            raise ValueError(f"datapoint value must be a finite number, got {self.value!r}")


def whole_minute(at: datetime, timeout_seconds: float | None, now: datetime, lag_seconds: float,
                 period_seconds: int = 60) -> bool:
    """Whether the minute that starts at `at` may be judged at `now`: every invocation that
    started in it has ended (Lambda stamps Duration, Invocations and Errors at an
    invocation's start, so a minute whose invocations still run reads fast and failure-free)
    and been published (`lag_seconds`: CloudWatch's newest one-minute datapoints for Lambda
    and SQS are incomplete for 1–3 minutes). The function's timeout bounds the first; an
    unknown timeout counts as none, the minute then waits for the lag alone."""
    timeout = timeout_seconds if isinstance(timeout_seconds, (int, float)) and timeout_seconds > 0 else 0.0
    return at + timedelta(seconds=period_seconds + timeout + lag_seconds) <= now


@dataclass(frozen=True)
class Alarm:
    """A downstream alarm's state and the datapoint it was decided on.
    state None: the alarm does not exist (a name that matches nothing)."""

    name: str
    state: str | None
    measured_at: datetime | None = None
    severity: str = CRITICAL
    # The minutes (the start of each period) of the recent datapoints of the alarm's own
    # metric that were beyond its threshold, whatever the alarm's state now: an alarm
    # evaluated "M out of N", or read a minute after it went back to OK, still says which
    # minutes crossed the owner's limit. () where the shell cannot tell (a composite or
    # metric-math alarm).
    breached: tuple[datetime, ...] = ()
    # The same recent datapoints as shares of the threshold (value ÷ threshold: 1 is the
    # owner's limit), for an alarm whose metric must stay at or below a positive static
    # threshold. () where the shell cannot tell (a lower bound, an anomaly band, metric math).
    levels: tuple[Datapoint, ...] = ()

    def __post_init__(self):
        if not (isinstance(self.breached, tuple) and all(isinstance(t, datetime) for t in self.breached)):
            raise ValueError(f"alarm {self.name}: breached must be a tuple of datetimes, got {self.breached!r}")
        if not (isinstance(self.levels, tuple) and all(isinstance(p, Datapoint) and isinstance(p.value, (int, float))
                                                       and math.isfinite(p.value) and p.value >= 0
                                                       for p in self.levels)):
            raise ValueError(f"alarm {self.name}: levels must be a tuple of datapoints of finite shares ≥ 0, "
                             f"got {self.levels!r}")
        if self.state is not None and self.state not in ALARM_STATES:
            raise ValueError(f"alarm {self.name}: state {self.state!r} is not one of {ALARM_STATES}")
        if self.severity not in (WARNING, CRITICAL):
            raise ValueError(f"alarm {self.name}: severity {self.severity!r} is not {WARNING!r} or {CRITICAL!r}")


@dataclass(frozen=True)
class Facts:
    """What is known of the mapping from before the event and from its configuration."""

    pre_event_concurrency: float | None      # the function's ConcurrentExecutions before the event
    reserved_concurrency: int | None = None  # None: unreserved
    owner_cap: int | None = None             # the owner's original MaximumConcurrency; None: no cap
    baseline_age_seconds: float | None = None  # ApproximateAgeOfOldestMessage before the event
    baseline_errors: float = 0.0             # Errors per period before the event
    # Errors as a share of Invocations before the event (None: no invocations seen). When
    # the reading has Invocations, errors are judged as a share: a drain running three
    # times the pre-event throughput has three times the errors at the same error rate.
    baseline_error_share: float | None = None
    # For the forecast: the queue's NumberOfMessagesSent and NumberOfMessagesDeleted per
    # second before the event (None: unknown).
    arrival_per_second: float | None = None
    deleted_per_second: float | None = None
    # The consumer's own baseline (holdfast.core.drain.baseline): seconds per
    # message (Duration's sum ÷ NumberOfMessagesReceived, median of the window's minutes)
    # and its spread (median absolute deviation ÷ median); the high percentile's per
    # message (p90 Duration × Invocations ÷ NumberOfMessagesReceived); the share of
    # received messages not deleted; the queue's visible messages; the function's timeout.
    seconds_per_message: float | None = None
    spread: float = 0.0
    high_seconds_per_message: float | None = None
    baseline_failure_share: float | None = None
    baseline_visible: float | None = None
    timeout_seconds: float | None = None
    baseline_note: str = ""       # the window the baseline is from, and why it ends where it does
    # Whether the queue has a redrive policy (None: unknown): a backlog of messages received
    # and never deleted, on a queue without one, can never drain.
    has_dlq: bool | None = None
    # The consumer's own client timeout on its downstream call, where the owner declares it
    # (None: unknown): a time per message near it fails whole batches.
    client_timeout_seconds: float | None = None
    # This mapping's share of its function's and its queue's metrics when several mappings
    # share them (the stage sets it; 1.0: the mapping has them alone).
    share: float = 1.0

    def __post_init__(self):
        def bad(name, value, allowed):
            raise ValueError(f"mapping facts: {name} = {value!r}: {allowed}")

        if self.pre_event_concurrency is not None and not (
            isinstance(self.pre_event_concurrency, (int, float)) and math.isfinite(self.pre_event_concurrency) and self.pre_event_concurrency >= 0
        ):
            bad("pre_event_concurrency", self.pre_event_concurrency, "must be a number ≥ 0 or None")
        if self.reserved_concurrency is not None and not (isinstance(self.reserved_concurrency, int) and self.reserved_concurrency >= 0):
            bad("reserved_concurrency", self.reserved_concurrency, "must be an integer ≥ 0 or None")
        if self.owner_cap is not None and not (isinstance(self.owner_cap, int) and LAMBDA_MIN_CAP <= self.owner_cap <= LAMBDA_MAX_CONCURRENCY):
            bad("owner_cap", self.owner_cap, "must be an integer from 2 to 1000 or None")
        if self.baseline_age_seconds is not None and not (isinstance(self.baseline_age_seconds, (int, float)) and self.baseline_age_seconds >= 0):
            bad("baseline_age_seconds", self.baseline_age_seconds, "must be a number ≥ 0 or None")
        if not (isinstance(self.baseline_errors, (int, float)) and self.baseline_errors >= 0):
            bad("baseline_errors", self.baseline_errors, "must be a number ≥ 0")
        if self.baseline_error_share is not None and not (
            isinstance(self.baseline_error_share, (int, float)) and 0 <= self.baseline_error_share <= 1
        ):
            bad("baseline_error_share", self.baseline_error_share, "must be a number from 0 to 1 or None")
        for name in ("arrival_per_second", "deleted_per_second", "seconds_per_message", "high_seconds_per_message",
                     "baseline_visible", "timeout_seconds"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                bad(name, value, "must be a number ≥ 0 or None")
        if self.has_dlq is not None and not isinstance(self.has_dlq, bool):
            bad("has_dlq", self.has_dlq, "must be true, false or None")
        if self.client_timeout_seconds is not None and not (
            isinstance(self.client_timeout_seconds, (int, float)) and math.isfinite(self.client_timeout_seconds)
            and self.client_timeout_seconds > 0
        ):
            bad("client_timeout_seconds", self.client_timeout_seconds, "must be a number > 0 or None")
        if not (isinstance(self.share, (int, float)) and not isinstance(self.share, bool) and 0 < self.share <= 1):
            bad("share", self.share, "must be a number in (0, 1]")
        if not (isinstance(self.spread, (int, float)) and math.isfinite(self.spread) and self.spread >= 0):
            bad("spread", self.spread, "must be a number ≥ 0")
        if self.baseline_failure_share is not None and not (
            isinstance(self.baseline_failure_share, (int, float)) and 0 <= self.baseline_failure_share <= 1
        ):
            bad("baseline_failure_share", self.baseline_failure_share, "must be a number from 0 to 1 or None")

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _FACT_FIELDS}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Facts":
        try:
            return cls(**{f: raw[f] for f in _FACT_FIELDS if f in raw})
        except TypeError as err:
            raise ValueError(f"mapping facts are malformed: {err}") from err


_FACT_FIELDS = ("pre_event_concurrency", "reserved_concurrency", "owner_cap", "baseline_age_seconds", "baseline_errors",
                "baseline_error_share",
                "arrival_per_second", "deleted_per_second", "seconds_per_message", "spread", "high_seconds_per_message",
                "baseline_failure_share", "baseline_visible", "timeout_seconds", "baseline_note", "has_dlq",
                "client_timeout_seconds", "share")


@dataclass(frozen=True)
class Reading:
    """One tick's observations of the mapping. None: no datapoint."""

    oldest_age: Datapoint | None
    visible: Datapoint | None
    errors: Datapoint | None
    throttles: Datapoint | None
    downstream: tuple[Alarm, ...] = ()
    # For the forecast on measured throughput: the queue's NumberOfMessagesSent and
    # NumberOfMessagesDeleted in the newest period (sums over the period).
    sent: Datapoint | None = None
    deleted: Datapoint | None = None
    # The queue's ApproximateNumberOfMessages from GetQueueAttributes, read when the age has
    # no fresh datapoint (SQS stops publishing for a queue idle six hours; CloudWatch may lag):
    # an empty queue is caught up, a non-empty one is behind. None: not read.
    visible_now: int | None = None
    # The function's Invocations in the period of `errors` (None: not read): errors are
    # then judged as a share of them.
    invocations: Datapoint | None = None
    # The queue does not exist (deleted): there is nothing to drain.
    queue_missing: bool = False
    # The built-in downstream evidence, one minute each: the function's Duration (Sum and
    # p90, milliseconds) and the queue's NumberOfMessagesReceived (Sum). With `deleted` and
    # `invocations` of the same minute they give the time per message and the failure share.
    duration: Datapoint | None = None
    duration_high: Datapoint | None = None
    received: Datapoint | None = None
    # The function's ConcurrentExecutions (Maximum) of the judged minute (None: not read).
    concurrency: Datapoint | None = None
    # Why this mapping's evidence can never be read (a queue in another account, a live read
    # denied, the function deleted); None: it can.
    unreachable: str | None = None
    # received and deleted came from the mapping's own metrics (MetricsConfig EventCount),
    # not its queue's, which every reader of the queue shares.
    per_mapping: bool = False
