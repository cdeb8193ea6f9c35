"""Words an operator reads and acts on: who paused (the IAM identity, as `engage` records
it), why `--all-accounts` found no account (the caller's account is in no Organization,
not the -a/-o/-t it was never given), and one count in `plan --all-accounts`."""

from __future__ import annotations

from holdfast.cli import main
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.table import ensure_table
from tests.cli.test_org_commands import REGION, org, run  # noqa: F401  (org: a fixture)

CALLER = "arn:aws:sts::123456789012:user/moto"   # moto's GetCallerIdentity


def test_pause_records_the_iam_identity_as_engage_does(clients, capsys):
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    assert main(["--region", REGION, "--json", "pause", "--yes", "--reason", "freeze"]) == 0
    control = ledger_control.read_control(Ledger(clients("dynamodb"), DEFAULT_TABLE))
    assert control.paused and control.paused_by.startswith(CALLER), control.paused_by
    assert "123456789012" in control.paused_by


def test_pause_everywhere_records_the_iam_identity_in_every_account(org, capsys):  # noqa: F811
    code, _ = run(capsys, "pause", "--all-accounts", "--yes", "-a", f"{org.a},{org.b}", "-r", REGION)
    assert code == 0
    assert all(org.control(a, REGION).paused_by.startswith(CALLER) for a in (org.a, org.b))


def test_all_accounts_without_an_organization_says_so_and_blames_no_option(aws, capsys):
    code = main(["--region", REGION, "status", "--all-accounts"])
    err = capsys.readouterr().err
    assert code == 2
    assert "account 123456789012" in err and "not in an Organization" in err and "delegated administrator" in err
    assert "--ou" not in err and "--tag" not in err and "-a/--accounts" in err


def test_plan_everywhere_says_one_count_in_the_table_and_the_summary(org, capsys):  # noqa: F811
    code = main(["--region", REGION, "plan", "--all-accounts", "-a", f"{org.a},{org.b}", "-r", REGION])
    out = capsys.readouterr().out
    assert code == 0
    assert "planned 1" in out and out.rstrip().endswith("1 resources would be engaged, 0 failed"), out
