"""The EventBridge rules that drive the controllers.

- Launch results from every Auto Scaling group, not only selected ones: a regional
  impairment shows in any group, and successful launches are the recovery signal; and
  terminations, of which the detector keeps those caused by a failed ELB health check
  (the October pattern across groups and zones).
  Events carry no tags, so the rule could not filter on the selector anyway.
- AWS Health issues for the configured services affecting this region, matched on
  `detail.eventRegion` (the impaired region), not on the event's `region` (where it was
  delivered). AWS Health sends each public event to the affected region's bus and to a
  backup region's bus (us-west-2 for most regions, us-east-1 for us-west-2): the copies
  of *this* region's events go elsewhere, while this bus receives other regions' backup
  copies, which the `eventRegion` filter keeps from invoking the detector at all.
- The reconciler's schedule.

Every target has a dead-letter queue and a retry policy: a signal EventBridge cannot
deliver is retried for an hour, a tick is not (the next one comes a period later).
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from holdfast.core.signals import ASG_DETAIL_TYPES
from holdfast.settings import Settings

# Launch results, and terminations (the detector keeps those an ELB health check caused).
LAUNCH_DETAIL_TYPES = list(ASG_DETAIL_TYPES)


class Signals(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        detector: lambda_.IFunction,
        reconciler: lambda_.IFunction,
        dead_letters: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        signal_target = targets.LambdaFunction(
            detector, dead_letter_queue=dead_letters, retry_attempts=2, max_event_age=Duration.hours(1)
        )
        self.launch_rule = events.Rule(
            self,
            "LaunchResults",
            description="Holdfast: Auto Scaling launch results and terminations (failures impair, successes recover)",
            event_pattern=events.EventPattern(source=["aws.autoscaling"], detail_type=LAUNCH_DETAIL_TYPES),
            targets=[signal_target],
        )
        self.health_rule = events.Rule(
            self,
            "HealthIssues",
            description="Holdfast: AWS Health issues for the configured services affecting this region",
            event_pattern=events.EventPattern(
                source=["aws.health"],
                detail_type=["AWS Health Event"],
                detail={"service": list(settings.health_services), "eventTypeCategory": ["issue"],
                        "eventRegion": [Stack.of(self).region]},
            ),
            targets=[signal_target],
        )
        self.schedule_rule = events.Rule(
            self,
            "Tick",
            description="Holdfast: reconciler tick",
            schedule=events.Schedule.rate(Duration.minutes(settings.schedule_minutes)),
            targets=[
                targets.LambdaFunction(
                    reconciler, dead_letter_queue=dead_letters, retry_attempts=0, max_event_age=Duration.seconds(60)
                )
            ],
        )
