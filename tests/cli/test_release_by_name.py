"""`holdfast release NAME`: the one engaged resource of that name in the Region, as
`status` names it; a name two engaged resources share, or none, is a usage error that
names them (or the nearest name) and does nothing."""

from __future__ import annotations

import json

from holdfast.cli import main
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.conftest import REGION
from tests.support.fleet import aws_semantics, describe_asg, make_asg, make_target_group  # noqa: F401


def _run(capsys, *args):
    code = main(["--region", REGION, *args])
    out, err = capsys.readouterr()
    return code, out, err


def _engaged(clients):
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    make_asg(clients, "orders")
    make_asg(clients, "search")
    make_target_group(clients, "search")   # a target group and a group both named search


def test_a_unique_name_releases_that_resource(clients, aws_semantics, capsys):
    _engaged(clients)
    assert _run(capsys, "engage", "--yes")[0] == 0
    code, out, err = _run(capsys, "--json", "release", "orders", "--yes")
    assert code == 0, err
    (restored,) = json.loads(out)["resources"]
    assert restored["arn"] == describe_asg(clients, "orders")["AutoScalingGroupARN"] and restored["action"] == "restored"
    assert describe_asg(clients, "orders")["SuspendedProcesses"] == []


def test_an_ambiguous_name_names_each_resource_and_does_nothing(clients, aws_semantics, capsys):
    _engaged(clients)
    assert _run(capsys, "engage", "--yes")[0] == 0
    code, _, err = _run(capsys, "release", "search", "--yes")
    assert code == 2
    assert "2 engaged resources in us-east-1 (account 123456789012) are named 'search'" in err
    assert "asg arn:aws:autoscaling:" in err and "nlb arn:aws:elasticloadbalancing:" in err and "give the ARN" in err
    assert describe_asg(clients, "search")["SuspendedProcesses"] != []   # still engaged


def test_an_unknown_name_is_a_usage_error_with_the_nearest_name(clients, aws_semantics, capsys):
    _engaged(clients)
    assert _run(capsys, "engage", "--yes")[0] == 0
    code, _, err = _run(capsys, "release", "ordres", "--yes")
    assert code == 2 and "no engaged resource in us-east-1 (account 123456789012) is named 'ordres'" in err
    assert "did you mean 'orders'?" in err and "nothing was done" in err
