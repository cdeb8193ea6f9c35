"""One mapping's drain, carried between ticks: from the hold to the owner's original."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Mapping

from holdfast.core.drain import stall
from holdfast.core.drain.constants import DEFAULTS, RESTORE, START, Constants
from holdfast.core.drain.controller import (
    CapState,
    Measure,
    decide,
    probe_minute,
    start,
)
from holdfast.core.drain.evidence import consumer_health, dependency_back
from holdfast.core.drain.forecast import (
    Forecast,
    measured_forecast,
    per_batch_rate,
    ramp_forecast,
)
from holdfast.core.drain.inputs import Facts, Reading

WAIT = "wait"   # the dependency is not back yet: the cap stays where engaging put it


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _when(v: str | None) -> datetime | None:
    return None if v is None else datetime.fromisoformat(v)


def _forecast_dict(f: Forecast | None) -> dict | None:
    return None if f is None else {"seconds": f.seconds, "reason": f.reason}


def _forecast_from(raw: Mapping[str, Any] | None) -> Forecast | None:
    return None if raw is None else Forecast(None if raw.get("seconds") is None else float(raw["seconds"]), str(raw["reason"]))


@dataclass(frozen=True)
class Last:
    """The newest decision, for `holdfast stage`."""

    action: str
    cap: int | None
    reasons: tuple[str, ...]
    waiting_on: tuple[str, ...]
    at: datetime


@dataclass(frozen=True)
class Drain:
    """One mapping's drain, carried between ticks (the shell keeps it in the ledger).

    `since` is the start of the hold it belongs to: evidence from before it says nothing
    about whether the dependency is back. `state` is None until the drain starts."""

    since: datetime
    facts: Facts
    state: CapState | None = None
    started_at: datetime | None = None
    ceiling: int | None = None
    forecast: Forecast | None = None    # made when the drain started
    measured: Forecast | None = None    # the newest, on measured throughput
    last: Last | None = None
    # The lowest oldest-message age seen behind, and when: the age not falling below it for
    # `stall_seconds` is a stall.
    lowest_age: float | None = None
    lowest_age_at: datetime | None = None
    stalled_since: datetime | None = None   # reported stalled since (None: not stalled)
    stalled_why: str | None = None
    projected_seconds: float | None = None   # the drain's length, forecast once it has run the stall period

    @property
    def restored(self) -> bool:
        return self.state is not None and self.state.restored

    def wanted_minute(self, constants: Constants = DEFAULTS) -> datetime | None:
        """The minute the consumer's evidence should be read for, when it is not the newest:
        a running probe's (a later minute may be published first). None: the newest."""
        if self.state is None or self.state.probe_at is None:
            return None
        return probe_minute(self.state.probe_at, constants)

    def to_dict(self) -> dict[str, Any]:
        last = self.last
        return {
            "since": self.since.isoformat(),
            "facts": self.facts.to_dict(),
            "state": None if self.state is None else self.state.to_dict(),
            "started_at": _iso(self.started_at),
            "ceiling": self.ceiling,
            "forecast": _forecast_dict(self.forecast),
            "measured": _forecast_dict(self.measured),
            "lowest_age": self.lowest_age,
            "lowest_age_at": _iso(self.lowest_age_at),
            "stalled_since": _iso(self.stalled_since),
            "stalled_why": self.stalled_why,
            "projected_seconds": self.projected_seconds,
            "last": None if last is None else {
                "action": last.action, "cap": last.cap, "reasons": list(last.reasons),
                "waiting_on": list(last.waiting_on), "at": last.at.isoformat(),
            },
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Drain":
        try:
            last = raw.get("last")
            return cls(
                since=datetime.fromisoformat(raw["since"]),
                facts=Facts.from_dict(raw["facts"]),
                state=None if raw.get("state") is None else CapState.from_dict(raw["state"]),
                started_at=_when(raw.get("started_at")),
                ceiling=None if raw.get("ceiling") is None else int(raw["ceiling"]),
                forecast=_forecast_from(raw.get("forecast")),
                measured=_forecast_from(raw.get("measured")),
                lowest_age=None if raw.get("lowest_age") is None else float(raw["lowest_age"]),
                lowest_age_at=_when(raw.get("lowest_age_at")),
                stalled_since=_when(raw.get("stalled_since")),
                stalled_why=None if raw.get("stalled_why") is None else str(raw["stalled_why"]),
                projected_seconds=None if raw.get("projected_seconds") is None else float(raw["projected_seconds"]),
                last=None if last is None else Last(
                    str(last["action"]), None if last.get("cap") is None else int(last["cap"]),
                    tuple(last.get("reasons", ())), tuple(last.get("waiting_on", ())), datetime.fromisoformat(last["at"]),
                ),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"drain record is malformed: {err}") from err


@dataclass(frozen=True)
class Step:
    """What one tick does to one mapping. `cap` is the MaximumConcurrency to have in
    force; None with WAIT (leave the mapping as it is) and with RESTORE (the owner's
    original comes back, cap or none)."""

    action: str
    cap: int | None
    reasons: tuple[str, ...]
    waiting_on: tuple[str, ...]
    drain: Drain

    @property
    def restore(self) -> bool:
        return self.action == RESTORE

    @property
    def stalled(self) -> str | None:
        """Why this drain cannot finish (None: it is not stalled). A stalled mapping keeps
        the cap last judged safe and no longer holds the later stages."""
        return self.drain.stalled_why


def advance(drain: Drain, reading: Reading, current_cap: int | None, now: datetime,
            constants: Constants = DEFAULTS, *, fallback: bool = False) -> Step:
    """One tick of one mapping's drain: wait for its dependency, start, then decide.

    `current_cap` is the MaximumConcurrency in force now (what engaging left: the floor,
    or the owner's lower cap); the drain starts from the higher of it and the pre-event
    concurrency. `fallback`: see `dependency_back`."""
    measured = measured_forecast(reading, constants)

    def step(action, cap, reasons, waiting, new: Drain) -> Step:
        # A drain that has not started is tracked once the plan's drain stage waits on it, or
        # once its consumer receives messages again (the pollers are back) and the
        # dependency still does not answer: before that the growing queue is the outage.
        trying = reading.received is not None and reading.received.value > 0 and reading.received.at >= drain.since
        new = stall.judge(new, reading, now, constants, tracking=new.state is not None or fallback or trying)
        if new.stalled_why is not None:
            reasons = tuple(reasons) + (f"stalled since {new.stalled_since.isoformat()}: {new.stalled_why}; the later "
                                        f"stages no longer wait for this mapping",)
        last = Last(action, cap, tuple(reasons), tuple(waiting), now)
        return Step(action, cap, tuple(reasons), tuple(waiting), replace(new, measured=measured, last=last))

    if drain.state is None:
        back, why = dependency_back(drain.facts, reading, drain.since, now, constants, fallback=fallback)
        if not back:
            return step(WAIT, None, ("drain not started: " + "; ".join(why),), ("evidence that the dependency is back",), drain)
        begin = current_cap if isinstance(current_cap, int) and current_cap >= 1 else constants.floor
        sent = reading.sent
        arriving = None if sent is None or sent.at < drain.since else sent.value / constants.period_seconds
        d = start(drain.facts, begin, now, constants, arriving_per_second=arriving)
        judged = consumer_health(drain.facts, reading, now, constants)
        if judged.complete and judged.at is not None and judged.at >= drain.since:
            # The minute that said the dependency is back, measured during the hold at the cap
            # engaging left (the floor): what the first raise's goodput is judged against.
            first = Measure(judged.at, begin, judged.deleted, judged.seconds_per_message, judged.failure_share or 0.0)
            d = replace(d, state=replace(d.state, measures=(first,)))
        per_batch = per_batch_rate(drain.facts.deleted_per_second, drain.facts.pre_event_concurrency)
        visible = None if reading.visible is None else reading.visible.value
        f = ramp_forecast(visible, drain.facts.arrival_per_second, per_batch, d.cap, d.state.step, d.ceiling, constants)
        new = replace(drain, state=d.state, started_at=now, ceiling=d.ceiling, forecast=f)
        return step(START, d.cap, why + d.reasons + (f"forecast: {f.reason}",), d.waiting_on, new)
    state, said = drain.state, None
    if not state.restored:
        state, said = state.shown(current_cap, now, timedelta(seconds=constants.period_seconds))
    d = decide(state, drain.facts, reading, now, constants)
    new = replace(drain, state=d.state, ceiling=d.ceiling)
    reasons = d.reasons if said is None else (said,) + d.reasons
    return step(d.action, None if d.restore else d.cap, reasons, d.waiting_on, new)
