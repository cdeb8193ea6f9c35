"""Benchmark: draining a 172-minute backlog, in the deterministic recovery model.

Run with `make bench` (or `.venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_drain.py`).
Figures are printed, never asserted; the anchors the model must reproduce are tested in
tests/drain/test_recovery_model.py.

Scenarios (holdfast_fixtures.recovery_model), each with its lower bound (the backlog at the
full rate of every second from the end of the outage: the consumers' or the database's
knee, nothing while the database is down):

- the seeds' arithmetic without a knee; a knee at 30 req/s with timeouts and one retry; 40;
- batch item failures (ReportBatchItemFailures: Errors 0 while every message fails), the
  database back 20 minutes after the pollers;
- the baseline window in a retry storm (the database failed 20 minutes before the hold);
- a knee four times the pre-event load;
- the knee dropping 40 % an hour into the drain;
- arrivals doubling at recovery;
- metrics 3–5 minutes late; and the knee drop with late metrics;
- and, marked "untuned", consumers and downstreams no constant was tuned on
  (holdfast_fixtures.recovery_model.UNTUNED): own work dwarfing the database call, a fast
  function, a knee 10 % above the arrivals, a knee 8× the pre-event load, a knee that
  rises, arrivals tripling, the database down 5 minutes mid-drain, a redrive policy of 2.

Strategies, each driven by Holdfast's real code: the controller
(holdfast.core.drain.advance, what the reconciler's drain stage runs per mapping)
at its defaults, with no downstream alarm named — the built-in evidence only — and the
same with the owner's latency alarms (a warning at 150 ms, the SLO at 250 ms) named; for
the first three also the fixed ladder Holdfast shipped before the controller and the ideal
fixed cap (found by running the model around the hidden knee).

Per run: the time until the oldest-message age is back at baseline (within 10 s) ÷ the
lower bound, and ÷ the lower bound of a drain that can start only once the outage's first
minute is readable (published and complete: 3–4 minutes after it, 5–6 with late metrics);
peak load on the database ÷ its knee; one-minute latency datapoints above the SLO (past
the knee far enough to matter) and seconds over it, the database up and past the
`max_wait` seconds of requests it queued while down (then no cap helps); messages
dead-lettered after the outage with the database up (by the drain's pacing); whether it
collapsed (a minute or more, the database up, with the consumers busy and nothing
succeeding); and the cap the drain started from ÷ the knee's concurrency (in brackets its
first slow-start probe, one minute one step above it).
"""

from __future__ import annotations

import time

import pytest

from holdfast.core import drain as dc
from holdfast_fixtures.drain_strategies import Controller, Ladder, first_readable, ideal_cap
from holdfast_fixtures.recovery_model import (
    ARITHMETIC, CLASSES, SCENARIOS, STORM, UNTUNED, bronson, caught_up_at, outcome, recovers_below, simulate,
)

HEADER = ["scenario", "bound", "strategy", "time ÷ bound", "÷ bound once readable", "peak ÷ knee", "SLO datapoints", "s over SLO", "dead-lettered",
          "collapsed", "start ÷ knee"]


def _row(scenario, o, start, probe=None) -> list[str]:
    ratio = "never" if o.ratio is None else f"{o.ratio:.3f}"
    peak = "—" if o.peak_load_over_knee is None else f"{o.peak_load_over_knee:.2f}"
    knee = scenario.knee_concurrency() if scenario.downstream.capacity is not None else None
    begin = "—" if start is None or not knee else f"{start / knee:.2f}"
    if probe is not None and knee:
        begin += f" (probe {probe / knee:.2f})"
    readable = scenario.lower_bound_seconds(first_readable(scenario))
    late = "never" if o.caught_up_after is None else f"{o.caught_up_after / readable:.3f}"
    return [scenario.name, f"{o.bound_seconds / 60:.0f} min", o.strategy, ratio, late, peak, str(o.datapoints_over_slo),
            f"{o.seconds_over_slo:,}", f"{o.dead_lettered:,.0f}", "yes" if o.collapsed else "no", begin]


def _start(controller: Controller) -> int | None:
    """The cap the drain starts from (its first one-minute probe goes one slow-start step
    above it: `_probe`)."""
    s = next((s for _, s in controller.decisions if s.action == dc.START), None)
    return None if s is None else s.drain.state.probe_from or s.cap


def _probe(controller: Controller) -> int | None:
    s = next((s for _, s in controller.decisions if s.action == dc.START), None)
    return None if s is None or s.drain.state.probe_from is None else s.cap


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


def _print(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows + [HEADER]) for i in range(len(HEADER))]
    for r in [HEADER] + rows:
        print("  " + "  ".join(str(v).ljust(w) if i < 3 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths))))


@pytest.mark.benchmark
def test_bench_drain():
    started = time.perf_counter()
    _anchors()
    rows, results = [], []
    for scenario in SCENARIOS + CLASSES + UNTUNED:
        for alarms in (False, True):
            controller = Controller(scenario, alarms=alarms)
            model = simulate(scenario, controller)
            o = outcome(model, controller.name)
            rows.append(_row(scenario, o, _start(controller), _probe(controller)))
            results.append((scenario, alarms, o, _start(controller), controller, model))
        if scenario in SCENARIOS:
            ladder = Ladder(scenario)
            rows.append(_row(scenario, outcome(simulate(scenario, ladder), "fixed ladder (before the controller)"), None))
            cap, ideal_model = ideal_cap(scenario)
            rows.append(_row(scenario, outcome(ideal_model, f"fixed cap {cap} (ideal)"), cap))
    print("\nthe drain, per scenario (bound: the lower bound on the time to drain):")
    _print(rows)

    for scenario, alarms, o, start, controller, model in results:
        f = controller.forecast
        caught = caught_up_at(model)
        if scenario is ARITHMETIC and not alarms and f and f.forecast_seconds is not None and caught is not None:
            actual = caught - f.started_at
            print(f"\n{scenario.name}: drain started {(f.started_at - scenario.outage_end) / 60:.0f} min after the outage; "
                  f"forecast then {f.forecast_seconds / 60:.0f} min, actual {actual / 60:.0f} min "
                  f"({f.forecast_seconds / actual - 1:+.0%})")

    print("\ngoals:")
    for scenario, alarms, o, start, controller, model in results:
        knee = scenario.knee_concurrency() if scenario.downstream.capacity is not None else None
        limit = 1.10 if alarms else 1.20
        checks = [
            (f"≤ {limit:.2f}× bound", o.ratio is not None and o.ratio <= limit),
            ("no collapse", not o.collapsed),
            ("≤ 1 datapoint over the SLO", o.datapoints_over_slo <= 1),
            ("nothing dead-lettered", o.dead_lettered == 0),
        ]
        if scenario is STORM and knee:
            checks.append(("started below the knee", start is not None and start <= knee))
        label = ("owner's alarms" if alarms else "defaults, no alarm") + (", untuned" if scenario in UNTUNED else "")
        print(f"  {scenario.name} ({label}): " + ", ".join(f"{what} {'met' if ok else 'MISSED'}" for what, ok in checks))
    print(f"({time.perf_counter() - started:.1f} s)")
