"""An EventBridge event in, a recorded signal out: what the detector Lambda does with each
event (handlers/detector.py wraps it with logging and metrics; the demo feeds its replay
through it too).

- Idempotent per event: the ledger put is conditional on a key derived from the
  signal (the activity id; eventArn + communicationId for Health), so EventBridge's
  at-least-once redelivery and a second copy of one Health communication store one item.
- A malformed, unknown or out-of-scope event is an outcome with its reason, never an
  exception. A launch failure the classifier cannot read is recorded as `unknown` (it
  never counts toward impairment) and counted in the metric LaunchFailuresUnknown. An unreachable ledger raises LedgerUnavailable: the one failure a retry fixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from holdfast.core.classify import UNKNOWN
from holdfast.core.signals import MALFORMED, parse_event
from holdfast.ledger.signals import record


@dataclass(frozen=True)
class Intake:
    outcome: str                     # recorded | duplicate | malformed | ignored
    reason: str | None = None
    klass: str | None = None
    signal_id: str | None = None
    group: str | None = None
    zone: str | None = None
    metrics: tuple[str, ...] = field(default=())   # metric names to count once each

    def to_dict(self) -> dict[str, Any]:
        if self.signal_id is None:
            return {"outcome": self.outcome, "reason": self.reason}
        return {"outcome": self.outcome, "class": self.klass, "signal_id": self.signal_id, "reason": self.reason}


def receive(runtime, event: Any) -> Intake:
    parsed = parse_event(event, region=runtime.clients.region, settings=runtime.settings)
    if parsed.signal is None:
        name = "EventsMalformed" if parsed.klass == MALFORMED else "EventsIgnored"
        return Intake(parsed.klass, parsed.reason, metrics=(name,))
    signal = parsed.signal
    new = record(runtime.ledger(), signal, ttl_hours=runtime.settings.signal_ttl_hours)
    metrics = ("SignalsRecorded", f"Signal-{signal.klass}") if new else ("SignalsDuplicate",)
    if new and signal.klass == UNKNOWN:
        # Never evidence of impairment, but worth a look: a wording the classifier should learn.
        metrics += ("LaunchFailuresUnknown",)
    return Intake("recorded" if new else "duplicate", parsed.reason, signal.klass, signal.id, signal.group,
                  signal.zone, metrics)
