"""The stage-change topic, encrypted with a key of its own, and its subscribers: an
e-mail address and AWS Chatbot channels (Slack, Microsoft Teams).

A customer-managed key rather than aws/sns because CloudWatch alarms publish to the
topic too, and the AWS-managed key's policy cannot let CloudWatch use it. Subscribers
need no key: SNS decrypts a message before it delivers it.

A Chatbot channel only receives. Its role has no policy, and its guardrail (the most any
channel member could do through Chatbot; CloudFormation applies AdministratorAccess when
none is given) is a policy of Holdfast's that denies every action. The reconciler
publishes a Chatbot custom notification on the topic's HTTPS protocol, which Chatbot's
subscription receives (holdfast.core.announce); CloudWatch alarm notifications on the
topic Chatbot renders itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from aws_cdk import Stack
from aws_cdk import aws_chatbot as chatbot
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

_NAME = re.compile(r"^[A-Za-z0-9-_]{1,128}$")


@dataclass(frozen=True)
class SlackChannel:
    """A Slack channel of a workspace already authorized in the Chatbot console (its id:
    the console's workspace id, such as T012ABCDEFG); `channel_id` such as C0123456789."""

    workspace_id: str
    channel_id: str
    name: str = "holdfast-slack"

    def check(self) -> None:
        if not re.match(r"^[0-9A-Z]{1,255}$", self.workspace_id):
            raise ValueError(f"Holdfast: SlackChannel workspace_id {self.workspace_id!r} must be the Slack workspace id "
                             "(capital letters and digits, e.g. T012ABCDEFG) from the Chatbot console")
        if not re.match(r"^[A-Za-z0-9]{1,256}$", self.channel_id):
            raise ValueError(f"Holdfast: SlackChannel channel_id {self.channel_id!r} must be a Slack channel id such as C0123456789")
        _check_name(self.name)


@dataclass(frozen=True)
class TeamsChannel:
    """A Microsoft Teams channel of a team already authorized in the Chatbot console:
    `team_id` and `tenant_id` are UUIDs, `channel_id` the channel's id URL-encoded as the
    Chatbot API takes it (19%3a...%40thread.tacv2)."""

    team_id: str
    tenant_id: str
    channel_id: str
    name: str = "holdfast-teams"

    def check(self) -> None:
        uuid = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")
        for field in ("team_id", "tenant_id"):
            if not uuid.match(getattr(self, field)):
                raise ValueError(f"Holdfast: TeamsChannel {field} {getattr(self, field)!r} must be a UUID "
                                 "(the Chatbot console shows it)")
        # The Chatbot API's pattern for TeamsChannelConfiguration.ChannelId, 1-255 characters.
        if not (1 <= len(self.channel_id) <= 255 and re.match(
                r"^([a-zA-Z0-9-_=+/.,])*%3[aA]([a-zA-Z0-9-_=+/.,])*%40([a-zA-Z0-9-_=+/.,])*$", self.channel_id)):
            raise ValueError(f"Holdfast: TeamsChannel channel_id {self.channel_id!r} must be a Teams channel id, "
                             "URL-encoded (19%3a...%40thread.tacv2)")
        _check_name(self.name)


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"Holdfast: chat channel name {name!r} must be 1-128 letters, digits, hyphens or underscores")


class Notifications(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, email: str | None = None,
                 chat_channels: Sequence[SlackChannel | TeamsChannel] = ()) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description="Holdfast stage-change topic",
            enable_key_rotation=True,
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Holdfast stage changes",
            master_key=self.key,
            enforce_ssl=True,
        )
        self._alarms_may_publish()
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.chat_channels: list[chatbot.SlackChannelConfiguration | chatbot.CfnMicrosoftTeamsChannelConfiguration] = []
        if chat_channels:
            self._chat(list(chat_channels))

    def _alarms_may_publish(self) -> None:
        """CloudWatch alarms of this account and region may publish, and use the key to.

        An AWS::SNS::TopicPolicy replaces the topic's whole access policy (SNS's default
        one included), so the policy CDK synthesizes for `enforce_ssl` (the TLS Deny)
        would leave CloudWatch no Allow: alarms that notify no one. The service principal
        is held to this account's alarms (aws:SourceAccount, and aws:SourceArn on the
        topic), against the confused deputy; the key grant carries aws:SourceAccount."""
        stack = Stack.of(self)
        cloudwatch = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[cloudwatch],
            actions=["sns:Publish"],
            resources=[self.topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"},
            },
        ))
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[cloudwatch],
            actions=["kms:Decrypt", "kms:GenerateDataKey"],
            resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
        ))

    def _chat(self, channels: list[SlackChannel | TeamsChannel]) -> None:
        names = [c.name for c in channels]
        for channel in channels:
            if not isinstance(channel, (SlackChannel, TeamsChannel)):
                raise TypeError(f"Holdfast: chat_channels takes SlackChannel or TeamsChannel, not {type(channel).__name__}")
            channel.check()
        if len(set(names)) != len(names):
            raise ValueError(f"Holdfast: chat channel names must differ (Chatbot names are unique in an account): {names}")
        self.chat_guardrail = iam.ManagedPolicy(
            self,
            "ChatGuardrail",
            description="Holdfast: chat channels receive notifications and run nothing",
            statements=[iam.PolicyStatement(sid="NothingFromChat", effect=iam.Effect.DENY, actions=["*"], resources=["*"])],
        )
        self.chat_role = iam.Role(
            self,
            "ChatRole",
            assumed_by=iam.ServicePrincipal("chatbot.amazonaws.com"),
            description="Holdfast: AWS Chatbot's role for Holdfast's chat channels (notifications only, no permission)",
        )
        for i, channel in enumerate(channels):
            if isinstance(channel, SlackChannel):
                config = chatbot.SlackChannelConfiguration(
                    self,
                    f"Slack{i}",
                    slack_channel_configuration_name=channel.name,
                    slack_workspace_id=channel.workspace_id,
                    slack_channel_id=channel.channel_id,
                    notification_topics=[self.topic],
                    role=self.chat_role,
                    guardrail_policies=[self.chat_guardrail],
                    logging_level=chatbot.LoggingLevel.ERROR,
                )
            else:
                config = chatbot.CfnMicrosoftTeamsChannelConfiguration(
                    self,
                    f"Teams{i}",
                    configuration_name=channel.name,
                    iam_role_arn=self.chat_role.role_arn,
                    team_id=channel.team_id,
                    teams_channel_id=channel.channel_id,
                    teams_tenant_id=channel.tenant_id,
                    sns_topic_arns=[self.topic.topic_arn],
                    guardrail_policies=[self.chat_guardrail.managed_policy_arn],
                    logging_level="ERROR",
                )
            self.chat_channels.append(config)

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Only what encryption adds; sns:Publish itself comes from policies/<role>.json."""
        self.key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")
