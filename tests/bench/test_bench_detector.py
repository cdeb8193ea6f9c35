"""Benchmark: the detector over 10,000 signals in its window, and the handler per event.

Run with `.venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_detector.py`.
Figures are printed, never asserted.

- detector: `evaluate` over 10,000 signals inside one lookback (capacity and
  configuration failures from 200 groups in 3 zones, successful launches, and four
  probe targets once a tick), in the three situations that cost differently: impaired
  (stops at the first reason), impaired-holding (walks the probe history to find where
  quiet began) and normal.
- handler: one EventBridge event parsed, classified and put conditionally into the
  ledger, on moto in-process (moto's DynamoDB answers in well under a millisecond of
  network; on AWS the conditional PutItem's few milliseconds dominate).
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

import pytest

from holdfast.core.detector import IMPAIRED, NORMAL, Verdict, evaluate
from holdfast.handlers import detector as handler_module
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from tests.support.factory import BAD_AMI, capacity, config, launch, launched, probe, utc

NOW = utc(2025, 10, 20, 7, 0)
SETTINGS = Settings()
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TARGETS = ("dns:dynamodb.us-east-1.amazonaws.com", "dns:ec2.us-east-1.amazonaws.com", "api:dynamodb", "api:ec2")


def window_of_signals(n: int, *, capacity_share: float, probes_failing: bool):
    span = SETTINGS.detect_window_minutes * 60
    signals = []
    for i in range(n):
        at = NOW - timedelta(seconds=(i * 7919) % span)
        g, z = f"group-{i % 200}", ZONES[i % 3]
        r = (i % 100) / 100
        if i % 10 == 0:
            signals.append(probe(TARGETS[i % 4], not probes_failing, at))
        elif r < capacity_share:
            signals.append(capacity(g, z, at, n=i))
        elif r < capacity_share + 0.3:
            signals.append(config(g, z, at, n=i))
        else:
            signals.append(launched(g, z, at - timedelta(microseconds=i)))
    return signals


def timed(fn, repeat=5):
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - start)
    return result, min(runs), statistics.median(runs)


@pytest.mark.benchmark
def test_detector_over_10000_signals():
    impaired_before = Verdict(IMPAIRED, NOW - timedelta(hours=1), (), None, None)
    cases = [
        ("capacity failures, normal -> impaired", window_of_signals(10_000, capacity_share=0.6, probes_failing=False), None),
        ("no capacity failure, impaired -> recovering", window_of_signals(10_000, capacity_share=0.0, probes_failing=False), impaired_before),
        ("configuration only, normal", window_of_signals(10_000, capacity_share=0.0, probes_failing=False), None),
    ]
    print()
    for label, signals, previous in cases:
        assert len(signals) == 10_000
        verdict, best, median = timed(lambda: evaluate(signals, previous, SETTINGS, NOW))
        print(f"detector  {label:42s} -> {verdict.state:10s} best {best * 1000:7.1f} ms  median {median * 1000:7.1f} ms")
    assert verdict.state == NORMAL


@pytest.mark.benchmark
def test_handler_per_event(clients, ledger_table, capsys):
    handler_module.use(Runtime(clients, SETTINGS, ledger_table))
    level = handler_module.logger.log_level
    handler_module.logger.setLevel("WARNING")  # its info lines would drown the figures
    try:
        events = [launch(f"group-{i % 50}", ZONES[i % 3], NOW + timedelta(seconds=i), n=i,
                         message=BAD_AMI if i % 2 else None) for i in range(500)]
        handler_module.handle(events[0], handler_module._runtime)  # warm: moto's model loads once
        per_event = []
        for event in events[1:]:
            start = time.perf_counter()
            handler_module.handle(event, handler_module._runtime)
            per_event.append(time.perf_counter() - start)
        start = time.perf_counter()
        duplicate = handler_module.handle(events[1], handler_module._runtime)
        dup_time = time.perf_counter() - start
    finally:
        handler_module.use(None)
        handler_module.logger.setLevel(level)
        handler_module.metrics.clear_metrics()
        capsys.readouterr()  # the handler's own log lines and metrics: not the figures
    assert duplicate["outcome"] == "duplicate"
    per_event.sort()
    with capsys.disabled():
        print(f"\nhandler   {len(per_event)} events: median {statistics.median(per_event) * 1000:.2f} ms, "
              f"p95 {per_event[int(len(per_event) * 0.95)] * 1000:.2f} ms; a duplicate {dup_time * 1000:.2f} ms (moto in-process)")
