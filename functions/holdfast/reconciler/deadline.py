"""The tick's deadline, and the claim of a long engage walk (holdfast.ledger.claims).

    TickDeadline(runtime, engage_seconds, ledger=...)(); with deadline.engaging(plan): ...

Short by default (`settings.tick_budget_seconds`); while the tick engages, and the
handler gave it the invocation's remaining time, long and claimed, so the schedule's
overlapping ticks leave the engage walk to its holder (see TickDeadline)."""

from __future__ import annotations

import contextvars
import threading
from datetime import timedelta
from typing import Callable

from holdfast.aws import CALL_HOOK
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.policy import Plan
from holdfast.ledger import Ledger
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler.state import logger
from holdfast.runtime import Runtime

# While a long engage walk runs, its claim is renewed and the plan read again this often:
# a walk whose plan moved on stops within this time (its engage is no longer what the
# plan wants), and so does one whose claim another controller took over.
PLAN_CHECK_SECONDS = ledger_claims.RENEW_SECONDS


class TickDeadline:
    """When the tick stops walking: `deadline()` True.

    Short by default: `settings.tick_budget_seconds` from the tick's start, for every
    stage. While the tick engages (`with deadline.engaging(plan)`), and the handler gave it
    `engage_seconds` longer than that, it keeps walking until `engage_seconds` from the
    tick's start, or until the plan's generation is no longer the one it engages for
    (read at most every PLAN_CHECK_SECONDS), whichever comes first. That long walk is
    claimed in the ledger (holdfast.ledger.claims): the ticks the schedule starts meanwhile
    leave the engage to it instead of splitting the rate budgets with it over the same
    resources. The claim is a short lease, renewed with each plan read; the read is made
    from every deadline check and every AWS call of the walk (aws.CALL_HOOK), so a walk
    busy listing a large fleet keeps it, and a walk that makes no calls at all (a killed
    holder) loses it within `claims.lease_seconds`. A renewal that finds the claim taken
    over stops the walk as a moved plan does. After the engage, relaxing gets the short
    budget again, counted from the end of the engage and never past `engage_seconds`."""

    def __init__(self, runtime: Runtime, engage_seconds: float | None, *, ledger: Ledger | None = None):
        self.runtime, self.clock = runtime, runtime.clock
        self.ledger = ledger or runtime.ledger()   # the tick's: the claim and the plan reads go through it
        short = float(runtime.settings.tick_budget_seconds)
        self.started = self.clock.monotonic()
        self.short = short
        self.total = short if engage_seconds is None else max(1.0, float(engage_seconds))
        self.long = engage_seconds is not None and self.total > short
        self.limit = min(short, self.total)   # seconds from the start
        self.watch: Callable[[], bool] | None = None   # True once the plan moved on
        self.checked = self.started
        self.moved = False
        self._checking = threading.Lock()

    def elapsed(self) -> float:
        return self.clock.monotonic() - self.started

    def __call__(self) -> bool:
        if self.elapsed() >= self.limit:
            return True
        watch = self.watch
        # Called by every writer thread of the walk: one of them reads the plan, the others go on.
        if watch is not None and self.clock.monotonic() - self.checked >= PLAN_CHECK_SECONDS \
                and self._checking.acquire(blocking=False):
            try:
                self.checked = self.clock.monotonic()
                # In a context of its own: the read is not counted as the walked kind's call.
                if contextvars.Context().run(watch):
                    self.moved, self.limit = True, self.elapsed()   # from now on, and for the rest of the tick
                    return True
            finally:
                self._checking.release()
        return False

    def engaging(self, plan: Plan | None) -> "_Engaging":
        return _Engaging(self, plan)


class _Engaging:
    def __init__(self, deadline: TickDeadline, plan: Plan | None):
        self.deadline, self.plan = deadline, plan
        self.taken, self.holder, self.claimed = True, None, False
        self._hook: contextvars.Token | None = None

    def __bool__(self) -> bool:
        return self.taken

    def __enter__(self) -> "_Engaging":
        d, rt = self.deadline, self.deadline.runtime
        if not d.long:
            return self
        if self.plan is None or not self.plan.generation:   # no ledger, no plan: walk, unclaimed
            d.limit = d.total
            return self
        ledger = d.ledger
        generation = self.plan.generation
        lease = ledger_claims.lease_seconds(rt.settings.schedule_minutes)

        def take() -> ledger_claims.Claim:
            now = rt.clock.now()
            until = now + timedelta(seconds=max(0.0, min(lease, d.total - d.elapsed())))
            return ledger_claims.take_engage_walk(ledger, generation=generation,
                                                  controller_id=rt.controller_id, now=now, until=until)

        try:
            claim = take()
        except LedgerUnavailable:
            claim = ledger_claims.Claim(True)   # engaging needs no ledger: walk, unclaimed
        else:
            self.claimed = bool(claim)
        self.taken, self.holder = claim.taken, claim.holder
        if self.taken:
            d.limit = d.total

            def moved_on() -> bool:
                """Renew the claim, then read the plan: True when the walk must stop."""
                try:
                    if self.claimed:
                        renewed = take()
                        if not renewed:
                            logger.info("engage walk taken over: leaving it to its new holder",
                                        extra={"controller": rt.controller_id, "generation": generation,
                                               "holder": renewed.holder})
                            self.claimed = False
                            return True
                    current = ledger_plan.read(ledger)
                except LedgerUnavailable:
                    return False   # engaging goes on without the ledger
                return current is not None and current.generation != generation

            d.watch, d.checked = moved_on, d.clock.monotonic()
            # Every AWS call of the walk checks the deadline too (at most one read and one
            # renewal a PLAN_CHECK_SECONDS): a long listing keeps the claim.
            self._hook = CALL_HOOK.set(d)
        return self

    def __exit__(self, *exc) -> None:
        d, rt = self.deadline, self.deadline.runtime
        if self._hook is not None:
            CALL_HOOK.reset(self._hook)
            self._hook = None
        if d.long and self.taken:
            d.watch = None
            if not d.moved:   # the plan moved on: the rest of the tick stops too
                d.limit = min(d.total, d.elapsed() + d.short)
            if self.claimed:
                ledger_claims.release_engage_walk(d.ledger, controller_id=rt.controller_id)
