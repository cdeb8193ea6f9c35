"""The controller at its defaults, no alarm named, on consumers its constants were not
tuned on (holdfast_fixtures.recovery_model.UNTUNED), run through the recovery model.

Each case was a defect of the controller before: full batches at 70 % of the function's
timeout at the baseline speed read as a permanent warning and stepped the cap down to
the floor (it never drained); a knee 10 % above the arrivals was crossed every half hour
by a raise from just under the warning (175 minutes over the SLO); and a consumer whose
own work dwarfs its database call showed the knee as 3 % of the time per message, so an
11 % raise went past the SLO (79 minutes over it). And with the raise band that fixed those
two, a function whose own work turns 5 % slower at every cap (not the drain's load) was
held in the band for ever. The goodput rule that replaced the band holds each of them
to the goal: within 1.20× the bound, and at most one datapoint over the SLO for each
one-minute probe past the knee (a knee is re-probed after the memory of its plateau ends,
as the downstream may have grown)."""

from __future__ import annotations

import pytest

from holdfast_fixtures.drain_strategies import Controller
from holdfast_fixtures.recovery_model import FAST_WORK, NEAR_ARRIVALS, OWN_SLOWDOWN, SLOW_WORK, outcome, simulate


@pytest.mark.parametrize("scenario", [SLOW_WORK, NEAR_ARRIVALS, FAST_WORK, OWN_SLOWDOWN], ids=lambda s: s.name)
def test_the_defaults_drain_within_the_goal_with_at_most_one_minute_over_the_slo_per_knee_crossed(scenario):
    controller = Controller(scenario)
    o = outcome(simulate(scenario, controller), controller.name)
    knee = scenario.knee_concurrency()
    crossed = sum(1 for _, s in controller.decisions
                  if s.drain.state is not None and s.drain.state.probe_at is not None and s.cap is not None and s.cap > knee)
    assert o.ratio is not None and o.ratio <= 1.20, o
    assert o.datapoints_over_slo <= max(1, crossed) and o.dead_lettered == 0 and not o.collapsed, (o, crossed)
