"""Create the ledger table where it is missing (first use, local endpoints), and ask
whether it is there (`describe`)."""

from __future__ import annotations

from holdfast.iam import uses
from holdfast.ledger import PK, SK, TTL_ATTRIBUTE, Ledger


@uses("dynamodb:DescribeTable", "dynamodb:CreateTable", "dynamodb:UpdateTimeToLive", by=("cli",))
def ensure_table(dynamodb, name: str) -> bool:
    """Create the table if it does not exist. Returns True when it was created."""
    try:
        dynamodb.describe_table(TableName=name)
        return False
    except dynamodb.exceptions.ResourceNotFoundException:
        pass
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": PK, "AttributeType": "S"},
            {"AttributeName": SK, "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )
    return True


@uses("dynamodb:DescribeTable", by=("cli",))
def describe(ledger: Ledger) -> dict:
    """The table's description; DynamoDB's errors (ResourceNotFoundException: no such
    table) pass through to the caller, which says what each means for its command."""
    return ledger.describe_table()["Table"]
