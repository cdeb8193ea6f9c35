"""The shape every actuator shares: write-ahead engage and decided restore.

A kind supplies the AWS side as hooks — `candidates` (bulk listing), `read` (the
per-resource reads), `get`, `posture` (pure),
`_write` (move the resource to given values), `_tag` / `_untag` (the record on the
resource) — and, for partial relaxes, `partial`. This class supplies the order of
operations that the invariants depend on:

engage:  tag (write-ahead) -> ledger (tolerated if unreachable) -> resource
         A tag that cannot be written stops the resource from being changed.
restore: guard, resource -> guard, untag -> guard, forget the ledger record
         Each step only after the one before succeeded, so a crash anywhere leaves a
         record from which the next run finishes the job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_code, error_text
from holdfast.core import restore
from holdfast.core.errors import Vanished
from holdfast.core.kinds import Kind
from holdfast.iam import uses
from holdfast.ratelimit import TokenBucket
from holdfast.core.tags import RECORD_KEYS, TagError, read_record, record_tags
from holdfast.core.model import (
    ALREADY,
    DRIFT_KEPT,
    ENGAGED,
    FAILED,
    PLANNED,
    RAISED,
    REFUSED_STALE,
    RESTORED,
    VANISHED,
    Candidate,
    Guard,
    Outcome,
    Record,
    Resource,
    StalePlan,
)


def make_resource(kind: str, arn: str, name: str, current: Mapping[str, Any], tags: Mapping[str, str],
                  ref: Mapping[str, Any] | None = None) -> Resource:
    """A Resource whose record is decoded from its tags (a garbled tag counts as none)."""
    try:
        found = read_record(tags)
    except TagError:
        found = None
    record = Record(kind, arn, *found) if found else None
    return Resource(kind, arn, name, dict(current), record, dict(ref or {}))


class TaggedActuator(ABC):
    """Engage and relax for a kind whose write-ahead record is a pair of tags."""

    spec: ClassVar[Kind]                          # the kind this actuator serves (core.kinds)
    kind: ClassVar[str] = ""                      # spec.name
    service = ""                                  # the boto3 service `_call` writes through
    not_found: tuple[str, ...] = ("ResourceNotFoundException",)
    lambda_limited = False                        # writes pass the shared Lambda token bucket

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "spec" in cls.__dict__:
            cls.kind = cls.spec.name

    def __init__(self, clients, settings, ledger, *, lambda_bucket: TokenBucket | None = None,
                 expired_queue_arn: str | None = None):
        self.clients = clients
        self.settings = settings
        self.ledger = ledger
        self.lambda_bucket = lambda_bucket
        self.expired_queue_arn = expired_queue_arn

    # ---- hooks a kind provides -------------------------------------------------------

    @abstractmethod
    def candidates(self) -> list[Candidate]:
        ...

    @abstractmethod
    def read(self, candidate: Candidate) -> Resource | None:
        ...

    def discover(self) -> list[Resource]:
        return [r for c in self.candidates() if (r := self.read(c)) is not None]

    @abstractmethod
    def get(self, arn: str) -> Resource | None:
        ...

    @abstractmethod
    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        ...

    def partial(self, record: Record, current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
        raise ValueError(f"{self.kind} has no partial relax; use a full restore (target None)")

    @abstractmethod
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        ...

    @abstractmethod
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        ...

    @abstractmethod
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        ...

    # ---- the shared walk -------------------------------------------------------------

    def plan(self, resource: Resource) -> Outcome:
        """What engage would change, without writing."""
        changes = self.posture(resource.current)
        return Outcome(self.kind, resource.arn, PLANNED if changes else ALREADY, changes=self._changes(resource, changes))

    def engage(self, resource: Resource) -> Outcome:
        record = resource.record
        changes = self.posture(resource.current)
        owner_changed: dict[str, Any] = {}
        if record is not None:
            # A value the owner changed while engaged is theirs (invariant 2): re-engaging,
            # like restoring, leaves it alone and reports it.
            owner_changed = restore.drift(restore.decide(record.original, record.applied, resource.current))
            changes = {k: v for k, v in changes.items() if k not in owner_changed}
        if not changes:
            outcome = Outcome(self.kind, resource.arn, ALREADY, drift=owner_changed)
            if record is not None and not self.ledger.holds(resource.arn):
                # Engaged while the ledger was unreachable: the original is on the tag only.
                # Put the ledger's copy back (conditional: an existing record stays).
                outcome.ledger_written = self.ledger.put_original(record, resource.name)
            return outcome
        original = dict(record.original) if record else {}
        applied = dict(record.applied) if record else {}
        for key, value in changes.items():
            current = resource.current.get(key)
            if key not in original:
                original[key] = current
                applied[key] = value
            elif current in restore.holdfast_values(applied[key]) and current != value:
                # Re-engaging over a raised cap: both values stay Holdfast's until the write lands.
                applied[key] = [current, value]
            else:
                applied[key] = value
        new = Record(self.kind, resource.arn, original, applied)
        outcome = Outcome(self.kind, resource.arn, ENGAGED, changes=self._changes(resource, changes), drift=owner_changed)
        try:
            if record is None or (record.original, record.applied) != (original, applied):
                self._tag(resource, record_tags(original, applied))
            # Always, not only with a new tag: a crash between the tag and the ledger leaves
            # the tag alone, and the put is conditional, so an existing record stays.
            outcome.ledger_written = self.ledger.put_original(new, resource.name)
            self._write(resource, changes, restoring=False)
        except Vanished:
            return Outcome(self.kind, resource.arn, VANISHED)
        except TagError as err:
            return Outcome(self.kind, resource.arn, FAILED, error=f"write-ahead record: {err}")
        except (ClientError, BotoCoreError) as err:
            outcome.action, outcome.error = FAILED, error_text(err)
        return outcome

    def relax(self, resource: Resource, target: Mapping[str, Any] | None, guard: Guard) -> Outcome:
        record = resource.record or self.ledger.get(resource.arn)
        if record is None:
            return Outcome(self.kind, resource.arn, ALREADY)
        try:
            if target is not None:
                return self._raise(resource, record, target, guard)
            return self._restore(resource, record, guard)
        except StalePlan as err:
            return Outcome(self.kind, resource.arn, REFUSED_STALE, error=str(err) or None)
        except Vanished:
            return self.forget_vanished(resource.arn, guard)
        except (ClientError, BotoCoreError) as err:
            return Outcome(self.kind, resource.arn, FAILED, error=error_text(err))

    def forget_vanished(self, arn: str, guard: Guard) -> Outcome:
        try:
            guard()
        except StalePlan as err:
            return Outcome(self.kind, arn, REFUSED_STALE, error=str(err) or None)
        return Outcome(self.kind, arn, VANISHED, ledger_written=self.ledger.forget(arn))

    def _raise(self, resource: Resource, record: Record, target: Mapping[str, Any], guard: Guard) -> Outcome:
        values = self.partial(record, resource.current, target)
        if not values:
            return Outcome(self.kind, resource.arn, ALREADY)
        applied = dict(record.applied)
        for key, value in values.items():
            # Both the cap in force and the one being written are Holdfast's while the write
            # is in flight: a crash between the two writes must not look like owner drift.
            applied[key] = [resource.current.get(key), value]
        guard()
        self._tag(resource, record_tags(record.original, applied))
        guard()
        self._write(resource, values, restoring=True)
        return Outcome(self.kind, resource.arn, RAISED, changes=self._changes(resource, values))

    def _restore(self, resource: Resource, record: Record, guard: Guard) -> Outcome:
        decisions = restore.decide(record.original, record.applied, resource.current)
        values = restore.writes(decisions)
        if values:
            guard()
            self._write(resource, values, restoring=True)
        if resource.record is not None:
            guard()
            self._untag(resource, list(RECORD_KEYS))
        guard()
        forgotten = self.ledger.forget(resource.arn)
        drift = restore.drift(decisions)
        return Outcome(
            self.kind,
            resource.arn,
            DRIFT_KEPT if drift else RESTORED,
            changes=self._changes(resource, values),
            drift=drift,
            ledger_written=forgotten,
        )

    def _changes(self, resource: Resource, values: Mapping[str, Any]) -> dict[str, Any]:
        return {k: {"from": resource.current.get(k), "to": v} for k, v in values.items()}

    def _call(self, operation: str, **kwargs: Any) -> Any:
        """One write through `service`; a missing resource raises Vanished."""
        if self.lambda_limited and self.lambda_bucket is not None:
            self.lambda_bucket.take()
        try:
            return getattr(self.clients(self.service), operation)(**kwargs)
        except ClientError as err:
            if error_code(err) in self.not_found:
                raise Vanished() from err
            raise


class LambdaTagged:
    """Write-ahead tags on a Lambda resource (a function, or an event source mapping by its
    own ARN: mappings do not inherit their function's tags)."""

    @uses("lambda:TagResource", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        self._call("tag_resource", Resource=resource.arn, Tags=dict(tags))

    @uses("lambda:UntagResource", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._call("untag_resource", Resource=resource.arn, TagKeys=keys)
