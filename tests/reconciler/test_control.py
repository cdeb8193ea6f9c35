"""Operator control: the kill switch, `advance`, `stage`, modes recommend and off,
and the Lambda entry point."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

from holdfast.cli import main
from holdfast.core.policy import DRAIN, HOLD
from holdfast.handlers import reconciler as handler_module
from holdfast.ledger import Ledger
from tests.scenarios.test_races import recover, run_to
from tests.support.harness import Harness


def cli(capsys, *argv):
    capsys.readouterr()  # drop the ticks' EMF lines
    code = main(["--json", *argv])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


def test_pause_stops_every_write_from_the_next_tick_and_unpause_resumes(harness, capsys):
    h = harness
    h.script.set("impaired", h.clock.now())
    code, doc = cli(capsys, "pause", "--reason", "game day", "--yes")
    assert code == 0 and doc["paused"] is True
    result = h.tick("A")
    assert result.actions == ["paused"] and h.engine.mutations == 0 and h.plan() is None
    code, doc = cli(capsys, "stage")
    assert code == 0 and doc["paused"] and doc["pause"]["reason"] == "game day"
    assert cli(capsys, "unpause", "--yes")[0] == 0
    h.tick("A")
    assert h.plan().stage == HOLD and h.engine.mutations > 0


def test_pause_mid_event_freezes_the_plan_and_the_resources(harness, capsys):
    h = harness
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)
    recover(h)
    cli(capsys, "pause", "--yes")
    before = (h.plan(), list(h.world.writes))
    for _ in range(30):
        h.minutes(1)
        h.tick("A")
    assert (h.plan(), h.world.writes) == before


def test_advance_skips_the_hold_of_the_current_generation(harness, capsys, monkeypatch):
    h = harness
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: h.clock)
    assert cli(capsys, "advance", "--yes")[0] == 1          # nothing to advance in normal
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)
    recover(h)
    h.tick("A")
    code, doc = cli(capsys, "stage")
    assert doc["stage"] == HOLD and any(g.startswith("hold:") for g in doc["next"]["gates"])
    assert cli(capsys, "advance", "--generation", str(h.plan().generation + 1), "--yes")[0] == 1   # stale view refused
    code, doc = cli(capsys, "advance", "--yes")
    assert code == 0 and doc["generation"] == 1
    h.tick("A")
    assert h.plan().stage == DRAIN and "hold skipped by operator" in h.plan().reasons[0]


def test_stage_text_names_what_gates_the_next_stage(harness, capsys):
    h = harness
    h.script.set("impaired", h.clock.now())
    h.tick("A")
    capsys.readouterr()
    assert main(["stage"]) == 0
    text = capsys.readouterr().out
    assert "hold  (generation 1)" in text and "gate      verdict is impaired" in text


def test_recommend_decides_and_writes_nothing_to_resources(clients, ledger_table):
    h = Harness(clients, ledger_table, settings=replace(Harness.__init__.__defaults__[0], mode="recommend"))
    h.script.set("impaired", h.clock.now())
    result = h.tick("A")
    assert h.plan().stage == HOLD and h.plan().mode == "recommend"
    assert h.engine.mutations == 0 and not h.world.writes
    assert result.count("planned") == len(h.world.resources)


def test_off_does_nothing(clients, ledger_table):
    h = Harness(clients, ledger_table, settings=replace(Harness.__init__.__defaults__[0], mode="off"))
    h.script.set("impaired", h.clock.now())
    before = dict(clients.calls)
    assert h.tick("A").actions == ["off"]
    assert dict(clients.calls) == before and h.engine.mutations == 0 and h.plan() is None


def test_the_handler_builds_its_shell_lazily_and_ticks(clients, ledger_table, monkeypatch):
    calls = []
    monkeypatch.setattr("holdfast.reconciler.tick", lambda runtime, **kw: calls.append(runtime) or SimpleNamespace(
        stage="hold", generation=3, actions=["plan:3"], complete=True, outcomes=[]))
    handler_module.use(None)
    context = SimpleNamespace(function_name="f", memory_limit_in_mb=256, invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:f",
                              aws_request_id="r", log_stream_name="2025/10/20/[$LATEST]abc")
    try:
        assert handler_module.handler({}, context) == {"stage": "hold", "generation": 3, "actions": ["plan:3"], "complete": True, "outcomes": 0}
    finally:
        handler_module.use(None)
    assert [r.controller_id for r in calls] == ["2025/10/20/[$LATEST]abc"]


def test_an_engage_request_starts_a_hold_at_the_next_tick_and_acts_once(harness):
    """`holdfast engage --all-accounts` writes only CONTROL/ENGAGE (what HoldfastOperator may
    write): the reconciler's next tick starts a hold from it with its own role, although
    no signal says impaired, and lifts it in stages as any hold. The request names the
    plan its operator saw, so it does not hold the region again once that plan moved on."""
    from holdfast.ledger import control as ledger_control

    h = harness
    h.script.set("normal", h.clock.now())
    h.tick("A")
    assert h.plan() is None or h.plan().stage != HOLD
    seen = h.plan().generation if h.plan() else 0
    assert ledger_control.request_engage(Ledger(h.observer("dynamodb"), h.table), by="oncall", reason="region looks bad", now=h.clock.now()) == seen
    h.tick("A")
    held = h.plan()
    assert held.stage == HOLD and held.generation == seen + 1
    assert held.reasons[0] == "engaged by oncall: region looks bad" and h.engine.mutations > 0
    # The verdict recovers and the hold moves on; the old request does not pull it back.
    recover(h)
    for _ in range(40):
        h.minutes(1)
        h.tick("A")
    assert h.plan().stage != HOLD and h.plan().generation > held.generation


def test_an_engage_request_for_a_plan_that_moved_on_does_nothing(harness):
    from holdfast.ledger import control as ledger_control

    h = harness
    h.script.set("normal", h.clock.now())
    ledger_control.request_engage(Ledger(h.observer("dynamodb"), h.table), by="oncall", reason="stale", now=h.clock.now())
    h.script.set("impaired", h.clock.now())
    run_to(h, HOLD)                     # a tick decided first: generation 1
    recover(h)
    for _ in range(40):
        h.minutes(1)
        h.tick("A")
    assert all("engaged by" not in r for r in h.plan().reasons) and h.plan().stage != HOLD
