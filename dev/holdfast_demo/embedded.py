"""An embedded AWS for the demo: moto's server on 127.0.0.1, in this process, with
AWS's semantics where moto departs from them (holdfast_fixtures.moto_patches).

Credentials are fixed dummies, so the demo can never reach a real account whatever
the shell's environment holds.

Clients made from `session()` in the same process as the server skip the socket: their
request, signed and serialized by botocore as for the wire, goes to the server's own WSGI
application (the one its HTTP listener calls) in the calling thread, and the answer is
parsed by botocore as if it had come back over HTTP. Moto's routing, its backends and the
patches all see the same request; only the TCP connection, the listener's thread per
connection and HTTP's framing are left out (they were a quarter of the demo's CPU), and
Flask's dispatch around moto's handler (`_dispatched`: another eighth). Any
other client (the CLI in another process, a test's own client) reaches the server
over HTTP.
"""

from __future__ import annotations

import io
import logging
import sys
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

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
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    _APPS[url] = server._server.app   # the application its listener serves
    try:
        with aws_semantics():
            warm_up(url)
            yield url
    finally:
        _APPS.pop(url, None)
        server.stop()
        _internal.moto_api_backend.reset()


# Each running embedded server's URL and its WSGI application (moto's DomainDispatcherApplication).
_APPS: dict[str, Any] = {}


def answer_in_process(request, **_: Any):
    """botocore's `before-send`: a request for a running embedded server, answered by that
    server's WSGI application in this thread; None (send it over HTTP) for any other URL.

    The WSGI environment is the one werkzeug's listener builds for the same request
    (werkzeug.serving.WSGIRequestHandler.make_environ, with moto's MotoRequestHandler
    keeping header names that hold an underscore), and the headers http.client would add
    (Host, Accept-Encoding) are added when botocore did not set them. The answer is moto's
    handler's, wrapped as its Flask application wraps it (`_dispatched`)."""
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.request import (
        PRESERVED_HEADER_NAMES_ENVIRON_KEY,
        environ_key_for_header,
        should_preserve_original_header_name,
    )
    from werkzeug.test import run_wsgi_app

    parts = urlsplit(request.url)
    app = _APPS.get(f"{parts.scheme}://{parts.netloc}")
    if app is None:
        return None
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode("utf-8")
    body = body or b""
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = [(k, v.decode("latin-1") if isinstance(v, bytes) else str(v)) for k, v in request.headers.items()]
    named = {k.lower() for k, _ in headers}
    headers += [(k, v) for k, v in (("Host", parts.netloc), ("Accept-Encoding", "identity")) if k.lower() not in named]
    if body and "content-length" not in named:
        headers.append(("Content-Length", str(len(body))))
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0), "wsgi.url_scheme": parts.scheme, "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        "REQUEST_METHOD": request.method, "SCRIPT_NAME": "", "PATH_INFO": _wsgi(unquote(parts.path)),
        "QUERY_STRING": _wsgi(parts.query), "REQUEST_URI": _wsgi(target), "RAW_URI": _wsgi(target),
        "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": 0, "SERVER_NAME": parts.hostname,
        "SERVER_PORT": str(parts.port), "SERVER_PROTOCOL": "HTTP/1.1",
    }
    for name, value in headers:
        if "_" not in name:   # werkzeug drops the others
            key = environ_key_for_header(name)
            environ[key] = f"{environ[key]},{value}" if key in environ and key.startswith("HTTP_") else value
    dashed, preserved = set(environ), {}
    for name, value in headers:   # moto keeps S3 metadata names with an underscore, never over a dashed one
        key = environ_key_for_header(name)
        if "_" in name and should_preserve_original_header_name(name) and key not in dashed:
            preserved.setdefault(key, name)
            environ[key] = f"{environ[key]},{value}" if key in environ else value
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = preserved
    answer, status, answer_headers = run_wsgi_app(_dispatched(app, environ) or app, environ, buffered=True)
    try:
        data = b"".join(answer)
    finally:
        getattr(answer, "close", lambda: None)()
    return AWSResponse(request.url, int(status.split(" ", 1)[0]), list(answer_headers.items()), MockRawResponse(data))


def _dispatched(app, environ: dict[str, Any]):
    """The response moto's Flask application would give for this request, as a WSGI
    application (werkzeug's Response), made without Flask's dispatch; None: leave the
    request to `app` (a path moto's own API serves, or an application that is not moto's).

    Flask's part in moto's server is routing and wrapping: the backend's application for
    the request (`DomainDispatcherApplication.get_application`, unchanged), its URL rule
    (the application's own map, matched as Flask matches it), and the rule's view,
    `moto.core.utils.convert_to_flask_response`, which calls the backend's handler with
    moto's request and wraps its (status, headers, body) in a Flask Response. The same is
    done here with the same objects, minus Flask's request context, its before/after
    hooks and its error handlers: the only hook on moto's applications is flask_cors's,
    which adds `Access-Control-Allow-Origin: *` (added here too), and the only errors
    Flask turns into answers are werkzeug's HTTPExceptions, answered here by the
    exception's own response as Flask does (any other exception reaches the caller, as
    it does through Flask with moto's `debug = True`). About a fifth of a call's CPU."""
    from botocore.exceptions import ClientError
    from flask import Response
    from moto.core.request import normalize_request
    from moto.moto_api import recorder
    from moto.moto_server.werkzeug_app import BackendRequest, DomainDispatcherApplication
    from werkzeug.exceptions import HTTPException

    if not isinstance(app, DomainDispatcherApplication) or environ["PATH_INFO"].startswith(("/moto-api", "/latest/")) \
            or environ["PATH_INFO"] == "/favicon.ico":
        return None
    backend_app = app.get_application(environ)
    try:
        endpoint, _ = backend_app.url_map.bind_to_environ(environ).match()
        view = backend_app.view_functions[endpoint]
        request = normalize_request(BackendRequest(environ))
        recorder._record_request(request)
        try:
            result = view.callback(request, request.raw_url, dict(request.headers))
        except ClientError as exc:
            result = 400, {}, exc.response["Error"]["Message"]
    except HTTPException as exc:
        response = exc.get_response(environ)
    else:
        status, headers, content = result if len(result) == 3 else (200, {}, result)
        response = Response(response=content, status=status, headers=headers)
        if request.method == "HEAD" and "content-length" in headers:
            response.headers["Content-Length"] = headers["content-length"]
    response.headers.setdefault("Access-Control-Allow-Origin", "*")
    return response


def _wsgi(text: str) -> str:
    """PEP 3333's native string: the UTF-8 bytes as latin-1 (werkzeug's _wsgi_encoding_dance)."""
    return text.encode("utf-8").decode("latin-1")


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
    """A boto3 session with dummy credentials (the embedded AWS accepts any) whose clients
    reach an embedded server of this process without a socket (`answer_in_process`)."""
    import boto3

    own = boto3.session.Session(aws_access_key_id="demo", aws_secret_access_key="demo", region_name=REGION)
    own.events.register("before-send", answer_in_process)
    return own
