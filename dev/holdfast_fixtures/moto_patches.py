"""Moto patches: AWS's documented semantics where moto 5.2.5 departs from them.

One place holds every departure from moto that Holdfast depends on; the tests
(tests/actuators/fleet.py's `aws_semantics` fixture) and the demo's embedded AWS
(holdfast_demo.embedded) both use it. Each patch says which AWS behaviour it restores:

- Lambda async invoke config: AWS's PutFunctionEventInvokeConfig replaces the whole
  config (moto keeps the first put); UpdateFunctionEventInvokeConfig merges the
  members it names and answers ResourceNotFoundException when the function has no
  config (moto replaces, and creates one).
- Application Auto Scaling TagResource / UntagResource / ListTagsForResource on a
  scalable target's ARN exist in AWS; moto has none of them.
- DescribeScalableTargets pagination: moto's NextToken is the index within the page,
  not within all targets, so past two pages it repeats itself and botocore's paginator
  stops ("The same next token was received twice"). AWS's token moves on.

- CloudWatch GetMetricData (API reference): at most 500 MetricDataQueries a call, each
  Id unique and matching `[a-z][a-zA-Z0-9_]*` ("the first character must be a lowercase
  letter"), StartTime rounded down to the whole minute (data under 15 days old), and
  results paginated with NextToken past MaxDatapoints (default 100,800), a query cut off
  by a page answering StatusCode PartialData. moto takes any number of queries and any
  Id, never paginates, and matches a metric by dimensions without its namespace. The
  patch answers MetricStat queries (SampleCount, Sum, Average, Minimum, Maximum) itself,
  matching namespace, name and the exact set of dimensions, as CloudWatch does; metric
  math and Metrics Insights queries still go to moto.
- Elastic Load Balancing ARNs: a Network Load Balancer's ARN is
  `...:loadbalancer/net/<name>/<id>` (a Gateway Load Balancer's `gwy`, an Application
  Load Balancer's `app`), and the `LoadBalancer` dimension of its CloudWatch metrics is
  the part after `loadbalancer/` ("net/my-load-balancer/50dc6c495c0c9188", ELB's
  CloudWatch metrics pages). moto names every load balancer `app/...`.
- AWS services' own metrics (AWS/NetworkELB, AWS/SQS, AWS/Lambda, ...) are published by
  the services; a caller cannot publish into a namespace that begins with "AWS/"
  (PutMetricData: "you should not specify a namespace that begins with AWS/"; CloudWatch
  answers InvalidParameterValue). moto accepts it; the patch refuses it, and
  `publish_service_metrics(account, region, namespace, data)` writes datapoints as the
  service itself would, for tests and the demo to emulate what AWS emits.

And two costs. moto's DynamoDB answers go through its generic, shape-walking response
serializer, about 3 ms an item: a Query of the few hundred signals the reconciler reads
each tick took most of a second. The patch answers Query and Scan with moto's own result
as JSON, as moto's DynamoDB did before that serializer (the result is the same document).
And moto's TransactWriteItems deep-copies every table it names, for its
rollback. The reconciler's plan guard is a transaction before every relaxing write,
and the ledger holds thousands of signal items by the recovery, so each guard cost
about 0.1 s and the copies piled up to gigabytes. The patch snapshots only the items a
transaction touches and rolls those back; the outcome of every transaction is moto's.
"""

from __future__ import annotations

import copy
import json
import threading
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock


@contextmanager
def aws_semantics() -> Iterator[None]:
    """Patch moto's backends to AWS's semantics (above) until the block ends."""
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.awslambda import models as lambda_models
    from moto.awslambda.exceptions import UnknownEventConfig
    from moto.core.exceptions import JsonRESTError

    def put(self, function_name, config):
        fn = self.get_function(function_name)
        event_config = lambda_models.EventInvokeConfig(fn.function_arn, fn.last_modified, config)
        fn.event_invoke_config = [event_config]
        return event_config.response()

    def update(self, function_name, config):
        fn = self.get_function(function_name)
        if not fn.event_invoke_config:
            raise UnknownEventConfig(fn.function_arn)
        return put(self, function_name, {**fn.event_invoke_config[0].config, **config})

    tags: dict[str, dict[str, str]] = {}

    def known(backend, arn: str) -> None:
        if not any(t.arn == arn for targets in backend.targets.values() for t in targets.values()):
            raise JsonRESTError("ResourceNotFoundException", f"No scalable target {arn}")

    def tag_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        tags.setdefault(arn, {}).update(self._get_param("Tags"))
        return "{}"

    def untag_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        for key in self._get_param("TagKeys"):
            tags.get(arn, {}).pop(key, None)
        return "{}"

    def list_tags_for_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        return json.dumps({"Tags": tags.get(arn, {})})

    original_describe = ApplicationAutoScalingResponse.describe_scalable_targets

    def describe_scalable_targets(self):
        body = json.loads(original_describe(self))
        if body.get("NextToken") is not None:
            start = int(self._get_param("NextToken") or -1) + 1
            body["NextToken"] = str(start + len(body["ScalableTargets"]) - 1)
        return json.dumps(body)

    with ExitStack() as stack:
        _cheap_transactions(stack)
        _cheap_query_answers(stack)
        _metric_data(stack)
        _load_balancer_arns(stack)
        stack.enter_context(
            mock.patch.object(ApplicationAutoScalingResponse, "describe_scalable_targets", describe_scalable_targets)
        )
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "put_function_event_invoke_config", put))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "update_function_event_invoke_config", update))
        for fn in (tag_resource, untag_resource, list_tags_for_resource):
            stack.enter_context(mock.patch.object(ApplicationAutoScalingResponse, fn.__name__, fn, create=True))
        yield


def _cheap_query_answers(stack: ExitStack) -> None:
    import base64

    from moto.dynamodb.responses import DynamoHandler

    def as_json(value):
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode()
        if isinstance(value, (set, frozenset)):
            return sorted(value)
        raise TypeError(f"not JSON: {type(value).__name__}")

    for name in ("query", "scan"):
        original = getattr(DynamoHandler, name)

        def answer(self, _original=original):
            # moto's own result (a dict of DynamoDB JSON), without the shape-walking serializer.
            return json.dumps(_original(self).result, default=as_json)

        stack.enter_context(mock.patch.object(DynamoHandler, name, answer))


def _cheap_transactions(stack: ExitStack) -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    transact = DynamoDBBackend.transact_write_items
    inside = threading.local()

    def table_deepcopy(self, memo):
        if getattr(inside, "transaction", False):
            return self  # moto's whole-table backup: the touched items are saved instead
        clone = copy.copy(self)
        memo[id(self)] = clone
        clone.__dict__ = copy.deepcopy(self.__dict__, memo)
        return clone

    def transact_write_items(self, transact_items):
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            key = op.get("Key") or {k: op["Item"][k] for k in (table.hash_key_attr, table.range_key_attr) if k}
            saved.append((table, key, copy.deepcopy(self.get_item(table.name, key))))
        inside.transaction = True
        try:
            return transact(self, transact_items)
        except Exception:
            for table, key, item in reversed(saved):
                hash_key, range_key = self.get_keys_value(table, key)
                table.delete_item(hash_key, range_key)
                if item is not None:
                    (table.items[hash_key].__setitem__(range_key, item) if table.has_range_key
                     else table.items.__setitem__(hash_key, item))
            raise
        finally:
            inside.transaction = False

    stack.enter_context(mock.patch.object(Table, "__deepcopy__", table_deepcopy, create=True))
    stack.enter_context(mock.patch.object(DynamoDBBackend, "transact_write_items", transact_write_items))


# ---- CloudWatch ---------------------------------------------------------------------------

MAX_QUERIES = 500
DEFAULT_MAX_DATAPOINTS = 100_800
_QUERY_ID = r"[a-z][a-zA-Z0-9_]*"
_INDEXES: dict[int, dict] = {}


def publish_service_metrics(account: str, region: str, namespace: str, data: list[dict]) -> None:
    """Datapoints an AWS service publishes: `data` holds {"MetricName", "Dimensions": [{"Name",
    "Value"}], "Timestamp" (aware), "Value"}. Written straight into moto's CloudWatch (the
    in-process backend that a moto server or mock_aws serves), as the service would."""
    from moto.cloudwatch.models import MetricDatum, cloudwatch_backends

    backend = cloudwatch_backends[account][region]
    with _lock(backend):
        backend.metric_data.extend(
            MetricDatum(namespace, d["MetricName"], float(d["Value"]), d.get("Dimensions", []), d["Timestamp"], d.get("Unit"))
            for d in data
        )


def _lock(backend) -> threading.Lock:
    return _INDEXES.setdefault(id(backend), {"lock": threading.Lock(), "seen": 0, "series": {}})["lock"]


def _series(backend) -> dict:
    """(namespace, name, dimensions) -> [(timestamp, datum)] sorted, built incrementally from
    moto's append-only list of datapoints."""
    import bisect
    from datetime import timezone

    index = _INDEXES.setdefault(id(backend), {"lock": threading.Lock(), "seen": 0, "series": {}})
    data = backend.metric_data
    for datum in data[index["seen"]:]:
        key = (datum.namespace, datum.name, frozenset((d.name, d.value) for d in datum.dimensions))
        t = datum.timestamp if datum.timestamp.tzinfo else datum.timestamp.replace(tzinfo=timezone.utc)
        bisect.insort(index["series"].setdefault(key, []), (t, id(datum), datum))
    index["seen"] = len(data)
    return index["series"]


def _stat(stat: str, datums: list) -> float:
    values, sums, counts, mins, maxs = [], 0.0, 0.0, [], []
    for d in datums:
        if hasattr(d, "value"):
            sums, counts = sums + d.value, counts + 1
            mins.append(d.value)
            maxs.append(d.value)
        else:  # a StatisticSet
            sums, counts = sums + d.sum_stat, counts + d.sample_count
            mins.append(d.min_stat)
            maxs.append(d.max_stat)
    return {"Sum": sums, "SampleCount": counts, "Average": sums / counts if counts else 0.0,
            "Minimum": min(mins), "Maximum": max(maxs)}[stat]


def _metric_data(stack: ExitStack) -> None:
    import bisect
    import re
    from datetime import timedelta, timezone

    from moto.cloudwatch.exceptions import InvalidParameterValue, ValidationError
    from moto.cloudwatch.models import CloudWatchBackend
    from moto.cloudwatch.responses import CloudWatchResponse
    from moto.core.responses import ActionResult

    original = CloudWatchResponse.get_metric_data
    original_put = CloudWatchBackend.put_metric_data

    def put_metric_data(self, namespace, metric_data):
        if str(namespace).startswith("AWS/"):
            raise InvalidParameterValue(f"The value {namespace} for parameter Namespace is invalid.")
        with _lock(self):
            return original_put(self, namespace, metric_data)

    def get_metric_data(self):
        params = self._get_params()
        queries = params.get("MetricDataQueries", [])
        if len(queries) > MAX_QUERIES:
            raise ValidationError(f"The collection MetricDataQueries must not have a size greater than {MAX_QUERIES}.")
        ids = [q.get("Id") or "" for q in queries]
        for i in ids:
            if not re.fullmatch(_QUERY_ID, i):
                raise ValidationError(f"Invalid metric data query id {i!r}: letters, numbers and underscore, "
                                      "the first character a lowercase letter.")
        if len(set(ids)) != len(ids):
            raise ValidationError("The values of MetricDataQueries.member.N.Id must be unique.")
        if any("MetricStat" not in q for q in queries):
            return original(self)
        aware = lambda t: t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        start = aware(params["StartTime"]).replace(second=0, microsecond=0)
        end = aware(params["EndTime"])
        if end <= start:
            raise ValidationError("The parameter EndTime must be greater than StartTime.")
        descending = (params.get("ScanBy") or "TimestampDescending") == "TimestampDescending"
        limit = int(params.get("MaxDatapoints") or DEFAULT_MAX_DATAPOINTS)
        skip = int(params.get("NextToken") or 0)
        backend = self.cloudwatch_backend
        with _lock(backend):
            series = _series(backend)
            results = []
            for q in queries:
                stat_q = q["MetricStat"]
                metric = stat_q["Metric"]
                key = (metric["Namespace"], metric["MetricName"],
                       frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
                points = series.get(key, [])
                period = timedelta(seconds=int(stat_q["Period"]))
                stamps, values, t = [], [], start
                while t < end:
                    lo = bisect.bisect_left(points, (t,))
                    hi = bisect.bisect_left(points, (t + period,))
                    if hi > lo:
                        stamps.append(t)
                        values.append(_stat(stat_q["Stat"], [d for _, _, d in points[lo:hi]]))
                    t += period
                if descending:
                    stamps.reverse()
                    values.reverse()
                results.append((q, stamps, values))
        page, emitted, position, token = [], 0, 0, None
        for q, stamps, values in results:
            n = len(stamps)
            if position + n <= skip:   # wholly on earlier pages
                position += n
                continue
            first = max(0, skip - position)
            room = limit - emitted
            take = min(n - first, room)
            cut = first + take < n
            page.append({"Id": q["Id"], "Label": q.get("Label") or metric_label(q),
                         "Timestamps": stamps[first:first + take], "Values": values[first:first + take],
                         "StatusCode": "PartialData" if cut else "Complete"})
            emitted += take
            position += n
            if cut:
                token = str(skip + emitted)
                break
        body = {"MetricDataResults": page, "Messages": []}
        if token:
            body["NextToken"] = token
        return ActionResult(body)

    def metric_label(q) -> str:
        return f"{q['MetricStat']['Metric']['MetricName']}"

    stack.enter_context(mock.patch.object(CloudWatchResponse, "get_metric_data", get_metric_data))
    stack.enter_context(mock.patch.object(CloudWatchBackend, "put_metric_data", put_metric_data))


# ---- Elastic Load Balancing ----------------------------------------------------------------

def _load_balancer_arns(stack: ExitStack) -> None:
    from moto.elbv2 import models as elbv2_models

    making = threading.local()
    create = elbv2_models.ELBv2Backend.create_load_balancer
    make_arn = elbv2_models.make_arn_for_load_balancer
    prefixes = {"network": "net", "gateway": "gwy"}

    def create_load_balancer(self, *args, **kwargs):
        making.kind = kwargs.get("loadbalancer_type")
        try:
            return create(self, *args, **kwargs)
        finally:
            making.kind = None

    def make_arn_for_load_balancer(*args, **kwargs):
        arn = make_arn(*args, **kwargs)
        prefix = prefixes.get(getattr(making, "kind", None) or "")
        return arn.replace(":loadbalancer/app/", f":loadbalancer/{prefix}/", 1) if prefix else arn

    stack.enter_context(mock.patch.object(elbv2_models.ELBv2Backend, "create_load_balancer", create_load_balancer))
    stack.enter_context(mock.patch.object(elbv2_models, "make_arn_for_load_balancer", make_arn_for_load_balancer))
