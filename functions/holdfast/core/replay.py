"""The replay stage: old work back at a bounded rate, once the live queues caught up. Pure.

Fresh work first, old work bounded. Messages that failed or expired during the event wait
in dead-letter queues: Holdfast's expired-events queue (Lambda's on-failure records of
async events that aged out while engaged) and owners' DLQs that opted in by tag. After
the drain, each is moved with SQS StartMessageMoveTask at MaxNumberOfMessagesPerSecond —
an owner's DLQ back to its source queue, the expired-events queue to the queue the
settings name — only once every live queue it feeds has caught up, and cancelled
(CancelMessageMoveTask) as soon as a downstream alarm of its consumers is in ALARM.

`decide(replay, seen, now, limits)` is one tick for one source. The shell (holdfast.stages
.replay) reads `Seen` — the source queue, its newest move tasks (ListMessageMoveTasks),
whether the live queues caught up, the alarms — does what the Action says, and keeps the
Replay in the ledger. The move tasks are the truth: a task this replay started is found
again by ListMessageMoveTasks after a crash between the start and the ledger write (it
started after `since`), so a tick never starts a second one (SQS would refuse it anyway:
one active task per source).

Statuses: WAITING (for the live queues, for alarms to clear), RUNNING (a task moving),
CANCELLED (by an alarm; starts again at half the rate once the alarms are OK for
`clear_seconds`), and the terminal DONE (moved, or nothing to move), SKIPPED (bad input,
with the reason: the queue is gone, it is not a DLQ of any SQS queue, no metric to tell
whether the live queue caught up, the move task failed) and GAVE_UP (`max_attempts`
starts spent). A terminal replay is never started again in the same hold: messages that
reach a DLQ after its replay finished stay there, reported, for the owner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping

WAITING, RUNNING, CANCELLED, DONE, SKIPPED, GAVE_UP = "waiting", "running", "cancelled", "done", "skipped", "gave-up"
TERMINAL = (DONE, SKIPPED, GAVE_UP)
STATUSES = (WAITING, RUNNING, CANCELLED) + TERMINAL

NOTHING, START, CANCEL = "nothing", "start", "cancel"

EXPIRED, DLQ = "expired-events", "dead-letter queue"

# SQS move-task statuses (ListMessageMoveTasks).
TASK_RUNNING, TASK_COMPLETED, TASK_CANCELLING, TASK_CANCELLED, TASK_FAILED = (
    "RUNNING", "COMPLETED", "CANCELLING", "CANCELLED", "FAILED")
MAX_RATE = 500   # MaxNumberOfMessagesPerSecond's maximum
AWS_MANAGED_SQS_KEY = "alias/aws/sqs"
KEY_TAG = ("holdfast:replay", "true")


@dataclass(frozen=True)
class Limits:
    rate: int                    # MaxNumberOfMessagesPerSecond of a first start
    max_attempts: int            # starts before giving up
    clear_seconds: float = 600.0  # alarms OK this long after a cancel before starting again

    def __post_init__(self):
        if not (isinstance(self.rate, int) and 1 <= self.rate <= MAX_RATE):
            raise ValueError(f"replay rate {self.rate!r} must be an integer from 1 to {MAX_RATE}")
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise ValueError(f"replay max_attempts {self.max_attempts!r} must be an integer ≥ 1")


@dataclass(frozen=True)
class Task:
    """One move task as ListMessageMoveTasks shows it."""

    status: str
    started: datetime
    moved: int = 0
    to_move: int | None = None
    handle: str | None = None      # only while RUNNING
    failure: str | None = None


@dataclass(frozen=True)
class Seen:
    """What the shell read this tick about one source."""

    exists: bool                          # the source queue is there
    visible: int | None = None            # its ApproximateNumberOfMessages
    redrive_sources: tuple[str, ...] | None = None   # queues whose RedrivePolicy names it (None: not read)
    tasks: tuple[Task, ...] = ()          # newest first
    caught_up: bool | None = None         # every live queue it feeds caught up; None: cannot tell
    caught_up_reason: str = ""
    alarming: tuple[str, ...] = ()        # downstream alarms of its consumers in ALARM
    problem: str | None = None            # bad input the shell found (e.g. no destination configured)
    kms_keys: tuple[str, ...] = ()        # customer-managed KMS keys of the source and its destinations


@dataclass(frozen=True)
class Replay:
    """One source's replay, carried between ticks."""

    source_arn: str
    kind: str                             # EXPIRED or DLQ
    since: datetime                       # the hold it belongs to
    destination_arn: str | None = None    # None: back to the source queues of the DLQ
    status: str = WAITING
    attempts: int = 0
    rate: int | None = None               # the rate of the newest start
    handle: str | None = None
    task_started: datetime | None = None  # StartedTimestamp of the newest task of this replay
    moved: int = 0                        # messages moved by this replay's tasks
    to_move: int | None = None
    cancelled_at: datetime | None = None
    reason: str = ""
    history: tuple[str, ...] = field(default=())   # one line per start, cancel and end

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"replay status {self.status!r} is not one of {STATUSES}")
        if self.kind not in (EXPIRED, DLQ):
            raise ValueError(f"replay kind {self.kind!r} is not {EXPIRED!r} or {DLQ!r}")

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        iso = lambda t: None if t is None else t.isoformat()
        return {
            "source_arn": self.source_arn, "kind": self.kind, "since": self.since.isoformat(),
            "destination_arn": self.destination_arn, "status": self.status, "attempts": self.attempts,
            "rate": self.rate, "handle": self.handle, "task_started": iso(self.task_started), "moved": self.moved,
            "to_move": self.to_move, "cancelled_at": iso(self.cancelled_at), "reason": self.reason,
            "history": list(self.history),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Replay":
        when = lambda v: None if v is None else datetime.fromisoformat(v)
        try:
            return cls(
                source_arn=raw["source_arn"], kind=raw["kind"], since=datetime.fromisoformat(raw["since"]),
                destination_arn=raw.get("destination_arn"), status=raw.get("status", WAITING),
                attempts=int(raw.get("attempts", 0)), rate=raw.get("rate"), handle=raw.get("handle"),
                task_started=when(raw.get("task_started")), moved=int(raw.get("moved", 0)), to_move=raw.get("to_move"),
                cancelled_at=when(raw.get("cancelled_at")), reason=str(raw.get("reason", "")),
                history=tuple(raw.get("history", ())),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"replay record is malformed: {err}") from err


@dataclass(frozen=True)
class Action:
    """What the shell does for one source this tick, and the replay to keep after it."""

    action: str                  # NOTHING, START or CANCEL
    replay: Replay
    rate: int | None = None      # START: MaxNumberOfMessagesPerSecond
    handle: str | None = None    # CANCEL: the task

    @property
    def reason(self) -> str:
        return self.replay.reason


def _stamp(now: datetime) -> str:
    return now.strftime("%H:%M")


def decide(r: Replay, seen: Seen, now: datetime, limits: Limits) -> Action:
    def keep(status: str, reason: str, *, action: str = NOTHING, note: str | None = None, **changes) -> Action:
        history = r.history + ((f"{_stamp(now)} {note}",) if note else ())
        new = replace(r, status=status, reason=reason, history=history, **changes)
        return Action(action, new, rate=new.rate if action == START else None,
                      handle=changes.get("handle", r.handle) if action == CANCEL else None)

    if r.finished:
        return Action(NOTHING, r)
    if not seen.exists:
        return keep(SKIPPED, f"the queue {r.source_arn} does not exist (deleted?): nothing replayed", note="source gone")

    ours = [t for t in seen.tasks if t.started >= r.since]
    running = next((t for t in ours if t.status == TASK_RUNNING), None)
    moved = r.moved
    if running is not None:
        progress = dict(handle=running.handle, task_started=running.started, to_move=running.to_move)
        if seen.alarming:
            names = ", ".join(seen.alarming)
            return keep(CANCELLED, f"{names} in ALARM: move task cancelled after {running.moved:,} messages; "
                                   f"starts again at half the rate once the alarms are OK",
                        action=CANCEL, note=f"cancelled ({names} in ALARM)", cancelled_at=now,
                        moved=r.moved + running.moved, **progress)
        left = "" if running.to_move is None else f" of {running.to_move:,}"
        return keep(RUNNING, f"moving at {r.rate or '?'}/s: {running.moved:,}{left} moved", **progress)

    newest = ours[0] if ours else None
    # A task of this replay not accounted for yet: one it started in a tick that crashed
    # before writing it down (this replay is WAITING), or the one it watched (RUNNING).
    unaccounted = newest is not None and (r.task_started is None or newest.started > r.task_started)
    if r.status == RUNNING or unaccounted:
        # The task this replay watched is no longer running: it completed, failed, or someone cancelled it.
        if newest is None:
            return keep(WAITING, "the move task is gone from ListMessageMoveTasks: starting again", handle=None)
        moved = r.moved + newest.moved
        if newest.status == TASK_COMPLETED:
            left = "" if not seen.visible else f"; {seen.visible:,} arrived in it since, left for the owner"
            return keep(DONE, f"replayed: {moved:,} messages moved{left}", note="completed", moved=moved, handle=None)
        if newest.status == TASK_FAILED:
            return keep(SKIPPED, f"the move task failed ({newest.failure or 'no reason given'}) after {moved:,} messages; "
                                 f"the rest stay in the queue{key_needs(r.source_arn, seen.kms_keys)}",
                        note="failed", moved=moved, handle=None)
        return keep(CANCELLED, f"the move task was cancelled ({newest.status}) after {moved:,} messages",
                    note="cancelled by someone else", moved=moved, handle=None, cancelled_at=now,
                    task_started=newest.started)

    if seen.visible == 0:
        if r.attempts:
            return keep(DONE, f"replayed: {moved:,} messages moved; the queue is empty", note="empty")
        return keep(DONE, "nothing to replay: the queue is empty", note="empty")
    if seen.problem:
        return keep(SKIPPED, seen.problem, note="skipped")
    if r.kind == DLQ and seen.redrive_sources is not None and not seen.redrive_sources:
        return keep(SKIPPED, "not a dead-letter queue of any SQS queue (no queue's RedrivePolicy names it): "
                             "StartMessageMoveTask moves only from those; nothing replayed", note="skipped")
    if seen.caught_up is None:
        return keep(SKIPPED, f"cannot tell whether the live queue caught up ({seen.caught_up_reason or 'no metric'}): "
                             f"not replayed, the {seen.visible if seen.visible is not None else 'unknown number of'} "
                             f"messages stay in the queue", note="skipped")
    if seen.alarming:
        return keep(r.status if r.status == CANCELLED else WAITING,
                    f"waiting: {', '.join(seen.alarming)} in ALARM", cancelled_at=now if r.status == CANCELLED else r.cancelled_at)
    if not seen.caught_up:
        return keep(WAITING, f"waiting for the live queue to catch up: {seen.caught_up_reason}")
    if r.status == CANCELLED and r.cancelled_at is not None and (now - r.cancelled_at) < timedelta(seconds=limits.clear_seconds):
        left = limits.clear_seconds - (now - r.cancelled_at).total_seconds()
        return keep(CANCELLED, f"alarms OK again; starting again in {left / 60:.0f} min at half the rate")
    if r.attempts >= limits.max_attempts:
        return keep(GAVE_UP, f"gave up after {r.attempts} starts ({moved:,} messages moved); "
                             f"{seen.visible if seen.visible is not None else 'the'} messages stay in the queue for the owner",
                    note="gave up")
    rate = limits.rate if r.rate is None else max(1, r.rate // 2 if r.status == CANCELLED else r.rate)
    count = "" if seen.visible is None else f" {seen.visible:,} messages"
    where = "their source queue" if r.destination_arn is None else r.destination_arn
    return keep(RUNNING, f"starting to move{count} to {where} at {rate}/s{key_needs(r.source_arn, seen.kms_keys)}",
                action=START, rate=rate,
                attempts=r.attempts + 1, note=f"started at {rate}/s", handle=None)


def key_policy_statement(source_arn: str) -> dict[str, Any]:
    """The key-policy statement that lets the account's IAM policies (Holdfast's reconciler
    role among them) use a key through SQS in the source's region: the key policy decides
    first, and a key whose policy does not delegate to IAM ignores the role's grant (AWS
    KMS Developer Guide, "Key policies"; "kms:ViaService")."""
    partition, region, account = source_arn.split(":")[1], source_arn.split(":")[3], source_arn.split(":")[4]
    return {
        "Sid": "HoldfastReplayThroughSqs",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": "*",
        "Condition": {"StringEquals": {"kms:ViaService": f"sqs.{region}.amazonaws.com", "kms:CallerAccount": account}},
    }


def key_needs(source_arn: str, keys: tuple[str, ...]) -> str:
    """What a move through customer-managed KMS keys needs, for the reason an operator
    reads. A move task reads the source and sends to the destination with the caller's
    permissions: kms:Decrypt on the source's key, kms:GenerateDataKey on the
    destination's (SQS Developer Guide, dead-letter queue redrive). Holdfast's role may
    use, through SQS, the keys tagged holdfast:replay=true (policies/reconciler.json)."""
    if not keys:
        return ""
    statement = json.dumps(key_policy_statement(source_arn), separators=(",", ":"))
    return (f"; the move uses the KMS key(s) {', '.join(keys)}: each needs the tag {KEY_TAG[0]}={KEY_TAG[1]} "
            f"and, in its key policy, {statement}")


def started(a: Action, handle: str, now: datetime) -> Replay:
    """The replay once StartMessageMoveTask answered with `handle`."""
    return replace(a.replay, handle=handle, task_started=now)


def opted_out(a: Action, why: str, now: datetime) -> Replay:
    """The replay once a queue's own tags, read just before the start, show the opt-in
    gone (the tagging index that listed it lags): it ends, nothing moved."""
    return replace(a.replay, status=SKIPPED, reason=f"{why}; nothing replayed",
                   history=a.replay.history + (f"{_stamp(now)} opted out",))


def start_refused(a: Action, error: str, now: datetime, *, already_running: bool) -> Replay:
    """The replay once StartMessageMoveTask refused. A task already running (someone's, or
    ours from a crashed tick) is adopted next tick; any other refusal ends the replay."""
    r = a.replay
    if already_running:
        return replace(r, status=WAITING, attempts=max(0, r.attempts - 1),
                       reason=f"a move task is already running on the queue: watching it next tick ({error})")
    return replace(r, status=SKIPPED, reason=f"StartMessageMoveTask refused: {error}; nothing replayed",
                   history=r.history + (f"{_stamp(now)} refused",))
