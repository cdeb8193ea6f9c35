"""A resource engaged through the ledger record only (no room for the record tags) whose
owner then removes the selector, against the shipped IAM policy, evaluated on every write
(holdfast_fixtures.iam_policy.Enforced: moto evaluates no IAM).

The reconciler's restore writes on Auto Scaling groups, functions' async configs and
target groups are allowed only on a resource carrying the selector or Holdfast's record
tag (policies/reconciler.json). Holdfast engages such a resource through the ledger only
while the selector is there, says the owner must keep it, and when it is gone sends no
write the policy denies: the restore is reported with what finishes it, the record stays,
and once the selector is back the next walk restores it exactly.
"""

from __future__ import annotations

import boto3
import pytest

from holdfast.core.model import ENGAGED, RESTORED, SKIPPED
from holdfast.iam import fill
from holdfast.settings import Settings
from holdfast_cdk import role_policies as policies
from holdfast_fixtures.iam_policy import Enforced
from tests.support import walks
from tests.support.fleet import describe_asg, make_asg, make_function

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired-events"
VALUES = {"Partition": "aws", "Region": "us-east-1", "Account": "123456789012", "SelectorKey": "holdfast:protect",
          "SelectorValue": "true", "ExpiredQueueArn": QUEUE,
          "LedgerTableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/holdfast-ledger",
          "TopicArn": "arn:aws:sns:us-east-1:123456789012:holdfast-stage",
          "ReconcilerFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:holdfast-reconciler"}
# 48 of the owner's besides the selector and `team`: 50, no room for Holdfast's two.
FULL = {f"owner-{i}": "x" for i in range(48)}


def owner(service):
    """The owner's own calls: not Holdfast's, so not under its policy."""
    return boto3.client(service, region_name="us-east-1")


@pytest.fixture
def iam(clients):
    with Enforced(clients, [fill(policies.read("reconciler"), VALUES, strict=False)]) as enforced:
        yield enforced


def suspended(clients, name):
    return sorted(p["ProcessName"] for p in describe_asg(clients, name)["SuspendedProcesses"])


def test_a_group_engaged_through_the_ledger_only_is_restored_once_its_selector_is_back(clients, ledger_table, iam):
    asg = owner("autoscaling")
    make_asg(clients, "g1", tags=FULL)

    # engaged through the ledger only, with the selector there: the owner is told to keep it
    [engaged] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("asg",)).outcomes
    assert engaged.action == ENGAGED and engaged.recorded_in == ["ledger"]
    assert suspended(clients, "g1") == ["AZRebalance", "ReplaceUnhealthy"]

    # the owner removes the selector anyway: no write the policy denies, a report of what finishes it
    asg.delete_tags(Tags=[{"ResourceId": "g1", "ResourceType": "auto-scaling-group", "Key": "holdfast:protect"}])
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("asg",)).outcomes
    assert outcome.action == SKIPPED, outcome
    assert "holdfast:protect=true again" in outcome.notes["record"]["fix"]
    assert iam.denied == []
    assert suspended(clients, "g1") == ["AZRebalance", "ReplaceUnhealthy"]

    # the selector back: the next walk restores it exactly
    asg.create_or_update_tags(Tags=[{"ResourceId": "g1", "ResourceType": "auto-scaling-group",
                                     "Key": "holdfast:protect", "Value": "true", "PropagateAtLaunch": True}])
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("asg",)).outcomes
    assert outcome.action == RESTORED and suspended(clients, "g1") == []
    assert iam.denied == []
    assert "keep its selector tag holdfast:protect=true" in engaged.notes["record"]["keep"]


def test_a_functions_config_engaged_through_the_ledger_only_is_never_written_without_its_selector(clients, ledger_table, iam):
    lam = owner("lambda")
    arn = make_function(clients, "f", tags=FULL)
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=2, MaximumEventAgeInSeconds=7200)
    options = {"kinds": ("async",), "expired_queue_arn": QUEUE}

    [engaged] = walks.engage_all(clients, SETTINGS, ledger_table, **options).outcomes
    assert engaged.action == ENGAGED and engaged.recorded_in == ["ledger"]

    lam.untag_resource(Resource=arn, TagKeys=["holdfast:protect"])
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, **options).outcomes
    assert outcome.action == SKIPPED and iam.denied == []
    assert lam.get_function_event_invoke_config(FunctionName="f")["MaximumRetryAttempts"] == SETTINGS.async_max_retry_attempts

    lam.tag_resource(Resource=arn, Tags={"holdfast:protect": "true"})
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, **options).outcomes
    config = lam.get_function_event_invoke_config(FunctionName="f")
    assert outcome.action == RESTORED and iam.denied == []
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (2, 7200)
    assert "keep its selector tag" in engaged.notes["record"]["keep"]


def test_the_enforced_policy_denies_a_restore_write_without_the_selector_or_the_record_tag(clients, ledger_table, iam):
    """The evaluation the tests above rely on: the shipped policy, not a stand-in."""
    from botocore.exceptions import ClientError

    make_asg(clients, "g1", tags=FULL)
    asg = clients("autoscaling")   # Holdfast's
    asg.suspend_processes(AutoScalingGroupName="g1", ScalingProcesses=["AZRebalance"])   # selector there: allowed
    owner("autoscaling").delete_tags(Tags=[{"ResourceId": "g1", "ResourceType": "auto-scaling-group", "Key": "holdfast:protect"}])
    with pytest.raises(ClientError, match="AccessDenied"):
        asg.resume_processes(AutoScalingGroupName="g1", ScalingProcesses=["AZRebalance"])
    assert iam.denied and iam.denied[-1][0] == "autoscaling:ResumeProcesses"
