"""The game-day FIS experiment template: from settings in HoldfastStack, and as a construct;
its role holds exactly the actions' permissions; bad props fail at synth."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from app import build_app
from holdfast.settings import Settings, SettingsError
from holdfast_cdk import GameDay
from tests.stack.checks import cfn_lint_errors

ACCOUNT, REGION = "123456789012", "us-east-1"  # as conftest
ASG_ACTION = "aws:ec2:asg-insufficient-instance-capacity-error"


def _template(game_day_synthesized) -> dict:
    (template,) = game_day_synthesized.resources("AWS::FIS::ExperimentTemplate").values()
    return template["Properties"]


def _role(game_day_synthesized) -> dict:
    roles = game_day_synthesized.resources("AWS::IAM::Role")
    (role,) = [r for r in roles.values() if r["Properties"].get("Description", "").startswith("Holdfast game day")]
    return role["Properties"]


def test_launches_of_the_selected_groups_fail_in_every_zone_for_the_set_duration(game_day_synthesized):
    props = _template(game_day_synthesized)
    action = props["Actions"]["LaunchesFailInEveryZone"]
    assert action["ActionId"] == ASG_ACTION
    assert action["Targets"] == {"AutoScalingGroups": "SelectedGroups"}
    assert action["Parameters"] == {
        "availabilityZoneIdentifiers": {"Fn::Join": [",", {"Fn::GetAZs": ""}]},
        "duration": "PT30M",
        "percentage": "100",
    }
    assert props["Targets"]["SelectedGroups"] == {
        "ResourceType": "aws:ec2:autoscaling-group",
        "ResourceTags": {"team:holdfast": "on"},
        "SelectionMode": "ALL",
    }
    assert props["ExperimentOptions"] == {"AccountTargeting": "single-account", "EmptyTargetResolutionMode": "fail"}


def test_the_stop_condition_is_the_configured_alarm(game_day_synthesized):
    (condition,) = _template(game_day_synthesized)["StopConditions"]
    assert condition["Source"] == "aws:cloudwatch:alarm"
    assert condition["Value"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":cloudwatch:{REGION}:{ACCOUNT}:alarm:orders-slo-breach"]]
    }


def test_lambda_invocation_errors_target_only_functions_tagged_for_the_extension(game_day_synthesized):
    props = _template(game_day_synthesized)
    action = props["Actions"]["InvocationsFail"]
    assert action["ActionId"] == "aws:lambda:invocation-error"
    assert action["Parameters"] == {"duration": "PT30M", "invocationPercentage": "100", "preventExecution": "true"}
    assert props["Targets"]["ExtensionFunctions"] == {
        "ResourceType": "aws:lambda:function",
        "ResourceTags": {"holdfast:fis-extension": "true"},
        "SelectionMode": "ALL",
    }


def test_the_fis_role_holds_exactly_the_permissions_the_actions_need(game_day_synthesized):
    role = _role(game_day_synthesized)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "fis.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    (policy,) = role["Policies"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert {sid: s["Action"] for sid, s in statements.items()} == {
        "InjectLaunchFailuresIntoThisAccountsGroups": "ec2:InjectApiError",
        "ResolveTargetGroupsNoResourceLevel": "autoscaling:DescribeAutoScalingGroups",
        "WriteExtensionConfiguration": ["s3:PutObject", "s3:DeleteObject"],
        "ReadTargetFunctions": "lambda:GetFunction",
        "ResolveTargetFunctionsNoResourceLevel": "tag:GetResources",
    }
    inject = statements["InjectLaunchFailuresIntoThisAccountsGroups"]
    assert inject["Condition"]["ForAnyValue:StringEquals"] == {"ec2:FisActionId": [ASG_ACTION]}
    groups = json.dumps(inject["Condition"]["ForAllValues:ArnLike"]["ec2:FisTargetArns"])
    assert f":autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/*" in groups
    assert json.dumps(statements["WriteExtensionConfiguration"]["Resource"]).count("fis-config-123456789012/FisConfigs/*") == 1
    # No managed policy: nothing beyond the statements above.
    assert "ManagedPolicyArns" not in role


def test_the_template_id_is_published_for_holdfast_drill(game_day_synthesized):
    parameters = game_day_synthesized.resources("AWS::SSM::Parameter").values()
    names = {p["Properties"]["Name"]: p["Properties"]["Value"] for p in parameters}
    stack = game_day_synthesized.stack.stack_name
    (template_id,) = game_day_synthesized.resources("AWS::FIS::ExperimentTemplate")
    assert names[f"/holdfast/{stack}/experiment-template-id"] == {"Ref": template_id}


def test_the_game_day_stack_passes_cdk_nag_and_cfn_lint(game_day_synthesized):
    assert game_day_synthesized.synth.nag_errors(game_day_synthesized.stack) == []
    assert cfn_lint_errors(game_day_synthesized.template.to_json(), regions=[REGION]) == []


def test_without_a_stop_alarm_the_stack_has_no_experiment(synthesized):
    assert synthesized.resources("AWS::FIS::ExperimentTemplate") == {}


# ---- the construct on its own: named zones, no Lambda action, bad props ----------------


def _stack() -> Stack:
    return Stack(App(), "Rehearsal", env={"account": ACCOUNT, "region": REGION})


def _alarm(stack: Stack) -> cloudwatch.IAlarm:
    return cloudwatch.Alarm.from_alarm_name(stack, "Slo", "orders-slo")


def test_named_zones_and_no_lambda_action_give_the_asg_permissions_only():
    stack = _stack()
    GameDay(stack, "GameDay", settings=Settings(), stop_condition_alarm=_alarm(stack), duration=Duration.minutes(5),
            percentage=50, availability_zones=["use1-az1", "use1-az2", "use1-az4"])
    t = Template.from_stack(stack)
    (props,) = [r["Properties"] for r in t.find_resources("AWS::FIS::ExperimentTemplate").values()]
    assert list(props["Actions"]) == ["LaunchesFailInEveryZone"]
    assert props["Actions"]["LaunchesFailInEveryZone"]["Parameters"] == {
        "availabilityZoneIdentifiers": "use1-az1,use1-az2,use1-az4", "duration": "PT5M", "percentage": "50"
    }
    assert props["Targets"]["SelectedGroups"]["ResourceTags"] == {"holdfast:protect": "true"}
    (role,) = t.find_resources("AWS::IAM::Role").values()
    actions = {json.dumps(s["Action"]) for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]}
    assert actions == {'"ec2:InjectApiError"', '"autoscaling:DescribeAutoScalingGroups"'}


BAD_PROPS = {
    "no stop alarm": (
        dict(stop_condition_alarm=None),
        ValueError,
        "GameDay: stop_condition_alarm is required: FIS stops the experiment when this alarm goes to ALARM",
    ),
    "an alarm name instead of an alarm": (dict(stop_condition_alarm="orders-slo"), TypeError, "must be a CloudWatch alarm"),
    "duration under a minute": (dict(duration=Duration.seconds(30)), ValueError, "duration must be from 1 minute to 3 hours"),
    "duration over three hours": (dict(duration=Duration.hours(4)), ValueError, "duration must be from 1 minute to 3 hours"),
    "duration not in whole minutes": (dict(duration=Duration.seconds(90)), ValueError, "in whole minutes"),
    "percentage": (dict(percentage=0), ValueError, "percentage must be an integer from 1 to 100, got 0"),
    "no zones": (dict(availability_zones=[]), ValueError, "availability_zones must be zone names or IDs"),
    "lambda errors without the extension's bucket": (
        dict(lambda_invocation_errors=True),
        ValueError,
        "lambda_config_bucket is required with lambda_invocation_errors",
    ),
    "no role and none to create": (dict(create_role=False), ValueError, "GameDay: no FIS role: pass role="),
}


@pytest.mark.parametrize("change, error, message", BAD_PROPS.values(), ids=BAD_PROPS.keys())
def test_bad_props_fail_at_synth_before_anything_is_created(change, error, message):
    stack = _stack()
    props = {"settings": Settings(), "stop_condition_alarm": _alarm(stack), **change}
    with pytest.raises(error, match=message):
        GameDay(stack, "GameDay", **props)
    game_day = stack.node.try_find_child("GameDay")
    assert game_day is None or not game_day.node.children


def test_lambda_errors_with_a_bucket_are_accepted():
    stack = _stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Config", "fis-config")
    game_day = GameDay(stack, "GameDay", settings=Settings(), stop_condition_alarm=_alarm(stack),
                       lambda_invocation_errors=True, lambda_config_bucket=bucket, lambda_prevent_execution=False)
    actions = stack.resolve(game_day.template.actions)
    assert actions["InvocationsFail"]["parameters"]["preventExecution"] == "false"


SETTINGS_PATH = {
    "no stop alarm": (
        {"game_day_duration_minutes": 15},
        r"holdfast\.game_day_stop_alarm = null: required when game_day_duration_minutes is set: FIS needs a stop condition",
    ),
    "lambda errors, no bucket": (
        {"game_day_stop_alarm": "slo", "game_day_lambda_errors": True},
        r"holdfast\.game_day_lambda_config_bucket = null: required when game_day_lambda_errors is true",
    ),
}


@pytest.mark.parametrize("raw, message", SETTINGS_PATH.values(), ids=SETTINGS_PATH.keys())
def test_a_missing_game_day_setting_stops_the_app_before_any_stack_is_made(raw, message, tmp_path):
    with pytest.raises(SettingsError, match=message):
        build_app({"holdfast": raw}, outdir=str(tmp_path))
