"""The stack deleted while Holdfast holds resources (holdfast.handlers.teardown), on moto:
`refuse` fails the deletion saying how to resume first and changes nothing; `restore`
puts every resource back before the stack goes, and fails naming what it could not."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from holdfast.clock import FakeClock
from holdfast.handlers import teardown
from holdfast.ledger import Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.resources import ResourceLedger
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    describe_asg,
    make_asg,
)
from tests.support.harness import T0

pytestmark = pytest.mark.usefixtures("aws_semantics")


class Context:
    log_stream_name = "teardown-test"

    def get_remaining_time_in_millis(self):
        return 900_000


def delete(runtime, monkeypatch, request_type="Delete") -> dict:
    """Run the handler on a CloudFormation request; what it PUT to the ResponseURL."""
    sent = {}
    monkeypatch.setattr(teardown, "_put", lambda url, body: sent.update(url=url, body=json.loads(body)))
    teardown.use(runtime)
    try:
        teardown.handler({"RequestType": request_type, "ResponseURL": "https://cloudformation-custom-resource/r",
                          "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/Holdfast/1",
                          "RequestId": "req-1", "LogicalResourceId": "Teardown",
                          "PhysicalResourceId": teardown.PHYSICAL_ID}, Context())
    finally:
        teardown.use(None)
    assert sent["url"] == "https://cloudformation-custom-resource/r"
    assert (sent["body"]["RequestId"], sent["body"]["LogicalResourceId"]) == ("req-1", "Teardown")
    return sent["body"]


def engaged_fleet(clients, ledger_table, settings):
    for name in ("web", "api"):
        make_asg(clients, name)
    walks.engage_all(clients, settings, ledger_table, kinds=("asg",))
    assert len(ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()) == 2


def suspended(clients, name):
    return sorted(p["ProcessName"] for p in describe_asg(clients, name)["SuspendedProcesses"])


def runtime(clients, ledger_table, settings):
    return Runtime(clients=clients, settings=settings, table=ledger_table, clock=FakeClock(T0), controller_id="teardown")


def test_refuse_fails_the_deletion_while_resources_are_held_and_changes_nothing(clients, ledger_table, monkeypatch):
    settings = Settings.from_mapping({"mode": "auto"})
    engaged_fleet(clients, ledger_table, settings)
    answer = delete(runtime(clients, ledger_table, settings), monkeypatch)
    assert answer["Status"] == "FAILED"
    assert "records of 2 asg" in answer["Reason"] and "holdfast resume --now" in answer["Reason"]
    assert suspended(clients, "web") == ["AZRebalance", "ReplaceUnhealthy"]
    assert not ledger_control.read_control(Ledger(clients("dynamodb"), ledger_table)).paused


def test_with_nothing_held_the_deletion_goes_in_either_mode_and_create_succeeds(clients, ledger_table, monkeypatch):
    for mode in ("refuse", "restore"):
        settings = Settings.from_mapping({"on_delete_while_engaged": mode})
        assert delete(runtime(clients, ledger_table, settings), monkeypatch)["Status"] == "SUCCESS"
    assert delete(runtime(clients, ledger_table, Settings()), monkeypatch, "Create")["Status"] == "SUCCESS"


def test_restore_puts_every_resource_back_and_pauses_the_controller_before_the_stack_goes(
        clients, ledger_table, monkeypatch):
    settings = Settings.from_mapping({"mode": "auto", "on_delete_while_engaged": "restore"})
    engaged_fleet(clients, ledger_table, settings)
    answer = delete(runtime(clients, ledger_table, settings), monkeypatch)
    assert answer["Status"] == "SUCCESS" and "restored 2 resource(s)" in answer["Reason"]
    assert suspended(clients, "web") == suspended(clients, "api") == []
    ledger = Ledger(clients("dynamodb"), ledger_table)
    assert ResourceLedger(ledger).records() == []
    assert ledger_control.read_control(ledger).paused   # no tick engages again while the stack goes


def test_restore_fails_the_deletion_naming_what_it_could_not_restore(clients, ledger_table, monkeypatch):
    settings = Settings.from_mapping({"mode": "auto", "on_delete_while_engaged": "restore"})
    engaged_fleet(clients, ledger_table, settings)
    events = clients("autoscaling").meta.events

    def deny_web(params, **_):
        if params.get("AutoScalingGroupName") == "web":
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "ResumeProcesses")

    events.register("before-parameter-build.auto-scaling.ResumeProcesses", deny_web)
    try:
        answer = delete(runtime(clients, ledger_table, settings), monkeypatch)
    finally:
        events.unregister("before-parameter-build.auto-scaling.ResumeProcesses", deny_web)
    assert answer["Status"] == "FAILED"
    assert "1 not restored" in answer["Reason"] and "autoScalingGroupName/web" in answer["Reason"]
    assert "AccessDenied" in answer["Reason"] and "holdfast resume --now" in answer["Reason"]
    assert suspended(clients, "api") == [] and suspended(clients, "web") == ["AZRebalance", "ReplaceUnhealthy"]


def test_a_crash_in_the_teardown_still_answers_cloudformation(clients, ledger_table, monkeypatch):
    monkeypatch.setattr(teardown, "on_delete", lambda *_: 1 / 0)
    answer = delete(runtime(clients, ledger_table, Settings()), monkeypatch)
    assert answer["Status"] == "FAILED" and "division by zero" in answer["Reason"]
