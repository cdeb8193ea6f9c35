"""An HTTP proxy in front of a moto server that throttles like AWS does, per account.

Moto never throttles, so a benchmark on moto alone says nothing about how Holdfast
behaves at AWS's request quotas. This proxy sits between the SDK and moto
(`--endpoint-url http://127.0.0.1:<port>`), gives each account, region and API class
a token bucket, and answers a request that finds its bucket empty with the throttle
error that service really sends, shaped so botocore parses it exactly as it parses
AWS's (the codes botocore/retries/standard.py treats as throttling: `Throttling`,
`ThrottlingException`, `ThrottledException`, `TooManyRequestsException`,
`ProvisionedThroughputExceededException`, ...). Other requests go on to moto unchanged.

    proxy = ThrottleProxy(moto_url).start()
    ... boto3 / `holdfast --endpoint-url proxy.url` ...
    proxy.requests    # Counter[(service, operation)]: every request that arrived
    proxy.throttled   # Counter[(service, operation)]: every one answered with a throttle
    proxy.journal     # [Answered]: each answered request of the operations named in `journal=`
    proxy.stop()

Identifying a request, as AWS's front ends do:
- service: the SigV4 credential scope in the Authorization header,
  `Credential=<key>/<date>/<region>/<service>/aws4_request` (the signing name:
  `lambda`, `autoscaling`, `elasticloadbalancing`, `application-autoscaling`,
  `tagging`, `dynamodb`, `monitoring`, ...);
- account: the access key id of that scope (moto maps every key to one account unless
  told otherwise, so in practice one account), and the region of the scope;
- operation: `X-Amz-Target` (`Prefix.Operation`) for the JSON protocols; `Action=` in the
  form body or query string for the query protocol (Auto Scaling, ELB); for Lambda's
  rest-json, the method and path matched against the routes in botocore's own service
  model (the most literal route wins: `/functions/{F}/configuration` before `/functions/{F}`).

Buckets (`DEFAULT_LIMITS`; rate = refill per second, burst = capacity). A bucket starts
full; a request takes one token; an empty bucket answers the throttle and takes nothing.

| bucket | rate | burst | source |
|---|---|---|---|
| lambda (every control-plane call but Invoke, GetFunction, GetPolicy) | 15 | 15 | Lambda quotas page: control-plane API requests, invocations, GetFunction and GetPolicy excluded, 15 a second; burst: none published, one second's worth |
| lambda:GetFunction | 100 | 100 | Lambda quotas page: GetFunction API requests, 100 a second, cannot be increased |
| lambda:GetPolicy | 15 | 15 | Lambda quotas page: GetPolicy API requests, 15 a second |
| autoscaling (one bucket for every action) | 10 | 40 | **no published figure**: Auto Scaling documents neither rate nor bucket. One shared bucket (as AWS is understood to have), shaped like ELB's published Describe bucket |
| elasticloadbalancing (ELBv2, every action) | 10 | 40 | ELB's "Request throttling" page: token buckets per account and Region and per API version; its example gives the non-mutating (Describe*) bucket 40 tokens refilled at 10 a second. The figures for mutating and registration actions were not in the copy read, so every action uses the Describe bucket (mutating actions are, if anything, stricter on AWS) |
| application-autoscaling | 10 | 20 | **no published figure** (its quotas page lists resource counts only); chosen like Auto Scaling |
| tagging (Resource Groups Tagging API) | 10 | 20 | **no published figure found**; chosen. Holdfast makes a few GetResources pages per walk, so this bucket never binds in the benchmarks |
| dynamodb:control (CreateTable, DescribeTable, ...) | 2500 | 2500 | DynamoDB's control-plane throttle limit of 2,500 requests per second |
| dynamodb (data plane, per account here, not per table) | 40000 | 40000 | an on-demand table's default maximum of 40,000 read and write request units a second; never binds here |
| monitoring:PutMetricData | 500 | 500 | CloudWatch quotas (500 TPS, per AWS re:Post's CloudWatch usage article) |
| monitoring:GetMetricData | 50 | 50 | CloudWatch quotas as recalled (50 TPS); not confirmed in the copy read |
| monitoring (every other CloudWatch action, e.g. DescribeAlarms) | 9 | 9 | DescribeAlarms' 9 TPS as recalled; not confirmed in the copy read |

Services not listed (SQS, EC2, IAM, ECS, STS, ...) pass unthrottled: Holdfast's walks
do not depend on them, and the fleet builder must not be slowed.

Throttle answers, one per protocol, each as the service sends it:
- Lambda (rest-json): HTTP 429, header `x-amzn-ErrorType: TooManyRequestsException`,
  body `{"Type":"User","message":"Rate exceeded"}` -> botocore Code
  `TooManyRequestsException` (a modeled error of every Lambda operation).
- Auto Scaling and ELB (query): HTTP 400, `text/xml`,
  `<ErrorResponse xmlns="..."><Error><Type>Sender</Type><Code>Throttling</Code>
  <Message>Rate exceeded</Message></Error><RequestId>..</RequestId></ErrorResponse>`
  -> Code `Throttling`. (ELB's page names the code `ThrottlingException`; the SDKs and
  CLI report ELB throttles as `Throttling: Rate exceeded`, as the issue saw. Both are
  in botocore's throttling list.)
- Application Auto Scaling (json 1.1): HTTP 400, `{"__type":"ThrottlingException","Message":"Rate exceeded"}`.
- Resource Groups Tagging API (json 1.1): HTTP 400, `{"__type":"ThrottledException","Message":"Rate exceeded"}`
  (ThrottledException is the throttle its service model defines).
- DynamoDB (json 1.0): HTTP 400, `__type` `com.amazonaws.dynamodb.v20120810#ThrottlingException`
  for the control plane, `...#ProvisionedThroughputExceededException` for data.
- CloudWatch (json 1.0, awsQueryCompatible): HTTP 400, `__type` `Throttling` and header
  `x-amzn-query-error: Throttling;Sender`, which botocore turns into Code `Throttling`
  as the query protocol always reported it.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Mapping
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Answered:
    """One request the proxy forwarded and moto answered (for `journal=` operations): when
    the answer came back (the proxy's monotonic clock), what was asked and the status."""

    at: float
    service: str
    operation: str
    path: str
    body: bytes
    status: int


@dataclass(frozen=True)
class Limit:
    rate: float    # tokens added per second
    burst: float   # bucket capacity (and the tokens it starts with)


DEFAULT_LIMITS: dict[str, Limit] = {
    "lambda": Limit(15, 15),
    "lambda:GetFunction": Limit(100, 100),
    "lambda:GetPolicy": Limit(15, 15),
    "autoscaling": Limit(10, 40),
    "elasticloadbalancing": Limit(10, 40),
    "application-autoscaling": Limit(10, 20),
    "tagging": Limit(10, 20),
    "dynamodb:control": Limit(2500, 2500),
    "dynamodb": Limit(40000, 40000),
    "monitoring:PutMetricData": Limit(500, 500),
    "monitoring:GetMetricData": Limit(50, 50),
    "monitoring": Limit(9, 9),
}

# Lambda operations outside the shared control-plane bucket: invocations are limited by
# concurrency, not by a request rate; GetFunction and GetPolicy have buckets of their own.
LAMBDA_UNLIMITED = frozenset({"Invoke", "InvokeAsync", "InvokeWithResponseStream"})
LAMBDA_OWN_BUCKET = frozenset({"GetFunction", "GetPolicy"})
DYNAMODB_DATA = frozenset({
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
    "TransactGetItems", "TransactWriteItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction",
})


def bucket_for(service: str, operation: str | None) -> str | None:
    """The bucket a request spends, or None when this proxy does not limit it."""
    if service == "lambda":
        if operation in LAMBDA_UNLIMITED:
            return None
        return f"lambda:{operation}" if operation in LAMBDA_OWN_BUCKET else "lambda"
    if service in ("autoscaling", "elasticloadbalancing", "application-autoscaling", "tagging"):
        return service
    if service == "dynamodb":
        return "dynamodb" if operation in DYNAMODB_DATA else "dynamodb:control"
    if service == "monitoring":
        return f"monitoring:{operation}" if operation in ("PutMetricData", "GetMetricData") else "monitoring"
    return None


class TokenBucket:
    """Non-blocking: `take()` spends a token if there is one and says whether it did."""

    def __init__(self, limit: Limit, monotonic: Callable[[], float]):
        self.limit = limit
        self._monotonic = monotonic
        self._tokens = float(limit.burst)
        self._last = monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self.limit.burst, self._tokens + (now - self._last) * self.limit.rate)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


# ---- recognising the request ---------------------------------------------------------

_SCOPE = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


def credential_scope(authorization: str) -> tuple[str, str, str] | None:
    """(access key id, region, signing service) from a SigV4 Authorization header."""
    m = _SCOPE.search(authorization or "")
    return (m.group(1), m.group(2), m.group(3)) if m else None


class RestRoutes:
    """Operation names of a rest-json service from method + path, built from botocore's model."""

    def __init__(self, service_name: str):
        import botocore.session

        model = botocore.session.get_session().get_service_model(service_name)
        routes = []
        for name in model.operation_names:
            http = model.operation_model(name).http
            uri = http["requestUri"].split("?", 1)[0]
            literal = len(re.sub(r"\{[^}]+\}", "", uri))
            pattern = ""
            for piece in re.split(r"(\{[^}]+\})", uri):
                if piece.startswith("{"):
                    pattern += ".+" if piece.endswith("+}") else "[^/]+"
                else:
                    pattern += re.escape(piece)
            routes.append((literal, http["method"].upper(), re.compile(f"^{pattern}/?$"), name))
        # The most literal route first, so /functions/{F}/configuration beats /functions/{F}.
        self._routes = sorted(routes, key=lambda r: -r[0])

    def operation(self, method: str, path: str) -> str | None:
        for _, route_method, pattern, name in self._routes:
            if route_method == method and pattern.match(path):
                return name
        return None


def json_target_operation(target: str | None) -> str | None:
    return target.rsplit(".", 1)[-1] if target else None


def query_action(path_and_query: str, body: bytes, content_type: str) -> str | None:
    query = parse_qs(urlsplit(path_and_query).query)
    if "Action" in query:
        return query["Action"][0]
    if "x-www-form-urlencoded" in (content_type or ""):
        form = parse_qs(body.decode("utf-8", "replace"))
        if "Action" in form:
            return form["Action"][0]
    return None


# ---- throttle answers ------------------------------------------------------------------

QUERY_NAMESPACES = {
    "autoscaling": "http://autoscaling.amazonaws.com/doc/2011-01-01/",
    "elasticloadbalancing": "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/",
}
JSON_THROTTLES = {
    # service: (content type, __type, message key, extra headers)
    "application-autoscaling": ("application/x-amz-json-1.1", "ThrottlingException", "Message", {}),
    "tagging": ("application/x-amz-json-1.1", "ThrottledException", "Message", {}),
    "monitoring": ("application/x-amz-json-1.0", "Throttling", "message", {"x-amzn-query-error": "Throttling;Sender"}),
}


def throttle_answer(service: str, bucket: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of the throttle error `service` really answers."""
    request_id = str(uuid.uuid4())
    if service == "lambda":
        return 429, {
            "Content-Type": "application/json",
            "x-amzn-ErrorType": "TooManyRequestsException",
            "x-amzn-RequestId": request_id,
        }, json.dumps({"Type": "User", "message": "Rate exceeded"}).encode()
    if service in QUERY_NAMESPACES:
        body = (
            f'<ErrorResponse xmlns="{QUERY_NAMESPACES[service]}">'
            "<Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return 400, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, body.encode()
    if service == "dynamodb":
        if bucket == "dynamodb":
            kind, message = "ProvisionedThroughputExceededException", (
                "The level of configured provisioned throughput for the table was exceeded.")
        else:
            kind, message = "ThrottlingException", "Rate of requests exceeds the allowed throughput."
        return 400, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}, json.dumps(
            {"__type": f"com.amazonaws.dynamodb.v20120810#{kind}", "message": message}).encode()
    content_type, kind, message_key, extra = JSON_THROTTLES[service]
    return 400, {"Content-Type": content_type, "x-amzn-RequestId": request_id, **extra}, json.dumps(
        {"__type": kind, message_key: "Rate exceeded"}).encode()


# ---- the proxy -------------------------------------------------------------------------

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade", "content-length"})


class _Server(ThreadingHTTPServer):
    # The SDK opens up to max_pool_connections sockets at once per client; the default
    # listen backlog of 5 would make bursts of connects fail under load.
    request_queue_size = 128
    daemon_threads = True


class ThrottleProxy:
    """Token buckets per (access key, region, bucket) in front of `upstream` (a moto server URL)."""

    def __init__(self, upstream: str, limits: Mapping[str, Limit] | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic, host: str = "127.0.0.1", port: int = 0,
                 journal: frozenset[tuple[str, str]] = frozenset()):
        split = urlsplit(upstream)
        self._upstream = (split.hostname or "127.0.0.1", split.port or 80)
        self.limits = dict(DEFAULT_LIMITS if limits is None else limits)
        self._monotonic = monotonic
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._lambda_routes = RestRoutes("lambda")
        self.requests: Counter[tuple[str, str]] = Counter()
        self.throttled: Counter[tuple[str, str]] = Counter()
        # (service, operation) pairs whose answered requests are kept, in order, with their time
        self.journaled = frozenset(journal)
        self.journal: list[Answered] = []
        self._server = _Server((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ThrottleProxy":
        # serve_forever looks for a shutdown every poll_interval (0.5 s by default): stop()
        # waits that long at most, after every test that started a proxy.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="throttle-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "ThrottleProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- counts ----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the counts and refill every bucket (a new run against the same proxy)."""
        with self._lock:
            self.requests.clear()
            self.throttled.clear()
            self.journal.clear()
            self._buckets.clear()

    def snapshot(self) -> tuple[Counter, Counter]:
        """Copies of (requests, throttled) as they stand, taken while no request is counted."""
        with self._lock:
            return Counter(self.requests), Counter(self.throttled)

    def by_service(self, counter: Counter | None = None) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (service, _), n in (self.requests if counter is None else counter).items():
            out[service] += n
        return dict(out)

    def throttles_by_service(self) -> dict[str, int]:
        return self.by_service(self.throttled)

    # ---- deciding ----------------------------------------------------------------------

    def identify(self, method: str, path: str, headers, body: bytes) -> tuple[str, str, str, str]:
        """(account key, region, service, operation); '?' for what cannot be told."""
        scope = credential_scope(headers.get("Authorization", ""))
        key, region, service = scope if scope else ("?", "?", "?")
        operation = json_target_operation(headers.get("X-Amz-Target"))
        if operation is None:
            operation = query_action(path, body, headers.get("Content-Type", ""))
        if operation is None and service == "lambda":
            operation = self._lambda_routes.operation(method, urlsplit(path).path)
        return key, region, service, operation or "?"

    def admit(self, key: str, region: str, service: str, operation: str) -> str | None:
        """None to forward; else the bucket that was empty."""
        name = bucket_for(service, operation)
        if name is None or name not in self.limits:
            return None
        with self._lock:
            bucket = self._buckets.get((key, region, name))
            if bucket is None:
                bucket = self._buckets[(key, region, name)] = TokenBucket(self.limits[name], self._monotonic)
        return None if bucket.take() else name

    def _forward(self, method: str, path: str, headers, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(*self._upstream, timeout=120)
            try:
                out_headers = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
                out_headers["Content-Length"] = str(len(body))
                conn.request(method, path, body=body, headers=out_headers)
                response = conn.getresponse()
                data = response.read()
                return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP], data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _handler_class(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    return b"".join(chunks)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _send(self, status: int, headers, body: bytes) -> None:
                self.send_response(status)
                for k, v in (headers.items() if isinstance(headers, dict) else headers):
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self) -> None:
                body = self._body()
                key, region, service, operation = proxy.identify(self.command, self.path, self.headers, body)
                with proxy._lock:
                    proxy.requests[(service, operation)] += 1
                empty = proxy.admit(key, region, service, operation)
                if empty is not None:
                    with proxy._lock:
                        proxy.throttled[(service, operation)] += 1
                    self._send(*throttle_answer(service, empty))
                    return
                try:
                    status, headers, data = proxy._forward(self.command, self.path, self.headers, body)
                except (http.client.HTTPException, OSError) as err:
                    self._send(502, {"Content-Type": "text/plain"}, f"proxy: upstream failed: {err}".encode())
                    return
                if (service, operation) in proxy.journaled:
                    with proxy._lock:
                        proxy.journal.append(Answered(proxy._monotonic(), service, operation, self.path, body, status))
                self._send(status, headers, data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle

        return Handler

