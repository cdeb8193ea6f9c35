"""`holdfast status --all-accounts`: stage, generation and engaged counts per account and
region, through the read-only role in each account, on moto.

Moto keeps one backend per account and maps an assumed role's credentials to the role's
account, so three accounts and two regions are real to the command. Moto would assume a
role that does not exist; AWS answers AccessDenied, and holdfast_fixtures.moto_patches
restores that (`assume_role_needs_the_role`).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone

import boto3
import pytest

from holdfast.aws import Clients
from holdfast.cli import accounts, build_parser, main
from holdfast.cli.context import Context
from holdfast.core import policy
from holdfast.core.model import Record
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.ledger import verdict as ledger_verdict
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger.table import ensure_table
from holdfast_fixtures.moto_patches import assume_role_needs_the_role
from tests.conftest import REGION

A, B, C = "111111111111", "222222222222", "333333333333"
OTHER = "eu-west-1"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]})


def _in(account: str, region: str) -> Clients:
    """Clients acting inside `account` (moto: credentials of a role assumed there)."""
    creds = boto3.client("sts", region_name=REGION).assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/admin", RoleSessionName="setup")["Credentials"]
    return Clients(boto3.session.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                                         aws_session_token=creds["SessionToken"], region_name=region))


def _read_only_role(account: str) -> None:
    _in(account, REGION)("iam").create_role(RoleName=accounts.DEFAULT_ROLE, AssumeRolePolicyDocument=TRUST)


@pytest.fixture
def organization(aws):
    """A: the role; a plan in hold with two engaged records in us-east-1, nothing in eu-west-1.
    B: the role; a ledger in us-east-1 only. C: no role."""
    for account in (A, B):
        _read_only_role(account)
    a = _in(A, REGION)
    ensure_table(a("dynamodb"), DEFAULT_TABLE)
    ledger_plan.write(Ledger(a("dynamodb"), DEFAULT_TABLE), policy.Plan(generation=1, stage=policy.HOLD, entered_at=NOW),
                      controller_id="r", now=NOW)
    ledger_plan.write(Ledger(a("dynamodb"), DEFAULT_TABLE), policy.Plan(generation=2, stage=policy.DRAIN, drain_step=1, entered_at=NOW),
                      controller_id="r", now=NOW)
    ledger = ResourceLedger(Ledger(a("dynamodb"), DEFAULT_TABLE))
    for kind, arn in (("asg", f"arn:aws:autoscaling:{REGION}:{A}:autoScalingGroup:u:autoScalingGroupName/g"),
                      ("esm", f"arn:aws:lambda:{REGION}:{A}:event-source-mapping:m1"),
                      ("esm", f"arn:aws:lambda:{REGION}:{A}:event-source-mapping:m2")):
        assert ledger.put_original(Record(kind, arn, {"x": 1}, {"x": 2}), "n")
    ledger_verdict.write_verdict(Ledger(a("dynamodb"), DEFAULT_TABLE), {"state": "recovering", "since": "2026-03-01T12:00:00Z",
                                                               "reasons": [], "last_capacity_failure": None,
                                                               "last_successful_launch": None})
    ledger_control.set_paused(Ledger(a("dynamodb"), DEFAULT_TABLE), True, by="oncall", reason="look", now=NOW)
    ensure_table(_in(A, OTHER)("dynamodb"), DEFAULT_TABLE)
    ensure_table(_in(B, REGION)("dynamodb"), DEFAULT_TABLE)
    with assume_role_needs_the_role():
        yield


ARGS = ["--region", REGION, "status", "--all-accounts", "--accounts", f"{A},{B},{C}", "--regions", f"{REGION},{OTHER}"]


def test_every_account_and_region_is_a_row_and_failures_are_rows_too(organization, capsys):
    code = main(["--json", *ARGS])

    doc = json.loads(capsys.readouterr().out)
    assert code == 1  # some rows could not be read; each says why
    rows = {(r["account"], r["region"]): r for r in doc["rows"]}
    assert list(rows) == [(A, OTHER), (A, REGION), (B, OTHER), (B, REGION), (C, OTHER), (C, REGION)]
    held = rows[(A, REGION)]
    assert (held["stage"], held["generation"], held["engaged"], held["engaged_by_kind"]) == ("drain", 2, 3, {"asg": 1, "esm": 2})
    assert (held["verdict"], held["paused"], held["entered_at"], held["error"]) == ("recovering", True, NOW.isoformat(), None)
    assert (rows[(A, OTHER)]["stage"], rows[(A, OTHER)]["generation"], rows[(A, OTHER)]["engaged"]) == ("normal", 0, 0)
    assert rows[(B, REGION)]["error"] is None and rows[(B, REGION)]["engaged"] == 0
    assert rows[(B, OTHER)]["error"] == f"no ledger table {DEFAULT_TABLE} in {OTHER}"
    for region in (REGION, OTHER):
        assert rows[(C, region)]["error"].startswith(f"cannot assume arn:aws:iam::{C}:role/HoldfastReadOnly: AccessDenied")
        assert rows[(C, region)]["stage"] is None
    assert doc["errors"] == 3 and doc["accounts"] == 3 and doc["regions"] == [REGION, OTHER]
    # One AssumeRole per account, not per region.
    assert doc["api_calls_by_operation"]["sts:AssumeRole"] == 3


def test_the_table_names_each_account_region_and_error(organization, capsys):
    code = main(ARGS)

    out, err = capsys.readouterr()
    assert code == 1
    lines = out.splitlines()
    assert lines[0].split() == ["ACCOUNT", "REGION", "STAGE", "GEN", "ENGAGED", "BY", "KIND", "SINCE", "VERDICT", "PAUSED", "ERROR"]
    held = next(line for line in lines if line.startswith(f"{A}  {REGION}"))
    assert "drain" in held and "asg 1, esm 2" in held and "recovering" in held and "yes" in held
    assert lines[-1] == "3 accounts x 2 regions: 1 not normal, 3 resources engaged, 3 unreadable"
    assert f"{C} {REGION}: cannot assume" in err and f"{B} {OTHER}: no ledger table" in err


def test_accounts_come_from_organizations_when_not_named(aws, capsys):
    org = boto3.client("organizations", region_name=REGION)
    org.create_organization(FeatureSet="ALL")
    created = [org.create_account(AccountName=n, Email=f"{n}@example.com")["CreateAccountStatus"]["AccountId"]
               for n in ("payments", "search")]
    for account in created:
        _read_only_role(account)
        ensure_table(_in(account, REGION)("dynamodb"), DEFAULT_TABLE)

    with assume_role_needs_the_role():
        code = main(["--json", "--region", REGION, "status", "--all-accounts"])

    doc = json.loads(capsys.readouterr().out)
    rows = {r["account"]: r for r in doc["rows"]}
    # The management account (123456789012) is listed too; it has no read-only role here.
    assert set(rows) == {"123456789012", *created} and code == 1
    assert all(rows[a]["error"] is None and rows[a]["stage"] == "normal" for a in created)
    assert "cannot assume" in rows["123456789012"]["error"]


class CountingBucket:
    def __init__(self):
        self.taken = 0

    def take(self):
        self.taken += 1


def test_every_assume_and_every_ledger_read_passes_its_budget(organization, capsys):
    args = build_parser().parse_args(["--json", *ARGS, "--workers", "3"])
    ctx = Context.from_args(args)
    budgets = accounts._Budgets(assume=CountingBucket(), reads=CountingBucket())

    accounts.status_all(ctx, args, budgets=budgets)

    calls = Counter(ctx.clients.calls)
    assert budgets.assume.taken == calls["sts:AssumeRole"] == 3
    reads = sum(n for op, n in calls.items() if op.startswith("dynamodb:"))
    # Six reads a region (the plan, the verdict, the kill switch, the records, the release
    # requests, the readiness result) for A's two regions and B's one; B's missing table fails on its first read.
    # Before them, each region's ledger name (its table is named by CloudFormation): one budgeted
    # GetParametersByPath for each account and region whose role was assumed (four rows), the
    # CLI's own lookup at start (in its own account) unbudgeted.
    rows = 4
    assert reads == 6 * 3 + 1 and budgets.reads.taken == reads + rows
    assert calls["ssm:GetParametersByPath"] == rows + 1


@pytest.mark.parametrize("extra, message", [
    (["--accounts", "12345,111111111111"], "--accounts: '12345' is not an AWS account id (12 digits)"),
    (["--accounts", A, "--regions", "us-east-1,mars-north-1"], "--regions: 'mars-north-1' is not an AWS region"),
    (["--accounts", A, "--role-name", "no spaces"], "--role-name 'no spaces' is not an IAM role name"),
    (["--accounts", A, "--workers", "0"], "--workers must be at least 1"),
])
def test_bad_input_is_a_usage_error_naming_it(aws, capsys, extra, message):
    assert main(["--region", REGION, "status", "--all-accounts", *extra]) == 2
    assert message in capsys.readouterr().err


def test_accounts_without_all_accounts_is_a_usage_error(aws, capsys):
    assert main(["--region", REGION, "status", "--accounts", A]) == 2
    assert "--accounts, --ou, --tag, --regions, --accounts-file and --output-dir go with --all-accounts" in capsys.readouterr().err


def test_all_accounts_from_a_region_with_two_stacks_reads_each_members_own_ledger(organization, capsys):
    """The caller's account and region hold two Holdfast stacks (two ledgers published): an
    --all-accounts command uses no ledger of the caller's, so that is no error; and a member
    always finds its own (CloudFormation names each table), --ledger-table or not."""
    here = Clients(region=REGION)
    for stack, name in (("Holdfast", "holdfast-one"), ("Other", "holdfast-two")):
        here("ssm").put_parameter(Name=f"/holdfast/{stack}/ledger-table", Value=name, Type="String")
    creds = boto3.client("sts", region_name=REGION).assume_role(   # in A: the role the fixture made there
        RoleArn=f"arn:aws:iam::{A}:role/{accounts.DEFAULT_ROLE}", RoleSessionName="setup")["Credentials"]
    boto3.client("ssm", region_name=REGION, aws_access_key_id=creds["AccessKeyId"],
                 aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"]).put_parameter(
        Name="/holdfast/Holdfast/ledger-table", Value=DEFAULT_TABLE, Type="String")
    args = ["--json", "--region", REGION, "status", "--all-accounts", "--accounts", A, "--regions", REGION]

    assert main(args) == 0, capsys.readouterr().err
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["stage"], row["engaged"], row["error"]) == ("drain", 3, None)

    # The --ledger-table the caller's own commands need here names no table of the member's.
    assert main(["--ledger-table", "holdfast-one", *args]) == 0, capsys.readouterr().err
    [row] = json.loads(capsys.readouterr().out)["rows"]
    assert (row["stage"], row["error"]) == ("drain", None)
    # A command that uses this region's ledger still asks which.
    assert main(["--region", REGION, "status"]) == 2
    assert "several Holdfast stacks publish a ledger table here" in capsys.readouterr().err
