"""A cap the owner sets on an engaged mapping survives every drain step and the restore.

Found by the demo's replay: at 03:00 the owner raised one mapping from the floor to 40
by hand (original 500); the drain stage's step to 100 then wrote 100 over it, and the
restore put 500 back, so the owner's change was lost without a report (an owner's change is kept and reported).
"""

from __future__ import annotations

import pytest

from holdfast.core.model import ALREADY, DRIFT_KEPT, RAISED
from tests.actuators.test_kinds import mapping, run
from tests.support.fleet import make_function, make_mapping

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


def test_the_controller_moves_a_cap_both_ways_never_above_the_owners_and_restores_clean(clients, ledger_table, settings):
    """The drain's controller raises and cuts: a partial relax writes either way, capped at
    the owner's own cap, and every value it wrote stays Holdfast's, so the restore puts the
    original back with no drift reported."""
    fn = make_function(clients, "consumer")
    uncapped = make_mapping(clients, fn, "q-uncapped")
    owned = make_mapping(clients, fn, "q-owned", cap=20)
    run(clients, settings, ledger_table, "esm")
    for n, want_uncapped, want_owned in ((16, 16, 16), (24, 24, 20), (16, 16, 16), (12, 12, 12)):
        run(clients, settings, ledger_table, "esm", "relax", target_for=lambda r, n=n: {"MaximumConcurrency": n})
        assert mapping(clients, uncapped["UUID"])[0] == {"MaximumConcurrency": want_uncapped}
        assert mapping(clients, owned["UUID"])[0] == {"MaximumConcurrency": want_owned}
    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    assert {o.action for o in out.values()} == {"restored"}
    assert mapping(clients, uncapped["UUID"])[0] in ({}, None)
    assert mapping(clients, owned["UUID"])[0] == {"MaximumConcurrency": 20}


def test_a_partial_relax_outside_lambdas_range_is_refused(clients, ledger_table, settings):
    from holdfast.actuators.esm import EsmActuator
    from holdfast.core.model import Record

    act = EsmActuator(clients, settings, None)
    record = Record("esm", "arn", {"MaximumConcurrency": None}, {"MaximumConcurrency": 2})
    for bad in ({"MaximumConcurrency": 1}, {"MaximumConcurrency": 1001}, {"MaximumConcurrency": True}, {"Other": 5}):
        with pytest.raises(ValueError, match="relaxes to"):
            act.partial(record, {"MaximumConcurrency": 2}, bad)
