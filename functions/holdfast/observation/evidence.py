"""The built-in evidence the stage gates read, from the selected fleet and CloudWatch.

`read(runtime, now, needed)` reads only what `policy.evidence_needed` asked for, in bulk:

- drain: the watched consumers are the SQS event source mappings whose function carries
  the selector (one ListEventSourceMappings page per 100 mappings, one tag:GetResources
  page per 100 functions) plus every mapping Holdfast holds a record for (selected by its
  own tag). Per consumer: the queue's ApproximateAgeOfOldestMessage (AWS/SQS, Maximum)
  and the function's Invocations, Errors and Throttles (AWS/Lambda, Sum).
- routing: the selected target groups (tag:GetResources, plus the ones Holdfast holds),
  with their load balancers (DescribeTargetGroups, 400 a page), and each one's
  UnHealthyHostCount (AWS/NetworkELB, dimensions LoadBalancer and TargetGroup, Maximum).

Every metric comes from GetMetricData, up to 500 queries a call (its limit), over the
last hold plus two minutes (a rise at the hold's first minute needs the minute before),
a 60-second period, ending where CloudWatch's datapoints are complete
(holdfast.observation.cloudwatch.complete_until: the minutes of the last two are still
being reported, and a partial minute reads healthier than it was). Pages follow NextToken.

A read that fails is the evidence's `error`, never an exception: the gate
it feeds stays closed and the next tick reads again. IAM: cloudwatch:GetMetricData takes
no resource-level permission (`Resource: *`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import kinds
from holdfast.core.evidence import (
    DRAIN,
    ROUTING,
    Consumer,
    DrainEvidence,
    Evidence,
    Points,
    RoutingEvidence,
    TargetHealth,
)
from holdfast.iam import uses
from holdfast.ledger import Ledger
from holdfast.observation.cloudwatch import complete_until

logger = logging.getLogger(__name__)

QUERIES_PER_CALL = 500
PERIOD_SECONDS = 60
MARGIN = timedelta(minutes=2)


class EvidenceUnavailable(Exception):
    """GetMetricData answered a result it could not complete (InternalError, Forbidden)."""


def read(runtime, now: datetime, needed: Iterable[str], *, ledger: Ledger | None = None) -> Evidence:
    """The evidence `needed` asks for; `ledger`: the tick's (holdfast.ledger.store), whose one
    Query of the resource records the walks share (a ledger of its own without one)."""
    needed = set(needed)
    if not needed:
        return Evidence()
    end = complete_until(now)
    start = end - timedelta(minutes=runtime.settings.hold_minutes) - MARGIN
    try:
        held = _held(ledger or runtime.ledger())
        # The held resources of the kinds that declare they feed each evidence (core.kinds).
        drain = _drain(runtime, start, end, kinds.held_by_evidence(held, DRAIN)) if DRAIN in needed else None
        routing = _routing(runtime, start, end, kinds.held_by_evidence(held, ROUTING)) if ROUTING in needed else None
    except Exception as err:  # noqa: BLE001 - an answer of an unexpected shape: the gates stay shut
        logger.exception("built-in evidence unreadable")
        text = f"{type(err).__name__}: {err}"
        drain = DrainEvidence(start, end, error=text) if DRAIN in needed else None
        routing = RoutingEvidence(start, end, error=text) if ROUTING in needed else None
    return Evidence(drain=drain, routing=routing)


def _held(ledger: Ledger) -> dict[str, set[str]]:
    """ARNs Holdfast holds a record for, by kind (selected by their own tag, perhaps)."""
    out: dict[str, set[str]] = {}
    for record in ledger.resources().records():
        out.setdefault(record.kind, set()).add(record.arn)
    return out


def _drain(runtime, start: datetime, end: datetime, held: set[str]) -> DrainEvidence:
    try:
        watched = consumers(runtime.clients, runtime.settings, held)
        queries = []
        for i, (_, queue, function) in enumerate(watched):
            queries.append(_query(f"age{i}", "AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": queue}, "Maximum"))
            for metric in ("Invocations", "Errors", "Throttles"):
                queries.append(_query(f"{metric.lower()}{i}", "AWS/Lambda", metric, {"FunctionName": function}, "Sum"))
        data = metric_data(runtime.clients("cloudwatch"), queries, start, end)
    except (EvidenceUnavailable, *AWS_ERRORS) as err:
        logger.warning("drain evidence unreadable: %s", err)
        return DrainEvidence(start, end, error=_text(err))
    return DrainEvidence(start, end, tuple(
        Consumer(arn, queue, function, data.get(f"age{i}", ()), data.get(f"invocations{i}", ()),
                 data.get(f"errors{i}", ()), data.get(f"throttles{i}", ()))
        for i, (arn, queue, function) in enumerate(watched)
    ))


def _routing(runtime, start: datetime, end: datetime, held: set[str]) -> RoutingEvidence:
    try:
        groups = target_groups(runtime.clients, runtime.settings, held)
        queries, keys = [], []
        for tg, balancers in groups:
            for lb in balancers:
                keys.append((tg, f"unhealthy{len(keys)}"))
                queries.append(_query(keys[-1][1], "AWS/NetworkELB", "UnHealthyHostCount",
                                      {"TargetGroup": tg.split(":")[-1], "LoadBalancer": lb.split(":loadbalancer/")[-1]},
                                      "Maximum"))
        data = metric_data(runtime.clients("cloudwatch"), queries, start, end)
    except (EvidenceUnavailable, *AWS_ERRORS) as err:
        logger.warning("routing evidence unreadable: %s", err)
        return RoutingEvidence(start, end, error=_text(err))
    health = []
    for tg, balancers in groups:
        # A target group behind several load balancers: the worst of them each minute.
        merged: dict[datetime, float] = {}
        for key_tg, qid in keys:
            if key_tg == tg:
                for t, v in data.get(qid, ()):
                    merged[t] = max(v, merged.get(t, v))
        health.append(TargetHealth(tg, tuple(balancers), tuple(sorted(merged.items()))))
    return RoutingEvidence(start, end, tuple(health))


@uses("lambda:ListEventSourceMappings", "tag:GetResources", by=("reconciler", "cli"))
def consumers(clients, settings, held: set[str]) -> list[tuple[str, str, str]]:
    """(mapping ARN, queue name, function name) of every enabled SQS mapping watched."""
    functions = set(_tagged(clients, settings, "lambda:function"))
    out = []
    for page in clients("lambda").get_paginator("list_event_source_mappings").paginate():
        for m in page["EventSourceMappings"]:
            source, function = m.get("EventSourceArn", ""), m.get("FunctionArn", "")
            if not source.startswith("arn:aws") or ":sqs:" not in source or m.get("State") in ("Disabled", "Disabling"):
                continue
            arn = m.get("EventSourceMappingArn") or _mapping_arn(m)
            if ":".join(function.split(":")[:7]) in functions or arn in held:
                out.append((arn, source.split(":")[-1], function.split(":")[6]))
    return sorted(out)


@uses("tag:GetResources", "elasticloadbalancing:DescribeTargetGroups", by=("reconciler", "cli"))
def target_groups(clients, settings, held: set[str]) -> list[tuple[str, list[str]]]:
    """(target group ARN, its load balancers' ARNs) of every selected target group."""
    selected = set(_tagged(clients, settings, "elasticloadbalancing:targetgroup")) | held
    if not selected:
        return []
    out = []
    for page in clients("elbv2").get_paginator("describe_target_groups").paginate(PaginationConfig={"PageSize": 400}):
        for group in page["TargetGroups"]:
            if group["TargetGroupArn"] in selected:
                out.append((group["TargetGroupArn"], sorted(group.get("LoadBalancerArns", []))))
    return sorted(out)


@uses("cloudwatch:GetMetricData", by=("reconciler", "cli"))
def metric_data(cloudwatch, queries: list[dict[str, Any]], start: datetime, end: datetime, *,
                max_datapoints: int | None = None) -> dict[str, Points]:
    """Query id -> [(time, value)] in time order; up to 500 queries a call, pages followed."""
    out: dict[str, list[tuple[datetime, float]]] = {}
    for i in range(0, len(queries), QUERIES_PER_CALL):
        kwargs: dict[str, Any] = dict(MetricDataQueries=queries[i:i + QUERIES_PER_CALL], StartTime=start, EndTime=end,
                                      ScanBy="TimestampAscending")
        if max_datapoints:
            kwargs["MaxDatapoints"] = max_datapoints
        while True:
            page = cloudwatch.get_metric_data(**kwargs)
            for result in page.get("MetricDataResults", []):
                if result.get("StatusCode") in ("InternalError", "Forbidden"):
                    raise EvidenceUnavailable(f"GetMetricData {result.get('StatusCode')} for {result.get('Id')}: "
                                              f"{'; '.join(m.get('Value', '') for m in result.get('Messages', []))}")
                out.setdefault(result["Id"], []).extend(
                    (t.astimezone(timezone.utc), float(v)) for t, v in zip(result.get("Timestamps", []), result.get("Values", [])))
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
    return {qid: tuple(sorted(points)) for qid, points in out.items()}


@uses("tag:GetResources", by=("reconciler", "cli"))
def _tagged(clients, settings, resource_type: str) -> list[str]:
    pages = clients("resourcegroupstaggingapi").get_paginator("get_resources").paginate(
        ResourceTypeFilters=[resource_type],
        TagFilters=[{"Key": settings.selector_key, "Values": [settings.selector_value]}],
        ResourcesPerPage=100,
    )
    return [item["ResourceARN"] for page in pages for item in page["ResourceTagMappingList"]]


def _query(qid: str, namespace: str, name: str, dimensions: dict[str, str], stat: str) -> dict[str, Any]:
    return {
        "Id": qid,
        "MetricStat": {
            "Metric": {"Namespace": namespace, "MetricName": name,
                       "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()]},
            "Period": PERIOD_SECONDS,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def _mapping_arn(m: dict[str, Any]) -> str:
    parts = m["FunctionArn"].split(":")
    return f"arn:{parts[1]}:lambda:{parts[3]}:{parts[4]}:event-source-mapping:{m['UUID']}"


def _text(err: Exception) -> str:
    return str(err) if isinstance(err, EvidenceUnavailable) else error_text(err)
