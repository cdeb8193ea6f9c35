"""Client-side rate budgets: every call of a service passes its budget, and throttling slows
the walk down instead of failing it.

AWS limits control-plane requests per account and region: Lambda allows about 15 a
second for every control-plane call together (reads included), with GetFunction (100/s)
and GetPolicy (15/s) apart and invocations not counted; Auto Scaling, ELB and
Application Auto Scaling have buckets of their own, whose sizes Auto Scaling and
Application Auto Scaling do not publish. A walk that sends faster than its budget is
answered with throttles; the SDK's three attempts then run out and a resource is
reported failed for nothing but speed. Here instead:

- `RateBudget` paces the calls of one API class (one AWS bucket) in one account and
  region. It is thread-safe and schedules each call a slot (virtual scheduling, the
  GCRA of ATM networks), so N threads together send at the budget's rate, never N
  times it. Time is injected (`monotonic`, `sleep`), so tests run on a fake clock.
- The rate follows AIMD, in the manner of botocore's adaptive mode
  (botocore/retries/adaptive.py, throttling.py): a throttle answer multiplies the rate
  by `beta` (0.7, the SDK's CUBIC beta) and pushes the next slot out by one new
  interval; every second without one adds `increase` requests/s back, up to the
  ceiling. Unlike the SDK's per-client limiter, which starts at nothing and learns
  from throttles, a budget starts where it is told (a published quota needs no
  probing) and is shared by every client and thread of the process. A throttle
  answered to a call sent before the last decrease does not decrease again: the calls
  in flight together when a bucket ran dry are one congestion signal, not eight.
- `Governor` is the botocore hook: installed on a client, every call of a governed
  service waits for its budget's slot (`before-send`, so retries pay too, as they do
  on AWS), and a throttle answer is retried — immediately, the budget paces the retry —
  for as long as the walk's deadline allows (`needs-retry`, registered first so the
  SDK's three attempts do not apply to throttles). Only when the deadline passes does a
  throttle reach the caller. It counts calls, throttles answered, retried and surfaced.
  Within Lambda, every call but GetFunction and GetPolicy spends the one `lambda`
  budget; GetFunction and GetPolicy have their own; invocations none.

Two controllers in one account (a slow tick and the next minute's; the reconciler and
an operator's `holdfast engage`) must not together exceed the account's budget. The
choice here is a split budget whose split is decided by leases (`ShareBoard`): each
controller holds a lease per budget, renewed every `renew_every` seconds, and sends at
ceiling / (live leases). A newcomer sends nothing until every other holder has renewed
since it joined, so every holder that is sending has counted every other one that is
(the sum of the shares is at most the ceiling); a holder that stops renewing (it
finished, or it crashed) drops out when its lease expires and the others take its share.
Why not the alternatives:
- a static split (each controller always 1/N) wastes most of the budget in the common
  case of one controller, when posture must come as fast as the quota allows;
- an exclusive lease on the engage walk serialises walks that need not be (an
  operator's `resume --now` behind a tick's engage), lets a stalled holder — the
  October enactor — block the others until its lease expires, and makes engaging
  depend on the ledger, while engaging must go on when the ledger is unreachable.
When the board cannot be reached, a budget assumes `fallback_shares` holders (2) and
carries on: engaging never waits for the ledger, and the AIMD still answers any
overshoot. `LocalShareBoard` is the in-process board (tests, and several budgets of one
process); `holdfast.ledger.budget_board.LedgerShareBoard` keeps the leases in the ledger
for controllers in different processes.

The pacing and the shares (RateBudget, Budgets, ShareBoard) are plain Python over an
injected clock; only the Governor touches botocore.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from botocore.exceptions import BotoCoreError

from holdfast.core import kinds

Monotonic = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class BudgetSpec:
    """One API class's budget: never above `ceiling` requests a second."""

    ceiling: float
    start: float | None = None   # the first rate; default the ceiling (a published quota)
    burst: float = 1.0           # calls that may go at once after an idle spell

    def __post_init__(self) -> None:
        if not self.ceiling > 0:
            raise ValueError(f"a budget's ceiling must be above 0 requests/s, got {self.ceiling!r}")
        if self.start is not None and not 0 < self.start <= self.ceiling:
            raise ValueError(f"a budget's start must be in (0, ceiling={self.ceiling}], got {self.start!r}")
        if self.burst < 1:
            raise ValueError(f"a budget's burst must be at least 1, got {self.burst!r}")


# Published quotas are ceilings to start at; unpublished ones start at a guess and probe up.
# One budget per service a kind declares (holdfast.core.kinds.SERVICES, with its figures),
# and Lambda's two reads that have quotas of their own.
DEFAULT_SPECS: dict[str, BudgetSpec] = {
    **{s.name: BudgetSpec(s.ceiling, start=s.start) for s in kinds.SERVICES},
    "lambda:GetFunction": BudgetSpec(100.0),   # Lambda quotas: GetFunction 100/s
    "lambda:GetPolicy": BudgetSpec(15.0),      # Lambda quotas: GetPolicy 15/s
}


class BudgetExhausted(Exception):
    """The deadline passed before the budget had a slot (the Governor raises DeadlinePassed)."""


class DeadlinePassed(BotoCoreError):
    """A governed call found no budget slot before the walk's deadline. A BotoCoreError, so a
    walk reports that one resource failed and carries on."""

    fmt = "{budget}: the walk's deadline passed while waiting for the rate budget ({detail})"


# ---- sharing one account's budget between controllers -----------------------------------

@dataclass(frozen=True)
class Share:
    holders: int   # live leases on this budget, this controller's included
    ready: bool    # every other holder has renewed since this one joined


class BoardUnavailable(Exception):
    """The share board (the ledger) could not be read or written."""


class ShareBoard(Protocol):
    def renew(self, budget: str, member: str, ttl: float) -> Share: ...

    def leave(self, budget: str, member: str) -> None: ...


class LocalShareBoard:
    """Leases in memory, on one clock: budgets of one process, and tests of the protocol."""

    def __init__(self, clock: Monotonic = time.monotonic):
        self._clock = clock
        self._leases: dict[str, dict[str, list[float]]] = {}   # budget -> member -> [joined, renewed, expires]
        self._lock = threading.Lock()

    def renew(self, budget: str, member: str, ttl: float) -> Share:
        with self._lock:
            now = self._clock()
            leases = self._leases.setdefault(budget, {})
            for other in [m for m, (_, _, expires) in leases.items() if expires <= now and m != member]:
                del leases[other]
            lease = leases.get(member)
            if lease is None or lease[2] <= now:   # new, or lapsed: a lapsed holder joins again
                lease = leases[member] = [now, now, now + ttl]
            lease[1], lease[2] = now, now + ttl
            joined = lease[0]
            ready = all(renewed >= joined for m, (_, renewed, _) in leases.items() if m != member)
            return Share(len(leases), ready)

    def leave(self, budget: str, member: str) -> None:
        with self._lock:
            self._leases.get(budget, {}).pop(member, None)


# ---- one budget -------------------------------------------------------------------------

class RateBudget:
    """The pace of one API class in one account and region. Thread-safe.

    `reserve()` gives the caller the time of its slot (or None while a newcomer waits for
    its share); `acquire(deadline)` reserves and sleeps until the slot. `throttled(sent_at)`
    and `succeeded()` feed the AIMD.
    """

    def __init__(self, name: str, spec: BudgetSpec, *, monotonic: Monotonic = time.monotonic,
                 sleep: Sleep = time.sleep, board: ShareBoard | None = None, member: str = "",
                 beta: float = 0.7, increase: float | None = None, floor: float = 0.5,
                 renew_every: float = 1.0, lease_ttl: float | None = None, fallback_shares: int = 2):
        if not 0 < beta < 1:
            raise ValueError(f"beta must be in (0, 1), got {beta!r}")
        if board is not None and not member:
            raise ValueError("a budget on a share board needs a member id (the controller's)")
        self.name = name
        self.spec = spec
        self._monotonic = monotonic
        self._sleep = sleep
        self._board = board
        self._member = member
        self._beta = beta
        self._increase = spec.ceiling / 20 if increase is None else increase
        self._floor = min(floor, spec.ceiling)
        self._renew_every = renew_every
        self._ttl = 3 * renew_every if lease_ttl is None else lease_ttl
        self._fallback = Share(max(1, fallback_shares), True)
        self._lock = threading.Lock()
        now = monotonic()
        self._base_rate = spec.start or spec.ceiling   # the rate at _base_time, before additive increase
        self._base_time = now
        self._tat = now                  # theoretical arrival time of the next call (GCRA)
        self._last_decrease = -math.inf  # when the rate was last cut
        self._share = Share(1, True) if board is None else None
        self._renew_due = -math.inf
        self.board_errors = 0
        self.stats: Counter[str] = Counter()   # sent, throttled, ignored_throttles, waited_ms

    # ---- the rate ---------------------------------------------------------------------

    def _cap(self) -> float:
        holders = self._share.holders if self._share else 1
        return self.spec.ceiling / max(1, holders)

    def _rate_at(self, now: float) -> float:
        grown = self._base_rate + self._increase * max(0.0, now - self._base_time)
        return max(min(grown, self._cap()), min(self._floor, self._cap()))

    @property
    def rate(self) -> float:
        with self._lock:
            return self._rate_at(self._monotonic())

    @property
    def shares(self) -> Share | None:
        return self._share

    def _renew(self, now: float) -> None:
        if self._board is None or now < self._renew_due:
            return
        before, old_cap = self._rate_at(now), self._cap()
        try:
            self._share = self._board.renew(self.name, self._member, self._ttl)
        except BoardUnavailable:
            self.board_errors += 1
            self._share = self._fallback
        self._renew_due = now + self._renew_every
        # A budget running at its share takes a larger share at once (a holder left: that is
        # no congestion); one that throttles had cut carries on from where it was.
        rate = self._cap() if before >= old_cap * 0.999 else min(before, self._cap())
        self._base_rate, self._base_time = rate, now

    # ---- slots ------------------------------------------------------------------------

    def reserve(self, deadline: float | None = None) -> float | None:
        """The time of this call's slot, committed; None while this controller waits for its
        share (ask again after `renew_every`). Raises BudgetExhausted, committing nothing,
        when the slot would come after `deadline`."""
        with self._lock:
            now = self._monotonic()
            self._renew(now)
            if self._share is not None and not self._share.ready:
                if deadline is not None and now + self._renew_every > deadline:
                    raise BudgetExhausted(f"{self.name}: waiting for this controller's share of the budget")
                return None
            interval = 1.0 / self._rate_at(now)
            tolerance = (self.spec.burst - 1.0) * interval
            slot = max(now, self._tat - tolerance)
            if deadline is not None and slot > deadline:
                raise BudgetExhausted(f"{self.name}: no slot before the deadline ({slot - now:.1f} s away)")
            self._tat = max(self._tat, slot) + interval
            self.stats["sent"] += 1
            return slot

    def acquire(self, deadline: float | None = None) -> float:
        """Wait for a slot and return its time (pass it to `throttled` if the call is throttled)."""
        while True:
            slot = self.reserve(deadline)
            now = self._monotonic()
            if slot is None:
                self._sleep(self._renew_every)
                continue
            if slot > now:
                self.stats["waited_ms"] += int((slot - now) * 1000)
                self._sleep(slot - now)
            return slot

    # ---- feedback -----------------------------------------------------------------------

    def throttled(self, sent_at: float | None = None) -> None:
        """A throttle answer: cut the rate by beta, unless this call went out before the last
        cut or at its moment (then it is the congestion the last cut already answered)."""
        with self._lock:
            self.stats["throttled"] += 1
            now = self._monotonic()
            if sent_at is not None and sent_at <= self._last_decrease:
                self.stats["ignored_throttles"] += 1
                return
            rate = max(self._floor, self._rate_at(now) * self._beta)
            self._base_rate, self._base_time = rate, now
            self._last_decrease = now
            self._tat = max(self._tat, now + 1.0 / rate)

    def succeeded(self) -> None:
        with self._lock:
            self.stats["succeeded"] += 1

    def leave(self) -> None:
        """Give up this controller's lease (the walk is over): the others take its share."""
        if self._board is not None:
            try:
                self._board.leave(self.name, self._member)
            except BoardUnavailable:
                self.board_errors += 1


class Budgets:
    """The budgets of one account and region, by name, created on first use."""

    def __init__(self, specs: Mapping[str, BudgetSpec] | None = None, **options: Any):
        self.specs = dict(DEFAULT_SPECS if specs is None else specs)
        self._options = options
        self._budgets: dict[str, RateBudget] = {}
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        return name in self.specs

    def __getitem__(self, name: str) -> RateBudget:
        with self._lock:
            budget = self._budgets.get(name)
            if budget is None:
                if name not in self.specs:
                    raise KeyError(f"no budget named {name!r}; known: {sorted(self.specs)}")
                budget = self._budgets[name] = RateBudget(name, self.specs[name], **self._options)
            return budget

    def made(self) -> dict[str, RateBudget]:
        with self._lock:
            return dict(self._budgets)

    def leave(self) -> None:
        for budget in self.made().values():
            budget.leave()


_PROCESS: dict[str, Budgets] = {}
_PROCESS_LOCK = threading.Lock()


def process_budgets(scope: str, **options: Any) -> Budgets:
    """The one `Budgets` of this process for `scope` (account and region): every client and
    thread of a process shares it. Options apply when it is first made."""
    with _PROCESS_LOCK:
        if scope not in _PROCESS:
            _PROCESS[scope] = Budgets(**options)
        return _PROCESS[scope]


# ---- which calls spend which budget --------------------------------------------------------

# botocore service ids (hyphenized) -> budget name, for every declared service but Lambda
# (whose calls `route` splits by operation).
SERVICE_BUDGETS = {s.botocore_id: s.name for s in kinds.SERVICES if s.name != kinds.LAMBDA.name}
LAMBDA_UNBUDGETED = frozenset({"Invoke", "InvokeAsync", "InvokeWithResponseStream"})
LAMBDA_OWN = frozenset({"GetFunction", "GetPolicy"})


def route(service_id: str, operation: str) -> str | None:
    """The budget a call spends, or None for calls no budget governs."""
    if service_id == kinds.LAMBDA.botocore_id:
        if operation in LAMBDA_UNBUDGETED:
            return None
        return f"lambda:{operation}" if operation in LAMBDA_OWN else "lambda"
    return SERVICE_BUDGETS.get(service_id)


# ---- the botocore hook -----------------------------------------------------------------------

class Governor:
    """Makes every governed call pass its budget and retries throttles until the deadline.

    `deadline` (monotonic seconds, or None) is the walk's: throttles are retried until
    then; with none, each call may keep retrying for `patience` seconds. Install on
    clients with `install(client)`, or on every client of a `holdfast.aws.Clients` with
    `govern(clients)`.
    """

    def __init__(self, budgets: Budgets, *, monotonic: Monotonic = time.monotonic, patience: float = 300.0,
                 router: Callable[[str, str], str | None] = route):
        self.budgets = budgets
        self.deadline: float | None = None
        self.patience = patience
        self._monotonic = monotonic
        self._route = router
        self._local = threading.local()
        self._lock = threading.Lock()
        # by budget name: calls (API calls), attempts, throttled, retried, surfaced, refused
        self.stats: dict[str, Counter[str]] = {}
        self._detector = None

    # ---- installing --------------------------------------------------------------------

    def install(self, client: Any) -> Any:
        from botocore.retries import standard

        if self._detector is None:
            self._detector = standard.ThrottlingErrorDetector(retry_event_adapter=standard.RetryEventAdapter())
        service_id = client.meta.service_model.service_id.hyphenize()
        events = client.meta.events
        events.register(f"before-call.{service_id}", self._before_call, unique_id=f"holdfast-budget-call-{id(self)}")
        events.register_first(f"before-send.{service_id}", self._before_send, unique_id=f"holdfast-budget-send-{id(self)}")
        events.register_first(f"needs-retry.{service_id}", self._needs_retry, unique_id=f"holdfast-budget-retry-{id(self)}")
        return client

    def govern(self, clients: Any) -> "Governor":
        """Install on every client `clients` (a holdfast.aws.Clients) has made or will make."""
        clients.on_client(lambda _service, client: self.install(client))
        return self

    # ---- counting ------------------------------------------------------------------------

    def _count(self, name: str, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats.setdefault(name, Counter())[key] += n

    def totals(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {name: dict(c) for name, c in sorted(self.stats.items())}

    # ---- the hooks -----------------------------------------------------------------------

    def _call_deadline(self) -> float:
        started = getattr(self._local, "started", None)
        patience = (started if started is not None else self._monotonic()) + self.patience
        return patience if self.deadline is None else min(self.deadline, patience)

    @staticmethod
    def _names(event_name: str) -> tuple[str, str]:
        _, service_id, operation = (event_name.split(".") + ["", ""])[:3]
        return service_id, operation

    def _before_call(self, model=None, event_name: str = "", **_: Any) -> None:
        name = self._route(*self._names(event_name)) if model is None else \
            self._route(model.service_model.service_id.hyphenize(), model.name)
        self._local.started = self._monotonic()
        if name is not None:
            self._count(name, "calls")

    def _before_send(self, request=None, event_name: str = "", **_: Any) -> None:
        name = self._route(*self._names(event_name))
        if name is None or name not in self.budgets:
            return None
        try:
            sent_at = self.budgets[name].acquire(self._call_deadline())
        except BudgetExhausted as err:
            self._count(name, "refused")
            raise DeadlinePassed(budget=name, detail=str(err)) from err
        sent = getattr(self._local, "sent", None)
        if sent is None:
            sent = self._local.sent = {}
        sent[name] = sent_at
        self._count(name, "attempts")
        return None

    def _needs_retry(self, response=None, caught_exception=None, operation=None, attempts=None,
                     request_dict=None, **kwargs: Any) -> float | None:
        if operation is None:
            return None
        name = self._route(operation.service_model.service_id.hyphenize(), operation.name)
        if name is None or name not in self.budgets:
            return None
        if isinstance(caught_exception, DeadlinePassed):
            return None   # never retry a call the deadline refused
        throttle = self._detector.is_throttling_error(
            response=response, caught_exception=caught_exception, operation=operation,
            attempts=attempts, request_dict=request_dict or {"context": {}},
        )
        budget = self.budgets[name]
        if not throttle:
            if response is not None and response[0] is not None and response[0].status_code < 400:
                budget.succeeded()
            return None   # the SDK's own retry rules decide
        self._count(name, "throttled")
        budget.throttled(getattr(self._local, "sent", {}).get(name))
        if self._monotonic() < self._call_deadline():
            self._count(name, "retried")
            return 0      # retry now: the budget paces the next attempt
        self._count(name, "surfaced")
        return None
