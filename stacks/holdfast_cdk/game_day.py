"""`GameDay`: an AWS FIS experiment template that rehearses a regional launch impairment.

The template fails every launch of the selected Auto Scaling groups (those carrying the
opt-in tag) in every Availability Zone of the region for a bounded time, with
`aws:ec2:asg-insufficient-instance-capacity-error`: what October 2025 looked like from
an account (launches failing with InsufficientInstanceCapacity in all zones at once).
Holdfast should see it, engage, and after the experiment ends lift its posture in
stages and restore every resource exactly. A CloudWatch alarm of yours stops the
experiment when the rehearsal hurts more than it should.

Facts it is built on (AWS FIS User Guide, "Actions reference" and "Lambda actions"):

- `aws:ec2:asg-insufficient-instance-capacity-error` targets `aws:ec2:autoscaling-group`
  (only groups using launch templates); parameters `duration` (ISO 8601),
  `availabilityZoneIdentifiers` (comma-separated zone names or zone IDs) and optional
  `percentage` (1–100, default 100). Its role needs `ec2:InjectApiError`, with the
  condition keys `ec2:FisActionId` (the action) and `ec2:FisTargetArns` (the groups),
  and `autoscaling:DescribeAutoScalingGroups`.
- `aws:lambda:invocation-error` targets `aws:lambda:function`; parameters `duration`,
  optional `invocationPercentage` and `preventExecution`. It works only on functions that
  carry the FIS Lambda extension layer and point it (AWS_FIS_CONFIGURATION_LOCATION) at
  an S3 location FIS writes to; its role needs `s3:PutObject`, `s3:DeleteObject`,
  `lambda:GetFunction` and `tag:GetResources`. So it is opt-in, and it targets a tag of
  its own (`holdfast:fis-extension=true` by default) that you put only on functions
  with the extension.

The zones: pass `availability_zones` (setting `game_day_availability_zones`) to name
them. Without them the template lists `Fn::GetAZs` of the stack's region, which is not
every zone: in an account with a default VPC it returns only the zones that have a
default subnet, so groups in other zones would keep launching and the detector would see
a partial failure. Synth then warns, and `holdfast drill` writes the selected groups'
zones into the template before it starts the experiment (`cover_zones`).
"""

from __future__ import annotations

from typing import Sequence

from aws_cdk import Acknowledgment, Annotations, Duration, Fn, Stack, Token, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_fis as fis
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from holdfast.settings import Settings
from holdfast_cdk import suppressions

ASG_ACTION = "aws:ec2:asg-insufficient-instance-capacity-error"
LAMBDA_ACTION = "aws:lambda:invocation-error"
LAMBDA_EXTENSION_TAG = ("holdfast:fis-extension", "true")
MIN_DURATION = Duration.minutes(1)
# FIS allows up to 12 hours; a rehearsal that needs more than 3 is no longer a rehearsal.
MAX_DURATION = Duration.hours(3)
TEMPLATE_ID_PARAMETER = "experiment-template-id"


class GameDay(Construct):
    """An FIS experiment template: launches of the selected groups fail in every zone.

    Props (keyword-only, each with its default unless required):

    - ``settings`` (``Settings``, required): the selector tag names the target groups.
    - ``stop_condition_alarm`` (``cloudwatch.IAlarm``, required): FIS stops the
      experiment when it goes to ALARM. There is no rehearsal without one.
    - ``duration`` (``Duration``, default 20 minutes; 1 minute to 3 hours): how long
      launches fail.
    - ``percentage`` (``int``, default 100): the share of the groups' launch requests that fail.
    - ``availability_zones`` (``Sequence[str] | None``, default ``None``: ``Fn::GetAZs``,
      with a synth warning; `holdfast drill` sets the selected groups' zones): zone names
      or zone IDs.
    - ``lambda_invocation_errors`` (``bool``, default ``False``): also fail invocations of
      functions tagged ``lambda_target_tag`` (they must carry the FIS Lambda extension).
    - ``lambda_target_tag`` (``tuple[str, str]``, default ``("holdfast:fis-extension", "true")``).
    - ``lambda_config_bucket`` (``s3.IBucket | None``, required with
      ``lambda_invocation_errors``): where the extension reads its configuration.
    - ``lambda_config_prefix`` (``str``, default ``"FisConfigs/"``): the prefix of
      AWS_FIS_CONFIGURATION_LOCATION in that bucket.
    - ``lambda_prevent_execution`` (``bool``, default ``True``): fail without running the
      function's code, so a rehearsal has no half-done side effects.
    - ``role`` (``iam.IRole | None``, default ``None``): an FIS experiment role of your own;
      by default one is created with exactly the permissions the actions need.
    - ``create_role`` (``bool``, default ``True``): with ``False``, ``role`` is required.
    - ``parameter_prefix`` (``str | None``, default ``None``): when set, the template id
      is published at ``<prefix>/experiment-template-id`` for `holdfast drill`.

    Attributes: ``template`` (the CfnExperimentTemplate), ``template_id``, ``role``,
    ``template_id_parameter`` (or ``None``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        stop_condition_alarm: cloudwatch.IAlarm | None,
        duration: Duration = Duration.minutes(20),
        percentage: int = 100,
        availability_zones: Sequence[str] | None = None,
        lambda_invocation_errors: bool = False,
        lambda_target_tag: tuple[str, str] = LAMBDA_EXTENSION_TAG,
        lambda_config_bucket: s3.IBucket | None = None,
        lambda_config_prefix: str = "FisConfigs/",
        lambda_prevent_execution: bool = True,
        role: iam.IRole | None = None,
        create_role: bool = True,
        parameter_prefix: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        _validate(
            stop_condition_alarm=stop_condition_alarm,
            duration=duration,
            percentage=percentage,
            availability_zones=availability_zones,
            lambda_invocation_errors=lambda_invocation_errors,
            lambda_config_bucket=lambda_config_bucket,
            role=role,
            create_role=create_role,
        )
        stack = Stack.of(self)
        iso_duration = f"PT{int(duration.to_seconds()) // 60}M"
        zones = ",".join(availability_zones) if availability_zones else Fn.join(",", Fn.get_azs())

        targets = {
            "SelectedGroups": fis.CfnExperimentTemplate.ExperimentTemplateTargetProperty(
                resource_type="aws:ec2:autoscaling-group",
                resource_tags={settings.selector_key: settings.selector_value},
                selection_mode="ALL",
            )
        }
        actions = {
            "LaunchesFailInEveryZone": fis.CfnExperimentTemplate.ExperimentTemplateActionProperty(
                action_id=ASG_ACTION,
                description="InsufficientInstanceCapacity on every launch of the selected groups, in every zone",
                parameters={"availabilityZoneIdentifiers": zones, "duration": iso_duration, "percentage": str(percentage)},
                targets={"AutoScalingGroups": "SelectedGroups"},
            )
        }
        if lambda_invocation_errors:
            targets["ExtensionFunctions"] = fis.CfnExperimentTemplate.ExperimentTemplateTargetProperty(
                resource_type="aws:lambda:function",
                resource_tags={lambda_target_tag[0]: lambda_target_tag[1]},
                selection_mode="ALL",
            )
            actions["InvocationsFail"] = fis.CfnExperimentTemplate.ExperimentTemplateActionProperty(
                action_id=LAMBDA_ACTION,
                description="Invocations of functions carrying the FIS extension fail",
                parameters={
                    "duration": iso_duration,
                    "invocationPercentage": str(percentage),
                    "preventExecution": "true" if lambda_prevent_execution else "false",
                },
                targets={"Functions": "ExtensionFunctions"},
            )

        self.role = role or self._role(stack, lambda_config_bucket if lambda_invocation_errors else None, lambda_config_prefix)
        self.template = fis.CfnExperimentTemplate(
            self,
            "Template",
            description=f"Holdfast game day: launches of groups tagged {settings.selector} fail in every zone for {iso_duration}",
            role_arn=self.role.role_arn,
            stop_conditions=[
                fis.CfnExperimentTemplate.ExperimentTemplateStopConditionProperty(
                    source="aws:cloudwatch:alarm", value=stop_condition_alarm.alarm_arn
                )
            ],
            targets=targets,
            actions=actions,
            # A rehearsal that selects nothing is a misconfiguration, not a success.
            experiment_options=fis.CfnExperimentTemplate.ExperimentTemplateExperimentOptionsProperty(
                account_targeting="single-account", empty_target_resolution_mode="fail"
            ),
            tags={"Name": "holdfast-game-day", "holdfast:component": "game-day"},
        )
        if not availability_zones:
            Annotations.of(self).add_warning_v2(
                "holdfast:game-day-zones",
                "Game day zones not named (game_day_availability_zones): the template lists Fn::GetAZs, which in an "
                "account with a default VPC is only the zones with a default subnet. `holdfast drill` writes the "
                "selected groups' zones into the template before it starts; name them to fail exactly those.",
            )
            Validations.of(self.template).acknowledge(
                Acknowledgment(
                    id="CloudFormation-Validate::E1022",
                    reason="Fn::Join over Fn::GetAZs is documented as supported (Fn::Join, 'Supported functions'); "
                    "the rule's false positive is https://github.com/aws-cloudformation/cfn-lint/issues/4674, fixed by https://github.com/aws-cloudformation/cfn-lint/pull/4677.",
                )
            )
        self.template_id = self.template.ref
        self.template_id_parameter = None
        if parameter_prefix:
            self.template_id_parameter = ssm.StringParameter(
                self,
                "TemplateIdParameter",
                parameter_name=f"{parameter_prefix}/{TEMPLATE_ID_PARAMETER}",
                string_value=self.template_id,
                description="Holdfast: the game-day FIS experiment template `holdfast drill` starts",
            )

    def _role(self, stack: Stack, bucket: s3.IBucket | None, prefix: str) -> iam.Role:
        groups = f"arn:{stack.partition}:autoscaling:{stack.region}:{stack.account}:autoScalingGroup:*:autoScalingGroupName/*"
        statements = [
            iam.PolicyStatement(
                sid="InjectLaunchFailuresIntoThisAccountsGroups",
                actions=["ec2:InjectApiError"],
                resources=["*"],
                conditions={
                    "ForAnyValue:StringEquals": {"ec2:FisActionId": [ASG_ACTION]},
                    "ForAllValues:ArnLike": {"ec2:FisTargetArns": [groups]},
                },
            ),
            iam.PolicyStatement(
                sid="ResolveTargetGroupsNoResourceLevel",
                actions=["autoscaling:DescribeAutoScalingGroups"],
                resources=["*"],
            ),
        ]
        if bucket is not None:
            statements += [
                iam.PolicyStatement(
                    sid="WriteExtensionConfiguration",
                    actions=["s3:PutObject", "s3:DeleteObject"],
                    resources=[bucket.arn_for_objects(f"{prefix}*")],
                ),
                iam.PolicyStatement(
                    sid="ReadTargetFunctions",
                    actions=["lambda:GetFunction"],
                    resources=[f"arn:{stack.partition}:lambda:{stack.region}:{stack.account}:function:*"],
                ),
                iam.PolicyStatement(sid="ResolveTargetFunctionsNoResourceLevel", actions=["tag:GetResources"], resources=["*"]),
            ]
        role = iam.Role(
            self,
            "Role",
            description="Holdfast game day: the FIS experiment role, exactly the actions' permissions",
            assumed_by=iam.ServicePrincipal(
                "fis.amazonaws.com",
                conditions={
                    # Confused-deputy guard: only FIS experiments of this account may assume it.
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:fis:{stack.region}:{stack.account}:experiment/*"},
                },
            ),
            inline_policies={"game-day": iam.PolicyDocument(statements=statements)},
        )
        suppressions.add(
            role,
            suppressions.NagPackSuppression(
                id="AwsSolutions-IAM5",
                applies_to=["Resource::*", {"regex": "/^Resource::arn:.*\\*$/"}],
                reason="ec2:InjectApiError takes no resource and is scoped by its FIS condition keys to this action "
                "and this account's groups; DescribeAutoScalingGroups and tag:GetResources take no resource; the "
                "extension bucket prefix and lambda:GetFunction are read/write of FIS's own configuration only.",
            ),
        )
        return role


def _validate(
    *,
    stop_condition_alarm: cloudwatch.IAlarm | None,
    duration: Duration,
    percentage: int,
    availability_zones: Sequence[str] | None,
    lambda_invocation_errors: bool,
    lambda_config_bucket: s3.IBucket | None,
    role: iam.IRole | None,
    create_role: bool,
) -> None:
    """Bad props fail at synth, before anything is created, with what is wrong."""
    if stop_condition_alarm is None:
        raise ValueError(
            "GameDay: stop_condition_alarm is required: FIS stops the experiment when this alarm goes to ALARM, "
            "and a rehearsal nothing can stop is not one to run (setting: game_day_stop_alarm)"
        )
    if not hasattr(stop_condition_alarm, "alarm_arn"):
        raise TypeError(f"GameDay: stop_condition_alarm must be a CloudWatch alarm (cloudwatch.IAlarm), not {type(stop_condition_alarm).__name__}")
    seconds = duration.to_seconds()
    if Token.is_unresolved(seconds) or seconds % 60 or not MIN_DURATION.to_seconds() <= seconds <= MAX_DURATION.to_seconds():
        raise ValueError(f"GameDay: duration must be from 1 minute to 3 hours in whole minutes, got {duration.to_human_string()}")
    if isinstance(percentage, bool) or not isinstance(percentage, int) or not 1 <= percentage <= 100:
        raise ValueError(f"GameDay: percentage must be an integer from 1 to 100, got {percentage!r}")
    if availability_zones is not None and (not availability_zones or not all(isinstance(z, str) and z for z in availability_zones)):
        raise ValueError(f"GameDay: availability_zones must be zone names or IDs, or None for every zone, got {availability_zones!r}")
    if lambda_invocation_errors and lambda_config_bucket is None:
        raise ValueError(
            "GameDay: lambda_config_bucket is required with lambda_invocation_errors: FIS writes the fault "
            "configuration there and the FIS Lambda extension reads it (setting: game_day_lambda_config_bucket)"
        )
    if role is None and not create_role:
        raise ValueError("GameDay: no FIS role: pass role= (an existing FIS experiment role) or leave create_role=True")


def member_game_day(stack: Stack, settings: Settings, *, selector_from: Settings | None = None,
                    parameter_prefix: str | None = None) -> GameDay:
    """The game day of an organization's member stack, in the accounts
    `org_game_day_stop_alarms` names only, each stopped by its own alarm.

    The StackSet deploys one template to every account, so the choice is CloudFormation's,
    per stack instance: a condition on `AWS::AccountId` (nested `Fn::Or` of at most 10
    `Fn::Equals` each, CloudFormation's limit) on every resource of the game day, and the
    alarm's name from a mapping by account; duration and zones are the organization's
    settings, the selector the member stack's (`selector_from`, an override's). Resources whose condition is false are not
    created and their properties are not evaluated. Launch failures only: the Lambda
    action's configuration bucket would be one bucket for every account."""
    from aws_cdk import Aws, CfnCondition, CfnMapping, CfnResource
    from aws_cdk import Fn as _Fn

    accounts = sorted(settings.org_game_day_stop_alarms)
    mapping = CfnMapping(stack, "GameDayStopAlarms",
                         mapping={a: {"alarm": settings.org_game_day_stop_alarms[a]} for a in accounts})
    equals = [_Fn.condition_equals(Aws.ACCOUNT_ID, a) for a in accounts]
    while len(equals) > 1:
        equals = [e[0] if len(e) == 1 else _Fn.condition_or(*e) for e in (equals[i:i + 10] for i in range(0, len(equals), 10))]
    condition = CfnCondition(stack, "IsGameDayAccount", expression=equals[0])
    game_day = GameDay(
        stack,
        "GameDay",
        settings=selector_from or settings,
        stop_condition_alarm=cloudwatch.Alarm.from_alarm_name(stack, "GameDayStopAlarm",
                                                                mapping.find_in_map(Aws.ACCOUNT_ID, "alarm")),
        duration=Duration.minutes(settings.game_day_duration_minutes),
        availability_zones=settings.game_day_availability_zones or None,
        parameter_prefix=parameter_prefix,
    )
    for child in game_day.node.find_all():
        if isinstance(child, CfnResource):
            child.cfn_options.condition = condition
    return game_day
