"""The ledger: the DynamoDB table that holds Holdfast's durable state.

On demand, because the load is a trickle in steady state and a burst during an event.
Point-in-time recovery and RETAIN, because the table holds the only record of what
every engaged resource looked like before Holdfast changed it (besides the
resource's own tag).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from holdfast.ledger import DEFAULT_TABLE, PK, SK, TTL_ATTRIBUTE


class Ledger(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, table_name: str = DEFAULT_TABLE) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            table_name=table_name,
            partition_key=dynamodb.Attribute(name=PK, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SK, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=TTL_ATTRIBUTE,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
