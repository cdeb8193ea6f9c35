"""Benchmark: the controller path, signal -> verdict -> ticks -> full
posture, on the issue's fleet behind the throttling proxy.

    make bench                                   # every benchmark, the issue's fleet
    HOLDFAST_BENCH_SCALE=0.1 .venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_controller.py

The fleet and the proxy are those of tests/bench/test_bench_scale.py (holdfast_fixtures.big_fleet,
holdfast_fixtures.throttle_proxy: Lambda 15/s for the control plane, Auto Scaling, ELB and
Application Auto Scaling on their own buckets). The controllers run in process as they run
in Lambda: each invocation with its own governed clients (holdfast.runtime.govern, the
budgets shared through the ledger), its own controller id, the handlers' own code paths:

- the detector (holdfast.handlers.detector.handle) receives capacity-class launch failures
  from the fleet's groups, one event at a time, in two zones; when the recorded signals
  turn the verdict impaired it starts a tick (its Lambda Invoke is answered in process, as
  Lambda's 202, and the reconciler invocation starts at once in a thread);
- the reconciler invocation is `tick(engage_seconds=` its Lambda time less the handler's
  margin `)`, as holdfast.handlers.reconciler gives it;
- the schedule starts an invocation every minute meanwhile (they overlap the long engaging
  tick and must leave it its walk); when no tick runs, the clock jumps to the next minute.

The clock is a fake one (holdfast.clock.FakeClock) moved by real time while calls run and
jumped over idle time: the schedule and the holds use it, the calls take real time.

Printed: time from the first qualifying signal to the verdict (the detector's), to the
first protective write, and to every resource in posture (its last protective write, and
the tick that recorded every engage walk done); per service the requests the proxy saw,
the throttles it answered and the minimum calls; the floor the quotas set for the calls
made and for the minimum calls (holdfast_fixtures.min_calls), their ratios; throttles
answered and surfaced as failures.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from datetime import datetime, timezone

import pytest
from botocore.awsrequest import AWSResponse

from holdfast.aws import Clients
from holdfast.clock import FakeClock
from holdfast.core.model import ENGAGED, FAILED
from holdfast.handlers import detector as detector_handler
from holdfast.handlers.reconciler import MARGIN_SECONDS
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.table import ensure_table
from holdfast.observation import collect as fresh_verdict
from holdfast.reconciler import tick
from holdfast.runtime import Runtime, govern
from holdfast.settings import Settings
from holdfast_fixtures import min_calls
from holdfast_fixtures.big_fleet import ISSUE_FLEET, build_big_fleet
from holdfast_fixtures.throttle_proxy import DEFAULT_LIMITS, ThrottleProxy
from tests.bench.test_bench_scale import FLOOR_BUCKET, THROTTLE_CODES, _all_kinds, _lambda_floor_ops, _model
from tests.scenarios.test_event import ENGAGED_MARKS
from tests.support import walks
from tests.support.factory import launch
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)

pytestmark = pytest.mark.benchmark

SCALE = float(os.environ.get("HOLDFAST_BENCH_SCALE", "1"))
KINDS = tuple(ISSUE_FLEET)
T0 = datetime(2025, 10, 20, 6, 48, tzinfo=timezone.utc)
LAMBDA_TIMEOUT = 900   # the reconciler's (holdfast_cdk/constructs/controllers.py)
ZONES = ("us-east-1a", "us-east-1b")
# The writes that put a resource in posture (not the write-ahead tags).
PROTECTIVE = {("autoscaling", "SuspendProcesses"), ("lambda", "UpdateEventSourceMapping"),
              ("lambda", "PutFunctionEventInvokeConfig"), ("lambda", "UpdateFunctionEventInvokeConfig"),
              ("elasticloadbalancing", "ModifyTargetGroupAttributes"),
              ("application-autoscaling", "RegisterScalableTarget")}
# The proxy's probes and the DNS probe need no network: the endpoints resolve.
SETTINGS = Settings.from_mapping({"mode": "auto", "lambda_writes_per_second": 15, "probe_api_services": [],
                                  "probe_endpoints": ["dynamodb.{region}.amazonaws.com"]})


class RunningClock(FakeClock):
    """A fake clock that real time moves while calls run; `advance` jumps over idle time."""

    def __init__(self, start: datetime):
        super().__init__(start)
        self._lock = threading.Lock()
        self._origin = time.perf_counter()
        self._jumped = 0.0
        self._start = start

    def _elapsed(self) -> float:
        return time.perf_counter() - self._origin + self._jumped

    def now(self) -> datetime:
        from datetime import timedelta
        return self._start + timedelta(seconds=self._elapsed())

    def monotonic(self) -> float:
        return self._elapsed()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._jumped += seconds

    def real(self) -> float:
        return time.perf_counter() - self._origin


class Writes:
    """When each protective write completed (real seconds on the clock), across invocations."""

    def __init__(self, clock: RunningClock):
        self.clock, self.lock = clock, threading.Lock()
        self.times: list[float] = []


class HookedClients(Clients):
    """Clients whose protective writes are timed (Writes)."""

    writes: Writes | None = None

    def __call__(self, service):
        client = super().__call__(service)
        if self.writes is not None and not getattr(client, "_bench_timed", False):
            name, writes = client.meta.service_model.signing_name, self.writes

            def after(model=None, http_response=None, **_):
                if (name, model.name) in PROTECTIVE and http_response is not None and http_response.status_code < 300:
                    with writes.lock:
                        writes.times.append(writes.clock.real())

            client.meta.events.register("after-call", after)
            client._bench_timed = True
        return client


class Controllers:
    """The deployed controllers, in process: detector invocations, reconciler invocations
    (the detector's and the schedule's), each with its own governed clients."""

    def __init__(self, url: str, clock: RunningClock, writes: Writes):
        self.url, self.clock, self.writes = url, clock, writes
        self.lock = threading.Lock()
        self.running: list[threading.Thread] = []
        self.results: list[tuple[str, float, float, object]] = []   # (controller, started, ended, TickResult)
        self.invocations = 0
        self.triggered_at: float | None = None

    def clients(self) -> Clients:
        clients = HookedClients(region="us-east-1", endpoint_url=self.url)
        clients.writes = self.writes
        return clients

    def runtime(self, controller: str, **extra) -> Runtime:
        runtime = Runtime(self.clients(), SETTINGS, DEFAULT_TABLE, self.clock, controller_id=controller, **extra)
        govern(runtime.clients, runtime.settings, table=runtime.table, member=controller)
        return runtime

    def invoke_reconciler(self, why: str) -> None:
        with self.lock:
            self.invocations += 1
            controller = f"reconciler-{self.invocations}-{why}"
        thread = threading.Thread(target=self._reconcile, args=(controller,), name=controller, daemon=True)
        with self.lock:
            self.running.append(thread)
        thread.start()

    def _reconcile(self, controller: str) -> None:
        started = self.clock.real()
        runtime = self.runtime(controller)
        collect = lambda rt, now, previous: fresh_verdict(rt, now, previous, resolver=lambda _h: ["127.0.0.1"])
        result = tick(runtime, collect=collect, engage_seconds=LAMBDA_TIMEOUT - MARGIN_SECONDS)
        with self.lock:
            self.results.append((controller, started, self.clock.real(), result))

    def busy(self) -> bool:
        with self.lock:
            self.running = [t for t in self.running if t.is_alive()]
            return bool(self.running)

    def detector(self) -> Runtime:
        runtime = self.runtime("detector", tick_function="arn:aws:lambda:us-east-1:123456789012:function:reconciler")

        def invoke(params=None, **_):
            self.triggered_at = self.clock.real() if self.triggered_at is None else self.triggered_at
            self.invoke_reconciler("detector")
            return AWSResponse(None, 202, {}, None), {"StatusCode": 202}

        runtime.clients("lambda").meta.events.register_first("before-call.lambda.Invoke", invoke)
        return runtime


def test_controller_path_signal_to_full_posture_behind_aws_rate_limits(moto_server, aws_semantics):
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for name in ("holdfast-reconciler", "holdfast-detector"):
        logging.getLogger(name).setLevel(logging.WARNING)
    moto_server.reset()
    direct = moto_server.clients()
    built = time.perf_counter()
    fleet = build_big_fleet(direct, scale=SCALE)
    counts = {k: len(fleet.selected[k]) for k in KINDS}
    ensure_table(direct("dynamodb"), DEFAULT_TABLE)
    print(f"\nfleet at scale {SCALE:g} built on moto in {time.perf_counter() - built:.1f} s: {counts} selected")
    plan = walks.engage_all(direct, Settings(), DEFAULT_TABLE, dry_run=True, kinds=KINDS)
    needs = _model(fleet, counts, [o.to_dict() for o in plan.outcomes], "planned")
    least = min_calls.engage(needs)
    groups = [arn.split("autoScalingGroupName/")[-1] for arn in fleet.selected["asg"]]

    with ThrottleProxy(moto_server.url) as proxy:
        clock = RunningClock(T0)
        writes = Writes(clock)
        ctl = Controllers(proxy.url, clock, writes)
        detector = ctl.detector()
        stop = threading.Event()

        def schedule() -> None:
            """Every minute on the clock, an invocation; idle minutes are jumped over."""
            next_at = 60.0
            while not stop.is_set():
                if clock.monotonic() >= next_at:
                    ctl.invoke_reconciler("schedule")
                    next_at += 60.0
                elif not ctl.busy() and ctl.invocations:
                    clock.advance(next_at - clock.monotonic())
                stop.wait(0.05)

        # Signals: one capacity-class failure at a time, groups alternating zones, until a tick starts.
        first_signal = clock.real()
        sent = 0
        for i, group in enumerate(groups):
            got = detector_handler.handle(launch(group, ZONES[i % 2], clock.now()), detector)
            sent += 1
            if got.get("trigger") == "started":
                break
        verdict_at = ctl.triggered_at
        assert verdict_at is not None, "the detector never started a tick"
        scheduler = threading.Thread(target=schedule, name="schedule", daemon=True)
        scheduler.start()
        deadline = time.perf_counter() + 3 * 3600
        posture_at = None
        snapshots = []   # (real seconds, requests, throttled): the calls made up to each moment
        try:
            while time.perf_counter() < deadline:
                snapshots.append((clock.real(), *proxy.snapshot()))
                done = ledger_plan.read(Ledger(direct("dynamodb"), DEFAULT_TABLE))
                if done is not None and done.done >= ENGAGED_MARKS:
                    posture_at = clock.real()
                    break
                time.sleep(0.25)
        finally:
            stop.set()
            scheduler.join()
            while ctl.busy():
                time.sleep(0.2)
        assert posture_at is not None, "full posture never recorded"
        total_requests, total_throttled = proxy.snapshot()

    # Every selected resource is in posture: a dry run straight on moto finds nothing to write.
    after = walks.engage_all(direct, Settings(), DEFAULT_TABLE, dry_run=True, kinds=KINDS)
    left = [o for o in after.outcomes if o.action == "planned"]
    outcomes = [o for _, _, _, r in ctl.results for o in r.outcomes]
    failed = [o for o in outcomes if o.action == FAILED]
    surfaced = Counter(next((c for c in THROTTLE_CODES if (o.error or "").startswith(c + ":")), "other") for o in failed)
    first_write, last_write = min(writes.times), max(writes.times)

    # The calls made until every resource was in posture (the first snapshot after the last
    # protective write): what the ticks did after it (the drain's first step) is not posture's.
    _, upto_requests, upto_throttled = next(((t, r, th) for t, r, th in snapshots if t >= last_write),
                                            (None, total_requests, total_throttled))
    arrived, throttled = Counter(), Counter()
    for (service, op), n in upto_requests.items():
        arrived[f"{service}:{op}"] += n
    for (service, op), n in upto_throttled.items():
        throttled[f"{service}:{op}"] += n
    min_ops = _all_kinds(least)

    def total(counter: Counter, service: str, floor_only: bool = False) -> int:
        if floor_only and service == "lambda":
            return _lambda_floor_ops(counter)
        return sum(n for op, n in counter.items() if op.split(":")[0] == service)

    print(f"signals sent: {sent} (capacity-class launch failures, {len(ZONES)} zones); "
          f"reconciler invocations: {ctl.invocations} ({sum(1 for c, *_ in ctl.results if 'detector' in c)} by the detector)")
    for controller, started, ended, result in sorted(ctl.results, key=lambda r: r[1]):
        print(f"  {controller:<28} {started - first_signal:7.1f} s -> {ended - first_signal:7.1f} s  "
              f"actions {result.actions[:8]} engaged {result.count(ENGAGED)} complete {result.complete}")
    print("calls until every resource was in posture (retries included), against the minimum:")
    print(f"  {'service':<24}{'requests':>10}{'throttled':>10}{'minimum':>9}{'rate/s':>8}{'floor(made) s':>15}{'floor(min) s':>14}")
    floors_made, floors_min = {}, {}
    for service in sorted({op.split(":")[0] for op in list(arrived) + list(min_ops)}):
        a, t, m = total(arrived, service), total(throttled, service), total(min_ops, service)
        bucket = DEFAULT_LIMITS.get(FLOOR_BUCKET.get(service, ""))
        fm = fn = None
        if bucket:
            admitted = total(arrived, service, True) - total(throttled, service, True)
            fm = floors_made[service] = min_calls.floor_seconds(admitted, bucket.rate, bucket.burst)
            fn = floors_min[service] = min_calls.floor_seconds(total(min_ops, service, True), bucket.rate, bucket.burst)
        print(f"  {service:<24}{a:>10}{t:>10}{m:>9}{(bucket.rate if bucket else ''):>8}"
              f"{(f'{fm:.1f}' if fm is not None else ''):>15}{(f'{fn:.1f}' if fn is not None else ''):>14}")
    floor_made, floor_min = max(floors_made.values()), max(floors_min.values())
    to_posture = last_write - first_signal
    print(f"time from the first qualifying signal: verdict {verdict_at - first_signal:.2f} s; first protective write "
          f"{first_write - first_signal:.2f} s ({first_write - verdict_at:.2f} s after the verdict; goal within 10 s); "
          f"every resource in posture (last protective write) {to_posture:.1f} s; every engage walk recorded done "
          f"{posture_at - first_signal:.1f} s")
    print(f"floor the quotas set for the calls made: {floor_made:.1f} s ({max(floors_made, key=floors_made.get)}); "
          f"for the minimum calls: {floor_min:.1f} s ({max(floors_min, key=floors_min.get)})")
    print(f"time to posture / floor(calls made) = {to_posture / floor_made:.2f}; "
          f"/ floor(minimum) = {to_posture / floor_min:.2f} (goal: within 1.15 of the minimum's floor)")
    print(f"throttles answered by the proxy: {dict(sorted(proxy.by_service(total_throttled).items()))} in all, "
          f"{dict(sorted(proxy.by_service(upto_throttled).items()))} until posture; failed outcomes: "
          f"{len(failed)}, of them for throttling: {sum(n for c, n in surfaced.items() if c != 'other')}; "
          f"resources a dry run still finds out of posture: {len(left)}")
    for o in failed[:5]:
        print(f"    failed: {o.kind} {o.arn}: {o.error}")
    assert not left, [o.arn for o in left[:5]]
