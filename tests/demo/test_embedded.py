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


def test_the_demos_clients_skip_the_socket_and_get_the_answers_http_gets(monkeypatch):
    import boto3
    import pytest
    import urllib3.connection
    from botocore.exceptions import ClientError

    with demo_server() as url:
        # GIVEN a client of the demo's session, and one of a plain session (over HTTP)
        own = session().client("sqs", endpoint_url=url)
        wire = boto3.session.Session(aws_access_key_id="demo", aws_secret_access_key="demo",
                                     region_name="us-east-1").client("sqs", endpoint_url=url)
        wire.create_queue(QueueName="made-over-http", Attributes={"VisibilityTimeout": "45"})
        over_http = wire.get_queue_attributes(QueueUrl=wire.get_queue_url(QueueName="made-over-http")["QueueUrl"],
                                              AttributeNames=["VisibilityTimeout"])["Attributes"]
        with pytest.raises(ClientError) as http_error:
            wire.get_queue_url(QueueName="missing")

        # WHEN no connection can be opened
        def refuse(self, *args, **kwargs):
            raise AssertionError("a connection was opened")

        monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", refuse)

        # THEN the demo's client still reaches the same AWS, answers and errors alike
        in_process = own.get_queue_attributes(QueueUrl=own.get_queue_url(QueueName="made-over-http")["QueueUrl"],
                                              AttributeNames=["VisibilityTimeout"])["Attributes"]
        assert in_process == over_http == {"VisibilityTimeout": "45"}
        with pytest.raises(ClientError) as own_error:
            own.get_queue_url(QueueName="missing")
        assert own_error.value.response["Error"] == http_error.value.response["Error"]
        assert own_error.value.response["ResponseMetadata"]["HTTPStatusCode"] == \
            http_error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
