"""`holdfast engage` with SSM Parameter Store unreadable (the parameters that name the ledger):
it says SSM failed, finds the ledger by the tag a deployed stack puts on it
(`holdfast:component=ledger`), or engages from the resources' tags alone, as with an
unreachable ledger, and never advises `holdfast ledger-init` (a second, empty ledger).
`holdfast.cli.main` in this process on moto; SSM refuses as AWS does a call the caller's
policy denies (AccessDeniedException, HTTP 400)."""

from __future__ import annotations

import json

import pytest

from holdfast.cli import main
from holdfast.ledger import Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger.resources import ResourceLedger
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
)

pytestmark = pytest.mark.usefixtures("aws_semantics")
STACK_TABLE = "Holdfast-LedgerTable1A2B3C-XYZ"   # as CloudFormation names a stack's ledger


@pytest.fixture
def ssm_denied(monkeypatch):
    from moto.core.exceptions import JsonRESTError
    from moto.ssm.models import SimpleSystemManagerBackend

    def denied(self, *args, **kwargs):
        raise JsonRESTError("AccessDeniedException", "User is not authorized to perform: ssm:GetParametersByPath")

    monkeypatch.setattr(SimpleSystemManagerBackend, "get_parameters_by_path", denied)


def tag_ledger(clients, name: str) -> None:
    arn = clients("dynamodb").describe_table(TableName=name)["Table"]["TableArn"]
    clients("dynamodb").tag_resource(ResourceArn=arn, Tags=[{"Key": "holdfast:component", "Value": "ledger"}])


def test_with_ssm_unreadable_engage_finds_the_ledger_by_its_tag_and_says_ssm_failed(clients, ssm_denied, capsys):
    ensure_table(clients("dynamodb"), STACK_TABLE)
    tag_ledger(clients, STACK_TABLE)
    ensure_table(clients("dynamodb"), "orders")            # another table of the account, untagged
    make_asg(clients, "web")

    assert main(["--region", REGION, "--json", "engage", "--yes"]) == 0
    said = capsys.readouterr()
    doc = json.loads(said.out)
    assert doc["ledger_available"] is True
    assert [r.arn for r in ResourceLedger(Ledger(clients("dynamodb"), STACK_TABLE)).records()] == \
        [o["arn"] for o in doc["resources"] if o["action"] == "engaged"]
    assert f"ledger: the table tagged holdfast:component=ledger, {STACK_TABLE} (SSM parameters under /holdfast " \
           "unreadable: AccessDenied" in said.err, said.err
    assert "ledger-init" not in said.err
    assert ledger_control.read_control(Ledger(clients("dynamodb"), STACK_TABLE)).held_by


def test_with_ssm_unreadable_and_no_tagged_ledger_engage_runs_from_tags_only_and_never_advises_ledger_init(
        clients, ssm_denied, capsys):
    make_asg(clients, "web")

    code = main(["--region", REGION, "--json", "engage", "--yes"])
    said = capsys.readouterr()
    assert code == 0, said.err
    doc = json.loads(said.out)
    assert doc["ledger_available"] is False
    assert [o["action"] for o in doc["resources"]] == ["engaged"]
    assert "SSM parameters under /holdfast unreadable" in said.err and "AccessDenied" in said.err
    assert "resource tags only" in said.err and "ledger-init" not in said.err

    # Nor does ledger-init make a second ledger while SSM cannot say whether one exists.
    assert main(["--region", REGION, "ledger-init", "--yes"]) == 2
    assert "second, empty one" in capsys.readouterr().err
    assert "holdfast-ledger" not in clients("dynamodb").list_tables()["TableNames"]
