"""`Holdfast`: the whole of Holdfast as one construct, for a stack of your own.

    from holdfast_cdk import Holdfast
    from holdfast.settings import Settings

    holdfast = Holdfast(self, "Holdfast", settings=Settings.from_context(self.node.try_get_context("holdfast")))
    holdfast.grant_expired_events_destination(my_function)

The construct composes the parts in `holdfast_cdk.constructs` and wires what crosses
between them: the values filled into the IAM policy documents, the controllers'
environment (the HOLDFAST_* variables `holdfast.handlers` reads), and the topic's key
for the reconciler, which announces stage changes. It publishes the expired-events
queue's ARN in SSM Parameter Store, where `holdfast` on an operator's machine finds it
without being told (`<parameter_prefix>/expired-queue-arn`), and the ledger table's name
(`<parameter_prefix>/ledger-table`): CloudFormation names the table, so several Holdfast
stacks can share an account and region, and a stack deleted (its ledger retained) and
deployed again gets a ledger of its own instead of failing on the old table's name.

At synth it reports the mode the controllers will run in (an info annotation the CDK CLI
prints): the default is `recommend`, which changes no resource.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from aws_cdk import Annotations, CfnResource, CustomResource, Duration, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from holdfast.settings import ENV_VAR, Settings
from holdfast_cdk.constructs import Controllers, Ledger, Monitoring, Notifications, Queues, Readiness, Signals
from holdfast_cdk.constructs.controllers import RETENTION, TEARDOWN_TIMEOUT_SECONDS
from holdfast_cdk.constructs.notifications import SlackChannel, TeamsChannel
from holdfast_cdk.region_switch import RegionSwitchAccess, RegionSwitchFunction
from holdfast_cdk.suppressions import acknowledge

PARAMETER_ROOT = "/holdfast"
EXPIRED_QUEUE_PARAMETER = "expired-queue-arn"
OWN_RESOURCES_PARAMETER = "own-resources"
# Holdfast's own resources of the types it could act on (holdfast.core.own): a stack-wide
# selector tag selects them too, and the controllers must leave them alone.
OWN_TYPES = ("AWS::Lambda::Function", "AWS::Lambda::EventSourceMapping", "AWS::SQS::Queue",
             "AWS::AutoScaling::AutoScalingGroup", "AWS::ElasticLoadBalancingV2::TargetGroup",
             "AWS::ApplicationAutoScaling::ScalableTarget")
SETTINGS_PARAMETER = "settings"
LEDGER_TABLE_PARAMETER = "ledger-table"
MODE_NOTES = {
    "auto": "acts: engages and restores the selected resources during an impairment",
    "recommend": "decides and reports, changes no resource; set \"mode\": \"auto\" to act",
    "off": "does nothing",
}
_PARAMETER_PREFIX = re.compile(r"^/[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")
# What Lambda needs to deliver an async invocation record to an SQS on-failure
# destination, with the function's execution role: SendMessage on the queue, and, when
# the queue is encrypted with a KMS key, the key use a producer needs (SQS Developer
# Guide, "Key management": producers need kms:GenerateDataKey and kms:Decrypt).
SEND_ACTIONS = ("sqs:SendMessage",)
KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")


class Holdfast(Construct):
    """Holdfast's ledger, controllers, signals, queues, topic, dashboard and alarms.

    Props (keyword-only, each with its default):

    - ``settings`` (``Settings``, default ``Settings()``: every documented default, mode
      ``recommend``): usually ``Settings.from_context(self.node.try_get_context("holdfast"))``.
    - ``ledger_table_name`` (``str | None``, default ``settings.ledger_table_name``, which
      defaults to ``None``: CloudFormation names the table): the DynamoDB table. The CLI
      finds it at ``<parameter_prefix>/ledger-table``.
    - ``expired_events_key`` (``kms.IKey | None``, default ``None``): a KMS key for the
      expired-events queue. ``None`` keeps SSE-SQS, so owners' execution roles need no
      KMS permission to deliver expired events.
    - ``parameter_prefix`` (``str | None``, default ``/holdfast/<stack name>``): the SSM
      path under which Holdfast publishes what the CLI must find.
    - ``policies_dir`` (``Path | None``, default ``None``: the packaged
      ``policies``): a directory with your own ``<role>.json`` documents.
    - ``acknowledge_nag_findings`` (``bool``, default ``True``): add Holdfast's cdk-nag
      acknowledgements (each with its reason) when cdk-nag is installed.
    - ``chat_channels`` (sequence of ``SlackChannel`` / ``TeamsChannel``, default ``()``):
      AWS Chatbot channels subscribed to the stage topic; each stage change arrives as a
      chat message (stage, why, what is held, the next gate). The workspace or team must
      be authorized in the Chatbot console first; the channels only receive.
    - ``region_switch`` (``RegionSwitchAccess | None``, default ``None``: none): the step
      function an ARC Region switch plan runs in this Region (holdfast_cdk.region_switch;
      `RegionSwitchSteps` puts the steps in the plan).

    Attributes: ``settings``, ``ledger`` (the table), ``readiness`` (its schedule, metric
    and alarm), ``region_switch`` (its step function, or None), ``expired_events_queue``,
    ``dead_letter_queue``, ``topic``, ``topic_key``, ``detector``, ``reconciler``,
    ``functions``, ``dashboard``, ``alarms``, ``expired_queue_parameter``, and the parts
    (``ledger_part``, ``queues``, ``notifications``, ``controllers``, ``signals``,
    ``monitoring``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings | None = None,
        ledger_table_name: str | None = None,
        expired_events_key: kms.IKey | None = None,
        parameter_prefix: str | None = None,
        policies_dir: Path | None = None,
        acknowledge_nag_findings: bool = True,
        chat_channels: Sequence[SlackChannel | TeamsChannel] = (),
        region_switch: RegionSwitchAccess | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if settings is not None and not isinstance(settings, Settings):
            raise TypeError(
                f"Holdfast: settings must be holdfast.settings.Settings (from Settings.from_mapping), not {type(settings).__name__}"
            )
        self.settings = settings = settings or Settings()
        stack = Stack.of(self)
        self.parameter_prefix = _parameter_prefix(parameter_prefix, stack, construct_id)

        self.ledger_part = Ledger(self, "Ledger", table_name=ledger_table_name or settings.ledger_table_name)
        Annotations.of(self).add_info(f"Holdfast in {stack.stack_name}: mode {settings.mode} ({MODE_NOTES[settings.mode]})")
        self.queues = Queues(self, "Queues", expired_events_key=expired_events_key)
        self.notifications = Notifications(self, "Notifications", email=settings.notification_email,
                                           chat_channels=chat_channels)
        table, topic, expired = self.ledger_part.table, self.notifications.topic, self.queues.expired_events

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
                "Partition": stack.partition,
                "Region": stack.region,
                "Account": stack.account,
                "SelectorKey": settings.selector_key,
                "SelectorValue": settings.selector_value,
                "LedgerTableArn": table.table_arn,
                "ExpiredQueueArn": expired.queue_arn,
                "TopicArn": topic.topic_arn,
            },
            dead_letters=self.queues.dead_letters,
            policies_dir=policies_dir,
            settings_parameter_name=f"{self.parameter_prefix}/{SETTINGS_PARAMETER}",
        )
        self.notifications.grant_publish(self.controllers.reconciler)
        self.queues.grant_replay(self.controllers.reconciler)

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
        # Doctor's read-only checks every `readiness_hours`, a metric and an alarm on failure.
        self.readiness = Readiness(
            self,
            "Readiness",
            function=self.controllers.readiness,
            hours=settings.readiness_hours,
            topic=topic,
            dead_letters=self.queues.dead_letters,
        )
        self.monitoring.alarms.append(self.readiness.alarm)
        self.expired_queue_parameter = ssm.StringParameter(
            self,
            "ExpiredQueueArnParameter",
            parameter_name=f"{self.parameter_prefix}/{EXPIRED_QUEUE_PARAMETER}",
            string_value=expired.queue_arn,
            description="Holdfast: the expired-events queue (the on-failure destination for owners' async functions)",
        )
        self.ledger_table_parameter = ssm.StringParameter(
            self,
            "LedgerTableParameter",
            parameter_name=f"{self.parameter_prefix}/{LEDGER_TABLE_PARAMETER}",
            string_value=table.table_name,
            description="Holdfast: the ledger table's name (the CLI reads it)",
        )
        # What `holdfast drill` reads to learn the deployed mode (it never drills a mode=off
        # account) and the settings its checks use; about 1.3 KB, inside a standard parameter's 4 KB.
        self.settings_parameter = ssm.StringParameter(
            self,
            "SettingsParameter",
            parameter_name=f"{self.parameter_prefix}/{SETTINGS_PARAMETER}",
            string_value=settings.to_json(),
            description="Holdfast: the deployed settings (read by holdfast drill)",
        )

        # ARC Region switch steps (holdfast_cdk.region_switch), before the scan of own resources below.
        self.region_switch = None if region_switch is None else RegionSwitchFunction(
            self, "RegionSwitch", access=region_switch, settings=settings, ledger_table_name=table.table_name,
            ledger_table_arn=table.table_arn, reconciler=self.controllers.reconciler,
            powertools=self.controllers.powertools, log_retention=RETENTION[settings.log_retention_days])
        self.teardown = self._teardown()

        # Holdfast never engages its own resources, whatever their tags (holdfast.core.own):
        # the controllers know them by the tags CloudFormation puts on every resource it
        # creates (this stack's id and each resource's logical ID), the CLI from SSM.
        # Logical IDs are plain strings: no reference between the functions, no cycle.
        own_ids = sorted(c.logical_id for c in self.node.find_all()
                         if isinstance(c, CfnResource) and c.cfn_resource_type in OWN_TYPES)
        for function in (*self.controllers.functions, self.teardown_function):
            function.add_environment("HOLDFAST_STACK_ID", stack.stack_id)
            function.add_environment("HOLDFAST_OWN_LOGICAL_IDS", ",".join(own_ids))
        self.own_resources_parameter = ssm.StringParameter(
            self,
            "OwnResourcesParameter",
            parameter_name=f"{self.parameter_prefix}/{OWN_RESOURCES_PARAMETER}",
            string_value=stack.to_json_string({
                "stack_id": stack.stack_id, "logical_ids": own_ids,
                "functions": [f.function_name for f in (*self.controllers.functions, self.teardown_function)]}),
            description="Holdfast: its own resources, which it never engages (read by the holdfast CLI)",
        )

        self.ledger = table
        self.expired_events_queue = expired
        self.dead_letter_queue = self.queues.dead_letters
        self.topic = topic
        self.topic_key = self.notifications.key
        self.detector = self.controllers.detector
        self.reconciler = self.controllers.reconciler
        self.functions = self.controllers.functions
        self.dashboard = self.monitoring.dashboard
        self.alarms = self.monitoring.alarms
        if acknowledge_nag_findings:
            steps = (self.region_switch.function,) if self.region_switch else ()
            acknowledge(functions=(*self.controllers.functions, self.teardown_function, *steps),
                        dead_letters=self.queues.dead_letters,
                        expired_events=self.queues.expired_events)

    # ---- the stack's deletion while resources are held --------------------------------

    def _teardown(self) -> CustomResource:
        """A custom resource whose Delete refuses the stack's deletion while Holdfast holds
        resources, or restores them first (`on_delete_while_engaged`,
        holdfast.handlers.teardown). It depends on every other part of the construct, so
        CloudFormation deletes it first: a refusal keeps the controllers, their roles, the
        ledger and the schedule, and a restore has them all while it runs."""
        function = self.teardown_function = self.controllers.teardown()
        resource = CustomResource(
            self,
            "Teardown",
            service_token=function.function_arn,
            resource_type="Custom::HoldfastTeardown",
            # CloudFormation waits for the answer this long at most (the function's timeout and a margin).
            service_timeout=Duration.seconds(TEARDOWN_TIMEOUT_SECONDS + 60),
            properties={"OnDeleteWhileEngaged": self.settings.on_delete_while_engaged},
        )
        for part in (self.ledger_part, self.queues, self.notifications, self.controllers, self.signals,
                     self.monitoring, self.readiness):
            resource.node.add_dependency(part)
        return resource

    # ---- grants for users' own functions -------------------------------------------

    def expired_events_statements(self) -> list[iam.PolicyStatement]:
        """The statements an execution role needs for Lambda to deliver an expired event
        to Holdfast's queue; for a role CDK cannot change (add them where you manage it)."""
        statements = [iam.PolicyStatement(actions=list(SEND_ACTIONS), resources=[self.expired_events_queue.queue_arn])]
        key = self.queues.expired_events_key
        if key is not None:
            statements.append(iam.PolicyStatement(actions=list(KEY_ACTIONS), resources=[key.key_arn]))
        return statements

    def grant_expired_events_destination(self, fn_or_role: Any) -> list[iam.Grant]:
        """Let a function of yours (or its execution role) deliver expired async events
        to Holdfast's queue, so Holdfast can set that queue as its on-failure destination
        while engaged (Lambda checks, when the destination is written, that the execution
        role may send to it). One line per function:

            holdfast.grant_expired_events_destination(my_function)
        """
        principal = _execution_role(fn_or_role)
        grants = [
            iam.Grant.add_to_principal(grantee=principal, actions=list(SEND_ACTIONS), resource_arns=[self.expired_events_queue.queue_arn])
        ]
        key = self.queues.expired_events_key
        if key is not None:
            grants.append(key.grant(principal, *KEY_ACTIONS))
        for grant in grants:
            if not grant.success:
                raise ValueError(
                    f"Holdfast: could not add the expired-events grant to {fn_or_role}: add "
                    f"{[s.to_json() for s in self.expired_events_statements()]} to its execution role yourself"
                )
        return grants


def _execution_role(fn_or_role: Any) -> iam.IGrantable:
    """A function's execution role, or the role/grantable itself."""
    if hasattr(fn_or_role, "function_arn"):
        role = fn_or_role.role
        if role is None:
            raise ValueError(
                f"Holdfast: function {fn_or_role.node.path} has no known execution role (an imported function?): "
                "pass its role, e.g. iam.Role.from_role_arn(...), to grant_expired_events_destination"
            )
        return role
    if hasattr(fn_or_role, "grant_principal"):
        return fn_or_role
    raise TypeError(
        f"Holdfast: grant_expired_events_destination takes a Lambda function or an IAM role, not {type(fn_or_role).__name__}"
    )


def _parameter_prefix(prefix: str | None, stack: Stack, construct_id: str) -> str:
    if prefix is None:
        name = stack.stack_name if not Token.is_unresolved(stack.stack_name) else construct_id
        prefix = f"{PARAMETER_ROOT}/{name}"
    if not _PARAMETER_PREFIX.match(prefix):
        raise ValueError(
            f"Holdfast: parameter_prefix {prefix!r} must be an SSM path such as /holdfast/my-stack: "
            "a leading '/', no trailing '/', letters, digits and _ . -"
        )
    return prefix
