"""Benchmark: draining a 172-minute backlog, in the deterministic recovery model.

Run with `make bench` (or `.venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_drain.py`).
Figures are printed, never asserted; the anchors the model must reproduce are tested in
tests/drain/test_recovery_model.py.

Three scenarios (holdfast_fixtures.recovery_model): the seeds' arithmetic without a knee;
a database with a knee at 30 req/s (1,800 msg/min), timeouts and one retry; the same
with the knee at 40 req/s. Three strategies, each driven by Holdfast's real code:

- the fixed ladder Holdfast shipped before the per-mapping controller: the real stage policy's hold (the
  launch verdict's 15 min quiet window, a 10 min hold), then floor 2, steps 5, 20, 100,
  300 one per hold, then the owner's value — here no cap — and no gating alarm (the
  ladder is reproduced in holdfast_fixtures.drain_strategies: the shipped policy no longer
  has it);
- the controller: holdfast.core.drain_control.advance (what the reconciler's drain stage
  runs per mapping) with its default Constants, which are the default settings;
- the same controller where the database has only its SLO alarm, no warning alarm;
- a fixed cap at the ideal value, found by running the model around the hidden knee.

Per strategy: the time until the oldest-message age is back at baseline (within 10 s)
as a ratio to the lower bound (backlog ÷ spare capacity, from the end of the outage),
peak load on the database ÷ its knee, seconds over the latency SLO (250 ms), messages
dead-lettered (maxReceiveCount 5), and whether it collapsed (a minute or more with the
consumers busy and nothing succeeding).

Goals: the controller within 1.10× of the bound in all three, never collapsing, no more
seconds over the SLO than the ideal fixed cap, nothing dead-lettered by its pacing.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from holdfast_fixtures.drain_strategies import Controller, Fixed, Ladder, ideal_cap
from holdfast_fixtures.recovery_model import ARITHMETIC, SCENARIOS, bronson, caught_up_at, outcome, recovers_below, simulate


def _fmt(o) -> list[str]:
    ratio = "never" if o.ratio is None else f"{o.ratio:.3f}"
    peak = "—" if o.peak_load_over_knee is None else f"{o.peak_load_over_knee:.2f}"
    return [ratio, peak, f"{o.seconds_over_slo:,}", f"{o.dead_lettered:,.0f}", "yes" if o.collapsed else "no"]


def _within(measured, caught: int, tolerance: float) -> int | None:
    """The first second from which every measured forecast is within `tolerance` of the
    time actually left (until an hour before the end, where any error is a large share)."""
    first = None
    for t, seconds in measured:
        left = caught - t
        if left < 3600:
            break
        ok = seconds is not None and abs(seconds / left - 1) <= tolerance
        first = (first if first is not None else t) if ok else None
    return first


def _anchors() -> None:
    """The published anchors, measured from the model's own output (tests/drain asserts them)."""
    seeds = simulate(ARITHMETIC, None)
    backlog = seeds.backlog_at(ARITHMETIC.outage_end)
    drained = (caught_up_at(seeds) - ARITHMETIC.outage_end) / 60
    print(f"\nanchors: the seeds' arithmetic: {backlog:,.0f} messages after the 172-minute outage (206,400), "
          f"drained in {drained:.0f} min at full speed (344)")
    healthy = bronson(lambda t: 280.0, seconds=600)
    tipped = bronson(lambda t: 280.0, seconds=1800, outage=(60, 10))
    print(f"anchors: Bronson et al.: 280 qps on a 300 qps database: goodput {healthy.goodput[-1]:.0f} qps; "
          f"after a 10 s spike: load {min(tipped.load[300:]):.0f} qps, goodput {max(tipped.goodput[300:]):.0f} "
          f"(sustained failure); recovers only below {recovers_below(range(100, 201, 2))} qps (about 150)")


@pytest.mark.benchmark
def test_bench_drain():
    started = time.perf_counter()
    _anchors()
    header = ["strategy", "time ÷ bound", "peak ÷ knee", "s over SLO", "dead-lettered", "collapsed"]
    goals = []
    for scenario in SCENARIOS:
        rows = []
        ladder = Ladder(scenario)
        o_ladder = outcome(simulate(scenario, ladder), ladder.name)
        controller = Controller(scenario)
        model = simulate(scenario, controller)
        o_ctl = outcome(model, controller.name)
        cap, ideal_model = ideal_cap(scenario)
        o_ideal = outcome(ideal_model, f"fixed cap {cap} (ideal)")
        bare = replace(scenario, latency_warning=None)
        o_bare = outcome(simulate(bare, Controller(bare)), "controller, SLO alarm only")
        for o in (o_ladder, o_ctl, o_bare, o_ideal):
            rows.append([o.strategy, *_fmt(o)])
        widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
        print(f"\n{scenario.name}: backlog {scenario.backlog:,.0f}, bound {scenario.lower_bound_seconds() / 60:.0f} min")
        for r in [header] + rows:
            print("  " + "  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
        f = controller.forecast
        caught = caught_up_at(model)
        if f and f.forecast_seconds is not None and caught is not None:
            actual = caught - f.started_at
            print(f"  controller: drain started {(f.started_at - scenario.outage_end) / 60:.0f} min after the outage; "
                  f"forecast then {f.forecast_seconds / 60:.0f} min, actual {actual / 60:.0f} min ({f.forecast_seconds / actual - 1:+.0%}); "
                  f"cuts {sum(1 for _, d in controller.decisions if d.action == 'cut')}, final cap {controller.state.cap}")
            later = controller.later
            if later and later.forecast_seconds is not None:
                left = caught - later.started_at
                print(f"  controller: 30 min in, on measured NumberOfMessagesDeleted: forecast {later.forecast_seconds / 60:.0f} min, "
                      f"actual {left / 60:.0f} min ({later.forecast_seconds / left - 1:+.0%})")
            trusted = _within(controller.measured, caught, 0.15)
            if trusted is not None:
                print(f"  controller: the measured forecast is within ±15 % of the time left from "
                      f"{(trusted - f.started_at) / 60:.0f} min into the drain on")
        goals.append((scenario.name, o_ctl, o_ideal))
    print("\ngoals for the controller:")
    for name, o, ideal in goals:
        checks = [
            ("≤ 1.10× bound", o.ratio is not None and o.ratio <= 1.10),
            ("no collapse", not o.collapsed),
            ("s over SLO ≤ ideal's", o.seconds_over_slo <= ideal.seconds_over_slo),
            ("nothing dead-lettered", o.dead_lettered == 0),
        ]
        print(f"  {name}: " + ", ".join(f"{label} {'met' if ok else 'MISSED'}" for label, ok in checks))
    print(f"({time.perf_counter() - started:.1f} s)")
