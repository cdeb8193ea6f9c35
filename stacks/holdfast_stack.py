"""HoldfastStack: the ledger, the controllers, their signals, queues, topic and alarms.

The stack composes the constructs and wires what crosses between them: the values
filled into the IAM policy documents, the controllers' environment (read by
functions/holdfast/handlers/shell.py), and the topic's key for the reconciler, which announces stage changes. Settings arrive already
validated (`Settings.from_mapping`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Stack
from constructs import Construct

from holdfast.settings import ENV_VAR, Settings

from stacks.constructs import Controllers, Ledger, Monitoring, Notifications, Queues, Signals
from stacks.suppressions import acknowledge


class HoldfastStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        policies_dir: Path | None = None,
        **kwargs: Any,
    ) -> None:
        """`policies_dir` replaces policies/ (for a stricter policy of your own, or tests)."""
        super().__init__(scope, construct_id, description="Holdfast: keeps automation safe during a regional EC2 impairment", **kwargs)
        self.settings = settings
        self.ledger = Ledger(self, "Ledger")
        self.queues = Queues(self, "Queues")
        self.notifications = Notifications(self, "Notifications", email=settings.notification_email)
        table, topic, expired = self.ledger.table, self.notifications.topic, self.queues.expired_events

        self.controllers = Controllers(
            self,
            "Controllers",
            settings=settings,
            environment={
                ENV_VAR: settings.to_json(),
                "HOLDFAST_LEDGER_TABLE": table.table_name,
                "HOLDFAST_EXPIRED_QUEUE_ARN": expired.queue_arn,
                "HOLDFAST_TOPIC_ARN": topic.topic_arn,
            },
            policy_values={
                "Partition": self.partition,
                "Region": self.region,
                "Account": self.account,
                "SelectorKey": settings.selector_key,
                "SelectorValue": settings.selector_value,
                "LedgerTableArn": table.table_arn,
                "ExpiredQueueArn": expired.queue_arn,
                "TopicArn": topic.topic_arn,
            },
            dead_letters=self.queues.dead_letters,
            policies_dir=policies_dir,
        )
        self.notifications.grant_publish(self.controllers.reconciler)

        self.signals = Signals(
            self,
            "Signals",
            settings=settings,
            detector=self.controllers.detector,
            reconciler=self.controllers.reconciler,
            dead_letters=self.queues.dead_letters,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            functions={"Detector": self.controllers.detector, "Reconciler": self.controllers.reconciler},
            dead_letters=self.queues.dead_letters,
            expired_events=expired,
            topic=topic,
        )
        acknowledge(functions=self.controllers.functions, dead_letters=self.queues.dead_letters,
                    expired_events=expired)
