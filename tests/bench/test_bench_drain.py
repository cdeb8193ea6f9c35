"""Benchmark: draining a 172-minute backlog, in the deterministic recovery model.

Run with `make bench` (or `.venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_drain.py`).
Figures are printed, never asserted; the anchors the model must reproduce are tested in
tests/drain/test_recovery_model.py.

Three scenarios (holdfast_fixtures.recovery_model): the seeds' arithmetic without a knee;
a database with a knee at 30 req/s (1,800 msg/min), timeouts and one retry; the same
with the knee at 40 req/s. Three strategies, each driven by Holdfast's real code:

- the fixed ladder: holdfast.core.policy.decide / posture with default Settings (floor 2,
  steps 5, 20, 100, 300, then the owner's value — here no cap; 10 min holds; the launch
  verdict's 15 min quiet window) and no gating alarm;
- the controller: holdfast.core.drain_control with its default Constants;
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
from holdfast_fixtures.recovery_model import SCENARIOS, caught_up_at, outcome, simulate


def _fmt(o) -> list[str]:
    ratio = "never" if o.ratio is None else f"{o.ratio:.3f}"
    peak = "—" if o.peak_load_over_knee is None else f"{o.peak_load_over_knee:.2f}"
    return [ratio, peak, f"{o.seconds_over_slo:,}", f"{o.dead_lettered:,.0f}", "yes" if o.collapsed else "no"]


@pytest.mark.benchmark
def test_bench_drain():
    started = time.perf_counter()
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
