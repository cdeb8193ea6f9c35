"""`holdfast drain-estimate`: how long a queue's backlog takes to drain, at each ESM cap.

From numbers:  --outage-minutes M --arrival-per-minute A --consumer-per-minute C
From a queue:  --queue-url URL, read over the last --window-minutes (default 60):
  - backlog: the queue's ApproximateNumberOfMessages now (GetQueueAttributes), the live
    value of what CloudWatch samples as ApproximateNumberOfMessagesVisible;
  - arrivals: NumberOfMessagesSent over the window, per minute (the mean);
  - consumers: NumberOfMessagesDeleted, the busiest 5-minute period of the window, per
    minute. The peak, not the mean, because the question is what the consumers can do,
    and during an outage their mean is near zero. If the window never saw them at full
    speed, pass --consumer-per-minute (or --arrival-per-minute) to override.
  - one batch's throughput: the deleted messages of that busiest period ÷ the
    ConcurrentExecutions of the functions consuming the queue (its event source
    mappings) in it — the same metrics the drain's forecast reads
    (holdfast.observation.drain_inputs), unless --per-batch-per-minute is given.
  Periods are 5 minutes, complete ones only: SQS publishes at least that often, so
  every period summed holds all of its data.

Besides the fixed caps, the estimate shows the drain under Holdfast's controller
(holdfast.core.drain): from the batches the arrivals need, raised a step per
fresh datapoint, up to the batches the consumers' full rate needs — if the downstream
keeps up; one with a knee below that stops the raises earlier.

The arithmetic, and the per-batch throughput model behind the cap steps, is in
holdfast.drain. Exit 2 when the numbers cannot drain (with the reason), 1 when the
queue's figures could not be read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlparse

import botocore.loaders
from botocore.exceptions import ClientError

from holdfast.aws import error_code, error_message
from holdfast.cli.context import UsageError, table
from holdfast.core import drain as dc
from holdfast.core.drain import estimate as drain
from holdfast.iam import uses
from holdfast.observation.drain_inputs import function_name

PERIOD_SECONDS = 300
_MISSING_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")


class QueueReadError(Exception):
    """The queue's attributes or metrics could not be read."""


@dataclass(frozen=True)
class QueueFigures:
    name: str
    backlog_messages: int
    arrival_per_minute: float
    consumer_per_minute: float
    window_minutes: int
    per_batch_per_minute: float | None = None   # measured; None: no consuming function's concurrency
    functions: tuple[str, ...] = ()


def register(sub) -> None:
    p = sub.add_parser(
        "drain-estimate",
        help="backlog and drain time after an outage, at full spare capacity and at each ESM cap step",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--outage-minutes", type=float, help="minutes the consumers were down")
    p.add_argument("--arrival-per-minute", type=float, help="messages arriving per minute")
    p.add_argument("--consumer-per-minute", type=float, help="messages the consumers process per minute at full speed")
    p.add_argument("--queue-url", help="read backlog, arrivals and consumer throughput from this SQS queue and its metrics")
    p.add_argument("--window-minutes", type=int, default=60, help="with --queue-url: minutes of metrics to read (5-1440, default 60)")
    p.add_argument(
        "--per-batch-per-minute",
        type=float,
        help=f"messages one concurrent batch consumes per minute (default: consumers / {drain.FULL_CONCURRENCY})",
    )
    p.set_defaults(func=run)


def run(ctx, args) -> int:
    measured_per_batch = False
    try:
        if args.queue_url is not None:
            if args.outage_minutes is not None:
                raise UsageError(
                    "give --queue-url or --outage-minutes, not both: the queue's backlog replaces outage × arrivals"
                )
            if not 5 <= args.window_minutes <= 1440:
                raise UsageError(f"--window-minutes must be from 5 to 1440, got {args.window_minutes}")
            # The queue is read by name in this region and account, and its metrics with it.
            ctx.require_here(queue_arn(args.queue_url, ctx.clients), "--queue-url", shown=args.queue_url)
            try:
                figures = read_queue(ctx.clients, args.queue_url, ctx.runtime.clock.now(), args.window_minutes)
            except QueueReadError as err:
                ctx.warn(str(err))
                return 1
            arrival = figures.arrival_per_minute if args.arrival_per_minute is None else drain.positive("--arrival-per-minute", args.arrival_per_minute)
            consumer = figures.consumer_per_minute if args.consumer_per_minute is None else drain.positive("--consumer-per-minute", args.consumer_per_minute)
            backlog, source = figures.backlog_messages, _queue_source(figures, args)
            if args.per_batch_per_minute is None and figures.per_batch_per_minute is not None:
                args.per_batch_per_minute = figures.per_batch_per_minute
                measured_per_batch = True
        elif args.outage_minutes is None and args.arrival_per_minute is None and args.consumer_per_minute is None:
            raise UsageError("give --outage-minutes, --arrival-per-minute and --consumer-per-minute, or --queue-url")
        else:
            backlog = drain.backlog_after(args.outage_minutes, args.arrival_per_minute)
            arrival = args.arrival_per_minute
            consumer = drain.positive("--consumer-per-minute", args.consumer_per_minute)
            source = f"{drain.fmt(args.outage_minutes)} min outage × {drain.fmt(arrival)}/min arrivals"
        caps = (ctx.settings.esm_floor, *[c for c in drain.FIXED_CAPS if c > ctx.settings.esm_floor])
        result = drain.estimate(backlog, arrival, consumer, caps, args.per_batch_per_minute,
                                dc.constants_from(ctx.settings))
    except drain.DrainInputError as err:
        hint = ""
        if isinstance(err, drain.NeverDrains) and args.queue_url is not None and args.consumer_per_minute is None:
            hint = (
                f" (consumers measured as the busiest 5 minutes of NumberOfMessagesDeleted in the last "
                f"{args.window_minutes} min; pass --consumer-per-minute for what they can do)"
            )
        raise UsageError(f"{err}{hint}") from err
    model = "measured" if measured_per_batch else ("given" if args.per_batch_per_minute is not None else None)
    ctx.emit(result.to_dict(), render(result, source, per_batch=model))
    return 0


# On an AWS domain, the host of an SQS queue URL names the queue's region:
# sqs.REGION.amazonaws.com (.amazonaws.com.cn, ...), sqs.REGION.api.aws (dual-stack),
# sqs-fips.REGION.amazonaws.com and .api.aws, REGION.queue.amazonaws.com (legacy), and an
# interface VPC endpoint's vpce-ID.sqs.REGION.vpce.amazonaws.com; us-east-1's legacy
# queue.amazonaws.com names none.
_SQS_LABELS = {"sqs", "sqs-fips", "queue"}
_LEGACY_HOST = "queue.amazonaws.com"   # us-east-1's


@functools.lru_cache(maxsize=1)
def _aws_domains() -> tuple[tuple[str, ...], tuple[tuple[str, re.Pattern], ...]]:
    """Every partition's DNS suffixes (IPv4 and dual-stack; longest first), and each
    partition with the pattern of its region names, from botocore's partitions data."""
    partitions = botocore.loaders.create_loader().load_data("partitions")["partitions"]
    suffixes = {s for p in partitions for s in (p["outputs"]["dnsSuffix"], p["outputs"].get("dualStackDnsSuffix")) if s}
    return (tuple(sorted(suffixes, key=len, reverse=True)),
            tuple((p["id"], re.compile(p["regionRegex"])) for p in partitions))


def queue_arn(url: str, clients) -> str:
    """The ARN of the queue `url` names: the account and name from its path, the region
    and partition from its host (this region's and partition's for a host on no AWS
    domain, such as a local endpoint);
    UsageError when it names no queue, or is on an AWS domain and its host names no SQS
    endpoint of one region (assuming this region would read a queue of the same name here)."""
    parsed = urlparse(url)
    path = [p for p in parsed.path.split("/") if p]
    if parsed.scheme not in ("http", "https") or len(path) != 2 or not re.fullmatch(r"\d{12}", path[0]):
        raise UsageError(f"--queue-url {url!r} is not an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
    host = (parsed.hostname or "").lower().rstrip(".")
    suffixes, partitions = _aws_domains()
    domain = next((d for d in suffixes if host == d or host.endswith("." + d)), None)
    partition = clients.partition
    if domain is None:
        region = clients.region
    elif host == _LEGACY_HOST:
        region, partition = "us-east-1", "aws"
    else:
        labels = host[: -len(domain)].rstrip(".").split(".")
        regions = [(label, p) for label in labels for p, names in partitions if names.match(label)]
        if len(regions) != 1 or not _SQS_LABELS & set(labels):
            raise UsageError(
                f"--queue-url {url!r}: its host {host} names no SQS endpoint of one region, so the queue's region "
                "is unknown; give the URL GetQueueUrl returns (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME); "
                "nothing was done")
        ((region, partition),) = regions
    return f"arn:{partition}:sqs:{region}:{path[0]}:{path[1]}"


def _queue_source(f: QueueFigures, args) -> str:
    arrivals = "given" if args.arrival_per_minute is not None else f"mean NumberOfMessagesSent over {f.window_minutes} min"
    consumers = "given" if args.consumer_per_minute is not None else f"busiest 5 min of NumberOfMessagesDeleted over {f.window_minutes} min"
    return f"queue {f.name}: visible messages now; arrivals {arrivals}; consumers {consumers}"


@uses("sqs:GetQueueAttributes", "cloudwatch:GetMetricData", "lambda:ListEventSourceMappings", by=("cli",))
def read_queue(clients, queue_url: str, now: datetime, window_minutes: int) -> QueueFigures:
    """The queue's backlog now, and its arrival and consumer rates over the window before `now`."""
    try:
        attrs = clients("sqs").get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn", "ApproximateNumberOfMessages"]
        )["Attributes"]
    except ClientError as err:
        code = error_code(err)
        if code in _MISSING_QUEUE:
            raise QueueReadError(f"queue {queue_url} does not exist in {clients.region}") from err
        raise QueueReadError(f"cannot read queue {queue_url}: {code}: {error_message(err)}") from err
    name = attrs["QueueArn"].rsplit(":", 1)[1]

    periods = -(-window_minutes * 60 // PERIOD_SECONDS)
    end = datetime.fromtimestamp(now.timestamp() // PERIOD_SECONDS * PERIOD_SECONDS, tz=now.tzinfo)
    start = end - timedelta(seconds=periods * PERIOD_SECONDS)
    functions = _consumers(clients, attrs["QueueArn"])
    queries = [_query("sent", "NumberOfMessagesSent", name), _query("deleted", "NumberOfMessagesDeleted", name)]
    queries += [_query(f"c{i}", "ConcurrentExecutions", fn, namespace="AWS/Lambda", dimension="FunctionName", stat="Maximum")
                for i, fn in enumerate(functions)]
    values: dict[str, dict] = {q["Id"]: {} for q in queries}
    try:
        for page in clients("cloudwatch").get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries, StartTime=start, EndTime=end,
        ):
            for result in page["MetricDataResults"]:
                values[result["Id"]].update(zip(result["Timestamps"], result["Values"]))
    except ClientError as err:
        raise QueueReadError(f"cannot read the metrics of queue {name}: {error_code(err)}") from err
    per_minute = PERIOD_SECONDS / 60
    deleted = values["deleted"]
    busiest = max(deleted, key=deleted.get) if deleted else None
    consumer = deleted[busiest] / per_minute if busiest is not None else 0.0
    concurrency = sum(values[f"c{i}"].get(busiest, 0.0) for i in range(len(functions))) if busiest is not None else 0.0
    return QueueFigures(
        name=name,
        backlog_messages=int(attrs["ApproximateNumberOfMessages"]),
        # Periods with no datapoint had no messages: the mean is over the whole window.
        arrival_per_minute=sum(values["sent"].values()) / (periods * per_minute),
        consumer_per_minute=consumer,
        window_minutes=window_minutes,
        per_batch_per_minute=consumer / concurrency if concurrency > 0 and consumer > 0 else None,
        functions=tuple(functions),
    )


def _consumers(clients, queue_arn: str) -> list[str]:
    """The names of the functions whose event source mappings read the queue; none when
    they cannot be listed (the estimate then uses the default per-batch model)."""
    try:
        pages = clients("lambda").get_paginator("list_event_source_mappings").paginate(EventSourceArn=queue_arn)
        return sorted({function_name(m["FunctionArn"]) for page in pages for m in page["EventSourceMappings"]})
    except ClientError:
        return []


def _query(query_id: str, metric: str, value: str, *, namespace: str = "AWS/SQS", dimension: str = "QueueName",
           stat: str = "Sum") -> dict:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {"Namespace": namespace, "MetricName": metric, "Dimensions": [{"Name": dimension, "Value": value}]},
            "Period": PERIOD_SECONDS,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def render(e: drain.Estimate, source: str, *, per_batch: str | None) -> str:
    spare = e.consumer_per_minute - e.arrival_per_minute
    model = {"given": "given", "measured": "measured: NumberOfMessagesDeleted ÷ ConcurrentExecutions"}.get(
        per_batch, f"consumers / {drain.FULL_CONCURRENCY:,} batches; set --per-batch-per-minute")
    rows = [
        [s.cap, drain.fmt(s.consumer_per_minute), drain.fmt(s.spare_per_minute), _duration(s.drain_minutes)]
        for s in e.steps
    ]
    rows.append(["uncapped", drain.fmt(e.consumer_per_minute), drain.fmt(spare), _duration(e.drain_minutes)])
    return "\n".join(
        [
            f"backlog: {e.backlog_messages:,} messages ({source})",
            f"drain at full spare capacity: {_duration(e.drain_minutes)}, at {drain.fmt(spare)}/min spare "
            f"(consumers {drain.fmt(e.consumer_per_minute)}/min − arrivals {drain.fmt(e.arrival_per_minute)}/min)",
            "",
            f"at fixed ESM caps (one batch consumes {drain.fmt(e.per_batch_per_minute)}/min: {model}):",
            table(["cap", "consumers/min", "spare/min", "drain"], rows),
        ] + ([
            "",
            f"under Holdfast's drain controller, if the downstream keeps up: {_duration(e.controller.drain_minutes)} "
            f"(from {e.controller.start_cap} batches, +{e.controller.step} per fresh datapoint, up to {e.controller.ceiling})",
        ] if e.controller is not None else [])
    )


def _duration(minutes: float | None) -> str:
    if minutes is None:
        return "never drains at this cap"
    whole = round(minutes)
    text = f"{drain.fmt(round(minutes, 1))} min"
    return text if whole < 60 else f"{text} ({whole // 60} h {whole % 60:02d} min)"
