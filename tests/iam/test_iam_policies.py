"""policies/<role>.json against the code: the same actions, no wildcard, writes scoped.

Each check runs on the real policies and code, and on a doctored copy to show that it
reports drift (a check that cannot fail proves nothing).
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from pathlib import Path

import pytest
from iam_checks import (
    SERVICE_PREFIX,
    aws_calls,
    drift,
    granted,
    is_write,
    undeclared_calls,
    unscoped_writes,
    wildcard_actions,
)

import holdfast
from holdfast import iam
from holdfast_cdk import role_policies as policies

PACKAGE = Path(holdfast.__file__).resolve().parent
ROLES = ("detector", "reconciler", "readonly", "operator", "readiness", "regionswitch")


@pytest.fixture(scope="module")
def declared() -> dict[str, set[str]]:
    """Import every holdfast module so every @uses has registered."""
    for module in pkgutil.walk_packages(holdfast.__path__, "holdfast."):
        importlib.import_module(module.name)
    return {role: set(iam.DECLARED[role]) for role in iam.ROLES}


@pytest.mark.parametrize("role", ROLES)
def test_policy_grants_exactly_what_the_code_declares(role, declared):
    assert drift(role, granted(policies.read(role)), declared[role]) == []


def test_drift_is_reported_both_ways():
    findings = drift("reconciler", {"autoscaling:SuspendProcesses", "sqs:PurgeQueue"}, {"autoscaling:SuspendProcesses", "ec2:DescribeInstances"})
    assert findings == [
        "policies/reconciler.json grants actions no @uses(by='reconciler') declares: ['sqs:PurgeQueue']",
        "code declares @uses(by='reconciler') actions policies/reconciler.json does not grant: ['ec2:DescribeInstances']",
    ]


def test_every_aws_call_in_the_code_is_declared(declared):
    calls = aws_calls(PACKAGE)
    assert calls, "the scan found no AWS call at all: it is broken"
    everyone = set().union(*declared.values())
    assert undeclared_calls(calls, everyone) == []


def test_an_undeclared_call_is_reported(tmp_path):
    source = tmp_path / "pkg" / "mod.py"
    source.parent.mkdir()
    source.write_text(
        "def suspend(asg, tables):\n"
        "    asg.suspend_processes(AutoScalingGroupName='g')\n"
        "    asg.get_paginator('describe_auto_scaling_groups')\n"
        "    tables.get_waiter('table_exists')\n"
        "    self_made = {}.get('x')\n"
    )
    calls = aws_calls(source.parent)
    assert [c.name for c in calls] == [
        "suspend_processes",
        "get_paginator('describe_auto_scaling_groups')",
        "get_waiter('table_exists')",
    ]
    findings = undeclared_calls(calls, {"autoscaling:DescribeAutoScalingGroups"})
    assert len(findings) == 2
    assert "autoscaling:SuspendProcesses" in findings[0]
    assert "dynamodb:DescribeTable" in findings[1]


def test_a_call_through_a_helper_is_seen(tmp_path):
    """`self._call("op", ...)` and getattr(client, "op") are AWS calls too."""
    source = tmp_path / "pkg" / "mod.py"
    source.parent.mkdir()
    source.write_text(
        "class A:\n"
        "    def go(self, client):\n"
        "        self._call('suspend_processes', AutoScalingGroupName='g')\n"
        "        getattr(client, 'update_event_source_mapping')(UUID='u')\n"
        "        self.describe('not an operation')\n"
    )
    calls = aws_calls(source.parent)
    assert [c.name for c in calls] == ["self._call('suspend_processes')", "getattr('update_event_source_mapping')"]
    findings = undeclared_calls(calls, {"lambda:UpdateEventSourceMapping"})
    assert len(findings) == 1 and "autoscaling:SuspendProcesses" in findings[0]


@pytest.mark.parametrize("role", ROLES)
def test_no_wildcard_actions(role):
    assert wildcard_actions(policies.read(role)) == []


def test_a_wildcard_action_is_reported():
    document = {"Statement": [{"Sid": "Broad", "Action": ["autoscaling:Describe*"], "Resource": "*"}]}
    assert wildcard_actions(document) == ["Broad: autoscaling:Describe*"]


@pytest.mark.parametrize("role", ROLES)
def test_every_write_is_scoped_by_tag_or_to_holdfast_resources_or_documented(role):
    assert unscoped_writes(policies.read(role)) == []


def test_an_unscoped_write_is_reported():
    document = copy.deepcopy(policies.read("reconciler"))
    read_only = next(s for s in document["Statement"] if s["Sid"] == "AutoScalingReadNoResourceLevel")
    read_only["Action"] = ["autoscaling:DescribeAutoScalingGroups", "autoscaling:SuspendProcesses"]
    tagged = next(s for s in document["Statement"] if s["Sid"] == "AutoScalingGroupsWriteOnlyTagged")
    tagged["Action"] = ["autoscaling:ResumeProcesses"]
    assert unscoped_writes(document) == ["AutoScalingReadNoResourceLevel: autoscaling:SuspendProcesses"]


@pytest.mark.parametrize("role", ROLES)
def test_policies_only_name_services_the_checks_know(role):
    """A new service must be added to SERVICE_PREFIX, or its calls would escape the scan."""
    prefixes = {a.split(":")[0] for a in granted(policies.read(role))}
    assert prefixes <= set(SERVICE_PREFIX.values())


@pytest.mark.parametrize("role", ROLES)
def test_every_statement_has_a_sid_and_is_explained_in_the_readme(role):
    readme = (Path(policies.POLICIES_DIR) / "README.md").read_text()
    for statement in policies.read(role)["Statement"]:
        assert statement.get("Sid"), statement
        assert f"`{statement['Sid']}`" in readme, f"policies/README.md does not explain {statement['Sid']}"


def test_the_read_only_role_only_reads_and_names_no_wildcard_action():
    """policies/readonly.json is HoldfastReadOnly's, assumed from the organization's admin
    account for `holdfast status --all-accounts`: reads only, of the ledger (what
    `cli/accounts.py` declares with by='readonly'; the drift test above holds it to that)."""
    document = policies.read("readonly")
    assert wildcard_actions(document) == []
    assert [a for a in granted(document) if is_write(a)] == []
    assert {a.split(":")[0] for a in granted(document)} <= set(SERVICE_PREFIX.values())
    readme = (Path(policies.POLICIES_DIR) / "README.md").read_text()
    for statement in document["Statement"]:
        assert f"`{statement['Sid']}`" in readme, statement["Sid"]


def test_a_write_in_the_read_only_policy_is_reported():
    document = copy.deepcopy(policies.read("readonly"))
    document["Statement"][0]["Action"].append("dynamodb:PutItem")
    assert [a for a in granted(document) if is_write(a)] == ["dynamodb:PutItem"]


def test_the_operator_role_writes_only_the_control_partition_and_checks_only_the_plan():
    """policies/operator.json is HoldfastOperator's, assumed from the organization's admin
    account for `holdfast pause|unpause|engage|advance --all-accounts`: every statement is
    held to named partitions of the ledger by dynamodb:LeadingKeys, writes to `CONTROL` only
    (the kill switch, the engage and advance requests), and no action touches a resource."""
    from holdfast.ledger.conditions import PLAN_PK
    from holdfast.ledger.control import CONTROL_PK

    document = policies.read("operator")
    assert {a.split(":")[0] for a in granted(document)} == {"dynamodb", "ssm"}
    (names,) = [s for s in document["Statement"] if not any(a.startswith("dynamodb:") for a in s["Action"])]
    assert names["Action"] == ["ssm:GetParametersByPath"]   # the ledger's name, read from its stack's parameter
    for statement in [s for s in document["Statement"] if s is not names]:
        keys = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
        assert statement["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}, statement["Sid"]
        # Tables CloudFormation named, tagged as Holdfast's ledger by its stack.
        assert statement["Resource"] == "arn:${Partition}:dynamodb:*:${Account}:table/*"
        assert statement["Condition"]["StringEquals"] == {"aws:ResourceTag/holdfast:component": "ledger"}
        writes = [a for a in statement["Action"] if is_write(a) and a != "dynamodb:ConditionCheckItem"]
        if writes:
            assert keys == [CONTROL_PK], statement["Sid"]
        else:
            assert set(keys) <= {CONTROL_PK, PLAN_PK}, statement["Sid"]


def test_a_write_without_its_leading_keys_condition_is_reported():
    document = copy.deepcopy(policies.read("operator"))
    assert unscoped_writes(document) == []
    del document["Statement"][0]["Condition"]["StringEquals"]   # the ledger tag: not what this checks
    del document["Statement"][0]["Condition"]["Null"]
    assert unscoped_writes(document) == ["ControlItemsWriteEveryRegion: dynamodb:PutItem"]
    del document["Statement"][0]["Condition"]
    assert unscoped_writes(document) == ["ControlItemsWriteEveryRegion: dynamodb:PutItem"]
