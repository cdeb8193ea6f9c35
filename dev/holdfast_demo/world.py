"""AWS's side of the night that depends on the fleet's state: what the services publish
and what the account's own automation does, with Holdfast and without it.

Each tick the demo reads the fleet's real state from the embedded AWS (every mapping's
cap, every group's suspended processes, the selected target groups' DNS-failover
thresholds) and `World.advance(now, state)` plays the minutes since the last tick:

- it publishes what the services would, into the embedded CloudWatch
  (holdfast_fixtures.moto_patches.publish_service_metrics): per selected target group
  behind the demo's NLB, UnHealthyHostCount a minute (AWS/NetworkELB); per selected SQS
  consumer, its queue's ApproximateAgeOfOldestMessage, ApproximateNumberOfMessagesVisible,
  NumberOfMessagesSent and NumberOfMessagesDeleted (AWS/SQS) and its function's
  Invocations, Errors and ConcurrentExecutions (AWS/Lambda), while the function is
  invoked: what each mapping's drain controller reads;
- it returns the "EC2 Instance Terminate Successful" events Auto Scaling would emit for
  instances that failed their ELB health check in groups whose ReplaceUnhealthy runs:
  the fleet's unselected twins and the account's other groups (OTHER_GROUPS, outside the
  selection; no resource needed, only their events). The detector sees them;
- it counts, with the same models and inputs, what the account's automation did to the
  selected resources (`actual`, from the state Holdfast left them in) and what it would
  have done with every resource as its owner configured it (`counterfactual`).

The models (the demo's, the timeline gives no rates):
- target health: every selected target group has two targets in each of three zones;
  from 06:21 "new instances launch without connectivity" each target is unhealthy in a
  given minute with probability 0.2 (0.3 from 07:04, 0.15 from 09:36), none from 10:36.
  A zone is failed out of DNS when its healthy targets fall below the group's
  dns_failover.minimum_healthy_targets.count ("off": never).
- health-check replacements: from 07:04 to 10:36 each group has, every 5 minutes, an
  instance failing its ELB health check with probability 0.5; ReplaceUnhealthy running
  terminates and replaces it.
- zone rebalancing: a group with launch failures in one zone and successes in another
  within an hour (05:28 to 13:50) is rebalanced once if AZRebalance runs (a launch in
  the short zone, a termination in the long one).
- SQS consumers: 200 messages a minute arrive on each queue (on a queue whose owner's cap
  consumes less, 80 % of what that cap consumes: the owner sized it for its load); a concurrent batch consumes
  60 a minute (batches of 10); a mapping runs min(cap, what its backlog needs) batches,
  an uncapped one up to about 1,000 (Lambda's SQS scaling). Nothing is consumed while
  Lambda's SQS polling is impaired (23:48 to 04:40). The oldest message's age is the
  backlog over the arrival rate. 0.4 % of invocations error once DynamoDB is back.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from holdfast_demo import scenario
from holdfast_demo.fleet import batches
from holdfast_fixtures.moto_patches import publish_service_metrics

MIN = timedelta(minutes=1)
OTHER_GROUPS = ("ops-batch", "ci-runners", "reporting", "bastion")
TARGETS_PER_ZONE = 2
ARRIVALS, PER_BATCH, BATCH, UNCAPPED = 200.0, 60.0, 10, 1000
ERROR_SHARE = 0.004
SECONDS_PER_MESSAGE = 60.0 / PER_BATCH   # a batch consumes PER_BATCH messages a minute, one at a time


def _chance(*parts: object) -> float:
    """A deterministic number in [0, 1) for these parts: the same night every run."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) / 2 ** 32


def unhealthy_probability(t: datetime) -> float:
    if scenario.NETWORK_LAG <= t < scenario.HEALTH_CHECK_TERMINATIONS:
        return 0.2
    if scenario.HEALTH_CHECK_TERMINATIONS <= t < scenario.FAILOVER_DISABLED:
        return 0.3
    if scenario.FAILOVER_DISABLED <= t < scenario.NETWORK_NORMAL:
        return 0.15
    return 0.0


@dataclass
class Tally:
    """What the account's own automation did to the selected resources."""

    instances_replaced: int = 0
    zones_rebalanced: int = 0
    dns_failovers: int = 0                       # a zone of a target group failed out of DNS
    target_groups_failed_out: set[str] = field(default_factory=set)
    peak_concurrency: int = 0
    peak_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances_replaced": self.instances_replaced,
            "zones_rebalanced": self.zones_rebalanced,
            "target_group_zone_failovers": self.dns_failovers,
            "target_groups_failed_out_of_dns": len(self.target_groups_failed_out),
            "peak_consumer_concurrency": self.peak_concurrency,
            "peak_consumer_concurrency_at": self.peak_at.astimezone(scenario.PDT).isoformat(timespec="minutes")
            if self.peak_at else None,
        }


@dataclass
class State:
    """The fleet as read from the embedded AWS at a tick."""

    caps: Mapping[str, int | None]                 # mapping ARN -> its cap in batches (fleet.batches; None: uncapped)
    suspended: Mapping[str, frozenset[str]]        # group name -> suspended processes
    dns_failover: Mapping[str, str] = field(default_factory=dict)   # TG ARN -> dns_failover count ("off", "1", ...)


@dataclass
class _Queue:
    mapping: str
    queue: str
    function: str
    original: int | None
    backlog: float = 0.0             # with Holdfast
    backlog_without: float = 0.0     # without Holdfast, same arrivals

    @property
    def arrivals(self) -> float:
        """Messages a minute: ARRIVALS, or what the owner sized the cap for (80 % of what it
        consumes) when that is less: a queue its owner's cap cannot keep up with would have
        grown a backlog before the event, with or without Holdfast."""
        return ARRIVALS if self.original is None else min(ARRIVALS, 0.8 * self.original * PER_BATCH)


class World:
    def __init__(self, *, account: str, region: str, fleet, before: Mapping[str, Any], steps: Sequence[scenario.Step],
                 start: datetime):
        self.account, self.region, self.fleet = account, region, fleet
        self.zones = list(fleet.zones)
        self.target_groups = [arn for arn in fleet.selected["nlb"] if arn in fleet.load_balancers]
        self.original_failover = {
            arn: (before[arn] or {}).get("Attributes", {}).get("target_group_health.dns_failover.minimum_healthy_targets.count", "off")
            for arn in self.target_groups
        }
        self.queues = []
        for arn in fleet.selected["esm"]:
            m = before[arn] or {}
            if not m.get("Enabled", True):
                continue  # a disabled mapping consumes nothing, with or without Holdfast
            self.queues.append(_Queue(arn, m["EventSourceArn"].split(":")[-1], m["FunctionArn"].split(":")[6],
                                      batches(m)))
        self.selected_groups = [fleet.handles[a] for a in fleet.selected["asg"]]
        self.twin_groups = [fleet.handles[a] for a in fleet.unselected["asg"]]
        self.outcomes = scenario.launch_outcomes(steps)
        self.actual, self.without = Tally(), Tally()
        self.failed_out: dict[tuple[str, str, str], bool] = {}   # (which, tg, zone) -> failed out now
        self.clock = start                                       # minutes up to here are played
        self.hour_done = start.replace(minute=0, second=0, microsecond=0)
        # For the chart: per minute, the selected target groups' unhealthy hosts, and consumers.
        self.unhealthy: list[tuple[datetime, int]] = []
        self.concurrency: list[tuple[datetime, int, int]] = []   # (t, with Holdfast, without)
        self.oldest_age: list[tuple[datetime, float]] = []       # the median queue's oldest message
        self.group_age: list[tuple[datetime, dict[str, float]]] = []   # each consumer group's oldest message
        # The drain's built-in evidence as published: the median mapping's time per message
        # (Duration's sum ÷ NumberOfMessagesReceived) ÷ its pre-event value; None: no receives.
        self.duration_ratio: list[tuple[datetime, float | None]] = []

    def reads_processes(self, now: datetime) -> bool:
        """Whether this tick's minutes need the groups' suspended processes: replacements
        run from 07:04 to 10:36, and rebalancing is scored each hour from 05:28 to 13:50."""
        if self.clock < scenario.NETWORK_NORMAL and now > scenario.HEALTH_CHECK_TERMINATIONS:
            return True
        return (scenario.LAUNCHES_RESUME <= now <= scenario.EC2_NORMAL + timedelta(hours=1)
                and self.hour_done + timedelta(hours=1) <= now)

    def reads_target_groups(self, now: datetime) -> bool:
        """Whether this tick's minutes need the target groups' current DNS-failover thresholds."""
        return any(unhealthy_probability(t) for t in (self.clock, now))

    def advance(self, now: datetime, state: State) -> list[dict]:
        """Play the minutes up to `now`; returns the termination events to deliver."""
        events: list[dict] = []
        metrics: dict[str, list[dict]] = {"AWS/NetworkELB": [], "AWS/SQS": [], "AWS/Lambda": []}
        t = self.clock
        while t < now:
            self._target_health(t, state, metrics["AWS/NetworkELB"])
            self._consumers(t, state, metrics)
            if t.minute % 5 == 0:
                events += self._replacements(t, state)
            t += MIN
        self._rebalances(now, state)
        self.clock = now
        for namespace, data in metrics.items():
            if data:
                publish_service_metrics(self.account, self.region, namespace, data)
        return events

    # ---- the models -----------------------------------------------------------------------

    def _target_health(self, t: datetime, state: State, out: list[dict]) -> None:
        p = unhealthy_probability(t)
        total = 0
        for tg in self.target_groups:
            bad, name = 0, tg.split("/")[1]   # the name, not the ARN's random id: the same night every run
            for zone in self.zones:
                down = sum(_chance("tg", name, zone, k, t) < p for k in range(TARGETS_PER_ZONE)) if p else 0
                bad += down
                healthy = TARGETS_PER_ZONE - down
                for which, tally, threshold in (("with", self.actual, state.dns_failover.get(tg)),
                                                ("without", self.without, self.original_failover[tg])):
                    failed = threshold not in (None, "off") and healthy < int(threshold)
                    if failed and not self.failed_out.get((which, tg, zone)):
                        tally.dns_failovers += 1
                        tally.target_groups_failed_out.add(tg)
                    self.failed_out[(which, tg, zone)] = failed
            total += bad
            lb = self.fleet.load_balancers[tg]
            out.append({"MetricName": "UnHealthyHostCount", "Timestamp": t + timedelta(seconds=30), "Value": bad,
                        "Dimensions": [{"Name": "TargetGroup", "Value": tg.split(":")[-1]},
                                       {"Name": "LoadBalancer", "Value": lb.split(":loadbalancer/")[1]}]})
        self.unhealthy.append((t, total))

    def _consumers(self, t: datetime, state: State, metrics: dict[str, list[dict]]) -> None:
        polling = not (scenario.IMPAIRMENT <= t < scenario.POLLING_RESTORED)
        errors = 1.0 if scenario.IMPAIRMENT <= t < scenario.DYNAMODB_BACK else ERROR_SHARE
        with_total = without_total = 0
        ages = []
        ratios = []
        group_ages: dict[str, float] = {}
        for q in self.queues:
            cap = state.caps.get(q.mapping, q.original)
            before = q.backlog
            used, q.backlog = _consume(q.backlog, q.arrivals, cap, polling)
            used_without, q.backlog_without = _consume(q.backlog_without, q.arrivals, q.original, polling)
            with_total += used
            without_total += used_without
            stamp = t + timedelta(seconds=30)
            age = q.backlog / q.arrivals * 60.0
            ages.append(age)
            queue = [{"Name": "QueueName", "Value": q.queue}]
            consumed = before + q.arrivals - q.backlog
            for name, value in (("ApproximateAgeOfOldestMessage", age), ("ApproximateNumberOfMessagesVisible", q.backlog),
                                ("NumberOfMessagesSent", q.arrivals), ("NumberOfMessagesDeleted", consumed)):
                metrics["AWS/SQS"].append({"MetricName": name, "Timestamp": stamp, "Value": value, "Dimensions": queue})
            group = consumer_group(q.original)
            group_ages[group] = max(group_ages.get(group, 0.0), age)
            # Receives: what was deleted and what failed (a failed message is received and not
            # deleted); while DynamoDB is down every receive fails. Duration: a second a message.
            failed = used * PER_BATCH if errors >= 1.0 else consumed * errors / (1.0 - errors)
            received = (0.0 if errors >= 1.0 else consumed) + failed if used else 0.0
            metrics["AWS/SQS"].append({"MetricName": "NumberOfMessagesReceived", "Timestamp": stamp, "Value": received,
                                       "Dimensions": queue})
            if used:
                invocations = used * PER_BATCH / BATCH
                fn = [{"Name": "FunctionName", "Value": q.function}]
                # Every invocation of the minute took as long (its share of the minute's messages):
                # a statistic set whose Minimum equals its Maximum, so CloudWatch has its p90 too.
                duration = received * 1000.0 * SECONDS_PER_MESSAGE
                each = duration / invocations
                metrics["AWS/Lambda"].append({"MetricName": "Duration", "Timestamp": stamp, "Dimensions": fn,
                                              "StatisticValues": {"SampleCount": invocations, "Sum": duration,
                                                                  "Minimum": each, "Maximum": each}})
                if received:
                    ratios.append(duration / received / (1000.0 * SECONDS_PER_MESSAGE))
                metrics["AWS/Lambda"].append({"MetricName": "Invocations", "Timestamp": stamp, "Value": invocations,
                                              "Dimensions": fn})
                metrics["AWS/Lambda"].append({"MetricName": "Errors", "Timestamp": stamp,
                                              "Value": round(invocations * errors, 1), "Dimensions": fn})
                metrics["AWS/Lambda"].append({"MetricName": "ConcurrentExecutions", "Timestamp": stamp, "Value": used,
                                              "Dimensions": fn})
        for tally, total in ((self.actual, with_total), (self.without, without_total)):
            if total > tally.peak_concurrency:
                tally.peak_concurrency, tally.peak_at = total, t
        self.concurrency.append((t, with_total, without_total))
        self.oldest_age.append((t, sorted(ages)[len(ages) // 2] if ages else 0.0))
        self.group_age.append((t, group_ages))
        self.duration_ratio.append((t, sorted(ratios)[len(ratios) // 2] if ratios else None))

    def _replacements(self, t: datetime, state: State) -> list[dict]:
        if not scenario.HEALTH_CHECK_TERMINATIONS <= t < scenario.NETWORK_NORMAL:
            return []
        events = []
        for group in self.selected_groups + self.twin_groups + list(OTHER_GROUPS):
            if _chance("elb", group, t) >= 0.5:
                continue
            running = "ReplaceUnhealthy" not in state.suspended.get(group, frozenset())
            if group in self.selected_groups:
                self.without.instances_replaced += 1
                self.actual.instances_replaced += running
            elif running:
                zone = self.zones[int(_chance("zone", group, t) * len(self.zones))]
                instance = "i-" + hashlib.sha256(f"{group}{t}".encode()).hexdigest()[:17]
                at = t + timedelta(seconds=int(_chance("s", group, t) * 50))
                events.append(scenario.termination_event(account=self.account, region=self.region, group=group,
                                                         zone=zone, at=at, instance=instance))
        return events

    def _rebalances(self, now: datetime, state: State) -> None:
        """Score every whole hour that ended by `now` (launch outcomes are known in advance)."""
        while self.hour_done + timedelta(hours=1) <= now:
            start, end = self.hour_done, self.hour_done + timedelta(hours=1)
            self.hour_done = end
            if end <= scenario.LAUNCHES_RESUME or start >= scenario.EC2_NORMAL:
                continue
            zones: dict[str, tuple[set, set]] = {}
            for t, group, zone, ok in self.outcomes:
                if start <= t < end and group in self.selected_groups:
                    zones.setdefault(group, (set(), set()))[ok].add(zone)
            for group, (failed, launched) in zones.items():
                if failed and launched - failed:
                    self.without.zones_rebalanced += 1
                    self.actual.zones_rebalanced += "AZRebalance" not in state.suspended.get(group, frozenset())


CONSUMER_GROUPS = ("owner: no cap", "owner cap above 100", "owner cap 100 or less")


def consumer_group(owner_cap: int | None) -> str:
    """A mapping's group on the chart, by its owner's own cap before the event."""
    if owner_cap is None:
        return CONSUMER_GROUPS[0]
    return CONSUMER_GROUPS[1] if owner_cap > 100 else CONSUMER_GROUPS[2]


def _consume(backlog: float, arrivals: float, cap: int | None, polling: bool) -> tuple[int, float]:
    """One minute of one queue: (concurrent batches, backlog after)."""
    waiting = backlog + arrivals
    if not polling:
        return 0, waiting
    needed = math.ceil(waiting / PER_BATCH)
    batches = min(UNCAPPED if cap is None else cap, needed)
    return batches, max(0.0, waiting - batches * PER_BATCH)
