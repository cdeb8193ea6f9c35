"""The pre-event baseline: from before the earliest sign of trouble."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from holdfast.core.drain.constants import DEFAULTS, Constants


@dataclass(frozen=True)
class Minute:
    """One minute of a consumer's metrics before the event (None: no datapoint)."""

    at: datetime
    concurrency: float | None = None
    age: float | None = None
    visible: float | None = None
    sent: float | None = None
    deleted: float | None = None
    received: float | None = None
    duration: float | None = None         # Sum, ms
    duration_high: float | None = None    # p90, ms
    invocations: float | None = None
    errors: float | None = None

    @property
    def seconds_per_message(self) -> float | None:
        if self.duration is None or not self.received:
            return None
        return self.duration / 1000.0 / self.received

    @property
    def failure_share(self) -> float | None:
        if not self.received or self.deleted is None:
            return None
        return max(0.0, self.received - self.deleted) / self.received


def median(values) -> float | None:
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def _quartile(values) -> float | None:
    v = sorted(x for x in values if x is not None)
    return v[len(v) // 4] if v else None


def first_anomaly(minutes, constants: Constants = DEFAULTS) -> datetime | None:
    """The start of the consumer's own trouble that runs into the newest of `minutes`: the
    oldest minute of the last run of anomalous minutes (time per message at the warning
    ratio of the lower quartile, or a failure share above the lower quartile's by the
    critical slack), a minute without data neither breaking nor starting a run. The lower
    quartile stands for the consumer's usual level however long the storm (up to three
    quarters of the minutes); None: no anomaly at the end."""
    c = constants
    minutes = sorted(minutes, key=lambda x: x.at)
    spm_ref = _quartile(m.seconds_per_message for m in minutes)
    fail_ref = _quartile(m.failure_share for m in minutes)

    def anomalous(m: Minute) -> bool | None:
        spm, fail = m.seconds_per_message, m.failure_share
        if spm is None and fail is None:
            return None
        return bool((spm is not None and spm_ref and spm >= spm_ref * c.duration_warning_ratio)
                    or (fail is not None and fail_ref is not None and fail > fail_ref + c.failure_critical_slack))

    start = None
    for m in reversed(minutes):
        bad = anomalous(m)
        if bad is None:
            continue
        if not bad:
            break
        start = m.at
    return start


def baseline_end(signals) -> tuple[datetime, str]:
    """The earliest of the named times (name -> time or None): where the baseline ends."""
    known = [(t, name) for name, t in signals.items() if t is not None]
    if not known:
        raise ValueError("baseline: no time to end the window at")
    t, name = min(known)
    return t, name


def baseline(minutes, until: datetime, why: str, window_minutes: int, constants: Constants = DEFAULTS) -> dict[str, Any]:
    """The pre-event figures (Facts fields) from the `window_minutes` before the earliest of
    `until` (the earliest impairment signal or the plan's engagement: `why` names it) and
    the consumer's own first anomaly, by medians of the minutes: a retry storm in part of
    the window moves no figure. Rates and shares are per minute, then the median."""
    c = constants
    minutes = [m for m in minutes if m.at < until]
    anomaly = first_anomaly(minutes, c)
    end, what = (anomaly, "the consumer's own first anomaly") if anomaly is not None and anomaly < until else (until, why)
    start = end - timedelta(minutes=window_minutes)
    used = [m for m in minutes if start <= m.at and m.at + timedelta(seconds=c.period_seconds) <= end]
    note = f"baseline from {len(used)} minutes, {start.isoformat()} to {end.isoformat()} (ending at {what})"
    spm = median(m.seconds_per_message for m in used)
    spread = 0.0
    if spm:
        spread = median(abs(m.seconds_per_message - spm) for m in used if m.seconds_per_message is not None) / spm
    per_second = lambda v: None if v is None else v / c.period_seconds
    errors = [m.errors for m in used if m.errors is not None]
    invoked = sum(m.invocations or 0.0 for m in used)
    highs = [m.duration_high / 1000.0 * m.invocations / m.received for m in used
             if m.duration_high is not None and m.invocations and m.received]
    return dict(
        pre_event_concurrency=median(m.concurrency for m in used),
        baseline_age_seconds=median(m.age for m in used),
        baseline_errors=median(errors) or 0.0,
        baseline_error_share=min(1.0, sum(errors) / invoked) if invoked > 0 else None,
        arrival_per_second=per_second(median(m.sent for m in used)),
        deleted_per_second=per_second(median(m.deleted for m in used)),
        seconds_per_message=spm,
        spread=spread,
        high_seconds_per_message=median(highs),
        baseline_failure_share=median(m.failure_share for m in used),
        baseline_visible=median(m.visible for m in used),
        baseline_note=note,
    )
