"""An embedded AWS for the demo: moto's server on 127.0.0.1, in this process, with
AWS's semantics where moto departs from them (holdfast_fixtures.moto_patches).

Credentials are fixed dummies, so the demo can never reach a real account whatever
the shell's environment holds.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from holdfast_fixtures import fast_moto

fast_moto.install()  # before moto is imported: EC2 with the fleet's one AMI, one botocore loader

from holdfast.iam import uses  # noqa: E402
from holdfast_fixtures.moto_patches import aws_semantics  # noqa: E402

REGION = "us-east-1"

# One cheap read per service the demo and the controllers call, made before anything else.
# The first request for a service makes the server import moto's module for it, build its
# routes and load its model: up to seconds of CPU, past the clients' 10 s read timeout on a
# busy machine when a dozen builder threads make their first calls at once (and a timed-out
# CreateFunction, retried, answers that the function already exists).
WARM_UP = {
    "dynamodb": ("list_tables", {}), "sqs": ("list_queues", {}), "sns": ("list_topics", {}),
    "sts": ("get_caller_identity", {}), "ec2": ("describe_availability_zones", {}),
    "autoscaling": ("describe_auto_scaling_groups", {}), "lambda": ("list_functions", {}),
    "elbv2": ("describe_load_balancers", {}), "ecs": ("list_clusters", {}),
    "application-autoscaling": ("describe_scalable_targets", {"ServiceNamespace": "ecs"}),
    "cloudwatch": ("list_metrics", {}), "iam": ("list_roles", {}),
    "resourcegroupstaggingapi": ("get_resources", {}),
}


@contextmanager
def moto_server(*, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """A moto server on `host` (127.0.0.1) and `port` (0: a free one), with AWS's semantics,
    and empty; yields its URL.

    moto's backends are global to the process: a server started in a process that ran
    other moto work (a test suite) would see its tables, plans and functions. The demo's
    AWS is its own, so every backend is reset before the first call and after the last."""
    from moto.moto_api import _internal
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    _internal.moto_api_backend.reset()
    try:
        with aws_semantics():
            host, port = server.get_host_and_port()
            url = f"http://{host}:{port}"
            warm_up(url)
            yield url
    finally:
        server.stop()
        _internal.moto_api_backend.reset()


@uses("dynamodb:ListTables", "sqs:ListQueues", "sns:ListTopics", "sts:GetCallerIdentity",
      "ec2:DescribeAvailabilityZones", "autoscaling:DescribeAutoScalingGroups", "lambda:ListFunctions",
      "elasticloadbalancing:DescribeLoadBalancers", "ecs:ListClusters", "application-autoscaling:DescribeScalableTargets",
      "cloudwatch:ListMetrics", "iam:ListRoles", "tag:GetResources", by=("cli",))
def warm_up(url: str) -> None:
    """Each service's first request, one at a time, with all the time it needs."""
    from botocore.config import Config

    patient = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=60, read_timeout=300)
    own = session()
    for service, (method, kwargs) in WARM_UP.items():
        getattr(own.client(service, endpoint_url=url, config=patient), method)(**kwargs)


def session():
    """A boto3 session with dummy credentials: the embedded AWS accepts any."""
    import boto3

    return boto3.session.Session(aws_access_key_id="demo", aws_secret_access_key="demo", region_name=REGION)
