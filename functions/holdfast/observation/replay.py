"""Replay recorded EventBridge events through the real parser, classifier and detector.

Pure: the caller reads the file. Operators tune thresholds with it (`holdfast detect`);
the demo and other tools drive it, so the document's shape is a contract:

    {"events":   [{"id": ..., "class": "capacity" | "configuration" | "unknown" | "launch"
                                       | "elb-termination" | "health" | "ignored" | "malformed",
                   "reason": ...}],
     "verdicts": [{"time": ISO-8601, "verdict": "normal" | "impaired" | "recovering",
                   "reasons": [...]}]}

- events: one entry per non-blank line, in file order. A line that is not JSON, or an
  event without its source's documented shape, is `malformed` and its reason starts
  with `line N:`; the replay goes on. A redelivered event id, or a Health
  communication already seen (a redelivery, or a file that merges two regions' buses), is `ignored` as a duplicate.
  `launch` (a successful launch, the recovery evidence) and `elb-termination` (an
  instance replaced after failing its ELB health check) extend the issue's list. An
  `unknown` launch failure's reason starts with `line N:` and quotes its message: it
  never counts toward impairment, and is worth teaching the classifier.
- verdicts: one entry per change of verdict, starting from `normal`. Ticks fall on
  multiples of the schedule period in event time, from the period of the first event
  until the lookback after the last has passed, so a recovery the events imply is
  shown even when the file ends first. Each tick sees what the live reconciler would
  read from the ledger: the signals of its lookback, and every Health communication
  younger than the signal TTL.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

from holdfast.core.classify import UNKNOWN
from holdfast.core.detector import NORMAL, evaluate, lookback
from holdfast.core.signals import ASG, HEALTH, IGNORED, MALFORMED, Signal, iso, parse_event


def load(lines: Iterable[str]) -> list[tuple[int, Any]]:
    """(line number, event or the JSON error) for each non-blank line."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            out.append((number, err))
    return out


def infer_region(events: Iterable[tuple[int, Any]]) -> str | None:
    """The region most launch events were delivered in, else the one most Health issues affect."""
    launches, health = Counter(), Counter()
    for _, event in events:
        if isinstance(event, Mapping) and isinstance(event.get("detail"), Mapping):
            if event.get("source") == ASG and event.get("region"):
                launches[event["region"]] += 1
            elif event.get("source") == HEALTH and event["detail"].get("eventRegion"):
                health[event["detail"]["eventRegion"]] += 1
    for counts in (launches, health):
        if counts:
            return counts.most_common(1)[0][0]
    return None


def replay(events: list[tuple[int, Any]], settings, region: str) -> dict:
    reports, signals = [], []
    seen_events, seen_signals = set(), set()
    for number, event in events:
        event_id = event.get("id") if isinstance(event, Mapping) else None
        if isinstance(event, json.JSONDecodeError):
            reports.append({"id": None, "class": MALFORMED, "reason": f"line {number}: not JSON ({event.msg})"})
            continue
        parsed = parse_event(event, region=region, settings=settings)
        klass, reason = parsed.report_class, parsed.reason
        if parsed.klass == MALFORMED:
            reason = f"line {number}: {reason}"
        elif event_id in seen_events:
            klass, reason = IGNORED, f"duplicate event id {event_id} (EventBridge redelivery)"
        elif parsed.signal is not None and parsed.signal.id in seen_signals:
            klass, reason = IGNORED, f"duplicate of {parsed.signal.id} (already seen; a backup-region copy or a redelivery)"
        elif parsed.signal is not None:
            signals.append(parsed.signal)
            seen_signals.add(parsed.signal.id)
            if klass == UNKNOWN:
                message = parsed.signal.detail.get("message") or ""
                reason = f"line {number}: {reason}, not counted toward impairment: {message[:200]!r}"
        if event_id:
            seen_events.add(event_id)
        reports.append({"id": event_id, "class": klass, "reason": reason})
    return {"events": reports, "verdicts": verdict_changes(signals, settings)}


def verdict_changes(signals: list[Signal], settings) -> list[dict]:
    if not signals:
        return []
    health = sorted((s for s in signals if s.source == HEALTH), key=lambda s: s.time)
    signals = sorted((s for s in signals if s.source != HEALTH), key=lambda s: s.time)
    times, health_times = [s.time for s in signals], [s.time for s in health]
    ttl = timedelta(hours=settings.signal_ttl_hours)
    period = timedelta(minutes=settings.schedule_minutes)
    span = lookback(settings)
    tick = _floor(min(times[:1] + health_times[:1]), period)
    end = max(times[-1:] + health_times[-1:]) + span + period
    changes, previous = [], None
    while tick <= end:
        window = signals[bisect.bisect_right(times, tick - span) : bisect.bisect_right(times, tick)]
        window += health[bisect.bisect_right(health_times, tick - ttl) : bisect.bisect_right(health_times, tick)]
        verdict = evaluate(window, previous, settings, tick)
        if verdict.state != (previous.state if previous else NORMAL):
            changes.append({"time": iso(tick), "verdict": verdict.state, "reasons": list(verdict.reasons)})
        previous = verdict
        tick += period
    return changes


def _floor(t: datetime, period: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return epoch + ((t - epoch) // period) * period
