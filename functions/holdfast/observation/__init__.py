"""Observation: what a tick (or `holdfast stage`) sees before it decides.

- `observe(runtime, now)` reads the operator's control, the plan, the verdict, the
  gating alarms and the built-in evidence the next stage's gate needs (evidence.py, only
  what `policy.evidence_needed` asks for): one function, shared by the tick and
  `holdfast stage`.
- `collect` is the tick's fresh verdict: probes.py and polling.py are the tick's own
  observations, ledger/signals.py stores them with what the detector Lambda recorded,
  and the pure detector (holdfast.core.detector) evaluates them all.

`collect` is the shell around the pure detector. It keeps working when the ledger is
unreachable (in October the ledger's own region could be the impaired one): the
tick's probes and polled activities are then all the detector sees, which is enough
to stay or become impaired; what it cannot do without the ledger is see events the
detector Lambda recorded.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.core import policy
from holdfast.core.detector import Verdict, evaluate, lookback
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.evacuation import holding
from holdfast.core.evidence import Evidence
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger.signals import recent, record_all
from holdfast.observation import evidence as builtin_evidence
from holdfast.observation import polling, probes
from holdfast.observation.alarms import gating_alarms

logger = logging.getLogger(__name__)


def collect(runtime, now: datetime, previous: Verdict | None, *,
            resolver: probes.Resolver = probes.system_resolver) -> Verdict:
    """Probe, poll, record what was seen, read the recent signals, evaluate."""
    clients, settings = runtime.clients, runtime.settings
    quick = _probe_clients(clients, settings)
    fresh = probes.run(quick, settings, clients.region, now, resolver=resolver)
    logger.info("probes: success ratio %s", probes.success_ratio(fresh))
    try:
        # Its own bounded client (polling.CONFIG) and time budget: a fallback must hold in a
        # bad hour without spending the tick retrying.
        polled = polling.poll(clients.with_config(polling.CONFIG)("autoscaling"), settings,
                              now - timedelta(minutes=settings.detect_window_minutes), monotonic=runtime.clock.monotonic)
        if polled.truncated:
            logger.warning("polling fallback stopped at its budget: %d launch results read; the next tick reads the window again", len(polled))
        fresh += polled
    except (ClientError, BotoCoreError) as err:
        logger.warning("polling fallback failed this tick: %s", err)

    ledger = runtime.ledger()
    stored = []
    try:
        record_all(ledger, fresh, ttl_hours=settings.signal_ttl_hours)
    except LedgerUnavailable as err:
        logger.warning("%s; evaluating without recording", err)
    try:
        stored = recent(ledger, now - lookback(settings), now)
    except LedgerUnavailable as err:
        logger.warning("%s; evaluating this tick's own observations only", err)
    return evaluate(stored + fresh, previous, settings, now)


# The probes' quick clients, made once per Clients (a boto3 client takes tens of
# milliseconds to make; a Lambda container ticks with one Clients for its lifetime).
_QUICK: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _probe_clients(clients, settings):
    kept = _QUICK.get(clients)
    if kept is None or kept[0] != settings.probe_timeout_seconds:
        kept = (settings.probe_timeout_seconds, clients.with_config(probes.probe_config(settings)))
        _QUICK[clients] = kept
    return kept[1]


Collect = Callable[..., Verdict]


@dataclass(frozen=True)
class Observation:
    """What one look at the world found. `verdict` is None when it could not be had
    (`verdict_error` says why) or was not asked for (paused)."""

    control: ledger_control.Control
    plan: policy.Plan | None
    item: Mapping[str, Any] | None            # the raw plan item (its `notified` flag)
    verdict: Verdict | None
    alarms: Mapping[str, str | None] = field(default_factory=dict)
    verdict_error: str | None = None
    evidence: Evidence = field(default_factory=Evidence)

    @property
    def notified(self) -> bool:
        return ledger_plan.is_notified(self.item)

    def decide(self, now: datetime, settings) -> policy.Decision:
        """The stage policy over what was seen; without a verdict, the plan stays."""
        if self.verdict is None:
            plan = self.plan or policy.Plan(mode=settings.mode)
            why = self.verdict_error or "no verdict recorded yet"
            return policy.Decision(plan, False, (f"no verdict: {why}",), ("no verdict",))
        return policy.decide(self.verdict, self.plan, self.alarms, now, settings,
                             advance_generation=self.control.advance_generation, evidence=self.evidence,
                             operator_engage=self.control.engage_requested(self.plan.generation if self.plan else 0),
                             evacuation=[e.gate() for e in holding(self.control.evacuations, self.plan)])


def observe(runtime, now: datetime, *, collect: Collect | None = None, ledger=None) -> Observation:
    """Control, plan, verdict and alarms. With `collect` (the tick), the verdict is fresh:
    collect(runtime, now, previous); a detection failure is the observation's
    `verdict_error`, never an exception (bad input never stops the controller). Without it (`holdfast stage`),
    the verdict is the last one recorded. Paused, the tick asks for no verdict.
    `ledger`: the tick's (holdfast.ledger.store), which the evidence reads the resource
    records through. Raises LedgerUnavailable when the control or the plan cannot be read."""
    ledger = ledger or runtime.ledger()
    control = ledger_control.read_control(ledger)
    item = ledger_plan.read_item(ledger)
    plan = ledger_plan.from_item(item) if item else None
    if control.paused and collect is not None:
        return Observation(control, plan, item, None)
    try:
        raw = ledger_verdict.read_verdict(ledger)
        previous = Verdict.from_dict(raw) if raw else None
        verdict = collect(runtime, now, previous) if collect is not None else previous
    except Exception as err:  # detection failing must not stop the walk
        logger.exception("verdict unavailable: keeping the plan")
        return Observation(control, plan, item, None, verdict_error=str(err))
    alarms = gating_alarms(runtime.clients, runtime.settings.gating_alarms) if verdict is not None else {}
    evidence = builtin_evidence.read(runtime, now, policy.evidence_needed(plan, verdict), ledger=ledger)
    return Observation(control, plan, item, verdict, alarms, evidence=evidence)
