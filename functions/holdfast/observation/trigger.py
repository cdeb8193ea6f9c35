"""Start a tick now: the detector's half of time to safe posture.

The reconciler ticks on a schedule (every `schedule_minutes`), so without this the first
protective write waits up to a period after the verdict could have turned. After the
detector records a signal that can impair (a capacity-class launch failure, an AWS Health
event, an ELB health-check termination), `after_signal`:

1. evaluates the verdict from the recorded signals: the pure detector the tick uses
   (holdfast.core.detector.evaluate), over the same lookback, from the last verdict a
   tick recorded. The tick's verdict sees these signals and its own probes and polling
   besides, so when this one says impaired, the tick's does too;
2. when it is impaired and the plan is not engaging yet (no plan, or a stage other than
   hold: a new impairment at any stage returns to hold), claims the trigger in the ledger
   (holdfast.ledger.claims: once per plan generation and schedule period, so a burst of
   events or several detector instances start one extra tick, not hundreds);
3. invokes the reconciler function asynchronously (Lambda Invoke, InvocationType Event).
   An invocation is not a control-plane call: Lambda's 15 requests a second for the
   control plane exclude invocations, which have their own quotas (the Lambda quotas
   page), so a trigger spends none of the engage walk's budget.

Nothing here raises: the signal is already recorded, and the schedule's next tick reads
it whatever happens to the trigger. Every outcome is returned for the handler's log and
metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_text
from holdfast.core import policy
from holdfast.core.classify import CAPACITY
from holdfast.core.detector import IMPAIRED, Verdict, evaluate, lookback
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.model import is_off
from holdfast.core.signals import ELB_TERMINATION, HEALTH_OPEN
from holdfast.iam import uses
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger.signals import recent

# The classes of signal that can make the verdict impaired.
IMPAIRING = frozenset({CAPACITY, HEALTH_OPEN, ELB_TERMINATION})


@dataclass(frozen=True)
class Triggered:
    outcome: str            # started | not-impaired | engaging | already-started | no-function | off | failed | skipped
    reason: str | None = None
    metric: str | None = None

    def to_dict(self) -> dict:
        return {"trigger": self.outcome, **({"trigger_reason": self.reason} if self.reason else {})}


def after_signal(runtime, klass: str | None, *, recorded: bool) -> Triggered:
    if not recorded or klass not in IMPAIRING:
        return Triggered("skipped")
    if is_off(runtime.settings.mode):
        return Triggered("off")
    if not runtime.tick_function:
        return Triggered("no-function", "no reconciler function to start: the schedule's next tick reads the signal")
    now = runtime.clock.now()
    ledger = runtime.ledger()
    try:
        raw = ledger_verdict.read_verdict(ledger)
        previous = Verdict.from_dict(raw) if raw else None
        verdict = evaluate(recent(ledger, now - lookback(runtime.settings), now), previous,
                           runtime.settings, now)
        if verdict.state != IMPAIRED:
            return Triggered("not-impaired", "; ".join(verdict.reasons)[:500] or verdict.state)
        plan = ledger_plan.read(ledger)
        if plan is not None and plan.stage == policy.HOLD:
            return Triggered("engaging", f"plan generation {plan.generation} already holds")
        generation = plan.generation if plan else 0
        period = timedelta(minutes=runtime.settings.schedule_minutes)
        if not ledger_claims.claim_tick_trigger(ledger, generation=generation,
                                                controller_id=runtime.controller_id, now=now, period=period):
            return Triggered("already-started", f"a tick was started for plan generation {generation} within the period")
    except LedgerUnavailable as err:
        return Triggered("failed", str(err), "TickTriggerFailed")
    try:
        start_tick(runtime, {"source": "holdfast.detector", "reason": "verdict impaired",
                             "reasons": list(verdict.reasons)[:5], "generation": generation})
    except (ClientError, BotoCoreError) as err:
        return Triggered("failed", error_text(err), "TickTriggerFailed")
    return Triggered("started", "; ".join(verdict.reasons)[:500], "TicksTriggered")


@uses("lambda:InvokeFunction", by=("detector", "regionswitch"))
def start_tick(runtime, payload: dict) -> None:
    """One asynchronous invocation of the reconciler (Lambda queues it and answers 202)."""
    runtime.clients("lambda").invoke(FunctionName=runtime.tick_function, InvocationType="Event",
                                     Payload=json.dumps(payload).encode())
