"""`make serve`: a local AWS to point the `holdfast` CLI at, with a small sample fleet.

    PYTHONPATH=dev .venv/bin/python -m holdfast_demo.serve [--port 5000] [--host 127.0.0.1]

Starts the demo's embedded AWS (moto's server with AWS's semantics where moto departs
from them, holdfast_fixtures.moto_patches), creates what a deployed Holdfast stack leaves
in an account (the ledger, the expired-events queue and its SSM parameter, the settings
parameter in mode `auto`, the stage topic, the reconciler function and its role, the
Health rule: `holdfast doctor` passes) and a sample fleet of every kind, tagged
`holdfast:protect=true`, with an untagged twin of each (holdfast_demo.fleet). Then it prints
the `export` lines that point the CLI at it, and serves until Ctrl-C (SIGINT) or SIGTERM,
after which the server is stopped and moto's backends reset; a signal during the set-up
stops it the same way.

A port something else listens on (macOS keeps 5000 for its AirPlay Receiver) is refused
before anything starts: exit 1 and a line that names the port and how to choose another
(`PORT=5001 make serve`, `--port 5001`, or 0 for any free port).

It is a development tool, like the demo: it lives in dev/, never in the wheel or the
Lambda asset, and nothing in `holdfast` imports it. Everything in it is on 127.0.0.1: the
CLI treats that endpoint as loopback (no confirmation asked, no rate budget), and the
credentials it prints are dummies the embedded AWS accepts.
"""

from __future__ import annotations

import argparse
import errno
import io
import json
import signal
import socket
import sys
import threading
import zipfile
from pathlib import Path
from typing import Sequence, TextIO

from holdfast.aws import Clients
from holdfast.iam import fill, uses
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.settings import Settings
from holdfast_demo.embedded import REGION, moto_server, session
from holdfast_demo.fleet import DEFAULT_SELECTOR, build_fleet

DEFAULT_PORT = 5000
# What `holdfast doctor` looks for (holdfast.readiness), written out here:
# tests/cli/test_readme_examples.py holds the two equal.
POWERTOOLS_LAYER_PARAMETER = "/aws/service/powertools/python/arm64/python3.13/3.37.0"
RECONCILER_HANDLER = "holdfast.handlers.reconciler.handler"
POLICIES = Path(__file__).resolve().parents[2] / "policies"   # the clone's policies/
# The stack name whose SSM parameters the sample publishes (/holdfast/<stack>/...): the
# construct's default, so the CLI finds them as it would in an account.
STACK = "Holdfast"
# Three groups across three zones: what the detector needs to see a regional impairment
# (detect_min_groups, detect_min_zones), so `holdfast drill` runs on the sample too.
SAMPLE = {"asgs": 3, "esms": 2, "asyncs": 2, "nlbs": 1, "services": 1}


@uses("sqs:CreateQueue", "sqs:GetQueueAttributes", "sns:CreateTopic", "ssm:PutParameter", "iam:CreateRole",
      "iam:PutRolePolicy", "lambda:CreateFunction", "events:PutRule", by=("cli",))
def stack_resources(clients: Clients, settings: Settings) -> str:
    """What a deploy leaves besides the ledger, by the APIs, so that `holdfast doctor` finds
    a deployed Holdfast: the expired-events queue and topic, the parameters the CLI reads,
    the reconciler function and its role with the rendered policies/reconciler.json, the
    Health rule, and AWS's public Powertools parameter the stack resolves its layer from."""
    from holdfast_fixtures.moto_patches import publish_public_parameter

    account = clients.account_id()
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName="holdfast-expired-events")["QueueUrl"]
    queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = clients("sns").create_topic(Name="holdfast-stage-changes")["TopicArn"]
    ssm = clients("ssm")
    ssm.put_parameter(Name=f"/holdfast/{STACK}/expired-queue-arn", Value=queue, Type="String")
    ssm.put_parameter(Name=f"/holdfast/{STACK}/settings", Value=json.dumps(settings.to_mapping()), Type="String")
    publish_public_parameter(account, REGION, POWERTOOLS_LAYER_PARAMETER,
                             f"arn:aws:lambda:{REGION}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:1")
    document = rendered_policy("reconciler", {
        "Partition": "aws", "Region": REGION, "Account": account, "SelectorKey": settings.selector_key,
        "SelectorValue": settings.selector_value, "LedgerTableArn": f"arn:aws:dynamodb:{REGION}:{account}:table/{DEFAULT_TABLE}",
        "TopicArn": topic, "ExpiredQueueArn": queue})
    iam = clients("iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                       "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName=f"{STACK}-ReconcilerRole", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=f"{STACK}-ReconcilerRole", PolicyName="reconciler", PolicyDocument=json.dumps(document))
    clients("lambda").create_function(
        FunctionName=f"{STACK}-Reconciler", Runtime="python3.13", Role=role, Handler=RECONCILER_HANDLER,
        Code={"ZipFile": _empty_zip()}, Environment={"Variables": {"HOLDFAST_LEDGER_TABLE": DEFAULT_TABLE}})
    clients("events").put_rule(Name=f"{STACK}-HealthIssues", State="ENABLED", EventPattern=json.dumps({
        "source": ["aws.health"], "detail-type": ["AWS Health Event"],
        "detail": {"service": sorted({"EC2", *settings.health_services}), "eventTypeCategory": ["issue"],
                   "eventRegion": [REGION]}}))
    return queue


def rendered_policy(role: str, values: dict[str, str]) -> dict:
    """policies/<role>.json with its `${Name}` placeholders filled and empty slots left out,
    as holdfast_cdk.role_policies renders it at synth (that module imports the CDK, whose
    runtime a local endpoint has no use for)."""
    document = json.loads((POLICIES / f"{role}.json").read_text())
    statements = [fill(s, values) for s in document["Statement"] if s.get("Action")]
    return {"Version": document["Version"], "Statement": statements}


def _empty_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("index.py", "")
    return buf.getvalue()


def exports(url: str) -> list[str]:
    return [
        f"export AWS_ENDPOINT_URL={url}",
        f"export AWS_REGION={REGION} AWS_DEFAULT_REGION={REGION}",
        "export AWS_ACCESS_KEY_ID=serve AWS_SECRET_ACCESS_KEY=serve",
        "unset AWS_PROFILE AWS_SESSION_TOKEN",
    ]


class PortTaken(Exception):
    """Something else listens on the port asked for."""


class Stopped(Exception):
    """SIGINT or SIGTERM: stop, whatever the server was doing."""


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on before moto's server is started: its
    listener thread would fail to bind and leave the start waiting for ever. Bound as
    werkzeug binds (SO_REUSEADDR), so a port in TIME_WAIT after a server of ours is free."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortTaken(f"port {port} on {host} is in use ({err.strerror}); choose another: "
                                f"`PORT={port + 1} make serve`, or `--port {port + 1}` (0: any free port)") from err
            raise


def serve(*, host: str, port: int, out: TextIO, stop: threading.Event) -> int:
    check_port(host, port)
    with moto_server(host=host, port=port) as url:
        clients = Clients(session(), endpoint_url=url)
        ensure_table(clients("dynamodb"), DEFAULT_TABLE)
        stack_resources(clients, Settings(mode="auto"))   # a sandbox: nothing there is real
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
    parser = argparse.ArgumentParser(prog="holdfast-serve", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def stopping(*_) -> None:
        # Raised in the main thread wherever it is (building the fleet, waiting): the
        # `with` blocks stop the server and reset moto on the way out.
        stop.set()
        raise Stopped

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stopping)
    try:
        return serve(host=args.host, port=args.port, out=sys.stdout, stop=stop)
    except PortTaken as err:
        print(f"holdfast-serve: {err}", file=sys.stderr)
        return 1
    except Stopped:
        print("# stopped", flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
