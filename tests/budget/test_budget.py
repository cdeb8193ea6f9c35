"""Rate budgets on a fake clock: pacing across threads, AIMD on throttles, the Governor's
retries within the deadline, and two controllers sharing one account's budget."""

from __future__ import annotations

import heapq
import threading
from datetime import datetime, timezone

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from holdfast.budget import (
    BoardUnavailable,
    BudgetExhausted,
    Budgets,
    BudgetSpec,
    DeadlinePassed,
    Governor,
    LocalShareBoard,
    RateBudget,
    route,
)
from holdfast.clock import FakeClock
from holdfast.ledger import Ledger
from holdfast_fixtures.throttle_proxy import throttle_answer


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2025, 10, 20, 7, 0, tzinfo=timezone.utc))


def budget(clock, ceiling=15.0, **kw) -> RateBudget:
    return RateBudget("lambda", BudgetSpec(ceiling, **{k: kw.pop(k) for k in ("start", "burst") if k in kw}),
                      monotonic=clock.monotonic, sleep=clock.advance, **kw)


# ---- pacing ---------------------------------------------------------------------------------

def test_threads_together_get_slots_at_the_rate_not_a_multiple_of_it(clock):
    b = budget(clock, ceiling=10.0)
    slots: list[float] = []
    lock = threading.Lock()

    def worker():
        for _ in range(25):
            s = b.reserve()
            with lock:
                slots.append(s)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    slots.sort()
    assert len(slots) == 200
    gaps = [round(b2 - b1, 9) for b1, b2 in zip(slots, slots[1:])]
    assert gaps == [0.1] * 199          # 200 calls take 19.9 s at 10/s, whoever asks
    assert slots[0] == clock.monotonic()


def test_acquire_sleeps_until_the_slot_and_a_deadline_refuses_without_spending(clock):
    b = budget(clock, ceiling=4.0)
    assert b.acquire() == 0.0
    assert b.acquire() == 0.25 and clock.monotonic() == 0.25
    with pytest.raises(BudgetExhausted):
        b.acquire(deadline=0.3)          # the next slot is at 0.5
    assert clock.monotonic() == 0.25     # refused without sleeping
    assert b.acquire() == 0.5            # and the refused slot was not spent


def test_burst_lets_an_idle_budget_send_a_few_at_once(clock):
    b = budget(clock, ceiling=10.0, burst=3)
    clock.advance(60)
    first = [b.reserve() for _ in range(5)]
    assert first[:3] == [60.0, 60.0, 60.0] and first[3] == pytest.approx(60.1)


# ---- AIMD -----------------------------------------------------------------------------------

def test_a_throttle_cuts_the_rate_once_per_congestion_and_quiet_time_wins_it_back(clock):
    b = budget(clock, ceiling=15.0)          # increase: ceiling/20 = 0.75 requests/s per second
    in_flight = [b.acquire() for _ in range(8)]
    b.throttled(in_flight[0])
    assert b.rate == pytest.approx(10.5)     # x0.7, the SDK's beta
    for sent in in_flight[1:]:               # the others were sent before the cut: same congestion
        b.throttled(sent)
    assert b.rate == pytest.approx(10.5)
    assert b.stats["ignored_throttles"] == 7
    later = b.acquire()                      # sent after the cut, and throttled: a new signal
    b.throttled(later)
    second = (10.5 + 0.75 / 10.5) * 0.7      # it had grown back a little while waiting its slot
    assert b.rate == pytest.approx(second)
    clock.advance(4)
    assert b.rate == pytest.approx(second + 4 * 0.75)
    clock.advance(100)
    assert b.rate == 15.0                    # never above the ceiling


def test_after_a_throttle_the_next_slot_waits_one_new_interval(clock):
    b = budget(clock, ceiling=15.0)
    sent = b.acquire()
    b.throttled(sent)
    assert b.reserve() == pytest.approx(sent + 1 / 10.5)


def test_a_rate_never_falls_below_the_floor(clock):
    b = budget(clock, ceiling=15.0, floor=0.5, increase=0.0)
    for _ in range(30):
        b.throttled(b.acquire())
    assert b.rate == 0.5
    # With the additive increase, back-to-back throttles settle where a cut and the growth
    # while waiting one slot cancel: r = (r + 0.75/r) * 0.7, r = sqrt(1.75).
    b = budget(clock, ceiling=15.0)
    for _ in range(60):
        b.throttled(b.acquire())
    assert b.rate == pytest.approx(1.75 ** 0.5, rel=1e-3)


def test_an_unpublished_quota_starts_low_and_probes_up_to_its_ceiling(clock):
    b = budget(clock, ceiling=20.0, start=10.0)
    assert b.rate == 10.0
    clock.advance(5)
    assert b.rate == pytest.approx(15.0)
    clock.advance(50)
    assert b.rate == 20.0


def test_specs_are_checked():
    with pytest.raises(ValueError, match="ceiling"):
        BudgetSpec(0)
    with pytest.raises(ValueError, match="start"):
        BudgetSpec(10, start=11)


# ---- the Governor on a botocore client ----------------------------------------------------------

class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


class Transport:
    """Answers in place of the network (a before-send handler that returns a response)."""

    def __init__(self, clock, answers):
        self.clock, self.answers, self.sent = clock, list(answers), []

    def __call__(self, request, **_):
        self.sent.append(self.clock.monotonic())
        status, headers, body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return AWSResponse(request.url, status, headers, _Raw(body))


OK = (200, {"Content-Type": "application/json"}, b'{"Functions": []}')
THROTTLE = throttle_answer("lambda", "lambda")   # 429 TooManyRequestsException, as Lambda answers


def lambda_client(governor, transport):
    client = boto3.session.Session(region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s").client(
        "lambda", endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"mode": "standard", "max_attempts": 3}))
    governor.install(client)
    client.meta.events.register_last("before-send.lambda", transport)
    return client


def governor(clock, **kw) -> Governor:
    return Governor(Budgets(monotonic=clock.monotonic, sleep=clock.advance), monotonic=clock.monotonic, **kw)


def test_a_throttled_call_slows_the_budget_and_is_retried_until_it_succeeds(clock):
    g = governor(clock)
    transport = Transport(clock, [THROTTLE] * 5 + [OK])   # more throttles than the SDK's 4 attempts
    client = lambda_client(g, transport)
    assert client.list_functions()["Functions"] == []
    assert g.totals()["lambda"] == {"calls": 1, "attempts": 6, "throttled": 5, "retried": 5}
    assert g.budgets["lambda"].rate < 15 * 0.7 ** 4        # each throttle came after the last cut
    gaps = [b - a for a, b in zip(transport.sent, transport.sent[1:])]
    assert all(gap >= 1 / 10.5 - 1e-9 for gap in gaps)     # every retry waited for the slowed budget
    assert gaps == sorted(gaps)                             # ... and waited longer each time


def test_throttles_surface_only_when_the_walk_deadline_passes(clock):
    g = governor(clock)
    g.deadline = clock.monotonic() + 3.0
    transport = Transport(clock, [THROTTLE])
    client = lambda_client(g, transport)
    with pytest.raises(DeadlinePassed) as info:
        client.list_functions()
    assert isinstance(info.value, BotoCoreError) and "deadline" in str(info.value)
    stats = g.totals()["lambda"]
    assert stats["attempts"] == len(transport.sent) > 4     # retried past the SDK's attempts
    assert stats["refused"] == 1
    assert clock.monotonic() <= g.deadline                  # never slept past the deadline


def test_a_call_after_the_deadline_is_refused_without_being_sent(clock):
    g = governor(clock)
    transport = Transport(clock, [OK])
    client = lambda_client(g, transport)
    g.deadline = clock.monotonic() - 1
    with pytest.raises(DeadlinePassed):
        client.list_functions()
    assert transport.sent == []                 # no budget spent past the deadline
    assert g.totals()["lambda"] == {"calls": 1, "refused": 1}


def test_without_a_walk_deadline_a_call_keeps_retrying_for_its_patience(clock):
    g = governor(clock, patience=2.0)
    transport = Transport(clock, [THROTTLE])
    client = lambda_client(g, transport)
    with pytest.raises((ClientError, DeadlinePassed)):
        client.list_functions()
    assert len(transport.sent) > 4 and clock.monotonic() <= 2.0


def test_getfunction_has_its_own_budget_and_invocations_none(clock):
    assert route("lambda", "GetFunction") == "lambda:GetFunction"
    assert route("lambda", "ListTags") == route("lambda", "UpdateEventSourceMapping") == "lambda"
    assert route("lambda", "GetPolicy") == "lambda:GetPolicy"
    assert route("lambda", "Invoke") is None
    assert route("auto-scaling", "SuspendProcesses") == "autoscaling"
    assert route("elastic-load-balancing-v2", "AddTags") == "elasticloadbalancing"
    assert route("sqs", "SendMessage") is None
    g = governor(clock)
    client = lambda_client(g, Transport(clock, [(200, {"Content-Type": "application/json"}, b"{}")]))
    for _ in range(3):
        client.get_function(FunctionName="f")
    client.list_tags(Resource="arn:aws:lambda:us-east-1:123456789012:function:f")
    assert g.totals() == {"lambda": {"calls": 1, "attempts": 1, }, "lambda:GetFunction": {"calls": 3, "attempts": 3}}
    assert g.budgets["lambda:GetFunction"].stats["sent"] == 3


def test_govern_installs_on_every_client_a_clients_makes(clock):
    from holdfast.aws import Clients

    clients = Clients(boto3.session.Session(region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"),
                      endpoint_url="http://127.0.0.1:9")
    g = governor(clock).govern(clients)
    transport = Transport(clock, [THROTTLE, OK])
    clients.on_client(lambda service, client: client.meta.events.register_last(f"before-send.{service}", transport))
    assert clients("lambda").list_functions()["Functions"] == []
    assert g.totals()["lambda"]["retried"] == 1


# ---- two controllers, one account ---------------------------------------------------------------

def _simulate(clock, controllers, until):
    """Each controller sends back to back (always more work); returns send times by name.
    controllers: name -> (budget, start, stop) with times in seconds."""
    sends = {name: [] for name in controllers}
    queue = [(start, name) for name, (_, start, _) in controllers.items()]
    heapq.heapify(queue)
    while queue:
        t, name = heapq.heappop(queue)
        b, _, stop = controllers[name]
        if t >= min(stop, until):
            b.leave()
            continue
        clock.advance(t - clock.monotonic())
        slot = b.reserve()
        if slot is None:                      # waiting for its share
            heapq.heappush(queue, (t + 1.0, name))
            continue
        sends[name].append(slot)
        heapq.heappush(queue, (slot, name))
    return sends


def _most_in_any_window(times, width):
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - width:
            j += 1
        best = max(best, i - j + 1)
    return best


def test_two_controllers_sharing_the_lambda_budget_stay_under_it_together(clock):
    board = LocalShareBoard(clock.monotonic)
    a = budget(clock, board=board, member="tick-1")
    b = budget(clock, board=board, member="cli-operator")
    sends = _simulate(clock, {"a": (a, 0.0, 40.0), "b": (b, 10.0, 60.0)}, until=60.0)
    every = sends["a"] + sends["b"]
    # Never more than the account's 15/s together, in any window (one slot of slack per budget).
    for width in (1.0, 5.0, 20.0):
        assert _most_in_any_window(every, width) <= 15 * width + 2
    # ... and the budget is used: A alone at 15/s, then both near 7.5/s each, then B alone at 15/s.
    count = lambda ts, lo, hi: sum(1 for t in ts if lo <= t < hi)
    assert count(sends["a"], 0, 10) >= 149
    assert count(every, 12, 40) >= 15 * 28 - 3
    assert 0.4 <= count(sends["b"], 12, 40) / count(every, 12, 40) <= 0.6
    assert count(sends["b"], 42, 60) >= 15 * 18 - 3
    assert b.shares.holders == 1


def test_a_newcomer_waits_until_every_holder_has_counted_it(clock):
    board = LocalShareBoard(clock.monotonic)
    assert board.renew("lambda", "a", ttl=3) .ready
    clock.advance(0.5)
    joined = board.renew("lambda", "b", ttl=3)
    assert joined.holders == 2 and not joined.ready      # a has not renewed since b came
    clock.advance(0.5)
    assert board.renew("lambda", "a", ttl=3).holders == 2
    assert board.renew("lambda", "b", ttl=3).ready


def test_a_crashed_holders_lease_expires_and_its_share_goes_to_the_others(clock):
    board = LocalShareBoard(clock.monotonic)
    board.renew("lambda", "a", ttl=3)
    board.renew("lambda", "b", ttl=3)
    board.renew("lambda", "a", ttl=3)
    clock.advance(3.5)                                    # b stopped renewing (crashed)
    assert board.renew("lambda", "a", ttl=3).holders == 1


def test_an_unreachable_board_means_a_conservative_share_not_a_stop(clock):
    class Down:
        def renew(self, *_a, **_k):
            raise BoardUnavailable("ledger unreachable")

        def leave(self, *_a, **_k):
            raise BoardUnavailable("ledger unreachable")

    b = budget(clock, board=Down(), member="tick-1")
    slots = [b.reserve() for _ in range(4)]
    assert slots == pytest.approx([0.0, 2 / 15, 4 / 15, 6 / 15])   # half the ceiling: 7.5/s
    assert b.board_errors == 1
    b.leave()
    assert b.board_errors == 2


# ---- the same protocol on the ledger ---------------------------------------------------------

def test_two_controllers_on_the_ledger_board_stay_under_the_budget_together(clock, clients, ledger_table):
    from holdfast.ledger.budget_board import LedgerShareBoard

    board = LedgerShareBoard(Ledger(clients("dynamodb"), ledger_table), clock=clock.monotonic)
    a = budget(clock, board=board, member="tick-1")
    b = budget(clock, board=board, member="tick-2")
    sends = _simulate(clock, {"a": (a, 0.0, 20.0), "b": (b, 5.0, 30.0)}, until=30.0)
    every = sends["a"] + sends["b"]
    assert _most_in_any_window(every, 1.0) <= 17 and _most_in_any_window(every, 10.0) <= 152
    assert sum(1 for t in every if 7 <= t < 20) >= 15 * 13 - 3
    assert min(sends["b"]) >= 6.0                 # b waited until a had counted it
    assert a.board_errors == b.board_errors == 0
    items = clients("dynamodb").query(
        TableName=ledger_table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": "BUDGET"}})
    assert items["Count"] == 0                    # both left


def test_the_ledger_board_unreachable_is_board_unavailable(clock, clients):
    from holdfast.ledger.budget_board import LedgerShareBoard

    board = LedgerShareBoard(Ledger(clients("dynamodb"), "no-such-table"), clock=clock.monotonic)
    with pytest.raises(BoardUnavailable):
        board.renew("lambda", "tick-1", ttl=3)
