"""The operator CLI contract: ledger-init, plan, engage, status, release, resume --now.

The first test drives the installed `holdfast` console script in a subprocess against
the session moto server, as an operator or another tool would; the rest call
`holdfast.cli.main` in-process against moto, which is cheaper, for the error paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import EndpointConnectionError

from holdfast.aws import Clients
from holdfast.cli import main
from holdfast.core.restore import holdfast_values
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast_demo.fleet import build_fleet, snapshot
from tests.conftest import REGION
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)

HOLDFAST = Path(sys.executable).with_name("holdfast")


def _run(server, *args: str) -> tuple[int, dict | None, str]:
    """One `holdfast --json ...` run: exit code, the JSON document on stdout, stderr."""
    proc = subprocess.run(
        [str(HOLDFAST), "--endpoint-url", server.url, "--region", REGION, "--json", *args],
        capture_output=True, text=True, timeout=60,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr


def _by_arn(document: dict) -> dict[str, dict]:
    return {r["arn"]: r for r in document["resources"]}


def _target_group_at_tag_quota(clients, fleet) -> str:
    """A selected target group with no room for Holdfast's write-ahead tags.

    Moto's tag quota for ELB is 10 (AWS's is 50); either way AddTags answers
    TooManyTags, and a resource whose write-ahead tags cannot be written is engaged
    through the ledger record only, and says so.
    """
    vpc = clients("ec2").describe_vpcs(Filters=[{"Name": "cidr", "Values": ["10.80.0.0/16"]}])["Vpcs"][0]["VpcId"]
    key, value = fleet.selector.split("=")
    tags = [{"Key": key, "Value": value}] + [{"Key": f"owner-{i}", "Value": "x"} for i in range(9)]
    arn = clients("elbv2").create_target_group(Name="full-of-tags", Protocol="TCP", Port=81, VpcId=vpc, Tags=tags)[
        "TargetGroups"][0]["TargetGroupArn"]
    # AWS always answers the health attributes; moto stores none until one is set, and the
    # restore writes the defaults back: set them as AWS reports them, so snapshots compare.
    from holdfast.actuators.nlb import ATTRIBUTES
    clients("elbv2").modify_target_group_attributes(
        TargetGroupArn=arn, Attributes=[{"Key": name, "Value": default} for name, default in ATTRIBUTES.values()])
    fleet.selected["nlb"].append(arn)
    fleet.handles[arn] = arn
    return arn


def test_console_script_engages_and_restores_a_fleet_exactly(moto_server, aws_semantics):
    """The threaded moto server runs in this process, so `aws_semantics`' patches reach it."""
    # GIVEN a fleet of every kind with unselected twins, one target group that cannot take tags
    moto_server.reset()
    clients = moto_server.clients()
    fleet = build_fleet(clients, asgs=2, esms=2, asyncs=3, nlbs=2, services=3)
    full = _target_group_at_tag_quota(clients, fleet)
    selected = set(fleet.arns()) - {a for arns in fleet.unselected.values() for a in arns}
    before = snapshot(clients, fleet)

    # WHEN the ledger does not exist yet THEN status is a usage error that says how to fix it
    code, doc, err = _run(moto_server, "status")
    assert code == 2 and doc["error"]["cause"] == "usage" and "holdfast ledger-init" in err

    code, doc, _ = _run(moto_server, "ledger-init")
    assert code == 0 and doc == {"command": "ledger-init", "table": DEFAULT_TABLE, "region": REGION, "created": True}

    # plan: every selected resource would change, nothing is written
    code, doc, _ = _run(moto_server, "plan")
    assert code == 0, doc
    assert set(_by_arn(doc)) == selected
    assert {r["action"] for r in doc["resources"]} == {"planned"} and doc["failed"] == []
    assert snapshot(clients, fleet) == before

    # engage: everything protected; the group at its tag quota through the ledger record
    # only (its AddTags answered TooManyTags), which the outcome says
    code, doc, err = _run(moto_server, "engage")
    assert code == 0, doc["failed"]
    assert doc["failed"] == []
    by_arn = _by_arn(doc)
    assert {a: r["action"] for a, r in by_arn.items()} == {a: "engaged" for a in selected}
    assert by_arn[full]["recorded_in"] == ["ledger"] and "tag limit" in by_arn[full]["notes"]["record"]["why"]
    assert all(r["recorded_in"] == ["tag", "ledger"] for a, r in by_arn.items() if a != full)
    assert doc["ledger_available"] is True and doc["complete"] is True
    assert set(doc["api_calls"]) == {"asg", "esm", "async", "nlb", "scalable-target"}
    assert all(n > 0 for n in doc["api_calls"].values())
    assert snapshot(clients, fleet)[full]["Tags"] == before[full]["Tags"]
    assert snapshot(clients, fleet)[full] != before[full]
    for arn in fleet.arns():
        if arn not in selected:
            assert snapshot(clients, fleet)[arn] == before[arn]

    # status: every engaged resource, with original, applied and current values, no drift
    code, doc, _ = _run(moto_server, "status")
    assert code == 0 and doc["ledger_available"] is True and doc["drifted"] == []
    rows = _by_arn(doc)
    assert set(rows) == selected
    assert rows[full]["recorded_in"] == ["ledger"]
    for row in rows.values():
        assert row["kind"] == fleet.kind_of(row["arn"])
        assert row["original"]
        # every current value is one Holdfast applied (a mapping's applied set holds the floor and the steps)
        assert all(v in holdfast_values(row["applied"][k]) for k, v in row["current"].items()), row
        assert row["drift"] == {}

    # release one group: restored exactly and forgotten; a second release is a usage error
    asg = fleet.selected["asg"][0]
    code, doc, _ = _run(moto_server, "release", asg)
    assert code == 0 and [(r["arn"], r["action"]) for r in doc["resources"]] == [(asg, "restored")]
    assert snapshot(clients, fleet)[asg] == before[asg]
    code, doc, err = _run(moto_server, "release", asg)
    assert code == 2 and "not engaged" in err

    # resume --now: the rest restored; the fleet is exactly as its owners had it
    code, doc, _ = _run(moto_server, "resume", "--now")
    assert code == 0, doc["failed"]
    assert {a: r["action"] for a, r in _by_arn(doc).items()} == {a: "restored" for a in selected - {asg}}
    assert snapshot(clients, fleet) == before


# ---- in-process: output shapes and error paths ------------------------------------------

def _main(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args, message",
    [
        (("resume",), "resume --now"),
        (("--selector", "no-equals-sign", "plan"), "holdfast.selector"),
        (("release", "arn:aws:s3:::a-bucket"), "not a resource kind Holdfast manages"),
        (("release", "not-an-arn"), "is named 'not-an-arn'"),   # a name, not an ARN: looked up, none engaged
        (("release", "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0:autoScalingGroupName/gone"), "does not exist"),
        (("engage",), "holdfast ledger-init"),
    ],
)
def test_usage_and_settings_errors_exit_2_with_one_line(aws, capsys, args, message):
    if args[0] == "release" and args[1].startswith("arn:aws:autoscaling"):
        ensure_table(Clients(region=REGION)("dynamodb"), DEFAULT_TABLE)
    code, out, err = _main(capsys, "--json", *args)
    # With --json the error is the document on stdout too, with the same one line's message.
    assert code == 2 and json.loads(out)["error"] == {"exit_code": 2, "cause": "usage", "message": err.strip().removeprefix("holdfast: error: ")}
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_credential_errors_are_one_line_not_a_traceback(capsys, monkeypatch, tmp_path):
    code, _, err = _main(capsys, "--profile", "no-such-profile", "status")
    assert code == 2 and "no-such-profile" in err and err.count("\n") == 1

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, _, err = _main(capsys, "--endpoint-url", "http://127.0.0.1:9", "status")
    assert code == 4 and "Unable to locate credentials" in err and err.count("\n") == 1


class _LedgerDown(Clients):
    """Clients whose DynamoDB endpoint cannot be reached, as in October; the rest answer."""

    def __call__(self, service: str):
        client = super().__call__(service)
        if service == "dynamodb" and not getattr(client, "_holdfast_down", False):
            def refuse(request, **_):
                raise EndpointConnectionError(endpoint_url=request.url)

            client.meta.events.register_first("before-send", refuse)
            client._holdfast_down = True
        return client


def test_without_the_ledger_engage_and_status_say_so_and_resume_restores_from_tags(aws_semantics, capsys, monkeypatch):
    # GIVEN a fleet and a ledger table that exists but cannot be reached
    clients = Clients(region=REGION)
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    fleet = build_fleet(clients, asgs=1, esms=1, asyncs=1, nlbs=1, services=1, unselected=0)
    before = snapshot(clients, fleet)
    monkeypatch.setattr("holdfast.cli.context.Clients", _LedgerDown)

    # WHEN engaging in text mode THEN every resource is protected and the output says tag-only
    code, out, err = _main(capsys, "--wide", "engage", "--yes")
    assert code == 0, err
    assert "ran from resource tags only" in out
    for arn in fleet.arns():   # --wide: the ARN column
        assert arn in out
    assert "API calls: asg" in err and "ledger holdfast-ledger unreachable" in err
    assert snapshot(clients, fleet) != before

    code, out, _ = _main(capsys, "--json", "status")
    doc = json.loads(out)
    assert code == 0 and doc["ledger_available"] is False
    assert {r["arn"] for r in doc["resources"]} == set(fleet.arns())
    assert all(r["recorded_in"] == ["tag"] for r in doc["resources"])

    code, out, _ = _main(capsys, "status")
    assert "engaged resources found from their tags only" in out

    # THEN a resume with no ledger at all restores every original from the tags; it exits 1
    # and says why: records kept only in the ledger could not be seen
    code, out, err = _main(capsys, "--json", "resume", "--now", "--yes")
    doc = json.loads(out)
    assert code == 1 and doc["ledger_available"] is False and doc["complete"] is False and doc["failed"] == []
    assert "recorded only there" in err
    assert snapshot(clients, fleet) == before
