"""A command gives up its shares of the account's rate budgets when it ends, so the
controllers it shared them with take them back at once, not when its leases lapse."""

from __future__ import annotations

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.cli.context import Context
from holdfast.ledger import DEFAULT_TABLE, PK, SK
from holdfast.ledger.budget_board import PARTITION
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_function,
    make_mapping,
)


def _leases(clients) -> list[str]:
    items = clients("dynamodb").query(
        TableName=DEFAULT_TABLE, KeyConditionExpression="#pk = :pk", ExpressionAttributeNames={"#pk": PK},
        ExpressionAttributeValues={":pk": {"S": PARTITION}}, ConsistentRead=True)["Items"]
    return sorted(i[SK]["S"] for i in items)


def test_a_command_gives_up_its_rate_budget_shares_when_it_ends(aws_semantics, capsys, monkeypatch):
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    make_mapping(clients, make_function(clients, "consumer"), "q")
    assert main(["--region", REGION, "--json", "plan"]) == 0
    assert _leases(clients) == []
    # The same command that does not leave holds its leases after it ends: it did join.
    monkeypatch.setattr(Context, "leave", lambda self: None)
    assert main(["--region", REGION, "--json", "plan"]) == 0
    capsys.readouterr()
    assert _leases(clients), "plan made no call through the rate budgets"


def test_a_lease_the_command_may_not_delete_is_left_to_lapse_and_the_command_still_succeeds(aws_semantics, capsys,
                                                                                          monkeypatch):
    # AWS answers a DeleteItem the caller's role does not allow with AccessDeniedException
    # (400): the lease then lapses by itself (3 s), and the command's outcome is its own.
    from botocore.exceptions import ClientError

    from holdfast.ledger.store import Ledger

    def denied(self, **request):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized to perform: "
                                     "dynamodb:DeleteItem"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "DeleteItem")

    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    make_mapping(clients, make_function(clients, "consumer"), "q")
    monkeypatch.setattr(Ledger, "delete_item", denied)
    assert main(["--region", REGION, "--json", "plan"]) == 0
    capsys.readouterr()
    assert _leases(clients), "the denied leave removed the lease after all"
