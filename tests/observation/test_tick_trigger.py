"""The detector starts a tick as soon as the recorded signals turn the verdict impaired
(holdfast.observation.trigger): one asynchronous invoke of the
reconciler per plan generation and schedule period, however many events or detectors.

DynamoDB is moto; the reconciler's Invoke is botocore's Stubber on the detector's Lambda
client (moto would run the function, which needs Docker): the stub checks the request
AWS would get (FunctionName, InvocationType Event) and answers as Lambda does (202).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.stub import ANY, Stubber

from holdfast.clock import FakeClock
from holdfast.core.policy import Plan
from holdfast.handlers import detector as handler_module
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.runtime import Runtime
from tests.support.factory import SETTINGS, launch, utc

T0 = utc(2025, 10, 20, 6, 58)
RECONCILER = "arn:aws:lambda:us-east-1:123456789012:function:holdfast-reconciler"
# Capacity failures from three groups in two zones: impaired by the default thresholds.
BURST = [("web", "us-east-1a"), ("api", "us-east-1b"), ("etl", "us-east-1a"), ("db", "us-east-1b"),
         ("jobs", "us-east-1a")]


class Context:
    function_name = "holdfast-detector"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:holdfast-detector"
    aws_request_id = "52fdfc07-2182-154f-163f-5f0f9a621d72"


@pytest.fixture
def detector(clients, ledger_table):
    clock = FakeClock(T0 + timedelta(seconds=30))
    stub = Stubber(clients("lambda"))
    stub.activate()

    def use(controller_id: str = "detector-1", **changes):
        handler_module.use(Runtime(clients, SETTINGS, ledger_table, clock, controller_id=controller_id,
                                   tick_function=RECONCILER).but(**changes))

    use()
    yield clock, stub, use
    stub.deactivate()
    handler_module.use(None)


def expect_invoke(stub: Stubber) -> None:
    stub.add_response("invoke", {"StatusCode": 202},
                      {"FunctionName": RECONCILER, "InvocationType": "Event", "Payload": ANY})


def test_a_burst_of_failures_starts_one_tick_when_the_verdict_turns(detector):
    clock, stub, use = detector
    expect_invoke(stub)
    results = []
    for group, zone in BURST:
        results.append(handler_module.handler(launch(group, zone, T0), Context()))
    triggers = [r["trigger"] for r in results]
    # Not impaired after one or two groups; the third turns it; the rest find the tick started.
    assert triggers == ["not-impaired", "not-impaired", "started", "already-started", "already-started"]
    stub.assert_no_pending_responses()
    # A second detector instance within the period starts none either.
    use("detector-2")
    assert handler_module.handler(launch("cache", "us-east-1b", T0), Context())["trigger"] == "already-started"


def test_no_tick_is_started_while_the_plan_already_holds(detector, clients, ledger_table):
    clock, stub, use = detector
    ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), Plan(generation=1, stage="hold", entered_at=T0),
                      controller_id="reconciler", now=T0)
    triggers = [handler_module.handler(launch(g, z, T0), Context())["trigger"] for g, z in BURST[:4]]
    assert triggers[-1] == "engaging"
    stub.assert_no_pending_responses()   # no invoke was made (an unexpected one raises)


def test_a_new_impairment_in_a_later_stage_starts_a_tick_for_that_generation(detector, clients, ledger_table):
    clock, stub, use = detector
    dynamodb = clients("dynamodb")
    ledger_plan.write(Ledger(dynamodb, ledger_table), Plan(generation=1, stage="drain", entered_at=T0),
                      controller_id="reconciler", now=T0)
    expect_invoke(stub)
    triggers = [handler_module.handler(launch(g, z, T0), Context())["trigger"] for g, z in BURST[:4]]
    assert triggers[2:] == ["started", "already-started"]
    # Once the period has passed, a plan still not holding (the started tick failed) may be started again.
    clock.advance(SETTINGS.schedule_minutes * 60 + 1)
    expect_invoke(stub)
    assert handler_module.handler(launch("late", "us-east-1b", clock.now()), Context())["trigger"] == "started"
    stub.assert_no_pending_responses()


def test_a_failed_invoke_is_counted_never_raised(detector, capsys):
    clock, stub, use = detector
    stub.add_client_error("invoke", "TooManyRequestsException", "Rate exceeded", http_status_code=429)
    results = [handler_module.handler(launch(g, z, T0), Context()) for g, z in BURST[:3]]
    assert results[-1]["outcome"] == "recorded" and results[-1]["trigger"] == "failed"
    assert "TooManyRequestsException" in results[-1]["trigger_reason"]
    out = capsys.readouterr().out
    assert any('"TickTriggerFailed"' in line and '"_aws"' in line for line in out.splitlines())


def test_without_a_reconciler_function_the_schedule_ticks(clients, ledger_table):
    handler_module.use(Runtime(clients, SETTINGS, ledger_table, FakeClock(T0)))
    try:
        results = [handler_module.handler(launch(g, z, T0), Context()) for g, z in BURST[:3]]
    finally:
        handler_module.use(None)
    assert {r["trigger"] for r in results} == {"no-function"}


def test_the_invoke_payload_names_its_source():
    from holdfast.observation import trigger

    sent = {}

    class Lambda:
        def invoke(self, **params):
            sent.update(params)

    runtime = type("R", (), {"tick_function": RECONCILER, "clients": staticmethod(lambda _s: Lambda())})()
    trigger.start_tick(runtime, {"source": "holdfast.detector"})
    assert sent["InvocationType"] == "Event" and json.loads(sent["Payload"]) == {"source": "holdfast.detector"}
