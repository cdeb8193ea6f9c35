"""The demo's embedded AWS is its own: moto's backends are global to the process, so
what an earlier test left behind (a ledger holding a plan in hold) must not reach it."""

from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast_demo.embedded import moto_server as demo_server
from holdfast_demo.embedded import session


def test_the_demos_aws_starts_empty_whatever_ran_before(moto_server):
    moto_server.reset()
    left = moto_server.clients()
    ensure_table(left("dynamodb"), DEFAULT_TABLE)
    left("sqs").create_queue(QueueName="left-behind")
    assert DEFAULT_TABLE in left("dynamodb").list_tables()["TableNames"]

    with demo_server() as url:
        own = session()
        assert own.client("dynamodb", endpoint_url=url).list_tables()["TableNames"] == []
        assert "QueueUrls" not in own.client("sqs", endpoint_url=url).list_queues()
