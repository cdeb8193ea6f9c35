"""`holdfast pause|unpause|engage|plan|status --all-accounts` and `holdfast report` against
two member accounts of an emulated organization, each in two regions.

Moto keeps one backend per account and maps an assumed role's credentials to the role's
account, so the accounts are real to the commands. The organization is moto's: an OU
`prod` with a child OU `payments` (B is there), A at the root tagged team=search; the
management account (123456789012) has no Holdfast role. AssumeRole of a role that does
not exist is AccessDenied, as in AWS (holdfast_fixtures.moto_patches).
"""

from __future__ import annotations

import csv
import io
import json
import threading
from datetime import datetime, timezone

import boto3
import pytest

from holdfast.aws import Clients
from holdfast.cli import accounts, main
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.table import ensure_table
from holdfast_cdk import role_policies
from holdfast_fixtures.moto_patches import assume_role_needs_the_role
from tests.conftest import REGION

OTHER = "eu-west-1"
REGIONS = (REGION, OTHER)
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]})
SELECTOR = [{"Key": "holdfast:protect", "Value": "true"}]


def _in(account: str, region: str) -> Clients:
    creds = boto3.client("sts", region_name=REGION).assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/admin", RoleSessionName="setup")["Credentials"]
    return Clients(boto3.session.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                                         aws_session_token=creds["SessionToken"], region_name=region))


def _group(clients: Clients, name: str) -> str:
    ec2 = clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone=f"{clients.region}a")["Subnet"]["SubnetId"]
    ec2.create_launch_template(LaunchTemplateName=f"{name}-lt", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"})
    clients("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=name, MinSize=0, MaxSize=1, DesiredCapacity=0, LaunchTemplate={"LaunchTemplateName": f"{name}-lt"},
        VPCZoneIdentifier=subnet,
        Tags=[{**t, "ResourceId": name, "ResourceType": "auto-scaling-group", "PropagateAtLaunch": False} for t in SELECTOR])
    return clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]["AutoScalingGroupARN"]


class Org:
    def __init__(self):
        org = boto3.client("organizations", region_name=REGION)
        org.create_organization(FeatureSet="ALL")
        root = org.list_roots()["Roots"][0]["Id"]
        self.prod = org.create_organizational_unit(ParentId=root, Name="prod")["OrganizationalUnit"]["Id"]
        self.payments = org.create_organizational_unit(ParentId=self.prod, Name="payments")["OrganizationalUnit"]["Id"]
        self.a, self.b = (org.create_account(AccountName=n, Email=f"{n}@example.com")["CreateAccountStatus"]["AccountId"]
                          for n in ("search", "payments"))
        org.move_account(AccountId=self.b, SourceParentId=root, DestinationParentId=self.payments)
        org.tag_resource(ResourceId=self.a, Tags=[{"Key": "team", "Value": "search"}])
        # Clients inside each account, made before AssumeRole needs the role (admin does not exist).
        self.inside = {(a, r): _in(a, r) for a in (self.a, self.b) for r in REGIONS}
        for account in (self.a, self.b):
            iam = self.inside[account, REGION]("iam")
            for role in (accounts.DEFAULT_ROLE, accounts.OPERATOR_ROLE):
                iam.create_role(RoleName=role, AssumeRolePolicyDocument=TRUST)
            for region in REGIONS:
                ensure_table(self.inside[account, region]("dynamodb"), DEFAULT_TABLE)
        self.group = _group(self.inside[self.a, REGION], "web")

    def control(self, account: str, region: str) -> ledger_control.Control:
        return ledger_control.read_control(Ledger(self.inside[account, region]("dynamodb"), DEFAULT_TABLE))


@pytest.fixture
def org(aws):
    made = Org()
    with assume_role_needs_the_role():
        yield made


def run(capsys, *argv) -> tuple[int, dict]:
    code = main(["--json", "--region", REGION, *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def _cells(doc) -> dict[tuple[str, str], dict]:
    return {(r["account"], r["region"]): r for r in doc["rows"]}


def test_pause_and_unpause_write_the_kill_switch_through_the_operator_role_everywhere(org, capsys):
    both = ["-a", org.a, "-a", org.b, "-r", REGION, "-r", OTHER]
    code, doc = run(capsys, "pause", "--all-accounts", "--yes", *both, "--reason", "org drill")

    assert code == 0 and doc["role_name"] == "HoldfastOperator" and doc["errors"] == 0
    assert set(_cells(doc)) == {(a, r) for a in (org.a, org.b) for r in REGIONS}
    for account in (org.a, org.b):
        for region in REGIONS:
            control = org.control(account, region)
            assert (control.paused, control.reason) == (True, "org drill")
    assert doc["api_calls_by_operation"]["sts:AssumeRole"] == 2          # once per account, not per region

    code, doc = run(capsys, "unpause", "--all-accounts", "--yes", *both)
    assert code == 0 and not any(org.control(a, r).paused for a in (org.a, org.b) for r in REGIONS)


def test_a_write_everywhere_without_yes_and_no_terminal_refuses_before_any_account(org, capsys):
    for command in ("pause", "unpause", "engage"):
        code, doc = run(capsys, command, "--all-accounts", "-a", org.a, "-r", REGION)
        assert code == 2 and doc["error"]["cause"] == "usage" and "--yes" in doc["error"]["message"], command
    code, doc = run(capsys, "pause", "--all-accounts", "--dry-run", "-a", org.a, "-r", REGION)
    assert code == 2 and "plan --all-accounts" in doc["error"]["message"]
    assert not org.control(org.a, REGION).paused


def test_a_missing_operator_role_is_a_row_with_its_error_and_the_others_still_pause(org, capsys):
    org.inside[org.b, REGION]("iam").delete_role(RoleName=accounts.OPERATOR_ROLE)
    code, doc = run(capsys, "pause", "--all-accounts", "--yes", "-a", f"{org.a},{org.b}", "-r", REGION)

    assert code == 1
    cells = _cells(doc)
    assert cells[(org.b, REGION)]["error"].startswith(f"cannot assume arn:aws:iam::{org.b}:role/HoldfastOperator: AccessDenied")
    assert cells[(org.a, REGION)]["error"] is None and org.control(org.a, REGION).paused
    assert not org.control(org.b, REGION).paused


def test_subsets_by_ou_with_its_child_ous_by_tag_and_by_account(org, capsys):
    def accounts_of(*subset):
        code, doc = run(capsys, "status", "--all-accounts", *subset, "-r", REGION)
        return code, sorted({r["account"] for r in doc["rows"]})

    assert accounts_of("-o", org.prod) == (0, [org.b])                  # B is in prod's child OU
    assert accounts_of("-t", "team=search") == (0, [org.a])
    assert accounts_of("-a", org.a, "-a", org.b, "-o", org.payments) == (0, [org.b])
    # Without a subset: every active account Organizations lists, the management account too.
    code, every = accounts_of()
    assert code == 1 and every == sorted([org.a, org.b, "123456789012"])


def test_a_subset_that_selects_no_account_is_a_usage_error(org, capsys):
    assert main(["--region", REGION, "status", "--all-accounts", "-a", org.a, "-o", org.prod]) == 2
    assert "no account" in capsys.readouterr().err


def test_engage_writes_only_the_request_and_leaves_the_resources_to_the_reconciler(org, capsys):
    code, doc = run(capsys, "engage", "--all-accounts", "--yes", "-a", org.a, "-r", REGION, "--reason", "us-east-1 launches failing")

    assert code == 0 and doc["role_name"] == "HoldfastOperator"
    (row,) = doc["rows"]
    assert row["generation"] == 0 and "the next tick starts a hold" in row["result"]
    control = org.control(org.a, REGION)
    assert control.engage_requested(0) == f"engaged by {control.engage_by}: us-east-1 launches failing"
    group = org.inside[org.a, REGION]("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["web"])["AutoScalingGroups"][0]
    assert group["SuspendedProcesses"] == []                             # nothing written to a resource
    # ssm: each region's ledger name (CloudFormation names the table), read from its stack's parameter.
    assert {op.split(":")[0] for op in doc["api_calls_by_operation"]} <= {"sts", "dynamodb", "organizations", "ssm"}


def test_plan_writes_each_account_region_to_the_output_folder_and_report_sums_them(org, capsys, tmp_path):
    out = tmp_path / "out"
    code, doc = run(capsys, "plan", "--all-accounts", "-a", f"{org.a},{org.b}", "-r", f"{REGION},{OTHER}",
                    "--output-dir", str(out))

    assert code == 0 and doc["role_name"] == "HoldfastReadOnly"
    cells = _cells(doc)
    assert cells[(org.a, REGION)]["planned"] == {"planned": 1}
    assert all(cells[k]["planned"] == {} for k in cells if k != (org.a, REGION))
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json"))
    assert files == sorted(f"{a}/{r}/plan.json" for a in (org.a, org.b) for r in REGIONS)
    detail = json.loads((out / org.a / REGION / "plan.json").read_text())
    assert [r["arn"] for r in detail["resources"]] == [org.group] and detail["command"] == "plan"
    # A plan only reads, and everything it read is granted to HoldfastReadOnly.
    granted = {a for s in role_policies.read("readonly")["Statement"] for a in s["Action"]}
    prefix = {"resourcegroupstaggingapi": "tag", "elbv2": "elasticloadbalancing"}   # boto3 name -> IAM prefix
    made = {prefix.get(op.split(":")[0], op.split(":")[0]) + ":" + op.split(":")[1]
            for op in doc["api_calls_by_operation"] if not op.startswith(("sts:", "organizations:"))}
    assert made and made <= granted, made - granted

    run(capsys, "status", "--all-accounts", "-a", org.a, "-r", REGION, "--output-dir", str(out))
    assert main(["--region", REGION, "report", "--output-dir", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert tuple(rows[0]) == accounts.REPORT_FIELDS
    assert sorted((r["account"], r["region"], r["command"]) for r in rows) == sorted(
        [(a, r, "plan") for a in (org.a, org.b) for r in REGIONS] + [(org.a, REGION, "status")])
    planned = next(r for r in rows if (r["account"], r["region"], r["command"]) == (org.a, REGION, "plan"))
    assert json.loads(planned["planned"]) == {"planned": 1} and planned["error"] == ""

    code, summary = run(capsys, "report", "--output-dir", str(out), "--command", "status")
    assert code == 0 and [(r["account"], r["stage"], r["paused"]) for r in summary["rows"]] == [(org.a, "normal", False)]


def test_report_of_a_folder_no_command_wrote_is_a_usage_error(aws, capsys, tmp_path):
    assert main(["report", "--output-dir", str(tmp_path / "nothing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["null", "[1, 2]", "\"plan\"", "3"])
def test_report_of_a_file_that_is_not_a_json_object_is_a_usage_error_naming_it(aws, capsys, tmp_path, content):
    path = tmp_path / "out" / "111111111111" / "us-east-1" / "plan.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert main(["report", "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "not the object an --all-accounts command writes" in err
    assert "Traceback" not in err


def test_account_regions_run_at_once_up_to_workers(org, capsys, monkeypatch):
    """Four account-regions meet at a barrier of four: they pass only if all four are in
    flight together. With three workers the fourth never starts while three wait."""
    read = accounts.WORK["status"]

    def meeting(parties):
        barrier = threading.Barrier(parties, timeout=20)

        def work(ctx, clients, budgets, args, row):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                row.error = "not in flight together"
                return
            read(ctx, clients, budgets, args, row)
        return work

    cells = ["-a", f"{org.a},{org.b}", "-r", f"{REGION},{OTHER}"]
    monkeypatch.setitem(accounts.WORK, "status", meeting(4))
    code, doc = run(capsys, "status", "--all-accounts", *cells, "--workers", "4")
    assert code == 0 and all(r["stage"] == "normal" for r in doc["rows"]) and len(doc["rows"]) == 4

    # Three workers: four can never meet, whatever the machine's speed; the timeout only ends the wait.
    short = threading.Barrier(4, timeout=0.5)

    def work(ctx, clients, budgets, args, row):
        try:
            short.wait()
        except threading.BrokenBarrierError:
            row.error = "not in flight together"
    monkeypatch.setitem(accounts.WORK, "status", work)
    code, doc = run(capsys, "status", "--all-accounts", *cells, "--workers", "3")
    assert code == 1 and any(r["error"] == "not in flight together" for r in doc["rows"])


def test_advance_skips_the_hold_of_each_account_regions_current_plan(org, capsys):
    from holdfast.core import policy
    from holdfast.ledger import plan as ledger_plan

    now = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    ledger_plan.write(Ledger(org.inside[org.a, REGION]("dynamodb"), DEFAULT_TABLE),
                      policy.Plan(generation=1, stage=policy.HOLD, entered_at=now), controller_id="r", now=now)
    code, doc = run(capsys, "advance", "--all-accounts", "--yes", "-a", org.a, "-r", f"{REGION},{OTHER}")

    assert code == 0 and doc["role_name"] == "HoldfastOperator"
    cells = _cells(doc)
    assert (cells[(org.a, REGION)]["stage"], cells[(org.a, REGION)]["generation"]) == ("hold", 1)
    assert cells[(org.a, OTHER)]["result"] == "no hold to skip"
    assert org.control(org.a, REGION).advance_generation == 1 and org.control(org.a, OTHER).advance_generation is None
    assert main(["--region", REGION, "advance", "--all-accounts", "--yes", "--generation", "1", "-a", org.a]) == 2


def test_release_writes_a_request_where_each_arn_is_and_the_tick_there_restores_it_once(org, capsys):
    from holdfast.engine import Engine
    from tests.support.harness import Harness

    inside_a = org.inside[org.a, REGION]
    harness = Harness(inside_a, DEFAULT_TABLE)              # account A's reconciler, with its own role
    assert [o.action for o in Engine(harness.runtime("cli")).engage(kinds=("asg",)).outcomes] == ["engaged"]
    elsewhere = f"arn:aws:autoscaling:{OTHER}:{org.b}:autoScalingGroup:00000000-0000-0000-0000-000000000000:autoScalingGroupName/web"

    code, doc = run(capsys, "release", org.group, elsewhere, "--all-accounts", "--yes", "--reason", "owner asked")

    assert code == 0 and doc["role_name"] == "HoldfastOperator" and doc["regions"] == sorted([REGION, OTHER])
    cells = _cells(doc)
    assert set(cells) == {(org.a, REGION), (org.b, OTHER)}          # only where each ARN is
    assert [(r["arn"], r["state"], r["written"]) for r in cells[(org.a, REGION)]["releases"]] == [(org.group, "requested", True)]
    assert "release requested for 1 resource(s)" in cells[(org.b, OTHER)]["result"]
    assert [r.arn for r in org.control(org.b, OTHER).releases] == [elsewhere]
    assert org.control(org.a, OTHER).releases == () and org.control(org.b, REGION).releases == ()
    group = lambda: inside_a("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["web"])["AutoScalingGroups"][0]
    assert {p["ProcessName"] for p in group()["SuspendedProcesses"]} == {"ReplaceUnhealthy", "AZRebalance"}

    # The same again before any tick: a duplicate, nothing written.
    code, doc = run(capsys, "release", org.group, "--all-accounts", "--yes")
    (row,) = doc["rows"]
    assert code == 0 and row["releases"][0]["written"] is False and "1 already requested" in row["result"]

    # A's next tick acts on it once, and status --all-accounts shows the outcome.
    assert "release:restored" in harness.tick("A").actions
    assert group()["SuspendedProcesses"] == []
    capsys.readouterr()   # the tick's log lines
    code, doc = run(capsys, "status", "--all-accounts", "-a", org.a, "-r", REGION)
    (row,) = doc["rows"]
    assert [(r["arn"], r["state"], r["outcome"]) for r in row["releases"]] == [(org.group, "done", "restored")]
    harness.clock.advance(60)
    assert not any(a.startswith("release:") for a in harness.tick("A").actions)


def test_release_everywhere_refuses_an_arn_outside_the_selection_or_not_a_resource(org, capsys):
    for extra, message in ((["-a", org.b], "the selection (-a/-o/-t) leaves out"),
                           (["-r", OTHER], "is outside --regions"),
                           ([], None)):
        argv = ["release", org.group, "--all-accounts", "--yes", *extra]
        if message is None:
            argv[1] = f"arn:aws:sqs:{REGION}:{org.a}:orders"
            message = "is not a resource kind Holdfast manages"
        code, doc = run(capsys, *argv)
        assert code == 2 and message in doc["error"]["message"], doc
    assert org.control(org.a, REGION).releases == ()
    # Without --all-accounts, release takes one ARN, as before.
    assert main(["--region", REGION, "release", org.group, org.group, "--yes"]) == 2
