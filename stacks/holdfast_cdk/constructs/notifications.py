"""The stage-change topic, encrypted with a key of its own.

A customer-managed key rather than aws/sns because CloudWatch alarms publish to the
topic too, and the AWS-managed key's policy cannot let CloudWatch use it.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class Notifications(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, email: str | None = None) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description="Holdfast stage-change topic",
            enable_key_rotation=True,
        )
        self.key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey")
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Holdfast stage changes",
            master_key=self.key,
            enforce_ssl=True,
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Only what encryption adds; sns:Publish itself comes from policies/<role>.json."""
        self.key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")
