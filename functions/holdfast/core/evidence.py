"""The built-in evidence the stage gates read, as plain data: what the selected fleet's own
CloudWatch metrics said over the last hold. Read in bulk by holdfast.observation.evidence
(GetMetricData), judged by holdfast.core.gates. Pure: no boto3, no clock.

- drain: per watched SQS event source mapping, its queue's ApproximateAgeOfOldestMessage
  (AWS/SQS, Maximum a minute) and its function's Invocations, Errors and Throttles
  (AWS/Lambda, Sum a minute).
- routing: per selected target group behind a load balancer, UnHealthyHostCount
  (AWS/NetworkELB, dimensions LoadBalancer and TargetGroup, Maximum a minute).

Each series is (time, value) pairs in time order, one a minute where the service
reported one. A missing minute is not a zero to every metric: Elastic Load Balancing
reports only while traffic flows, SQS stops reporting a queue idle for six hours, and
Lambda reports nothing for a function that was not invoked. `error` says the evidence
could not be read (the gates then stay closed; the next tick reads again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

Points = tuple[tuple[datetime, float], ...]

DRAIN, ROUTING = "drain", "routing"   # what a stage's gate reads (policy.evidence_needed)


@dataclass(frozen=True)
class Consumer:
    """One watched SQS mapping: its queue and its function."""

    mapping: str          # the mapping's ARN
    queue: str            # queue name
    function: str         # function name
    age: Points = ()      # oldest message's age, seconds
    invocations: Points = ()
    errors: Points = ()
    throttles: Points = ()


@dataclass(frozen=True)
class TargetHealth:
    target_group: str                 # ARN
    load_balancers: tuple[str, ...]   # ARNs; none: nothing routes to it, nothing to judge
    unhealthy: Points = ()


@dataclass(frozen=True)
class DrainEvidence:
    start: datetime
    end: datetime
    consumers: tuple[Consumer, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class RoutingEvidence:
    start: datetime
    end: datetime
    target_groups: tuple[TargetHealth, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Evidence:
    """What one look at the metrics found; a part not read is None."""

    drain: DrainEvidence | None = None
    routing: RoutingEvidence | None = None
    notes: tuple[str, ...] = field(default=())


def total(points: Points, start: datetime, end: datetime) -> float:
    return sum(v for t, v in points if start <= t < end)


def within(points: Points, start: datetime, end: datetime) -> Points:
    return tuple((t, v) for t, v in points if start <= t < end)


def rises(points: Points, start: datetime) -> list[tuple[datetime, float, float]]:
    """(time, before, after) of every rise from one datapoint to the next, at or after `start`."""
    return [(t1, v0, v1) for (_, v0), (t1, v1) in zip(points, points[1:]) if t1 >= start and v1 > v0]


def name_of(arn: str) -> str:
    """A short name for messages: a target group's name, a function's, a mapping's UUID head."""
    if ":targetgroup/" in arn:
        return arn.split(":targetgroup/")[1].split("/")[0]
    if ":event-source-mapping:" in arn:
        return arn.rsplit(":", 1)[1][:8]
    return arn.rsplit(":", 1)[-1]
