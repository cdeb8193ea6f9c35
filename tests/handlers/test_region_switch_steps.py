"""The Region switch steps against moto (the ledger) and the real reconciler (its engine
faked, as in tests/reconciler): an evacuation engages the Region being left, holds it
through a recovered verdict, and the post-recovery lift starts the staged lift; bad
input is refused with nothing written."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from holdfast.core.evacuation import StepPending, StepRefused
from holdfast.core.policy import DRAIN, HOLD
from holdfast.handlers import region_switch as handler
from holdfast.settings import Settings
from tests.scenarios.test_races import recover
from tests.support.harness import Harness

ACCOUNT, REGION = "123456789012", "us-east-1"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:holdfast-region-switch"
PLAN = f"arn:aws:arc-region-switch::{ACCOUNT}:plan/evacuate:abc123"
RECONCILER = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:holdfast-reconciler"


SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30})


@pytest.fixture
def harness(clients, ledger_table) -> Harness:
    return Harness(clients, ledger_table, settings=SETTINGS)


def event(step, *, execution="exec-1", plan=PLAN, **body):
    """What Region switch sends: the step's payload with its metadata merged in."""
    payload = {"holdfast": {"step": step, "region": REGION, "account": ACCOUNT, **body}}
    return {**payload, "InvokedBy": "arc-region-switch", "PlanArn": plan, "ExecutionId": execution,
            "StepName": f"holdfast-{step}"}


def items(h):
    return sorted((i["pk"]["S"], i["sk"]["S"]) for i in h.observer("dynamodb").scan(TableName=h.table)["Items"]
                  if i["pk"]["S"] in ("CONTROL", "PLAN"))


def step(h, payload, *, function=FUNCTION, settings=None):
    runtime = h.runtime("region-switch").but(settings=settings or h.settings)
    return handler.handle(payload, runtime, function)


def test_an_evacuation_holds_the_region_until_its_post_recovery_step_lifts_it(harness):
    h = harness
    with pytest.raises(StepPending, match="waiting for"):
        step(h, event("engage"))
    h.tick("A")
    assert h.plan().stage == HOLD and "region-switch" in h.plan().reasons[0]
    h.tick("A")    # the engage walks finish
    assert step(h, event("engage"))["status"] == "engaged"
    assert step(h, event("posture"))["posture"]["engaged"] is True
    recover(h)     # the Region is fine by Holdfast's own evidence: the evacuation still holds it
    for _ in range(30):
        h.minutes(1)
        h.tick("A")
    assert h.plan().stage == HOLD
    result = step(h, event("lift", execution="exec-2"))
    assert result["status"] == "lift-started"
    h.tick("A")
    assert h.plan().stage == DRAIN
    assert step(h, event("lift", execution="exec-2"))["status"] == "not-held"   # a rerun lifts nothing


def test_the_engage_step_starts_a_tick_once_per_period_and_a_rerun_writes_nothing_new(harness):
    """The reconciler's Invoke is botocore's Stubber (moto would run the function, which
    needs Docker), with the request AWS would get: InvocationType Event, the reconciler."""
    from botocore.stub import ANY, Stubber

    h = harness
    stub = Stubber(h.observer("lambda"))
    stub.add_response("invoke", {"StatusCode": 202},
                      {"FunctionName": RECONCILER, "InvocationType": "Event", "Payload": ANY})
    with stub:
        runtime = h.runtime("region-switch").but(tick_function=RECONCILER)
        began = h.clock.now()
        with pytest.raises(StepPending, match="evacuation hold written.*tick: started"):
            handler.handle(event("engage"), runtime, FUNCTION)
        h.clock.advance(30)   # Region switch's retry: the same execution, the same period
        with pytest.raises(StepPending, match="already in force for this execution.*tick: one was started"):
            handler.handle(event("engage"), runtime, FUNCTION)
        stub.assert_no_pending_responses()
    hold = h.observer("dynamodb").get_item(TableName=h.table, Key={"pk": {"S": "CONTROL"},
                                                                  "sk": {"S": f"EVACUATION#{PLAN}"}})["Item"]
    assert hold["execution"]["S"] == "exec-1" and hold["at"]["S"] == began.isoformat()


def test_not_waiting_succeeds_once_the_hold_is_asked_for(harness):
    h = harness
    result = step(h, event("engage", wait=False))
    assert result["status"] == "engaging" and "engage requested from plan generation 0" in result["detail"]


@pytest.mark.parametrize("payload, function, why", [
    ({"holdfast": {"step": "engage", "region": "us-west-2", "account": ACCOUNT}, "PlanArn": PLAN},
     FUNCTION, "names Region 'us-west-2', but this function runs in us-east-1"),
    ({"holdfast": {"step": "engage", "region": REGION, "account": "210987654321"}, "PlanArn": PLAN},
     FUNCTION, "names account '210987654321', but this function runs in account 123456789012"),
    ({"holdfast": {"step": "engage", "region": REGION, "account": ACCOUNT}, "PlanArn": "plan-1"},
     FUNCTION, "is not a Region switch plan ARN"),
    ({"holdfast": {"step": "evacuate", "region": REGION, "account": ACCOUNT}, "PlanArn": PLAN},
     FUNCTION, "step 'evacuate' is not one of engage, posture, lift"),
    ({"holdfast": {"step": "engage", "region": REGION, "account": ACCOUNT, "mode": "on"}, "PlanArn": PLAN},
     FUNCTION, "mode 'on' is not one of auto, recommend"),
    ({"holdfast": {"step": "engage", "region": REGION, "account": ACCOUNT, "force": True}, "PlanArn": PLAN},
     FUNCTION, "unknown keys \\['force'\\]"),
    ({"PlanArn": PLAN, "ExecutionId": "e"}, FUNCTION, "has no \"holdfast\" object"),
    (["engage"], FUNCTION, "is a list, not a JSON object"),
    (event("engage"), "holdfast-region-switch", "cannot tell this function's Region"),
])
def test_bad_input_is_refused_with_nothing_written(harness, payload, function, why):
    h = harness
    before = items(h)
    with pytest.raises(StepRefused, match=why):
        step(h, payload, function=function)
    assert items(h) == before


@pytest.mark.parametrize("deployed, step_mode, why", [
    ("recommend", "auto", "deployed with mode recommend, which changes no resource"),
    ("off", "auto", "deployed with mode off"),
    ("off", "recommend", "deployed with mode off"),
])
def test_a_mode_the_settings_forbid_is_refused_with_nothing_written(harness, deployed, step_mode, why):
    h = harness
    settings = replace(SETTINGS, mode=deployed)
    for name in ("engage", "lift"):
        with pytest.raises(StepRefused, match=why):
            step(h, event(name, mode=step_mode), settings=settings)
    assert items(h) == []
    assert step(h, event("posture"), settings=settings)["deployed_mode"] == deployed   # posture only reads


def test_mode_recommend_reports_and_writes_nothing(harness):
    h = harness
    result = step(h, event("engage", mode="recommend"))
    assert result["status"] == "reported" and "would hold us-east-1" in result["detail"]
    assert step(h, event("lift", mode="recommend"))["detail"].startswith("mode recommend: would find no evacuation")
    assert items(h) == []


def test_a_region_without_holdfast_is_refused_with_nothing_written(harness):
    h = harness
    runtime = h.runtime("region-switch").but(table="holdfast-ledger-elsewhere")
    with pytest.raises(StepRefused, match="Holdfast is not deployed in us-east-1.*holdfast-ledger-elsewhere"):
        handler.handle(event("engage"), runtime, FUNCTION)
    assert items(h) == []


def test_an_advance_by_hand_lifts_the_evacuation_hold(harness, capsys, monkeypatch):
    """The operator can force any state: `holdfast advance` skips the evacuation's gate too."""
    from holdfast.cli import main

    h = harness
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: h.clock)
    step(h, event("engage", wait=False))
    h.tick("A")
    h.tick("A")
    recover(h)
    h.minutes(20)
    h.tick("A")
    capsys.readouterr()
    assert main(["--json", "stage"]) == 0
    gates = json.loads(capsys.readouterr().out)["next"]["gates"]
    assert any(g.startswith(f"held for Region switch plan {PLAN}") for g in gates)
    assert main(["--json", "advance", "--yes"]) == 0
    h.tick("A")
    assert h.plan().stage == DRAIN


def test_a_second_plan_keeps_the_region_held_after_the_first_lifts(harness):
    h = harness
    other = f"arn:aws:arc-region-switch::{ACCOUNT}:plan/payments:def456"
    step(h, event("engage", wait=False))
    step(h, event("engage", wait=False, plan=other))
    h.tick("A")
    h.tick("A")
    recover(h)
    h.minutes(20)
    result = step(h, event("lift"))
    assert result["status"] == "lift-started" and result["evacuations"] == [other]
    assert f"still held for {other}" in result["detail"]
    h.tick("A")
    assert h.plan().stage == HOLD
    step(h, event("lift", plan=other))
    h.tick("A")
    assert h.plan().stage == DRAIN


class Context:
    invoked_function_arn = FUNCTION
    log_stream_name = "2025/10/20/[$LATEST]abc"
    function_name = "holdfast-region-switch"
    memory_limit_in_mb = 256
    aws_request_id = "52fdfc07-2182-154f-163f-5f0f9a621d72"


def test_the_lambda_entry_point_acts_in_the_region_and_account_it_was_invoked_by(harness):
    h = harness
    handler.use(h.runtime("region-switch"))
    try:
        assert handler.handler(event("posture"), Context())["region"] == REGION
        other = type("Other", (Context,), {"invoked_function_arn": FUNCTION.replace(REGION, "eu-west-1")})
        with pytest.raises(StepRefused, match="this function runs in eu-west-1"):
            handler.handler(event("engage"), other())
    finally:
        handler.use(None)
    assert items(h) == []


def test_an_unexpected_failure_is_pending_so_region_switch_runs_it_again(harness, monkeypatch):
    h = harness

    def broken(*_a, **_k):
        raise KeyError("generation")

    monkeypatch.setattr("holdfast.ledger.plan.read", broken)
    with pytest.raises(StepPending, match="KeyError.*runs the step again"):
        step(h, event("engage"))


def test_a_paused_reconciler_is_named_while_the_step_waits(harness):
    from holdfast.ledger import control as ledger_control

    h = harness
    ledger_control.set_paused(h.runtime("cli").ledger(), True, by="oncall", reason="change freeze", now=h.clock.now())
    with pytest.raises(StepPending, match="kill switch is set \\(by oncall: change freeze\\)"):
        step(h, event("engage"))
