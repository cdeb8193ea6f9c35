"""Per-resource original records in the ledger: pk `RES`, sk `<arn>`.

One partition, so every record is one paginated Query, never a Scan of the whole table
(signals included). Holdfast writes these at most at the Lambda write rate, far inside
one partition's throughput.

The ledger is the second copy of a write-ahead record; the first is the tag on the
resource. Engaging must go on when the ledger is unreachable (its region may be the
impaired one), so every method here turns a DynamoDB error into a result, never an
exception, and the first failure marks the ledger unavailable for the rest of the run:
a walk over a thousand resources then does not wait out a thousand timeouts. A caller
that must know whether it saw every record (a relax walk) checks `available` after
`records()`: a failed Query is an incomplete answer, not an empty one.

A recorded original is never overwritten. `put_original` writes a record once
(conditionally); when one is there already it grows it (a new key's original, more
applied values: holdfast.core.restore.covers) and raises `Conflict` when the two name a
different original for the same key: the ledger's stays, and the caller reports it. A
partial relax moves the applied values instead (`advance=True`, holdfast.core.restore.advance),
the original still never replaced. An engage's write (`engage=True`) during a hold holds
only while the resource has no release mark of that engagement (conditions.NOT_RELEASED_IN,
in one transaction with the record's own condition): `ReleasedByHand` otherwise.

One Query per tick answers every reader: the engine's walks (`holds`, `cached`,
`records`), the built-in evidence and the drain stage each take a view of the tick's
ledger (holdfast.ledger.store.Ledger.resources), and the views share what the first
successful Query read, kept current with every view's writes. Each view keeps its own
`available` and `error`, as a ledger of its own would: a failure (a Query, a write)
marks the view that met it, and drops the shared read, so the next reader Queries
again instead of trusting a table that just failed; a view that had the read keeps it.
A ResourceLedger built on its own (`ResourceLedger(ledger)`) shares nothing, and its
`records` Queries each time. Its calls go through the Ledger's storage hooks
(holdfast.ledger.store), which bind the table's name.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import condition_failed, condition_failed_at
from holdfast.core import restore
from holdfast.core.errors import Conflict, ReleasedByHand, Superseded
from holdfast.core.model import Record
from holdfast.iam import uses
from holdfast.ledger import PK, SK
from holdfast.ledger.conditions import NO_RECORD_YET, RECORD_EXISTS, RECORD_UNCHANGED, version_is
from holdfast.ledger.control import not_released

if TYPE_CHECKING:
    from holdfast.ledger.store import Ledger

# A record grown by two controllers at once: re-read and merge this many times at most.
GROW_ATTEMPTS = 3

PARTITION = "RES"


def _key(arn: str) -> dict[str, Any]:
    return {PK: {"S": PARTITION}, SK: {"S": arn}}


class Shared:
    """The resource records one Query read, for the views of one ledger (one tick), and
    the lock their writes update them under. None until a Query succeeds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[str, Record] | None = None
        # Held while a view Queries: walks of several services start at once, and the
        # first read of the tick is made once, not by each of them.
        self.reading = threading.Lock()


class ResourceLedger:
    """Original records of engaged resources, tolerant of an unreachable table."""

    def __init__(self, ledger: "Ledger", *, shared: Shared | None = None):
        self._ledger = ledger
        self.table = ledger.table
        self.available = True
        self.error: str | None = None
        # A view of a tick's ledger answers `records` from the shared read; one built on its
        # own Queries for each `records`, as a command that reads again expects.
        self._sharing = shared is not None
        self._shared = shared or Shared()
        self._lock = self._shared.lock
        self._known: dict[str, Record] | None = None   # this view's read: the shared one, once seen

    def _read(self) -> dict[str, Record] | None:
        """What this view has read: its own, else the tick's shared read (then its own too)."""
        with self._lock:
            if self._known is None:
                self._known = self._shared.known
            return self._known

    def _all(self) -> dict[str, Record]:
        known = self._read()
        if known is None:
            known = {r.arn: r for r in self.records()}
        return known

    def holds(self, arn: str) -> bool:
        """Whether the ledger has a record for `arn`, from one Query per tick (shared).
        True when the ledger is unreachable: nothing could be written anyway."""
        known = self._all()
        return not self.available or arn in known

    def cached(self, arn: str) -> Record | None:
        """The record for `arn` as this tick's one Query saw it (kept current with this
        tick's own writes); None when absent or the ledger is unreachable."""
        known = self._all()
        return known.get(arn) if self.available else None

    def _remember(self, arn: str, record: Record | None) -> None:
        """A write of this view, in its read and in the tick's shared read (another view's,
        perhaps, after a failure dropped this one's): what a Query now would answer."""
        with self._lock:
            reads = [self._known] if self._known is not None else []
            if self._shared.known is not None and self._shared.known is not self._known:
                reads.append(self._shared.known)
            for known in reads:
                if record is None:
                    known.pop(arn, None)
                else:
                    known[arn] = record

    def _failed(self, err: Exception) -> None:
        with self._lock:
            self.available = False
            self.error = self.error or f"{type(err).__name__}: {err}"
            # The next reader reads again, as a ledger of its own would; this view keeps its read.
            self._shared.known = None

    @uses("dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem",
          by=("reconciler", "cli"))
    def put_original(self, record: Record, name: str, *, advance: bool = False, engage: bool = False) -> bool:
        """Record an original, or grow the record already there. False when the ledger is
        unreachable; raises Conflict when the ledger holds a different original for a key.
        `advance`: the applied values of `record`'s keys replace the ledger's (a partial
        relax moving its record, holdfast.core.restore.advance) instead of joining them.
        `engage`: an engage's write-ahead, refused (ReleasedByHand) while the resource has
        a release mark of the engagement in force (`Ledger.engagement`)."""
        if not self.available:
            return False
        item = {
            **_key(record.arn),
            "kind": {"S": record.kind},
            "name": {"S": name},
            "original": {"S": _json(record.original)},
            "applied": {"S": _json(record.applied)},
            "version": {"N": "1"},
        }
        try:
            self._write(record.arn, {"Put": {"Item": item, "ConditionExpression": NO_RECORD_YET}}, engage)
            self._remember(record.arn, replace(record, version=1, writing=None))
            return True
        except (ClientError, BotoCoreError) as err:
            if not condition_failed(err):
                self._failed(err)
                return False
        return self._grow(record, name, advance, engage)

    def _write(self, arn: str, write: dict[str, Any], engage: bool) -> None:
        """One conditional Put or Update of a record: with `engage` during an engagement,
        in one transaction with the check that `arn` was not released by hand in it
        (ReleasedByHand when it was; the record's own condition failing raises as a plain
        write's would)."""
        began = getattr(self._ledger, "engagement", None) if engage else None
        if began is None:
            op, body = next(iter(write.items()))
            (self._ledger.put_item if op == "Put" else self._ledger.update_item)(**body)
            return
        try:
            self._ledger.transact_write_items([not_released(arn, began), write])
        except ClientError as err:
            if condition_failed_at(err, 0):
                raise ReleasedByHand(f"{arn} was released by hand during this hold (it began at {began}): "
                                     "left as released; the next hold protects it again") from err
            raise

    def _grow(self, record: Record, name: str, advance: bool = False, engage: bool = False) -> bool:
        for _ in range(GROW_ATTEMPTS):
            existing = self.get(record.arn)
            if existing is None:
                if not self.available:
                    return False
                # forgotten meanwhile: write it afresh
                return self.put_original(record, name, advance=advance, engage=engage)
            differ = restore.conflicts(existing.original, record.original)
            if differ:
                self._remember(record.arn, existing)
                raise Conflict(
                    f"the ledger holds another original for {record.arn}: "
                    + "; ".join(f"{k}: ledger {a!r}, this write {b!r}" for k, (a, b) in sorted(differ.items()))
                    + " (the ledger's is kept)"
                )
            if restore.same(existing, record) if advance else restore.covers(existing, record):
                self._remember(record.arn, existing)
                return True
            if advance:
                grown = Record(existing.kind, existing.arn, {**record.original, **existing.original},
                               {**existing.applied, **record.applied}, existing.identity)
            else:
                grown = restore.merge(record, existing)
            try:
                self._write(record.arn, {"Update": dict(
                    Key=_key(record.arn),
                    UpdateExpression="SET #original = :original, #applied = :applied ADD #version :one",
                    ConditionExpression=RECORD_UNCHANGED,
                    ExpressionAttributeNames={"#original": "original", "#applied": "applied", "#version": "version"},
                    ExpressionAttributeValues={
                        ":original": {"S": _json(grown.original)},
                        ":applied": {"S": _json(grown.applied)},
                        ":old_original": {"S": _json(existing.original)},
                        ":old_applied": {"S": _json(existing.applied)},
                        ":one": {"N": "1"},
                    },
                )}, engage)
                self._remember(record.arn, replace(grown, version=existing.version + 1, writing=existing.writing))
                return True
            except (ClientError, BotoCoreError) as err:
                if not condition_failed(err):
                    self._failed(err)
                    return False
        self._failed(RuntimeError(f"the record of {record.arn} kept changing while it was grown"))
        return False

    def now(self):
        """The tick's time, or None when this ledger was given no clock."""
        clock = getattr(self._ledger, "clock", None)
        return clock.now() if clock is not None else None

    @uses("dynamodb:UpdateItem", by=("reconciler", "cli"))
    def claim_write(self, record: Record, name: str, values: dict[str, Any], *, read: Record) -> Record | None:
        """Record `record` (a partial relax's moved record, or the record as it is before a
        restore's write) and the write about to be sent (`values`, now), only over the
        version of the record the write was decided on (`read`, this tick's copy:
        conditions.RECORD_VERSION_IS). Returns the record as written, or None when the ledger
        does not answer (marked unavailable, as every write here does). Superseded when
        another controller wrote the record since `read`."""
        if not self.available:
            return None
        now = self.now()
        writing = {"values": dict(values), "at": now.isoformat() if now is not None else None}
        condition = version_is(read.version)
        try:
            self._ledger.update_item(
                Key=_key(record.arn),
                UpdateExpression="SET #original = :original, #applied = :applied, #writing = :writing, #name = :name "
                                 "ADD #version :one",
                ConditionExpression=condition["ConditionExpression"],
                ExpressionAttributeNames={"#original": "original", "#applied": "applied", "#writing": "writing",
                                          "#name": "name", **condition["ExpressionAttributeNames"]},
                ExpressionAttributeValues={":original": {"S": _json(record.original)},
                                           ":applied": {"S": _json(record.applied)},
                                           ":writing": {"S": _json(writing)}, ":name": {"S": name},
                                           ":one": {"N": "1"}, **condition["ExpressionAttributeValues"]},
            )
        except (ClientError, BotoCoreError) as err:
            if condition_failed(err):
                fresh = self.get(record.arn)   # another controller's write: this tick's copy follows it
                if fresh is not None:
                    self._remember(record.arn, fresh)
                raise Superseded(f"the record of {record.arn} changed since this tick read it (version "
                                 f"{read.version}): another controller wrote its cap; acting next tick") from err
            self._failed(err)
            return None
        written = replace(record, identity=read.identity, version=read.version + 1, writing=writing)
        self._remember(record.arn, written)
        return written

    @uses("dynamodb:UpdateItem", by=("reconciler", "cli"))
    def settle_write(self, record: Record) -> None:
        """The write `claim_write` recorded as `record` will not land (it was never sent, or
        AWS answered that it failed): its time is cleared, so nothing waits for it; its
        target stays in the applied set. Only over that version; best effort (a write that
        fails leaves the wait, LEASE_SECONDS at most)."""
        if not self.available or not record.writing:
            return
        settled = {**record.writing, "at": None}
        condition = version_is(record.version)
        try:
            self._ledger.update_item(
                Key=_key(record.arn), UpdateExpression="SET #writing = :writing",
                ConditionExpression=condition["ConditionExpression"],
                ExpressionAttributeNames={"#writing": "writing", **condition["ExpressionAttributeNames"]},
                ExpressionAttributeValues={":writing": {"S": _json(settled)}, **condition["ExpressionAttributeValues"]})
        except (ClientError, BotoCoreError):
            return
        self._remember(record.arn, replace(record, writing=settled))

    @uses("dynamodb:UpdateItem", by=("reconciler", "cli"))
    def put_identity(self, arn: str, identity: dict[str, Any]) -> bool:
        """Keep what tells the engaged resource from a later one at the same ARN with its
        record (holdfast.core.model.Record.identity), once the record is there. False when
        unreachable or the record is gone."""
        if not self.available:
            return False
        try:
            self._ledger.update_item(Key=_key(arn), UpdateExpression="SET #identity = :identity",
                                 ConditionExpression=RECORD_EXISTS,
                                 ExpressionAttributeNames={"#identity": "identity"},
                                 ExpressionAttributeValues={":identity": {"S": _json(identity)}})
        except (ClientError, BotoCoreError) as err:
            if not condition_failed(err):
                self._failed(err)
            return False
        known = (self._read() or {}).get(arn)
        if known is not None:
            self._remember(arn, replace(known, identity=dict(identity)))
        return True

    @uses("dynamodb:GetItem", by=("reconciler", "cli", "readonly", "readiness"))
    def get(self, arn: str) -> Record | None:
        """The record for one resource; None when absent or the ledger is unreachable."""
        if not self.available:
            return None
        try:
            item = self._ledger.get_item(Key=_key(arn), ConsistentRead=True)
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return None
        return _record(item) if item else None

    @uses("dynamodb:DeleteItem", by=("reconciler", "cli"))
    def forget(self, arn: str) -> bool:
        """Drop a record after its resource is restored (or vanished). False when unreachable."""
        if not self.available:
            return False
        try:
            self._ledger.delete_item(Key=_key(arn))
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return False
        self._remember(arn, None)
        return True

    def records(self) -> list[Record]:
        """Every original record, by ARN (the sort key's order); empty when the ledger is
        unreachable (then `available` is False: the answer is incomplete, not empty). A view
        of a tick's ledger answers from the tick's one Query when there is one."""
        with self._shared.reading:
            if not self.available:
                return []
            known = self._read() if self._sharing else None
            if known is not None:   # this tick's one Query, with this tick's writes since
                with self._lock:
                    return sorted(known.values(), key=lambda r: r.arn)
            return self._query()

    @uses("dynamodb:Query", by=("reconciler", "cli", "readonly", "readiness"))
    def _query(self) -> list[Record]:
        out: list[Record] = []
        try:
            for page in self._ledger.query_pages(
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": PK},
                ExpressionAttributeValues={":pk": {"S": PARTITION}},
                ConsistentRead=True,
            ):
                out.extend(_record(item) for item in page["Items"])
        except (ClientError, BotoCoreError) as err:
            self._failed(err)
            return []
        with self._lock:
            self._known = {r.arn: r for r in out}
            self._shared.known = self._known
        return out


def _json(values) -> str:
    return json.dumps(values, sort_keys=True)


def _record(item: dict[str, Any]) -> Record:
    return Record(
        kind=item["kind"]["S"],
        arn=item[SK]["S"],
        original=json.loads(item["original"]["S"]),
        applied=json.loads(item["applied"]["S"]),
        identity=json.loads(item["identity"]["S"]) if "identity" in item else None,
        version=int(item["version"]["N"]) if "version" in item else 0,
        writing=json.loads(item["writing"]["S"]) if "writing" in item else None,
    )
