"""Whether Holdfast holds a Region, from the plan alone (holdfast.core.evacuation.posture):
the engage step's success condition, as a table."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from holdfast.core.evacuation import Evacuation, holding, posture
from holdfast.core.policy import DRAIN, HOLD, NORMAL, Plan
from holdfast.settings import Settings

T0 = datetime(2025, 10, 20, 7, 0, tzinfo=timezone.utc)
SETTINGS = Settings.from_mapping({"mode": "auto"})
EVERY = frozenset({"asg", "async", "nlb", "scalable-target", "esm/engaged"})


@pytest.mark.parametrize("plan, engaged, waiting", [
    (None, False, ()),
    (Plan(generation=3, stage=NORMAL), False, ()),
    (Plan(generation=4, stage=HOLD, entered_at=T0, impaired_at=T0), False,
     ("asg", "esm/engaged", "async", "nlb", "scalable-target")),
    (Plan(generation=4, stage=HOLD, entered_at=T0, impaired_at=T0, done=EVERY - {"nlb"}), False, ("nlb",)),
    (Plan(generation=4, stage=HOLD, entered_at=T0, impaired_at=T0, done=EVERY), True, ()),
    # A step back into hold keeps the drains it had: no mapping engage to wait for.
    (Plan(generation=7, stage=HOLD, entered_at=T0 + timedelta(hours=1), impaired_at=T0, stepped_back=True,
          done=EVERY - {"esm/engaged"}), True, ()),
    # Lifting: not held, whatever is done.
    (Plan(generation=5, stage=DRAIN, entered_at=T0, impaired_at=T0, done=EVERY), False, ()),
])
def test_posture(plan, engaged, waiting):
    got = posture(plan, SETTINGS)
    assert (got.engaged, got.waiting) == (engaged, waiting)


def test_an_evacuation_holds_only_a_plan_in_hold():
    evacuation = Evacuation("arn:aws:arc-region-switch::123456789012:plan/orders:abc123", "e-1", "rs", T0.isoformat())
    assert holding([evacuation], Plan(generation=2, stage=HOLD, entered_at=T0, impaired_at=T0)) == (evacuation,)
    assert holding([evacuation], Plan(generation=3, stage=DRAIN, entered_at=T0)) == ()
    assert holding([evacuation], None) == ()
