"""`holdfast release ARN` acts on exactly the resource its ARN names, or on nothing: an ARN
of another region or another account than the command acts in is a usage error (exit 2,
one line naming what differs), for every kind, and nothing is written anywhere.

Before this check, Lambda's and Auto Scaling's lookups by name (or a mapping's by UUID)
found this region's resource of the same name, and `release` restored it and forgot its
record. `holdfast.cli.main` runs in-process against moto (account 123456789012,
us-east-1), with AWS's semantics where moto departs from them."""

from __future__ import annotations

import json

import pytest

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
    make_mapping,
    make_service_target,
    make_target_group,
)

ACCOUNT = "123456789012"
FOREIGN_REGION, FOREIGN_ACCOUNT = "eu-west-1", "210987654321"
WRITES = ("Put", "Update", "Delete", "Tag", "Untag", "Suspend", "Resume", "Modify", "Register", "AddTags", "RemoveTags")


def run(capsys, *args) -> tuple[int, dict | None, str]:
    code = main(["--region", REGION, "--json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def foreign(arn: str, *, region: str | None = None, account: str | None = None) -> str:
    parts = arn.split(":")
    parts[3] = region or parts[3]
    parts[4] = account or parts[4]
    return ":".join(parts)


@pytest.fixture
def engaged(aws_semantics, capsys):
    """One engaged resource of every kind (an alias's async config among them): kind -> ARNs."""
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    lam = clients("lambda")
    fn = make_function(clients, "fn")
    version = lam.publish_version(FunctionName="fn")["Version"]
    lam.create_alias(FunctionName="fn", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="fn", Qualifier="live", MaximumRetryAttempts=2)
    arns = {
        "asg": [make_asg(clients, "asg")],
        "esm": [make_mapping(clients, make_function(clients, "consumer"), "q")["EventSourceMappingArn"]],
        "async": [fn, f"{fn}:live"],
        "nlb": [make_target_group(clients, "tg")],
        "scalable-target": [make_service_target(clients, "svc")],
    }
    code, doc, err = run(capsys, "engage", "--yes")
    assert code == 0, err
    engaged = {r["arn"] for r in doc["resources"] if r["action"] == "engaged"}
    assert {a for kind in arns.values() for a in kind} <= engaged
    return clients, arns


def status(capsys) -> dict[str, dict]:
    code, doc, err = run(capsys, "status")
    assert code == 0, err
    return {r["arn"]: r for r in doc["resources"]}


def test_release_refuses_an_arn_of_another_region_or_account_for_every_kind(engaged, capsys):
    clients, arns = engaged
    before = status(capsys)
    tried = []
    for kind, each in arns.items():
        for arn in each:
            for where, other in (("region", foreign(arn, region=FOREIGN_REGION)),
                                 ("account", foreign(arn, account=FOREIGN_ACCOUNT))):
                calls = dict(clients.calls)
                code, out, err = run(capsys, "release", other, "--yes")
                assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (other, err)
                assert out["error"]["cause"] == "usage" and out["error"]["exit_code"] == 2 and "resources" not in out
                assert other in err and "nothing was done" in err
                assert (f"region {FOREIGN_REGION}" in err and "--region eu-west-1" in err) if where == "region" \
                    else f"account {FOREIGN_ACCOUNT}" in err
                made = [op for op, n in clients.calls.items() if n != calls.get(op, 0)]
                assert not [op for op in made if op.split(":")[1].startswith(WRITES) and not op.startswith("dynamodb:")]
                tried.append((kind, where))
    # Every kind, a qualified ARN among them, each in a foreign region and a foreign account.
    assert len(tried) == 12 and {k for k, _ in tried} == set(arns)
    # This region's resources of the same names and ids are all still engaged, as they were.
    after = status(capsys)
    assert after.keys() == before.keys() >= {a for each in arns.values() for a in each}
    assert {a: r["current"] for a, r in after.items()} == {a: r["current"] for a, r in before.items()}


def test_release_of_this_regions_arn_restores_exactly_that_resource(engaged, capsys):
    clients, arns = engaged
    alias = arns["async"][1]
    code, doc, err = run(capsys, "release", alias, "--yes")
    assert code == 0, err
    assert [r["arn"] for r in doc["resources"]] == [alias] and doc["resources"][0]["action"] == "restored"
    left = status(capsys)
    assert alias not in left and arns["async"][0] in left, "the function's own config is still engaged"


def test_an_arn_of_another_partition_is_refused_too(engaged, capsys):
    _, arns = engaged
    other = arns["asg"][0].replace("arn:aws:", "arn:aws-cn:", 1)
    code, _, err = run(capsys, "release", other, "--yes")
    assert code == 2 and "partition aws-cn" in err
