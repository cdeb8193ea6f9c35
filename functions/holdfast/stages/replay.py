"""The replay stage, one tick: old work moved back at a bounded rate (holdfast.core.replay).

    done = step(runtime, plan, now, guard=guard)

Sources, found each tick:
- Holdfast's expired-events queue (`runtime.expired_queue_arn`), moved to the queue named
  by `replay_expired_events_to` (nothing set: reported, not replayed);
- owners' dead-letter queues that opted in with the tag `holdfast:replay=true`
  (Resource Groups Tagging API, one bulk listing), moved back to their source queues.
  A tagged queue that is itself the redrive source of a tagged DLQ is a destination, not
  a source. Every destination must carry the tag too: the reconciler's IAM policy lets it
  send only to such queues (policies/README.md), and a destination without it is reported.

Per source: GetQueueUrl, GetQueueAttributes (visible messages), ListDeadLetterSourceQueues
(its redrive sources), ListMessageMoveTasks (the newest 10), the live queues' ages
(GetMetricData; an empty queue with no datapoint counts as caught up), and the alarms of
the live queues' consumers (the drain's records of this hold, and the settings by queue
name). Then the pure decision, and:

- START: the guard (a start adds load: it is relaxing, so it needs the current plan), the opt-in confirmed
  on the queues' own tags (ListQueueTags on the source DLQ and each destination: the
  tagging index that found them lags, and may still list a queue whose owner just removed
  `holdfast:replay`; a queue without it ends the replay, reported, nothing moved), then
  StartMessageMoveTask with MaxNumberOfMessagesPerSecond, then the record. A crash between the two leaves a
  task that ListMessageMoveTasks shows the next tick, which adopts it.
- CANCEL: CancelMessageMoveTask (protective: no guard), then the record.
Every record write is conditional on the plan generation (holdfast.ledger.drain).

AWS facts (SQS API Reference, StartMessageMoveTask): only DLQs of other SQS queues are
accepted as a source (a Lambda destination like the expired-events queue needs an SQS
queue whose RedrivePolicy names it); one active task per source; at most 500 messages a
second; a task runs at most 36 hours. Permissions: StartMessageMoveTask, ReceiveMessage,
DeleteMessage and GetQueueAttributes on the source, SendMessage on the destination.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_code, error_text, http_status
from holdfast.core import drain as dc
from holdfast.core import policy
from holdfast.core import replay as rp
from holdfast.core.errors import Conflict
from holdfast.core.model import PLANNED, Guard, Outcome
from holdfast.iam import uses
from holdfast.ledger import Ledger
from holdfast.ledger import drain as records
from holdfast.observation import drain_inputs
from holdfast.stages.drain import current_records, hold_started

logger = logging.getLogger(__name__)

TAG = "holdfast:replay"
TAG_VALUE = "true"
KIND = "replay"
MISSING_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException")
# StartMessageMoveTask refusals that end a replay with a clear outcome; anything else
# (throttling, a server error, no answer) is tried again next tick.
FINAL_REFUSALS = MISSING_QUEUE + ("InvalidParameterValue", "UnsupportedOperation", "AccessDenied",
                                  "AccessDeniedException", "InvalidAddress")
ALREADY_RUNNING = "already a task running"


@dataclass
class Replayed:
    outcomes: list[Outcome] = field(default_factory=list)
    replays: dict[str, rp.Replay] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return all(r.finished for r in self.replays.values())

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.replays.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out


def limits(settings) -> rp.Limits:
    return rp.Limits(rate=settings.replay_messages_per_second, max_attempts=settings.replay_max_attempts,
                     clear_seconds=60.0 * settings.hold_minutes)


def _arn_from_url(url: str, like_arn: str) -> str:
    """https://sqs.REGION.amazonaws.com/ACCOUNT/NAME -> the queue's ARN (partition and region of `like_arn`)."""
    parts = like_arn.split(":")
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:{parts[1]}:sqs:{parts[3]}:{account}:{name}"


@uses("tag:GetResources", by=("reconciler",))
def tagged_queues(clients) -> set[str]:
    """Every SQS queue carrying holdfast:replay=true."""
    pages = clients("resourcegroupstaggingapi").get_paginator("get_resources").paginate(
        ResourceTypeFilters=["sqs"], TagFilters=[{"Key": TAG, "Values": [TAG_VALUE]}])
    return {m["ResourceARN"] for page in pages for m in page["ResourceTagMappingList"]}


@dataclass
class _Queue:
    arn: str
    url: str | None = None
    exists: bool = True
    visible: int | None = None
    redrive_target: str | None = None          # its RedrivePolicy's DLQ
    kms_key: str | None = None                 # its customer-managed KMS key (KmsMasterKeyId), if any
    sources: tuple[str, ...] | None = None     # queues whose RedrivePolicy names it
    error: str | None = None
    refused: bool = False                      # the error is an answer (4xx), not an outage: it will not pass


@uses("sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ListDeadLetterSourceQueues", by=("reconciler",))
def read_queue(clients, arn: str, *, sources: bool) -> _Queue:
    sqs = clients("sqs")
    parts = arn.split(":")
    q = _Queue(arn)
    try:
        q.url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=q.url, AttributeNames=[
            "ApproximateNumberOfMessages", "RedrivePolicy", "KmsMasterKeyId"])["Attributes"]
        q.visible = int(attrs.get("ApproximateNumberOfMessages", 0))
        # SSE-SQS has no key; alias/aws/sqs is the AWS managed key, whose key policy lets
        # any principal of the account use it through SQS: neither needs a grant.
        if attrs.get("KmsMasterKeyId") and attrs["KmsMasterKeyId"] != rp.AWS_MANAGED_SQS_KEY:
            q.kms_key = attrs["KmsMasterKeyId"]
        if attrs.get("RedrivePolicy"):
            try:
                q.redrive_target = json.loads(attrs["RedrivePolicy"]).get("deadLetterTargetArn")
            except ValueError:
                q.redrive_target = None
        if sources:
            urls = [u for page in sqs.get_paginator("list_dead_letter_source_queues").paginate(QueueUrl=q.url)
                    for u in page.get("queueUrls", [])]
            q.sources = tuple(sorted(_arn_from_url(u, arn) for u in urls))
    except (ClientError, BotoCoreError) as err:
        if error_code(err) in MISSING_QUEUE:
            q.exists = False
        else:
            q.error, q.refused = error_text(err), refused(err)
    return q


def refused(err: Exception) -> bool:
    """An AWS answer that says no (a 4xx other than throttling): trying next tick gives the
    same answer, so the replay ends with it instead of waiting for ever."""
    if not isinstance(err, ClientError):
        return False
    status = http_status(err)
    return 400 <= status < 500 and status != 429 and "Throttl" not in (error_code(err) or "")


@uses("sqs:GetQueueUrl", "sqs:ListQueueTags", by=("reconciler",))
def not_opted_in(clients, arns) -> list[str]:
    """Those of `arns` whose own tags (ListQueueTags, current where the tagging index lags)
    lack holdfast:replay=true; a queue gone counts as lacking it."""
    sqs = clients("sqs")
    out = []
    for arn in arns:
        parts = arn.split(":")
        try:
            url = sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
            tags = sqs.list_queue_tags(QueueUrl=url).get("Tags") or {}
        except ClientError as err:
            if error_code(err) not in MISSING_QUEUE:
                raise
            tags = {}
        if tags.get(TAG) != TAG_VALUE:
            out.append(arn)
    return out


@uses("sqs:ListMessageMoveTasks", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", by=("reconciler",))
def move_tasks(clients, source_arn: str) -> tuple[rp.Task, ...]:
    """The newest move tasks of a source, newest first (ListMessageMoveTasks' order)."""
    results = clients("sqs").list_message_move_tasks(SourceArn=source_arn, MaxResults=10).get("Results", [])
    out = []
    for t in results:
        started = datetime.fromtimestamp(int(t["StartedTimestamp"]) / 1000, tz=timezone.utc)
        out.append(rp.Task(t["Status"], started, int(t.get("ApproximateNumberOfMessagesMoved", 0)),
                           t.get("ApproximateNumberOfMessagesToMove"), t.get("TaskHandle"), t.get("FailureReason")))
    return tuple(sorted(out, key=lambda x: x.started, reverse=True))


@uses("sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
      "sqs:SendMessage", "kms:Decrypt", "kms:GenerateDataKey", by=("reconciler",))
def start_move(clients, source_arn: str, destination_arn: str | None, rate: int) -> str:
    kwargs: dict[str, Any] = {"SourceArn": source_arn, "MaxNumberOfMessagesPerSecond": rate}
    if destination_arn is not None:
        kwargs["DestinationArn"] = destination_arn
    return clients("sqs").start_message_move_task(**kwargs)["TaskHandle"]


@uses("sqs:CancelMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", by=("reconciler",))
def cancel_move(clients, handle: str) -> None:
    clients("sqs").cancel_message_move_task(TaskHandle=handle)


def step(runtime, plan: policy.Plan, now: datetime, *, guard: Guard, dry_run: bool = False,
         ledger: Ledger | None = None) -> Replayed:
    """One tick of every replay source. Raises StalePlan and LedgerUnavailable; an AWS
    error on the bulk listing propagates (the reconciler logs it and tries next tick).
    `ledger`: the tick's, whose one read of the drain's records the drain stage shares
    (a ledger of its own without one)."""
    clients, settings = runtime.clients, runtime.settings
    ledger = ledger or runtime.ledger()
    since = hold_started(plan)
    out = Replayed()
    tagged = tagged_queues(clients)
    every = records.read_all(ledger, records.REPLAY)

    # Sources and where each goes.
    sources: dict[str, tuple[str, str | None]] = {}
    if runtime.expired_queue_arn:
        sources[runtime.expired_queue_arn] = (rp.EXPIRED, settings.replay_expired_events_to)
    queues = {arn: read_queue(clients, arn, sources=True) for arn in sorted(tagged)}
    for arn, q in queues.items():
        if arn in sources:
            continue
        if q.redrive_target in tagged and not q.sources:
            continue   # the source queue of a tagged DLQ: a destination, tagged so Holdfast may send to it
        sources[arn] = (rp.DLQ, None)

    drains = current_records(ledger, plan)
    consumers = [drain_inputs.Consumer.from_dict(i.doc["consumer"]) for i in drains.values() if "consumer" in i.doc]
    lim = limits(settings)
    seen_by_source: dict[str, rp.Seen] = {}
    live_by_source: dict[str, tuple[str, ...]] = {}
    for arn, (kind, destination) in sources.items():
        q = queues.get(arn) or read_queue(clients, arn, sources=True)
        problem = None
        if kind == rp.EXPIRED:
            live = (destination,) if destination else ()
            if destination is None:
                problem = ("no destination: set replay_expired_events_to to a queue (tagged holdfast:replay=true) to "
                           "replay the expired events; they stay in the expired-events queue (14 days)")
            elif destination not in tagged:
                problem = f"the destination {destination} lacks the tag {TAG}={TAG_VALUE}: Holdfast may not send to it"
        else:
            live = q.sources or ()
            untagged = [s for s in live if s not in tagged]
            if untagged:
                problem = (f"its source queue(s) {', '.join(untagged)} lack the tag {TAG}={TAG_VALUE}: Holdfast may "
                           f"send only to tagged queues, so it cannot move messages back")
        if q.error is not None:
            if not q.refused:
                logger.warning("replay source %s unreadable this tick: %s", arn, q.error)
                continue
            problem = f"the queue cannot be read ({q.error}): nothing replayed"
        live_by_source[arn] = live
        tasks = ()
        if q.exists and q.error is None:
            try:
                tasks = move_tasks(clients, arn)
            except (ClientError, BotoCoreError) as err:
                if error_code(err) in MISSING_QUEUE:
                    q.exists = False
                elif refused(err):
                    problem = f"ListMessageMoveTasks refused ({error_text(err)}): nothing replayed"
                else:
                    logger.warning("move tasks of %s unreadable this tick: %s", arn, error_text(err))
                    continue
        keys = tuple(dict.fromkeys(k for k in [q.kms_key] + [queues[d].kms_key for d in live if d in queues] if k))
        seen_by_source[arn] = rp.Seen(exists=q.exists, visible=q.visible, redrive_sources=q.sources if kind == rp.DLQ else None,
                                      tasks=tasks, problem=problem, kms_keys=keys)

    # The live queues: caught up, and their consumers' alarms.
    live_all = sorted({lq for lqs in live_by_source.values() for lq in lqs if lq})
    constants = dc.constants_from(settings)
    ages = drain_inputs.queue_ages(clients, live_all, now, since=since, pre_event_minutes=settings.drain_pre_event_minutes,
                                   stale_seconds=constants.stale_seconds) if live_all else {}
    names_for: dict[str, set[str]] = {lq: set() for lq in live_all}
    for lq in live_all:
        names_for[lq].update(settings.drain_downstream_alarms.get(drain_inputs.EVERY, ()))
        names_for[lq].update(settings.drain_downstream_alarms.get(lq.rsplit(":", 1)[-1], ()))
        for c in consumers:
            if c.queue_arn == lq:
                names_for[lq].update(c.alarms)
    infos = drain_inputs.describe(clients, {n for ns in names_for.values() for n in ns})
    alarming_names = {n for n, info in infos.items() if info.state == dc.ALARM}

    for arn, seen in seen_by_source.items():
        kind, destination = sources[arn]
        caught, why = _caught_up(clients, live_by_source[arn], ages, constants)
        alarming = tuple(sorted(n for lq in live_by_source[arn] for n in names_for.get(lq, ()) if n in alarming_names))
        seen = rp.Seen(seen.exists, seen.visible, seen.redrive_sources, seen.tasks, caught, why, alarming, seen.problem,
                       seen.kms_keys)
        item = every.get(arn)
        replay = None
        if item is not None:
            try:
                replay = rp.Replay.from_dict(item.doc["replay"])
            except (KeyError, ValueError):
                replay = None
        if replay is None or replay.since != since:
            replay = rp.Replay(arn, kind, since, destination_arn=destination)
        action = rp.decide(replay, seen, now, lim)
        new = action.replay
        if dry_run:
            out.replays[arn] = new
            out.outcomes.append(Outcome(KIND, arn, PLANNED, changes={"replay": {"to": action.action, "why": new.reason}}))
            continue
        if action.action == rp.START:
            guard()
            try:
                confirm = ([arn] if kind == rp.DLQ else []) + [lq for lq in live_by_source[arn] if lq]
                lacking = not_opted_in(clients, confirm)
                if lacking:
                    new = rp.opted_out(action, f"{', '.join(lacking)} no longer tagged {TAG}={TAG_VALUE} (its own tags, "
                                               "read just before the move; the tagging index still listed it)", now)
                else:
                    handle = start_move(clients, arn, new.destination_arn, action.rate)
                    new = rp.started(action, handle, now)
            except (ClientError, BotoCoreError) as err:
                code, text = error_code(err), error_text(err)
                if code in FINAL_REFUSALS or ALREADY_RUNNING in text:
                    new = rp.start_refused(action, text, now, already_running=ALREADY_RUNNING in text)
                else:
                    logger.warning("StartMessageMoveTask on %s failed this tick: %s", arn, text)
                    continue   # transient: nothing started, nothing recorded; the next tick decides again
        elif action.action == rp.CANCEL:
            try:
                cancel_move(clients, action.handle)
            except (ClientError, BotoCoreError) as err:
                # It finished or was cancelled meanwhile: the next tick reads what it became.
                logger.warning("CancelMessageMoveTask on %s: %s", arn, error_text(err))
        if action.action != rp.NOTHING or new != replay or item is None:
            try:
                records.write(ledger, records.REPLAY, arn, {"replay": new.to_dict()}, generation=plan.generation,
                              read_version=0 if item is None else item.version, controller_id=runtime.controller_id,
                              now=now)
            except Conflict as err:
                logger.info("replay record of %s: %s; acting next tick", arn, err)
        out.replays[arn] = new
        out.outcomes.append(Outcome(KIND, arn, f"replay-{new.status}",
                                    changes={"replay": {"action": action.action, "why": new.reason}}))
    # A source that could not be read this tick is not finished.
    for arn in sources:
        if arn not in out.replays:
            out.replays[arn] = rp.Replay(arn, sources[arn][0], since, status=rp.WAITING, reason="unreadable this tick")
    return out


def _caught_up(clients, live: tuple[str, ...], ages, constants: dc.Constants) -> tuple[bool | None, str]:
    """Whether every live queue's oldest message is back within the slack of its pre-event
    age. An age missing from CloudWatch counts as caught up only for an empty queue."""
    if not live:
        return True, "no live queue"
    behind = []
    for lq in live:
        point, baseline = ages.get(lq, (None, None))
        limit = (baseline or 0.0) + constants.caught_up_slack_seconds
        if point is None:
            q = read_queue(clients, lq, sources=False)
            if not q.exists:
                return None, f"the live queue {lq} does not exist"
            if q.visible == 0:
                continue
            return None, f"no ApproximateAgeOfOldestMessage datapoint for {lq} ({q.visible} messages visible)"
        if point.value > limit:
            behind.append(f"{lq.rsplit(':', 1)[-1]}: oldest message {point.value:g} s old, baseline {limit:g} s")
    if behind:
        return False, "; ".join(behind)
    return True, "every live queue at its baseline age"
