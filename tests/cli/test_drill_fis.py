"""`holdfast drill` against a real account: the AWS FIS experiment and the deployed controller.

Moto has no FIS, so the FIS client is botocore's Stubber, which checks every request
and response against the FIS API model: StartExperiment (clientToken, experimentTemplateId),
GetExperiment and StopExperiment (id), GetExperimentTemplate (id), as the FIS API
Reference gives them. Everything else (the ledger, the fleet, SSM, IAM) is moto
in-process, and the command sees no endpoint: it takes the AWS path.

The deployed controller is simulated where the drill waits: each `sleep` moves the clock
one poll, records the launch results the running experiment causes through the detector's
intake (as the detector Lambda would), and runs one real reconciler tick.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from functools import partial

import pytest
from botocore.stub import ANY, Stubber

from holdfast import reconciler
from holdfast.aws import Clients
from holdfast.cli import build_parser, drill
from holdfast.cli.context import Context, UsageError
from holdfast.clock import FakeClock
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger.table import ensure_table
from holdfast.observation import collect
from holdfast.observation.intake import receive
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_demo.fleet import build_fleet, snapshot
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture)

ACCOUNT = "123456789012"
TEMPLATE = "EXTa1b2c3d4e5f6g7h8"
EXPERIMENT = "EXPz9y8x7w6v5u4t3s2"
ROLE = "holdfast-game-day"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{ROLE}"
PREFIX = "/holdfast/Holdfast"
DEPLOYED = {"mode": "auto", "hold_minutes": 1, "capacity_hold_minutes": 1, "recover_quiet_minutes": 1, "detect_window_minutes": 3}
POLL = 60.0
START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
RUNS_FOR = timedelta(seconds=170)   # the experiment's bounded duration, from the request


def template(actions=None) -> dict:
    """GetExperimentTemplate's answer, shaped as the GameDay construct's template."""
    return {"experimentTemplate": {
        "id": TEMPLATE,
        "description": "Holdfast game day",
        "roleArn": ROLE_ARN,
        "targets": {"SelectedGroups": {"resourceType": "aws:ec2:autoscaling-group",
                                       "resourceTags": {"holdfast:protect": "true"}, "selectionMode": "ALL"}},
        "actions": actions if actions is not None else {"LaunchesFailInEveryZone": {
            "actionId": drill.ASG_ICE_ACTION,
            "parameters": {"availabilityZoneIdentifiers": "us-east-1a,us-east-1b,us-east-1c", "duration": "PT3M"},
            "targets": {"AutoScalingGroups": "SelectedGroups"}}},
        "stopConditions": [{"source": "aws:cloudwatch:alarm", "value": f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:stop"}],
    }}


def experiment(status: str, *, end: datetime | None = None, reason: str | None = None) -> dict:
    state = {"status": status, **({"reason": reason} if reason else {})}
    body = {"id": EXPERIMENT, "experimentTemplateId": TEMPLATE, "roleArn": ROLE_ARN, "state": state,
            "creationTime": START, "startTime": START}
    if end is not None:
        body["endTime"] = end
    return {"experiment": body}


@pytest.fixture
def account(aws_semantics, clients):
    """A deployed Holdfast: the ledger, the settings and template parameters, the FIS
    role, and a fleet of every kind."""
    return deployed(clients, asgs=3, esms=2, asyncs=2, nlbs=1, services=1)


@pytest.fixture
def refusing_account(aws_semantics, clients):
    """The same deployment with a fleet of three Auto Scaling groups across three zones
    (and an unselected twin): what the preflight needs to pass (detect_min_groups,
    detect_min_zones), so that each refusal below comes from the check it is about. A
    refusal comes before anything is started or engaged, so no other kind is needed to
    show that nothing was."""
    return deployed(clients, asgs=3)


def deployed(clients, **fleet):
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    ssm = clients("ssm")
    ssm.put_parameter(Name=f"{PREFIX}/settings", Type="String", Value=json.dumps(DEPLOYED))
    ssm.put_parameter(Name=f"{PREFIX}/{drill.TEMPLATE_PARAMETER}", Type="String", Value=TEMPLATE)
    clients("iam").create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "fis.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    return build_fleet(clients, **fleet)


def command(tmp_path, *extra: str):
    args = build_parser().parse_args(["--region", REGION, "--json", "drill", "--out", str(tmp_path / "out"),
                                      "--poll-seconds", str(POLL), *extra])
    ctx = Context.from_args(args)
    return ctx, args, Stubber(ctx.clients("fis"))


class DeployedController:
    """What the account does while the drill sleeps: launches fail (or succeed, once the
    experiment has ended), the detector records them, the reconciler ticks."""

    def __init__(self, clock: FakeClock, fleet, *, interrupt_after: int | None = None):
        self.clock, self.fleet = clock, fleet
        self.runtime = Runtime(clients=Clients(region=REGION), settings=Settings.from_mapping(DEPLOYED),
                               table=DEFAULT_TABLE, clock=clock, controller_id="deployed-reconciler")
        self.collect = partial(collect, resolver=drill.answering_resolver)
        self.sleeps, self.interrupt_after = 0, interrupt_after
        self.end = START + RUNS_FOR

    def __call__(self, seconds: float) -> None:
        self.sleeps += 1
        if self.interrupt_after is not None and self.sleeps > self.interrupt_after:
            raise KeyboardInterrupt
        self.clock.advance(seconds)
        at = self.clock.now() - timedelta(seconds=30)
        groups = [self.fleet.handles[a] for a in self.fleet.selected["asg"]]
        for i, group in enumerate(groups):
            # After the experiment every group launches again: recovery is regional (a
            # success share across groups and zones, core/detector.py), not one success.
            ok = at >= self.end
            zone = self.fleet.zones[(i + self.sleeps) % len(self.fleet.zones)]
            receive(self.runtime, drill.launch_event(drill_id="fis", account=ACCOUNT, region=REGION, group=group,
                                                     zone=zone, at=at, ok=ok))
        with drill.quiet_controllers(__import__("sys").stderr):
            reconciler.tick(self.runtime, collect=self.collect)


def test_the_experiment_is_started_watched_measured_and_the_fleet_restored(account, clients, tmp_path):
    fleet = account
    before = snapshot(clients, fleet)
    clock = FakeClock(START)
    controller = DeployedController(clock, fleet)
    ctx, args, fis = command(tmp_path, "--yes")
    fis.add_response("get_experiment_template", template(), {"id": TEMPLATE})
    fis.add_response("start_experiment", experiment("initiating", reason="Experiment is initiating."),
                     {"clientToken": ANY, "experimentTemplateId": TEMPLATE})
    # Polled at 12:00, 12:01, 12:02 (running), 12:03: ended at 12:02:50.
    for status in ("running", "running", "running"):
        fis.add_response("get_experiment", experiment(status), {"id": EXPERIMENT})
    fis.add_response("get_experiment", experiment("completed", end=START + RUNS_FOR, reason="Experiment completed."),
                     {"id": EXPERIMENT})

    with fis:
        code = drill.drill(ctx, args, clock=clock, sleep=controller)

    fis.assert_no_pending_responses()
    report = json.loads((tmp_path / "out" / "drill-report.json").read_text())
    assert code == 0, report["problems"]
    assert report["result"] == "passed" and report["experiment"]["id"] == EXPERIMENT
    assert report["experiment"]["state"] == "completed" and report["settings_source"] == f"SSM parameter {PREFIX}/settings"
    f = report["figures"]
    # The first failure is recorded at 12:00:30; the poll at 12:01 sees the hold walked.
    assert (f["first_failure_at"], f["full_posture_at"]) == ("2026-03-01T12:00:30.000Z", "2026-03-01T12:01:00.000Z")
    assert f["minutes_to_full_posture"] == 0.5
    assert f["experiment_end_at"] == "2026-03-01T12:02:50.000Z"
    # Seen at a poll, a whole number of polls after the request; end -> normal counts from FIS's endTime.
    normal = datetime.fromisoformat(f["normal_at"].replace("Z", "+00:00"))
    assert (normal - START).total_seconds() % POLL == 0 and normal > START + RUNS_FOR
    assert f["minutes_end_to_normal"] == round((normal - (START + RUNS_FOR)).total_seconds() / 60, 1)
    assert report["restore"]["exact"] and snapshot(clients, fleet) == before
    assert ledger_plan.read(Ledger(clients("dynamodb"), DEFAULT_TABLE)).stage == "normal"


def test_an_interrupted_drill_stops_the_experiment_and_says_what_is_left(account, clients, tmp_path):
    clock = FakeClock(START)
    ctx, args, fis = command(tmp_path, "--yes")
    fis.add_response("get_experiment_template", template(), {"id": TEMPLATE})
    fis.add_response("start_experiment", experiment("initiating"), {"clientToken": ANY, "experimentTemplateId": TEMPLATE})
    fis.add_response("get_experiment", experiment("running"), {"id": EXPERIMENT})
    fis.add_response("get_experiment", experiment("running"), {"id": EXPERIMENT})
    fis.add_response("stop_experiment", experiment("stopping"), {"id": EXPERIMENT})

    with fis:
        code = drill.drill(ctx, args, clock=clock, sleep=DeployedController(clock, account, interrupt_after=1))

    fis.assert_no_pending_responses()
    report = json.loads((tmp_path / "out" / "drill-report.json").read_text())
    assert code == 1 and report["result"] == "failed"
    assert report["experiment"]["state"] == "stopping"
    assert "interrupted by the operator" in report["problems"]
    assert any(p.startswith("the plan did not return to normal during the drill") for p in report["problems"])
    # Holdfast holds the fleet: each engaged resource is named as not back (yet).
    assert {r["arn"] for r in report["restore"]["not_restored"]} == {a for arns in account.selected.values() for a in arns}


# ---- refusals, each before anything is started ------------------------------------------

def test_without_yes_nothing_is_called(refusing_account, tmp_path, capsys):
    from holdfast.cli import main

    assert main(["--region", REGION, "drill", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "injects real launch failures" in err and "--yes" in err
    assert not (tmp_path / "drill-report.json").exists()


@pytest.mark.parametrize("case, message", [
    ("missing", f"FIS experiment template {TEMPLATE} does not exist in {REGION}"),
    ("no-action", f"has no {drill.ASG_ICE_ACTION} action"),
    ("no-role", f"the FIS role {ROLE_ARN} of experiment template {TEMPLATE} does not exist"),
    ("rejected", f"FIS did not start experiment template {TEMPLATE}: ValidationException"),
])
def test_a_missing_or_broken_template_is_refused_naming_the_problem(refusing_account, clients, tmp_path, case, message):
    before = snapshot(clients, refusing_account)
    ctx, args, fis = command(tmp_path, "--yes")
    if case == "missing":
        fis.add_client_error("get_experiment_template", "ResourceNotFoundException", "Experiment template not found",
                             404, expected_params={"id": TEMPLATE})
    elif case == "no-action":
        fis.add_response("get_experiment_template",
                         template({"StopSome": {"actionId": "aws:ec2:stop-instances", "targets": {"Instances": "SelectedGroups"}}}),
                         {"id": TEMPLATE})
    else:
        fis.add_response("get_experiment_template", template(), {"id": TEMPLATE})
    if case == "no-role":
        clients("iam").delete_role(RoleName=ROLE)
    if case == "rejected":
        fis.add_client_error("start_experiment", "ValidationException", "Unable to assume role", 400,
                             expected_params={"clientToken": ANY, "experimentTemplateId": TEMPLATE})

    with fis, pytest.raises(UsageError, match=_literal(message)):
        drill.drill(ctx, args, clock=FakeClock(START), sleep=lambda s: pytest.fail("no waiting after a refusal"))

    fis.assert_no_pending_responses()
    assert ledger_plan.read(Ledger(clients("dynamodb"), DEFAULT_TABLE)) is None
    assert snapshot(clients, refusing_account) == before


@pytest.mark.parametrize("setup, message", [
    ("no-settings", f"cannot tell the deployed controller's mode (no SSM parameter {PREFIX}/settings)"),
    ("off", "Holdfast runs in mode=off here"),
    ("no-template", f"no FIS experiment template: SSM parameter {PREFIX}/experiment-template-id does not exist"),
    # The stack is found by its game day's parameter: here one named as make e2e names it.
    ("other-stack", "cannot tell the deployed controller's mode (no SSM parameter /holdfast/Holdfast-e2e/settings)"),
    ("two-stacks", f"2 Holdfast stacks in {REGION} have a game day (/holdfast/Holdfast, /holdfast/Second): "
                   "choose one with --stack-name"),
])
def test_the_deployment_is_checked_before_fis_is_called(refusing_account, clients, tmp_path, setup, message):
    ssm = clients("ssm")
    if setup == "no-settings":
        ssm.delete_parameter(Name=f"{PREFIX}/settings")
    elif setup == "off":
        ssm.put_parameter(Name=f"{PREFIX}/settings", Type="String", Value=json.dumps({"mode": "off"}), Overwrite=True)
    elif setup == "no-template":
        ssm.delete_parameter(Name=f"{PREFIX}/{drill.TEMPLATE_PARAMETER}")
    elif setup == "other-stack":
        ssm.delete_parameter(Name=f"{PREFIX}/{drill.TEMPLATE_PARAMETER}")
        ssm.put_parameter(Name=f"/holdfast/Holdfast-e2e/{drill.TEMPLATE_PARAMETER}", Type="String", Value=TEMPLATE)
    else:
        ssm.put_parameter(Name=f"/holdfast/Second/{drill.TEMPLATE_PARAMETER}", Type="String", Value=TEMPLATE)
    ctx, args, fis = command(tmp_path, "--yes")

    with fis, pytest.raises(UsageError, match=_literal(message)):   # any FIS call would fail: nothing is stubbed
        drill.drill(ctx, args, clock=FakeClock(START), sleep=lambda s: pytest.fail("no waiting after a refusal"))


def test_settings_given_by_hand_are_used_and_reported_as_unconfirmed(refusing_account, clients, tmp_path):
    clients("ssm").delete_parameter(Name=f"{PREFIX}/settings")
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps({"context": {"holdfast": {"mode": "off"}}}))
    ctx, args, fis = command(tmp_path, "--yes", "--settings", str(path))

    with fis, pytest.raises(UsageError, match=_literal(f"(settings from --settings {path} (not confirmed against the deployment")):
        drill.drill(ctx, args, clock=FakeClock(START), sleep=lambda s: None)


def _literal(text: str) -> str:
    import re

    return re.escape(text)


def _group_zones(clients) -> str:
    groups = clients("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    return ",".join(sorted({z for g in groups for z in g["AvailabilityZones"]}))


def test_a_template_missing_a_zone_of_the_selected_groups_gets_their_zones_before_it_starts(refusing_account, clients, tmp_path):
    """A game day deployed without game_day_availability_zones lists Fn::GetAZs, which in
    an account with a default VPC may leave out zones the groups launch in."""
    zones = _group_zones(clients)
    assert zones.count(",") >= 1, zones
    listed = zones.split(",")[0]
    actions = {"LaunchesFailInEveryZone": {
        "actionId": drill.ASG_ICE_ACTION, "description": "InsufficientInstanceCapacity",
        "parameters": {"availabilityZoneIdentifiers": listed, "duration": "PT3M"},
        "targets": {"AutoScalingGroups": "SelectedGroups"}}}
    ctx, args, fis = command(tmp_path, "--yes")
    fis.add_response("get_experiment_template", template(actions), {"id": TEMPLATE})
    covered = {name: {**a, "parameters": {**a["parameters"], "availabilityZoneIdentifiers": zones}} for name, a in actions.items()}
    fis.add_response("update_experiment_template", template(covered), {"id": TEMPLATE, "actions": covered})
    fis.add_client_error("start_experiment", "ValidationException", "stop here", 400,
                         expected_params={"clientToken": ANY, "experimentTemplateId": TEMPLATE})
    with fis, pytest.raises(UsageError, match="stop here"):
        drill.drill(ctx, args, clock=FakeClock(START), sleep=lambda s: pytest.fail("not started"))
    fis.assert_no_pending_responses()


def test_a_template_of_zone_ids_missing_the_groups_zones_is_refused_with_the_setting_to_fix_it(refusing_account, clients, tmp_path):
    actions = {"LaunchesFailInEveryZone": {
        "actionId": drill.ASG_ICE_ACTION, "parameters": {"availabilityZoneIdentifiers": "use1-az1", "duration": "PT3M"},
        "targets": {"AutoScalingGroups": "SelectedGroups"}}}
    ctx, args, fis = command(tmp_path, "--yes")
    fis.add_response("get_experiment_template", template(actions), {"id": TEMPLATE})
    with fis, pytest.raises(UsageError, match="zone IDs; the selected groups launch in .*set game_day_availability_zones"):
        drill.drill(ctx, args, clock=FakeClock(START), sleep=lambda s: pytest.fail("not started"))
    fis.assert_no_pending_responses()
