"""The controllers watching themselves: a dashboard and alarms that notify the topic.

Alarms fire on any error or throttle of either controller, on any message in the
dead-letter queue, and on any resource the reconciler reports stuck (metric
Holdfast/ResourcesStuck: a resource whose engage or restore failed on
`stuck_after_failures` walks and no longer holds its stage back; `holdfast status`
lists each with the command that fixes it), and on any drain reported stalled (metric
Holdfast/DrainStalled: a mapping whose drain cannot finish keeps its cap and no longer
holds the later stages; `holdfast stage` says why and since when). A single reconciler error is worth knowing about even though the
next tick retries: a controller that errors every tick is the failure that matters,
and it starts with one.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

PERIOD = Duration.minutes(1)
# The reconciler's own metrics (holdfast.reconciler.announcements.emit_metrics: Powertools adds the service dimension).
NAMESPACE, RECONCILER_SERVICE = "Holdfast", "holdfast-reconciler"


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.IFunction],
        dead_letters: sqs.IQueue,
        expired_events: sqs.IQueue,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        notify = actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []
        widgets: list[cloudwatch.IWidget] = []
        for name, function in functions.items():
            errors = function.metric_errors(period=PERIOD, statistic="Sum")
            throttles = function.metric_throttles(period=PERIOD, statistic="Sum")
            self._alarm(f"{name}Errors", errors, f"Holdfast {name} errors", notify)
            self._alarm(f"{name}Throttles", throttles, f"Holdfast {name} throttled", notify)
            widgets.append(
                cloudwatch.GraphWidget(
                    title=f"{name}: invocations, errors, throttles",
                    left=[function.metric_invocations(period=PERIOD, statistic="Sum"), errors, throttles],
                    width=8,
                )
            )
            widgets.append(
                cloudwatch.GraphWidget(
                    title=f"{name}: duration",
                    left=[function.metric_duration(period=PERIOD, statistic="Maximum")],
                    width=8,
                )
            )
        undelivered = dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
        self._alarm("DeadLetters", undelivered, "Holdfast work undelivered (dead-letter queue not empty)", notify)
        widgets.append(
            cloudwatch.GraphWidget(
                title="Queues: dead letters, expired events",
                left=[
                    undelivered,
                    expired_events.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                ],
                width=8,
            )
        )
        stuck = cloudwatch.Metric(namespace=NAMESPACE, metric_name="ResourcesStuck",
                                  dimensions_map={"service": RECONCILER_SERVICE}, period=Duration.minutes(5),
                                  statistic="Maximum")
        # A tick that did not walk (paused, a plan conflict) emits no figure: keep the state.
        self._alarm("ResourcesStuck", stuck, "Holdfast: resources stuck (failing on every walk); see `holdfast status`",
                    notify, missing=cloudwatch.TreatMissingData.IGNORE)
        widgets.append(cloudwatch.GraphWidget(title="Reconciler: resources stuck", left=[stuck], width=8))
        stalled = cloudwatch.Metric(namespace=NAMESPACE, metric_name="DrainStalled",
                                    dimensions_map={"service": RECONCILER_SERVICE}, period=Duration.minutes(5),
                                    statistic="Maximum")
        # Emitted by the ticks that drive the drain; between them the state is kept.
        self._alarm("DrainStalled", stalled, "Holdfast: a drain cannot finish (stalled, it keeps its cap); see "
                    "`holdfast stage`", notify, missing=cloudwatch.TreatMissingData.IGNORE)
        widgets.append(cloudwatch.GraphWidget(title="Reconciler: drains stalled", left=[stalled], width=8))
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", widgets=[widgets])

    def _alarm(self, construct_id: str, metric: cloudwatch.Metric, description: str, notify,
               missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING) -> None:
        alarm = metric.create_alarm(
            self,
            construct_id,
            alarm_description=description,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=missing,
        )
        alarm.add_alarm_action(notify)
        self.alarms.append(alarm)
