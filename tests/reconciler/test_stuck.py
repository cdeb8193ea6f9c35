"""One resource that keeps failing no longer pins the whole plan.

On moto with the real engine and actuators. A resource whose engage (or restore) fails on
every walk is counted in the ledger across ticks (holdfast.ledger.failures); after
`stuck_after_failures` walks it no longer gates its stage (holdfast.core.progress), the
tick reports it (TickResult.stuck, metric ResourcesStuck) and `holdfast status` lists it
with the command that fixes it. A stuck restore is retried by later ticks and restored
without a human once its cause is gone.
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from holdfast.clock import FakeClock
from holdfast.core import progress
from holdfast.core.policy import NORMAL
from holdfast.ledger import Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from tests.support.fakes import Script
from tests.support.harness import T0

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30,
                                  "stuck_after_failures": 3, "rewalk_minutes": 5})


@pytest.fixture
def aws_semantics(aws):
    from holdfast_fixtures.moto_patches import aws_semantics as patched

    with patched():
        yield


class Refuse:
    """Every `operation` call on one group answers AccessDenied, as the controller's IAM
    condition does once the group's owner removed its opt-in tag."""

    def __init__(self, clients, operation: str, group: str):
        self.events, self.operation, self.group = clients("autoscaling").meta.events, operation, group
        self.events.register(f"before-parameter-build.auto-scaling.{operation}", self)

    def __call__(self, params, **_):
        if params.get("AutoScalingGroupName") == self.group:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": f"not authorized to {self.operation}"}},
                              self.operation)

    def lift(self) -> None:
        self.events.unregister(f"before-parameter-build.auto-scaling.{self.operation}", self)


class Event:
    def __init__(self, clients, table):
        self.clients, self.table = clients, table
        self.fleet = build_fleet(clients, asgs=2, unselected=0, workers=1)
        self.groups = sorted(self.fleet.selected["asg"])
        self.before = snapshot(clients, self.fleet)
        self.owners = {g: self.suspended(g) for g in self.groups}   # what the owners suspended themselves
        self.clock, self.script = FakeClock(T0), Script()

    def tick(self):
        return tick(Runtime(self.clients, SETTINGS, self.table, self.clock, controller_id="solo"), collect=self.script.collect)

    def run(self, minutes: int, state: str | None = None):
        results = []
        for _ in range(minutes):
            if state and self.script.state != state:
                self.script.set(state, self.clock.now())
            results.append(self.tick())
            self.clock.advance(60)
        return results

    def plan(self):
        return ledger_plan.read(Ledger(self.clients("dynamodb"), self.table))

    def name(self, arn: str) -> str:
        return arn.split("autoScalingGroupName/")[1]

    def suspended(self, arn: str) -> set[str]:
        group = self.clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[self.name(arn)])
        return {p["ProcessName"] for p in group["AutoScalingGroups"][0]["SuspendedProcesses"]}


def stuck_metric(capsys) -> list[float]:
    """The ResourcesStuck figures the ticks emitted (CloudWatch EMF lines on stdout)."""
    out = []
    for line in capsys.readouterr().out.splitlines():
        if '"ResourcesStuck"' in line and line.startswith("{"):
            out += json.loads(line)["ResourcesStuck"]
    return out


def test_a_group_that_fails_every_engage_stops_gating_hold_and_is_reported(clients, ledger_table, capsys):
    event = Event(clients, ledger_table)
    bad, good = event.groups
    denied = Refuse(clients, "SuspendProcesses", event.name(bad))

    # GIVEN an impairment: every walk of the groups fails on one of them
    event.script.set("impaired", event.clock.now())
    first = event.run(2)
    assert [o.action for r in first for o in r.outcomes if o.arn == bad] == ["failed", "failed"]
    assert "asg" not in event.plan().done  # bounded retries: it still gates for now
    # WHEN it keeps failing THEN after 3 walks it is stuck: the kind is done, the stage no longer waits for it
    third = event.run(1)[0]
    assert [f.arn for f in third.stuck] == [bad] and third.stuck[0].failures == 3
    assert "asg" in event.plan().done
    assert event.suspended(good) == {"ReplaceUnhealthy", "AZRebalance"} and event.suspended(bad) == event.owners[bad]

    # AND the plan leaves hold when the region recovers: no human needed
    event.run(15, "recovering")
    assert event.plan().stage != "hold"
    figures = stuck_metric(capsys)
    assert figures[:2] == [0.0, 0.0] and figures[2] == 1.0

    # AND `holdfast status` lists it, with the command that fixes it
    from holdfast.cli import main
    code = main(["--json", "--region", "us-east-1", "--ledger-table", ledger_table, "status"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    [row] = doc["stuck"]
    assert row["arn"] == bad and row["operation"] == "engage" and row["failures"] == 3
    assert "AccessDenied" in row["error"] and "`holdfast engage`" in row["fix"]
    denied.lift()


def test_a_group_whose_restore_is_denied_stops_gating_capacity_and_is_restored_once_allowed(clients, ledger_table, capsys):
    event = Event(clients, ledger_table)
    bad, good = event.groups
    event.script.set("impaired", event.clock.now())
    event.run(2)
    assert all(event.suspended(g) == {"ReplaceUnhealthy", "AZRebalance"} for g in event.groups)

    # GIVEN the owner removed the opt-in tag of one group while engaged: its restore is denied on every tick
    denied = Refuse(clients, "ResumeProcesses", event.name(bad))
    stages = [r.stage for r in event.run(140, "recovering")]

    # THEN the plan still reaches normal; the other group is restored; the denied one is reported stuck
    assert stages[-1] == NORMAL, stages[-5:]
    assert event.suspended(good) == event.owners[good]
    assert event.suspended(bad) == {"ReplaceUnhealthy", "AZRebalance"}
    last = event.run(1)[0]
    assert [(f.arn, f.operation) for f in last.stuck] == [(bad, "relax")]
    assert stuck_metric(capsys)[-1] == 1.0

    from holdfast.cli import main
    assert main(["--region", "us-east-1", "--ledger-table", ledger_table, "status"]) == 0
    text = capsys.readouterr().out
    assert "1 stuck" in text and f"holdfast release {bad}" in text and "opt-in tag holdfast:protect=true" in text

    # WHEN the cause is gone THEN a later tick restores it by itself, and nothing is stuck any more
    denied.lift()
    after = event.run(SETTINGS.rewalk_minutes + 1)
    assert event.suspended(bad) == event.owners[bad]
    assert after[-1].stuck == []
    assert snapshot(clients, event.fleet) == event.before


def test_stuck_failures_no_longer_gate_but_other_failures_do():
    walked = lambda failed, stuck, complete=True: progress.Walked("asg", True, complete, failed, stuck=stuck)
    decide = lambda w: progress.after_walk(w, saved_cursor=None, dry_run=False, older_relaxers=False)
    assert decide(walked(2, 2)).mark_done and decide(walked(2, 2)).note
    assert not decide(walked(2, 1)).mark_done
    assert not decide(walked(1, 1, complete=False)).mark_done
    assert progress.is_stuck(3, 3) and not progress.is_stuck(2, 3)
