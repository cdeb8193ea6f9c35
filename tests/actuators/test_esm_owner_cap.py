"""A cap the owner sets on an engaged mapping survives every drain step and the restore.

Found by the demo's replay: at 03:00 the owner raised one mapping from the floor to 40
by hand (original 500); the drain stage's step to 100 then wrote 100 over it, and the
restore put 500 back, so the owner's change was lost without a report (invariant 2).
"""

from __future__ import annotations

import pytest

from holdfast.core.model import ALREADY, DRIFT_KEPT, RAISED
from tests.actuators.fleet import make_function, make_mapping
from tests.actuators.test_kinds import mapping, run

pytestmark = pytest.mark.usefixtures("aws_semantics")


def test_drain_steps_and_restore_keep_the_owners_cap(clients, ledger_table, settings):
    fn = make_function(clients, "consumer")
    drifted = make_mapping(clients, fn, "q-drifted", cap=500)
    other = make_mapping(clients, fn, "q-other", cap=500)
    run(clients, settings, ledger_table, "esm")
    clients("lambda").update_event_source_mapping(UUID=drifted["UUID"], ScalingConfig={"MaximumConcurrency": 40})

    for step in (5, 20, 100, 300):
        out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=lambda r, s=step: {"MaximumConcurrency": s})
        assert out[drifted["EventSourceMappingArn"]].action == ALREADY
        assert out[other["EventSourceMappingArn"]].action == RAISED
        assert mapping(clients, drifted["UUID"])[0] == {"MaximumConcurrency": 40}
        assert mapping(clients, other["UUID"])[0] == {"MaximumConcurrency": step}

    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    restored = out[drifted["EventSourceMappingArn"]]
    assert restored.action == DRIFT_KEPT
    assert restored.drift["MaximumConcurrency"]["current"] == 40
    assert mapping(clients, drifted["UUID"])[0] == {"MaximumConcurrency": 40}
    assert mapping(clients, other["UUID"])[0] == {"MaximumConcurrency": 500}
