"""`make serve`: a local AWS to point the `holdfast` CLI at, with a small sample fleet.

    PYTHONPATH=dev .venv/bin/python -m holdfast_demo.serve [--port 5000] [--host 127.0.0.1]

Starts the demo's embedded AWS (moto's server with AWS's semantics where moto departs
from them, holdfast_fixtures.moto_patches), creates what a deployed Holdfast stack has
(the ledger, the expired-events queue and its SSM parameter, the settings parameter in
mode `auto`, the stage topic) and a sample fleet of every kind, tagged
`holdfast:protect=true`, with an untagged twin of each (holdfast_demo.fleet). Then it prints
the `export` lines that point the CLI at it, and serves until Ctrl-C (SIGINT) or SIGTERM,
after which the server is stopped and moto's backends reset.

It is a development tool, like the demo: it lives in dev/, never in the wheel or the
Lambda asset, and nothing in `holdfast` imports it. Everything in it is on 127.0.0.1: the
CLI treats that endpoint as loopback (no confirmation asked, no rate budget), and the
credentials it prints are dummies the embedded AWS accepts.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Sequence, TextIO

from holdfast.aws import Clients
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.settings import Settings
from holdfast_demo.embedded import REGION, moto_server, session
from holdfast_demo.fleet import DEFAULT_SELECTOR, build_fleet

DEFAULT_PORT = 5000
# The stack name whose SSM parameters the sample publishes (/holdfast/<stack>/...): the
# construct's default, so the CLI finds them as it would in an account.
STACK = "Holdfast"
# Three groups across three zones: what the detector needs to see a regional impairment
# (detect_min_groups, detect_min_zones), so `holdfast drill` runs on the sample too.
SAMPLE = {"asgs": 3, "esms": 2, "asyncs": 2, "nlbs": 1, "services": 1}


@uses("sqs:CreateQueue", "sqs:GetQueueAttributes", "sns:CreateTopic", "ssm:PutParameter", by=("cli",))
def stack_resources(clients: Clients, settings: Settings) -> str:
    """What the stack creates besides the ledger, and the parameters the CLI reads."""
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName="holdfast-expired-events")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    clients("sns").create_topic(Name="holdfast-stage-changes")
    ssm = clients("ssm")
    ssm.put_parameter(Name=f"/holdfast/{STACK}/expired-queue-arn", Value=queue, Type="String")
    ssm.put_parameter(Name=f"/holdfast/{STACK}/settings", Value=json.dumps(settings.to_mapping()), Type="String")
    return queue


def exports(url: str) -> list[str]:
    return [
        f"export AWS_ENDPOINT_URL={url}",
        f"export AWS_REGION={REGION} AWS_DEFAULT_REGION={REGION}",
        "export AWS_ACCESS_KEY_ID=serve AWS_SECRET_ACCESS_KEY=serve",
        "unset AWS_PROFILE AWS_SESSION_TOKEN",
    ]


def serve(*, host: str, port: int, out: TextIO, stop: threading.Event) -> int:
    with moto_server(host=host, port=port) as url:
        clients = Clients(session(), endpoint_url=url)
        ensure_table(clients("dynamodb"), DEFAULT_TABLE)
        stack_resources(clients, Settings())
        fleet = build_fleet(clients, **SAMPLE, prefix="sample")
        counts = ", ".join(f"{len(arns)} {kind}" for kind, arns in fleet.selected.items())
        lines = [
            f"# Holdfast's local AWS at {url} (moto, with AWS's semantics), region {REGION}:",
            f"# the ledger {DEFAULT_TABLE}, the expired-events queue, /holdfast/{STACK}/settings (mode auto),",
            f"# and a sample fleet tagged {DEFAULT_SELECTOR} ({counts}; an untagged twin of each).",
            "# Point the CLI at it in your shell:",
            *exports(url),
            "# Ctrl-C stops it.",
        ]
        out.write("\n".join(lines) + "\n")
        out.flush()
        while not stop.wait(0.5):   # a signal handler sets it; the timeout keeps the wait interruptible
            pass
    out.write("# stopped\n")
    out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="holdfast-serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return serve(host=args.host, port=args.port, out=sys.stdout, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
