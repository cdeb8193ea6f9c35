"""The readiness check's schedule and alarm: every `readiness_hours` the readiness
function runs doctor's read-only checks (holdfast.handlers.readiness); its metric
`Holdfast/ReadinessChecksFailed` counts the checks that failed, and the alarm fires on
one failed check, or on a period without a run (missing data is breaching: a check that
stopped running is not a ready account).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

NAMESPACE = "Holdfast"
METRIC = "ReadinessChecksFailed"
SERVICE = "holdfast-readiness"   # Powertools adds the service dimension


class Readiness(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, function: lambda_.IFunction, hours: int,
                 topic: sns.ITopic, dead_letters: sqs.IQueue) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Schedule",
            description=f"Holdfast: readiness checks every {hours} h",
            schedule=events.Schedule.rate(Duration.hours(hours)),
            targets=[targets.LambdaFunction(function, dead_letter_queue=dead_letters, retry_attempts=0,
                                            max_event_age=Duration.minutes(10))],
        )
        self.metric = cloudwatch.Metric(namespace=NAMESPACE, metric_name=METRIC, dimensions_map={"service": SERVICE},
                                        period=Duration.hours(hours), statistic="Maximum")
        self.alarm = self.metric.create_alarm(
            self,
            "Alarm",
            alarm_description=f"Holdfast: a readiness check failed, or none ran for {hours} h; "
                              "`holdfast status` shows the last result, `holdfast doctor` each fix",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        self.alarm.add_alarm_action(actions.SnsAction(topic))
