"""A resource released by hand during a hold stays released for the rest of that hold.

An operator can force any state, one resource's release included: `holdfast release`
(or a release request) restores it, and the hold's re-walks, which re-protect resources
set back, must not engage it again. The next hold protects it again
(holdfast.core.release.left_released; the mark is CONTROL/RELEASED#<arn>). The real tick
and engine on moto (in-process), with AWS's semantics where it departs from them."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from holdfast.cli import main
from holdfast.clock import FakeClock
from holdfast.core import release as release_requests
from holdfast.core.model import ENGAGED
from holdfast.core.policy import HOLD, NORMAL, Plan
from holdfast.handlers.shell import runtime_from_env
from holdfast.ledger import Ledger
from holdfast.ledger import control as ledger_control
from holdfast.reconciler import tick
from holdfast.settings import Settings
from tests.support.fakes import Script
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_function,
)
from tests.support.harness import T0


def config(clients, arn) -> tuple[int, int]:
    c = clients("lambda").get_function_event_invoke_config(FunctionName=arn)
    return c["MaximumEventAgeInSeconds"], c["MaximumRetryAttempts"]


def engage_functions(clients, ledger_table, *names):
    """Functions with an owner's async config (3600 s, 2 retries), engaged by a real tick
    of an impairment: (their ARNs, the runtime, its clock, the scripted verdict)."""
    arns = [make_function(clients, name) for name in names]
    for arn in arns:
        clients("lambda").put_function_event_invoke_config(FunctionName=arn, MaximumEventAgeInSeconds=3600,
                                                           MaximumRetryAttempts=2)
    env = {"HOLDFAST_LEDGER_TABLE": ledger_table, "HOLDFAST_SETTINGS": Settings(mode="auto").to_json()}
    clock = FakeClock(T0)
    runtime = runtime_from_env("reconciler", env).but(clients=clients, clock=clock)
    script = Script()
    script.set("impaired", clock.now())
    engaged = {o.arn for o in tick(runtime, collect=script.collect).outcomes if o.action == ENGAGED}
    assert set(arns) <= engaged
    return arns, runtime, clock, script


def test_a_resource_released_during_a_hold_is_not_engaged_again_by_its_rewalks(clients, ledger_table, aws_semantics,
                                                                                 capsys):
    (orders, billing), runtime, clock, script = engage_functions(clients, ledger_table, "orders", "billing")
    protected = config(clients, orders)
    assert protected != (3600, 2)

    # An operator releases `orders` by hand in the hold.
    assert main(["--region", "us-east-1", "--json", "release", orders, "--yes"]) == 0
    said = capsys.readouterr().err
    assert config(clients, orders) == (3600, 2)

    # Re-walks of the same hold (every rewalk_minutes) leave it as released; the rest stays engaged.
    for _ in range(3):
        clock.advance(6 * 60)
        result = tick(runtime, collect=script.collect)
        assert orders not in {o.arn for o in result.outcomes if o.action == ENGAGED}
    assert config(clients, orders) == (3600, 2) and config(clients, billing) == protected
    control = ledger_control.read_control(Ledger(clients("dynamodb"), ledger_table))
    assert [r.arn for r in control.released] == [orders]
    assert "stays released for the rest of this hold" in said
    capsys.readouterr()
    assert main(["--region", "us-east-1", "--json", "status"]) == 0
    [mark] = json.loads(capsys.readouterr().out)["released"]
    assert (mark["arn"], mark["began"]) == (orders, T0.isoformat())


def test_the_mark_holds_for_its_own_engagement_only():
    plan = Plan(generation=3, stage=HOLD, entered_at=T0, impaired_at=T0)
    mark = release_requests.Released("arn:aws:lambda:us-east-1:123456789012:function:orders", T0.isoformat(), "oncall")
    assert release_requests.left_released((mark,), plan) == {mark.arn}
    # A later hold (a new impairment), or a step back that engages again: protected again.
    later = replace(plan, impaired_at=T0 + timedelta(hours=2), entered_at=T0 + timedelta(hours=2))
    assert release_requests.left_released((mark,), later) == frozenset()
    stepped = replace(plan, stepped_back=True, entered_at=T0 + timedelta(minutes=30))
    assert release_requests.left_released((mark,), stepped) == frozenset()
    assert release_requests.left_released((mark,), replace(plan, stage=NORMAL)) == frozenset()
    assert release_requests.left_released((mark,), None) == frozenset()


def test_a_mark_not_written_by_holdfast_is_named_and_not_read(clients, ledger_table):
    dynamodb = clients("dynamodb")
    dynamodb.put_item(TableName=ledger_table, Item={"pk": {"S": "CONTROL"}, "sk": {"S": "RELEASED#arn:x"},
                                                    "arn": {"S": "arn:y"}, "began": {"S": T0.isoformat()}})
    dynamodb.put_item(TableName=ledger_table, Item={"pk": {"S": "CONTROL"}, "sk": {"S": "RELEASED#arn:z"},
                                                    "arn": {"S": "arn:z"}, "began": {"N": "1"}})
    control = ledger_control.read_control(Ledger(dynamodb, ledger_table))
    assert control.released == ()
    assert len([p for p in control.problems if p.startswith("RELEASED#")]) == 2, control.problems


def test_a_release_mark_that_cannot_be_written_warns_and_the_next_rewalk_engages_it_again(
        clients, ledger_table, aws_semantics, capsys, monkeypatch):
    """DynamoDB refusing the mark's PutItem (AccessDeniedException, HTTP 400, as DynamoDB
    answers a call its policy denies) does not undo the release: the resource is restored,
    `holdfast release` succeeds and says the next re-walk may engage it again, and it does."""
    from moto.core.exceptions import JsonRESTError
    from moto.dynamodb.models import DynamoDBBackend

    (orders,), runtime, clock, script = engage_functions(clients, ledger_table, "orders")
    protected = config(clients, orders)

    put_item = DynamoDBBackend.put_item
    refused = []

    def deny_marks(self, table_name, item_attrs, *args, **kwargs):
        if item_attrs.get("sk", {}).get("S", "").startswith(ledger_control.RELEASED_PREFIX):
            refused.append(item_attrs["sk"]["S"])
            raise JsonRESTError("AccessDeniedException", "User is not authorized to perform: dynamodb:PutItem")
        return put_item(self, table_name, item_attrs, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "put_item", deny_marks)
    assert main(["--region", "us-east-1", "--json", "release", orders, "--yes"]) == 0
    said = capsys.readouterr().err
    assert refused == [ledger_control.RELEASED_PREFIX + orders]
    assert config(clients, orders) == (3600, 2)
    assert "AccessDeniedException" in said and "the next re-walk of this hold may engage it again" in said
    assert ledger_control.read_control(Ledger(clients("dynamodb"), ledger_table)).released == ()
    monkeypatch.undo()

    clock.advance(6 * 60)
    assert orders in {o.arn for o in tick(runtime, collect=script.collect).outcomes if o.action == ENGAGED}
    assert config(clients, orders) == protected


class Killed(BaseException):
    """The tick's process dying (out of memory, a runtime crash): nothing after it runs."""


def test_a_release_whose_tick_dies_after_the_restore_stays_released_through_the_takeover(
        clients, ledger_table, aws_semantics, monkeypatch):
    """The request's tick restores the function and dies before recording anything more; the
    tick that takes the claim over finds it restored (restored-unconfirmed). The mark was
    written before the restore, so the hold's re-walks leave it as released."""
    from holdfast.reconciler import releases

    (orders, billing), runtime, clock, script = engage_functions(clients, ledger_table, "orders", "billing")
    protected = config(clients, billing)
    ledger_control.request_release(Ledger(clients("dynamodb"), ledger_table), orders, by="oncall", reason="drill",
                                   now=clock.now() + timedelta(seconds=1), request_id="r1")
    clock.advance(60)
    release_one = releases.release_one

    def dies_after_the_restore(*args, **kwargs):
        release_one(*args, **kwargs)
        raise Killed()

    monkeypatch.setattr(releases, "release_one", dies_after_the_restore)
    try:
        tick(runtime, collect=script.collect)
        raise AssertionError("the tick was to die")
    except Killed:
        pass
    monkeypatch.undo()
    assert config(clients, orders) == (3600, 2)

    clock.advance(5 * 60)       # the claim has run out: a tick takes it over
    result = tick(runtime, collect=script.collect)
    assert "release:restored-unconfirmed" in result.actions
    for _ in range(3):          # the hold's re-walks
        clock.advance(6 * 60)
        result = tick(runtime, collect=script.collect)
        assert orders not in {o.arn for o in result.outcomes if o.action == ENGAGED}
    assert config(clients, orders) == (3600, 2) and config(clients, billing) == protected


def test_a_release_landing_while_a_rewalk_lists_is_not_engaged_again_and_status_agrees(
        clients, ledger_table, aws_semantics, monkeypatch, capsys):
    """The tick reads the release marks at its start; `holdfast release` lands after that read,
    before the re-walk lists the functions. The re-walk's write-ahead is conditional on there
    being no mark of this hold (conditions.NOT_RELEASED_IN): refused, the function is left as
    released, with no record tag, and `status` lists it released, not engaged."""
    from holdfast.actuators.async_config import AsyncConfigActuator
    from holdfast.core.tags import read_record

    (orders, billing), runtime, clock, script = engage_functions(clients, ledger_table, "orders", "billing")
    protected = config(clients, billing)
    candidates = AsyncConfigActuator.candidates
    landed = []

    def release_lands_first(self):
        if not landed:
            landed.append(main(["--region", "us-east-1", "--json", "release", orders, "--yes"]))
        return candidates(self)

    monkeypatch.setattr(AsyncConfigActuator, "candidates", release_lands_first)
    clock.advance(6 * 60)       # a re-walk is due
    result = tick(runtime, collect=script.collect)
    monkeypatch.undo()
    assert landed == [0]
    assert orders not in {o.arn for o in result.outcomes if o.action == ENGAGED}
    assert config(clients, orders) == (3600, 2) and config(clients, billing) == protected
    tags = clients("lambda").list_tags(Resource=orders)["Tags"]
    assert read_record(tags) is None, tags

    capsys.readouterr()
    assert main(["--region", "us-east-1", "--json", "status"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [m["arn"] for m in doc["released"]] == [orders]
    assert orders not in {r["arn"] for r in doc["resources"]}
    # The later re-walks leave it so.
    clock.advance(6 * 60)
    assert orders not in {o.arn for o in tick(runtime, collect=script.collect).outcomes if o.action == ENGAGED}
    assert config(clients, orders) == (3600, 2)
