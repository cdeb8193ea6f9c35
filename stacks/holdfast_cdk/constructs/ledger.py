"""The ledger: the DynamoDB table that holds Holdfast's durable state.

On demand, because the load is a trickle in steady state and a burst during an event.
Point-in-time recovery and RETAIN, because the table holds the only record of what
every engaged resource looked like before Holdfast changed it (besides the
resource's own tag).

Named by CloudFormation unless a name is given: a retained table keeps its name after
its stack is deleted, so a fixed name would make the next create of the stack (a
redeploy, an account back in a StackSet's OU, a second stack in the account and region)
fail with "already exists". The table carries the tag `holdfast:component=ledger`,
which the organization's read-only role is scoped to (policies/readonly.json).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from holdfast.ledger import PK, SK, TTL_ATTRIBUTE

COMPONENT_TAG = ("holdfast:component", "ledger")


class Ledger(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, table_name: str | None = None) -> None:
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
        Tags.of(self.table).add(*COMPONENT_TAG)
