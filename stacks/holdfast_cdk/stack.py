"""HoldfastStack: the `Holdfast` construct in a stack of its own, as `cdk deploy` makes it.

A thin stack: the construct under the id "Default", which CDK leaves out of logical IDs,
so the stack's resources keep the logical IDs they had before the construct existed
(an update of a deployed stack replaces nothing). On top: the outputs an operator and
the CLI look for, and, when `game_day_stop_alarm` is set, the game-day experiment (not
in the organization's member stacks: `holdfast_cdk.org` adds theirs per account).
Settings arrive already validated (`Settings.from_mapping`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from constructs import Construct

from holdfast.settings import Settings
from holdfast_cdk.construct import Holdfast
from holdfast_cdk.game_day import GameDay

DESCRIPTION = "Holdfast: keeps automation safe during a regional EC2 impairment"


class HoldfastStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        policies_dir: Path | None = None,
        game_day: bool = True,
        **kwargs: Any,
    ) -> None:
        """`policies_dir` replaces the packaged policies (for a stricter policy of your own, or tests);
        `game_day=False` leaves the game day out whatever the settings say."""
        kwargs.setdefault("description", DESCRIPTION)
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.holdfast = Holdfast(self, "Default", settings=settings, policies_dir=policies_dir)
        holdfast = self.holdfast

        CfnOutput(self, "ExpiredEventsQueueArn", value=holdfast.expired_events_queue.queue_arn,
                  description="On-failure destination Holdfast gives owners' async functions while engaged")
        CfnOutput(self, "ExpiredEventsQueueArnParameter", value=holdfast.expired_queue_parameter.parameter_name,
                  description="SSM parameter holding the expired-events queue ARN (the CLI reads it)")
        CfnOutput(self, "LedgerTableName", value=holdfast.ledger.table_name,
                  description="The ledger, named by CloudFormation unless ledger_table_name is set (the CLI reads "
                  "it from the SSM parameter LedgerTableParameter names)")
        CfnOutput(self, "LedgerTableParameter", value=holdfast.ledger_table_parameter.parameter_name)
        CfnOutput(self, "TopicArn", value=holdfast.topic.topic_arn)
        CfnOutput(self, "DashboardName", value=holdfast.dashboard.dashboard_name)

        self.game_day: GameDay | None = None
        if game_day and settings.game_day_stop_alarm is not None:
            bucket = None
            if settings.game_day_lambda_config_bucket:
                bucket = s3.Bucket.from_bucket_name(self, "GameDayLambdaConfigBucket", settings.game_day_lambda_config_bucket)
            self.game_day = GameDay(
                self,
                "GameDay",
                settings=settings,
                stop_condition_alarm=cloudwatch.Alarm.from_alarm_name(self, "GameDayStopAlarm", settings.game_day_stop_alarm),
                duration=Duration.minutes(settings.game_day_duration_minutes),
                lambda_invocation_errors=settings.game_day_lambda_errors,
                lambda_config_bucket=bucket,
                availability_zones=settings.game_day_availability_zones or None,
                parameter_prefix=holdfast.parameter_prefix,
            )
            CfnOutput(self, "GameDayExperimentTemplateId", value=self.game_day.template_id)
