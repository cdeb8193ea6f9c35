"""What the drain reads about each controlled mapping, in bulk, once a tick.

- `mappings(clients)`: every SQS event source mapping with its cap in force, from
  ListEventSourceMappings (100 a page): the bulk read, no call per mapping.
- `consumer(...)`: once per mapping and hold, what stays put during a drain — the
  function's reserved concurrency (GetFunction, outside the Lambda control-plane budget),
  the downstream alarms named for it (settings `drain_downstream_alarms` /
  `drain_warning_alarms` by function name, queue name, mapping UUID or `*`, and the tags
  `holdfast:downstream-alarms` / `holdfast:downstream-warnings` on the mapping or its
  function: names separated by spaces, as Lambda tag values allow no comma).
- `pre_event(...)`: the facts from before the event (ConcurrentExecutions, the time per
  message and its spread, the failure share, the oldest-message age, visible messages,
  Errors and their share of Invocations, the queue's sent and deleted rates): medians over
  `drain_pre_event_minutes` ending before the earliest sign of trouble
  (holdfast.core.drain.baseline).
- `alarms(...)`: each downstream alarm's state and the time of the datapoint it was decided
  on (holdfast.core.drain.Alarm).
- `readings(...)`: this tick's holdfast.core.drain.Reading per mapping, with the
  consumer's own evidence of one minute: NumberOfMessagesReceived and NumberOfMessagesDeleted
  of the queue, Duration (Sum and p90), Invocations and Errors of the function.

Every read ends where CloudWatch's datapoints are complete
(holdfast.observation.cloudwatch.complete_until).

Metrics come from GetMetricData, at most 500 queries a call (its limit), one-minute
periods, newest first. CloudWatch's StateReasonData names the datapoints of the last state
*change* only, so an alarm's `measured_at` is the newest datapoint of its own metric (read
in the same GetMetricData calls), or of its evaluated datapoints if that is newer:

| alarm                                    | measured_at                                      |
|------------------------------------------|--------------------------------------------------|
| metric alarm with datapoints             | its metric's newest datapoint (period start)     |
| OK with no datapoint (missing data is    | its last evaluation: one period plus CloudWatch's |
| not breaching), composite or math in OK  | lag (2 min) before now                           |
| ALARM with no datapoint, composite, math | when it entered ALARM: one cut per transition    |
| INSUFFICIENT_DATA                        | when it entered that state (the controller       |
|                                          | ignores it after a stale period)                 |
| missing                                  | state None: ignored, and said so                 |

A read that fails leaves that input missing (None): the controller holds with the reason,
it never crashes the tick.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_code, error_text
from holdfast.core import drain as dc
from holdfast.core import pollers
from holdfast.core.drain import share as dc_share
from holdfast.core.drain.inputs import whole_minute
from holdfast.iam import uses
from holdfast.observation.cloudwatch import COMPLETE_AFTER, complete_until

logger = logging.getLogger(__name__)

MISSING_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
MISSING_FUNCTION = ("ResourceNotFoundException",)
DENIED = ("AccessDenied", "AccessDeniedException", "AWS.SimpleQueueService.AccessDenied")
TAG_ALARMS = "holdfast:downstream-alarms"
TAG_WARNINGS = "holdfast:downstream-warnings"
EVERY = "*"
QUERIES_PER_CALL = 500        # GetMetricData's limit
ALARM_NAMES_PER_CALL = 100    # DescribeAlarms' limit
PERIOD = 60

# metric key -> (namespace, metric name, statistic, dimension)
QUEUE_METRICS = {
    "age": ("AWS/SQS", "ApproximateAgeOfOldestMessage", "Maximum"),
    "visible": ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum"),
    "sent": ("AWS/SQS", "NumberOfMessagesSent", "Sum"),
    "deleted": ("AWS/SQS", "NumberOfMessagesDeleted", "Sum"),
    "received": ("AWS/SQS", "NumberOfMessagesReceived", "Sum"),
}
FUNCTION_METRICS = {
    "errors": ("AWS/Lambda", "Errors", "Sum"),
    "invocations": ("AWS/Lambda", "Invocations", "Sum"),
    "throttles": ("AWS/Lambda", "Throttles", "Sum"),
    "concurrency": ("AWS/Lambda", "ConcurrentExecutions", "Maximum"),
    "duration": ("AWS/Lambda", "Duration", "Sum"),
    "duration_high": ("AWS/Lambda", "Duration", "p90"),
}
# A mapping's own metrics (MetricsConfig EventCount; Lambda developer guide, "Types of
# metrics for Lambda functions", event source mapping metrics), by EventSourceMappingUUID:
# events read from the queue and events deleted from it after the function processed them,
# in place of the queue's NumberOfMessagesReceived/Deleted, which every reader shares.
MAPPING_METRICS = {
    "received": ("AWS/Lambda", "PolledEventCount", "Sum"),
    "deleted": ("AWS/Lambda", "DeletedEventCount", "Sum"),
}
# The built-in downstream evidence of a minute: read together, judged on one minute.
MINUTE_METRICS = ("received", "deleted", "duration", "duration_high", "invocations", "errors")
JUDGED_METRICS = MINUTE_METRICS + ("concurrency",)


def _name(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


def function_name(function_arn: str) -> str:
    """The function's name from its ARN, without a version or alias qualifier."""
    parts = function_arn.split(":")
    return parts[6] if len(parts) > 6 else function_arn


@dataclass(frozen=True)
class Listed:
    """One SQS mapping as ListEventSourceMappings shows it."""

    arn: str
    uuid: str
    function_arn: str
    queue_arn: str
    cap: int | None      # concurrent batches: MaximumConcurrency, or the batches a provisioned one's pollers carry
    state: str | None = None
    pollers: int | None = None   # a provisioned mapping's MaximumPollers (holdfast.core.pollers); None: not provisioned
    # The mapping publishes its own metrics (MetricsConfig with EventCount).
    event_counts: bool = False

    @property
    def account(self) -> str:
        return _account(self.arn)

    @property
    def queue_account(self) -> str:
        return _account(self.queue_arn)


@dataclass(frozen=True)
class Consumer:
    """What the drain keeps about one mapping for a hold (it stays put during a drain)."""

    arn: str
    uuid: str
    function_arn: str
    queue_arn: str
    reserved: int | None = None
    alarms: tuple[str, ...] = ()        # downstream: an ALARM cuts
    warnings: tuple[str, ...] = ()      # an ALARM stops raises
    notes: tuple[str, ...] = ()         # what could not be read, for the operator
    timeout: float | None = None        # the function's timeout, seconds
    has_dlq: bool | None = None         # the queue has a redrive policy (None: unread)
    # Why its evidence can never be read, known when the drain began (a queue in another
    # account); None: it can.
    unreachable: str | None = None
    event_counts: bool = False          # the mapping publishes its own metrics (refreshed every tick)

    @property
    def function(self) -> str:
        return function_name(self.function_arn)

    @property
    def queue(self) -> str:
        return _name(self.queue_arn)

    def to_dict(self) -> dict[str, Any]:
        return {"arn": self.arn, "uuid": self.uuid, "function_arn": self.function_arn, "queue_arn": self.queue_arn,
                "reserved": self.reserved, "alarms": list(self.alarms), "warnings": list(self.warnings),
                "notes": list(self.notes), "timeout": self.timeout, "has_dlq": self.has_dlq,
                "unreachable": self.unreachable, "event_counts": self.event_counts}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Consumer":
        return cls(raw["arn"], raw["uuid"], raw["function_arn"], raw["queue_arn"], raw.get("reserved"),
                   tuple(raw.get("alarms", ())), tuple(raw.get("warnings", ())), tuple(raw.get("notes", ())),
                   raw.get("timeout"), raw.get("has_dlq"), raw.get("unreachable"), bool(raw.get("event_counts", False)))


def _account(arn: str) -> str:
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 else ""


def other_account(m: "Listed") -> str | None:
    """Why a mapping's queue cannot be read from here, when it is another account's: its
    metrics are published in that account, and Holdfast's policy reads queues of its own
    account only. None: the queue is this account's."""
    if m.queue_account and m.account and m.queue_account != m.account:
        return (f"the queue {_name(m.queue_arn)} is in account {m.queue_account}, not {m.account}: its metrics are "
                "published there and Holdfast may not read it, so this drain cannot be judged here")
    return None


def _event_counts(m: Mapping[str, Any]) -> bool:
    return "EventCount" in ((m.get("MetricsConfig") or {}).get("Metrics") or [])


def _mapping_arn(m: Mapping[str, Any]) -> str:
    if m.get("EventSourceMappingArn"):
        return m["EventSourceMappingArn"]
    parts = m["FunctionArn"].split(":")
    return f"arn:{parts[1]}:lambda:{parts[3]}:{parts[4]}:event-source-mapping:{m['UUID']}"


@uses("lambda:ListEventSourceMappings", by=("reconciler", "cli"))
def mappings(clients) -> dict[str, Listed]:
    """Every SQS mapping by ARN, with its cap in force (a provisioned one's: the batches its
    MaximumPollers carry, holdfast.core.pollers)."""
    out = {}
    for page in clients("lambda").get_paginator("list_event_source_mappings").paginate():
        for m in page["EventSourceMappings"]:
            if not m.get("EventSourceArn", "").startswith("arn:aws") or ":sqs:" not in m["EventSourceArn"]:
                continue
            arn = _mapping_arn(m)
            most = None
            if pollers.provisioned(m.get("ProvisionedPollerConfig")):
                most = pollers.config(m["ProvisionedPollerConfig"])[pollers.MAX_KEY]
            cap = pollers.cap_of(most) if most is not None else (m.get("ScalingConfig") or {}).get("MaximumConcurrency")
            out[arn] = Listed(arn, m["UUID"], m["FunctionArn"], m["EventSourceArn"], cap, m.get("State"),
                              pollers=most, event_counts=_event_counts(m))
    return out


def sharing(listed: Mapping[str, Listed], selected: Iterable[str]) -> list[str]:
    """What `holdfast plan` warns of: selected mappings whose function or queue other
    mappings share, without their own metrics (MetricsConfig EventCount). Their drain reads
    shared figures apportioned by cap (holdfast.core.drain.share), and one function's caps
    together stay within what it carried before the event plus a step."""
    selected = [a for a in selected if a in listed]
    out = []
    for kind, key, what in (("function", lambda m: function_name(m.function_arn), "Duration and concurrency"),
                            ("queue", lambda m: m.queue_arn, "received and deleted counts")):
        groups: dict[str, list[Listed]] = {}
        for m in listed.values():
            groups.setdefault(key(m), []).append(m)
        for name, members in sorted(groups.items()):
            if len(members) < 2 or not any(m.arn in selected for m in members):
                continue
            without = [m.uuid for m in members if not m.event_counts]
            if kind == "queue" and not without:
                continue   # each reads its own received and deleted
            out.append(f"{len(members)} mappings share the {kind} {_name(name)} ({', '.join(m.uuid for m in members)}): "
                       f"the drain apportions its {what} by cap"
                       + (f"; turn on MetricsConfig EventCount for {', '.join(without)} to give each its own counts"
                          if without else ""))
    return out


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v for v in (value or "").split(" ") if v)


def named_alarms(settings, m: Listed, tags: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(downstream alarms, warnings) named for a mapping by the settings and by tags
    (`tags`: the mapping's and its function's together)."""
    keys = (EVERY, function_name(m.function_arn), _name(m.queue_arn), m.uuid)
    alarms: list[str] = []
    warnings: list[str] = []
    for key in keys:
        alarms += settings.drain_downstream_alarms.get(key, ())
        warnings += settings.drain_warning_alarms.get(key, ())
    alarms += _split(tags.get(TAG_ALARMS))
    warnings += _split(tags.get(TAG_WARNINGS))
    alarms = list(dict.fromkeys(alarms))
    warnings = [w for w in dict.fromkeys(warnings) if w not in alarms]   # named both ways: it cuts
    return tuple(alarms), tuple(warnings)


def function_gone(function_arn: str) -> str:
    return (f"the function {function_name(function_arn)} no longer exists (GetFunction: ResourceNotFoundException): "
            "nothing consumes this queue, so this drain cannot finish")


@uses("lambda:GetFunction", "lambda:ListTags", by=("reconciler", "cli"))
def consumer(clients, settings, m: Listed) -> Consumer:
    """The consumer facts of one mapping: reserved concurrency, timeout, whether its queue
    has a redrive policy, and the alarms named for it. A read that fails is a note, never
    an exception: the drain goes on without it."""
    client = clients("lambda")
    notes, tags, reserved, timeout, unreachable = [], {}, None, None, other_account(m)
    try:
        got = client.get_function(FunctionName=m.function_arn)
        reserved = (got.get("Concurrency") or {}).get("ReservedConcurrentExecutions")
        timeout = (got.get("Configuration") or {}).get("Timeout")
    except (ClientError, BotoCoreError) as err:
        if isinstance(err, ClientError) and error_code(err) in MISSING_FUNCTION:
            unreachable = unreachable or function_gone(m.function_arn)
        notes.append(f"reserved concurrency and timeout unreadable ({error_text(err)}): the drain's ceiling is "
                     f"Lambda's, and Duration is not judged against the timeout")
    has_dlq = None
    if other_account(m) is None:
        has_dlq, note = redrive(clients, m.queue_arn)
        if note:
            notes.append(note)
    for arn in (unqualified(m.function_arn), m.arn):
        try:
            tags.update(client.list_tags(Resource=arn).get("Tags", {}))
        except (ClientError, BotoCoreError) as err:
            notes.append(f"tags of {arn} unreadable ({error_text(err)}): alarms named by tag there are not known")
    alarms, warnings = named_alarms(settings, m, tags)
    return Consumer(m.arn, m.uuid, m.function_arn, m.queue_arn, reserved, alarms, warnings, tuple(notes),
                    float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None,
                    has_dlq, unreachable, m.event_counts)


@uses("sqs:GetQueueUrl", "sqs:GetQueueAttributes", by=("reconciler", "cli"))
def redrive(clients, queue_arn: str) -> tuple[bool | None, str | None]:
    """(whether the queue has a dead-letter queue, from its RedrivePolicy; a note when it
    could not be read). A backlog its consumer can never process drains only through one."""
    parts = queue_arn.split(":")
    sqs = clients("sqs")
    try:
        url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"]).get("Attributes", {})
    except (ClientError, BotoCoreError, IndexError, KeyError) as err:
        why = error_text(err) if isinstance(err, (ClientError, BotoCoreError)) else f"malformed queue ARN {queue_arn}"
        return None, f"the queue's redrive policy unreadable ({why}): whether it has a dead-letter queue is unknown"
    try:
        target = json.loads(attrs.get("RedrivePolicy") or "{}").get("deadLetterTargetArn")
    except (ValueError, AttributeError):
        return None, "the queue's redrive policy is not JSON: whether it has a dead-letter queue is unknown"
    return bool(target), None


def unqualified(function_arn: str) -> str:
    return ":".join(function_arn.split(":")[:7])


# ---- GetMetricData in bulk ---------------------------------------------------------------


@dataclass
class _Batch:
    """Metric queries keyed by (owner, metric); run in calls of at most 500."""

    start: datetime
    end: datetime
    queries: list[tuple[tuple[str, str], dict]] = field(default_factory=list)

    def add(self, owner: str, metric: str, namespace: str, name: str, stat: str, dimensions: list[dict],
            period: int = PERIOD) -> None:
        self.queries.append(((owner, metric), {
            "MetricStat": {"Metric": {"Namespace": namespace, "MetricName": name, "Dimensions": dimensions},
                           "Period": period, "Stat": stat},
            "ReturnData": True,
        }))

    @uses("cloudwatch:GetMetricData", by=("reconciler", "cli"))
    def run(self, clients) -> dict[tuple[str, str], list[dc.Datapoint]]:
        """(owner, metric) -> datapoints, newest first; a failed call leaves its queries empty."""
        out: dict[tuple[str, str], list[dc.Datapoint]] = {k: [] for k, _ in self.queries}
        cloudwatch = clients("cloudwatch") if self.queries else None
        for i in range(0, len(self.queries), QUERIES_PER_CALL):
            chunk = self.queries[i:i + QUERIES_PER_CALL]
            ids = {f"q{i + j}": k for j, (k, _) in enumerate(chunk)}
            request = [{"Id": qid, **q} for qid, (_, q) in zip(ids, chunk)]
            try:
                for page in cloudwatch.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=request, StartTime=self.start, EndTime=self.end, ScanBy="TimestampDescending",
                ):
                    for result in page["MetricDataResults"]:
                        points = out[ids[result["Id"]]]
                        for when, value in zip(result.get("Timestamps", []), result.get("Values", [])):
                            if isinstance(value, (int, float)) and math.isfinite(value):
                                points.append(dc.Datapoint(when.astimezone(timezone.utc), float(value)))
            except (ClientError, BotoCoreError) as err:
                logger.warning("GetMetricData failed for %d queries: %s; those inputs are missing this tick",
                               len(chunk), error_text(err))
        for points in out.values():
            points.sort(key=lambda p: p.at, reverse=True)
        return out


def _queue_dims(queue_arn: str) -> list[dict]:
    return [{"Name": "QueueName", "Value": _name(queue_arn)}]


def _function_dims(function_arn: str) -> list[dict]:
    return [{"Name": "FunctionName", "Value": function_name(function_arn)}]


def _mapping_dims(uuid: str) -> list[dict]:
    return [{"Name": "EventSourceMappingUUID", "Value": uuid}]


def _add_queue_metrics(batch: "_Batch", c: Consumer, metrics: Iterable[str]) -> None:
    """The queue's metrics of `c`; received and deleted from the mapping's own metrics when
    it publishes them."""
    for metric in metrics:
        if c.event_counts and metric in MAPPING_METRICS:
            ns, name, stat = MAPPING_METRICS[metric]
            batch.add(c.arn, metric, ns, name, stat, _mapping_dims(c.uuid))
        else:
            ns, name, stat = QUEUE_METRICS[metric]
            batch.add(c.arn, metric, ns, name, stat, _queue_dims(c.queue_arn))


def pre_event(clients, consumers: Iterable[Consumer], until: datetime, why: str, minutes: int,
              owner_caps: Mapping[str, int | None],
              shares: Mapping[str, dc_share.Shares] | None = None) -> dict[str, dc.Facts]:
    """Each mapping's facts from before the event (holdfast.core.drain.baseline):
    the minutes of the `minutes` before the earliest of `until` (`why` names it: the first
    impairment signal or the plan's engagement) and the consumer's own first anomaly, read
    over twice that so the anomaly can be found; medians, so a storm in part of the window
    moves no figure. A mapping that shares its function or its queue (`shares`,
    holdfast.core.drain.share) has the shared sums apportioned to it, minute by minute."""
    consumers = list(consumers)
    shares = shares or {}
    batch = _Batch(until - timedelta(minutes=2 * minutes), until)
    for c in consumers:
        _add_queue_metrics(batch, c, ("age", "visible", "sent", "deleted", "received"))
        for metric in ("errors", "invocations", "concurrency", "duration", "duration_high"):
            ns, name, stat = FUNCTION_METRICS[metric]
            batch.add(c.arn, metric, ns, name, stat, _function_dims(c.function_arn))
    data = batch.run(clients)
    out = {}
    for c in consumers:
        by_minute: dict[datetime, dict[str, float]] = {}
        for metric in ("age", "visible", "sent", "deleted", "received", "errors", "invocations", "concurrency",
                       "duration", "duration_high"):
            for p in data[(c.arn, metric)]:
                by_minute.setdefault(p.at, {})[metric] = p.value
        share = shares.get(c.arn, dc_share.Shares())
        series = [dc_share.apportion_minute(dc.Minute(at, **values), share, own_counts=c.event_counts)
                  for at, values in sorted(by_minute.items())]
        fields = dc.baseline(series, until, why, minutes)
        out[c.arn] = dc.Facts(reserved_concurrency=c.reserved, owner_cap=owner_caps.get(c.arn),
                              timeout_seconds=c.timeout, has_dlq=c.has_dlq, share=share.least, **fields)
    return out


# ---- the downstream alarms -------------------------------------------------------------


@dataclass(frozen=True)
class AlarmInfo:
    name: str
    state: str | None                 # None: no such alarm
    transitioned: datetime | None = None
    evaluated: datetime | None = None   # newest of StateReasonData's evaluated datapoints
    metric: dict | None = None          # MetricStat of a single-metric alarm
    threshold: float | None = None      # a static threshold's value and operator (None:
    comparison: str | None = None       # a composite, metric-math or anomaly-band alarm)


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _evaluated(reason_data: str | None) -> datetime | None:
    try:
        points = json.loads(reason_data or "{}").get("evaluatedDatapoints") or []
        times = [datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%S.%f%z") for p in points if "timestamp" in p]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return max(times).astimezone(timezone.utc) if times else None


@uses("cloudwatch:DescribeAlarms", by=("reconciler", "cli"))
def describe(clients, names: Iterable[str]) -> dict[str, AlarmInfo]:
    """Each alarm's state, its last transition, and its metric; an unreadable page leaves
    its alarms as state None (ignored by the controller, and said so)."""
    names = sorted(set(names))
    out = {n: AlarmInfo(n, None) for n in names}
    cloudwatch = clients("cloudwatch") if names else None
    for i in range(0, len(names), ALARM_NAMES_PER_CALL):
        try:
            page = cloudwatch.describe_alarms(AlarmNames=names[i:i + ALARM_NAMES_PER_CALL],
                                              AlarmTypes=["MetricAlarm", "CompositeAlarm"], MaxRecords=ALARM_NAMES_PER_CALL)
        except (ClientError, BotoCoreError) as err:
            logger.warning("downstream alarms unreadable: %s", error_text(err))
            continue
        for a in page.get("MetricAlarms", []) + page.get("CompositeAlarms", []):
            metric = None
            if a.get("MetricName") and a.get("Namespace"):
                stat = a.get("Statistic") or a.get("ExtendedStatistic")
                if stat:
                    metric = {"Namespace": a["Namespace"], "MetricName": a["MetricName"],
                              "Dimensions": a.get("Dimensions", []), "Period": int(a.get("Period") or PERIOD), "Stat": stat}
            transitioned = _utc(a.get("StateTransitionedTimestamp") or a.get("StateUpdatedTimestamp"))
            threshold = a.get("Threshold") if metric is not None and a.get("ComparisonOperator") in BEYOND else None
            out[a["AlarmName"]] = AlarmInfo(a["AlarmName"], a.get("StateValue"), transitioned,
                                            _evaluated(a.get("StateReasonData")), metric,
                                            None if threshold is None else float(threshold),
                                            a.get("ComparisonOperator") if threshold is not None else None)
    return out


# A static threshold's ComparisonOperator (CloudWatch API Reference, PutMetricAlarm): whether a
# datapoint's value is beyond it. The anomaly-detection operators compare with a band, not a
# Threshold: such an alarm reports no breached minutes.
BEYOND = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


# The comparisons whose threshold is an upper limit (a latency, an error count): their
# metric as a share of the threshold is how near the owner's limit a minute came.
UPPER = frozenset({"GreaterThanThreshold", "GreaterThanOrEqualToThreshold"})


def breached(info: AlarmInfo, points: Iterable[dc.Datapoint]) -> tuple[datetime, ...]:
    """The minutes of the alarm's own metric whose datapoint is beyond its threshold, newest
    first (() for an alarm without a static threshold on one metric)."""
    if info.threshold is None or info.comparison not in BEYOND:
        return ()
    beyond = BEYOND[info.comparison]
    return tuple(p.at for p in points if beyond(p.value, info.threshold))


def levels(info: AlarmInfo, points: Iterable[dc.Datapoint]) -> tuple[dc.Datapoint, ...]:
    """The alarm's own metric as shares of its threshold (`dc.Alarm.levels`), for an alarm
    whose metric must stay at or below a positive static threshold; () for any other."""
    if info.threshold is None or info.threshold <= 0 or info.comparison not in UPPER:
        return ()
    return tuple(dc.Datapoint(p.at, p.value / info.threshold) for p in points
                 if math.isfinite(p.value) and p.value >= 0)



def measured_at(info: AlarmInfo, newest: datetime | None, now: datetime) -> datetime | None:
    """The time of the datapoint an alarm's state was decided on (see the module's table)."""
    if info.state is None:
        return None
    if info.state == dc.INSUFFICIENT_DATA:
        return info.transitioned
    times = [t for t in (newest, info.evaluated) if t is not None]
    if times:
        return max(times)
    if info.state == dc.OK:
        period = (info.metric or {}).get("Period", PERIOD)
        return complete_until(now) - timedelta(seconds=period)
    return info.transitioned


# ---- this tick's readings ---------------------------------------------------------------


# Lambda stamps Duration, Invocations, Errors, Throttles and ConcurrentExecutions at an
# invocation's start: their minute is whole once the function's timeout has passed too. SQS
# stamps its counts when they happen (a receive, a delete, a sample of the age): theirs is
# whole once published. The judged minute mixes both, so it waits for the timeout.
INVOCATION_STAMPED = frozenset({"errors", "throttles", "invocations", "duration", "duration_high", "concurrency"})


def _whole(c: Consumer, metric: str, now: datetime):
    """The rule (holdfast.core.drain.inputs.whole_minute) for one metric of `c`."""
    timeout = c.timeout if metric in INVOCATION_STAMPED else None
    lag = COMPLETE_AFTER.total_seconds()
    return lambda at: whole_minute(at, timeout, now, lag, PERIOD)


def readings(clients, consumers: Iterable[Consumer], now: datetime, *, stale_seconds: float,
             live_for: Iterable[str] | None = None, minutes: Mapping[str, datetime] | None = None) -> dict[str, dc.Reading]:
    """Each consumer's Reading: its queue and function metrics and its downstream alarms.
    For the consumers in `live_for` (all when None) whose queue has no fresh age datapoint,
    the queue's depth is read live (GetQueueAttributes). `minutes`: consumer ARN -> the
    minute its own evidence is to be judged on, when published (a slow-start probe's).

    Every datapoint read is of a whole minute (`_whole`): the newest minute a Reading holds
    is the newest whole one. A mapping that publishes its own metrics has its received and
    deleted from them (`per_mapping`). `unreachable` says why a mapping's evidence can never
    be read: its queue is another account's, the live read was denied, or its function is
    gone (GetFunction, asked only of a drain whose function shows no Invocations)."""
    minutes = minutes or {}
    live_for = None if live_for is None else set(live_for)
    consumers = list(consumers)
    names = {n for c in consumers for n in c.alarms + c.warnings}
    infos = describe(clients, names)
    longest = max((c.timeout or 0.0 for c in consumers), default=0.0)
    lookback = timedelta(seconds=stale_seconds + 2 * PERIOD + longest)
    end = complete_until(now)
    batch = _Batch(end - lookback, end)
    for c in consumers:
        _add_queue_metrics(batch, c, QUEUE_METRICS)
        for metric in ("errors", "throttles", "invocations", "duration", "duration_high", "concurrency"):
            ns, name, stat = FUNCTION_METRICS[metric]
            batch.add(c.arn, metric, ns, name, stat, _function_dims(c.function_arn))
    for info in infos.values():
        if info.metric is not None:
            m = info.metric
            batch.add("alarm:" + info.name, "metric", m["Namespace"], m["MetricName"], m["Stat"], m["Dimensions"], m["Period"])
    raw = batch.run(clients)
    by_arn = {c.arn: c for c in consumers}
    data = {(owner, metric): ([p for p in points if _whole(by_arn[owner], metric, now)(p.at)]
                              if owner in by_arn else points) for (owner, metric), points in raw.items()}
    newest = lambda owner, metric: (data.get((owner, metric)) or [None])[0]
    gone = _functions_gone(clients, [c for c in consumers if (live_for is None or c.arn in live_for)
                                     and c.unreachable is None and not data.get((c.arn, "invocations"))])
    out = {}
    for c in consumers:
        age = newest(c.arn, "age")
        unreachable = c.unreachable or _other_account(c) or gone.get(function_name(c.function_arn))
        live, missing = None, False
        if (unreachable is None and (live_for is None or c.arn in live_for)
                and (age is None or age.at + timedelta(seconds=PERIOD + stale_seconds) < now)):
            live, missing, denied = visible_now(clients, c.queue_arn)
            unreachable = unreachable or denied
        downstream = []
        for name, severity in [(n, dc.CRITICAL) for n in c.alarms] + [(n, dc.WARNING) for n in c.warnings]:
            info = infos.get(name, AlarmInfo(name, None))
            point = newest("alarm:" + name, "metric")
            points = data.get(("alarm:" + name, "metric"), [])
            downstream.append(dc.Alarm(name, info.state, measured_at(info, point.at if point else None, now), severity,
                                       breached(info, points), levels(info, points)))
        judged = _judged_minute(data, c.arn, minutes.get(c.arn))
        out[c.arn] = dc.Reading(
            oldest_age=newest(c.arn, "age"), visible=newest(c.arn, "visible"), throttles=newest(c.arn, "throttles"),
            downstream=tuple(downstream), sent=newest(c.arn, "sent"), visible_now=live, queue_missing=missing,
            unreachable=unreachable, per_mapping=c.event_counts and judged["received"] is not None,
            **judged,
        )
    return out


def _other_account(c: Consumer) -> str | None:
    return other_account(Listed(c.arn, c.uuid, c.function_arn, c.queue_arn, None))


@uses("lambda:GetFunction", by=("reconciler", "cli"))
def _functions_gone(clients, consumers: list[Consumer]) -> dict[str, str]:
    """function name -> why its drain cannot finish, for the functions of `consumers` that
    no longer exist (one GetFunction each, outside Lambda's control-plane budget). A read
    that fails otherwise says nothing: the function may well be there."""
    out: dict[str, str] = {}
    for arn in sorted({unqualified(c.function_arn) for c in consumers}):
        try:
            clients("lambda").get_function(FunctionName=arn)
        except ClientError as err:
            if error_code(err) in MISSING_FUNCTION:
                out[function_name(arn)] = function_gone(arn)
        except BotoCoreError:
            pass
    return out


def _judged_minute(data: Mapping[tuple[str, str], list[dc.Datapoint]], owner: str,
                   wanted: datetime | None = None) -> dict[str, dc.Datapoint | None]:
    """The datapoints of the minute the consumer's own evidence is judged on: `wanted` when
    it has both NumberOfMessagesReceived and Duration, else the newest minute with both (SQS
    and Lambda publish on their own schedules; judging one minute's receives by another's
    Duration would misread both), else the newest with receives. None where a metric has no
    datapoint for that minute. `data` holds whole minutes only (see `readings`)."""
    points = {metric: {p.at: p for p in data.get((owner, metric), [])} for metric in JUDGED_METRICS}
    received = sorted(points["received"], reverse=True)
    both = [t for t in received if t in points["duration"]]
    if wanted is not None and wanted in both:
        both = [wanted]
    minute = both[0] if both else received[0] if received else None
    if minute is None:
        newest = lambda metric: (data.get((owner, metric)) or [None])[0]
        return {metric: newest(metric) for metric in JUDGED_METRICS}
    return {metric: points[metric].get(minute) for metric in JUDGED_METRICS}


@uses("sqs:GetQueueUrl", "sqs:GetQueueAttributes", by=("reconciler", "cli"))
def visible_now(clients, queue_arn: str) -> tuple[int | None, bool, str | None]:
    """(the queue's ApproximateNumberOfMessages, live; whether the queue is gone; why it
    may not be read, when the read was denied). The count is None when it cannot be read."""
    parts = queue_arn.split(":")
    sqs = clients("sqs")
    try:
        url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]), False, None
    except ClientError as err:
        if error_code(err) in MISSING_QUEUE:
            return None, True, None
        if error_code(err) in DENIED:
            return None, False, (f"reading the queue {parts[5]} was denied ({error_text(err)}): its depth cannot be "
                                 "known, so this drain cannot be judged caught up")
        logger.warning("queue %s unreadable: %s", queue_arn, error_text(err))
    except (BotoCoreError, KeyError, ValueError, IndexError) as err:
        logger.warning("queue %s unreadable: %s", queue_arn, err)
    return None, False, None


def queue_ages(clients, queue_arns: Iterable[str], now: datetime, *, since: datetime, pre_event_minutes: int,
               stale_seconds: float) -> dict[str, tuple[dc.Datapoint | None, float | None]]:
    """For the replay: each queue's newest ApproximateAgeOfOldestMessage and its pre-event
    baseline (the most it aged in the window before the hold)."""
    arns = sorted(set(queue_arns))
    ns, name, stat = QUEUE_METRICS["age"]
    end = complete_until(now)
    now_batch = _Batch(end - timedelta(seconds=stale_seconds + 2 * PERIOD), end)
    before = _Batch(since - timedelta(minutes=pre_event_minutes), since)
    for arn in arns:
        now_batch.add(arn, "age", ns, name, stat, _queue_dims(arn))
        before.add(arn, "age", ns, name, stat, _queue_dims(arn))
    current, baseline = now_batch.run(clients), before.run(clients)
    out = {}
    for arn in arns:
        points, base = current[(arn, "age")], [p.value for p in baseline[(arn, "age")]]
        out[arn] = (points[0] if points else None, max(base) if base else None)
    return out
