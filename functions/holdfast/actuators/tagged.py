"""The shape every actuator shares: write-ahead engage and decided restore.

A kind supplies the AWS side as hooks — `candidates` (bulk listing), `read` (the
per-resource reads), `get`, `posture` (pure), `audit` (`holdfast audit`'s reader: every
resource of the kind in the account, handed to the kind's rule),
`_write` (move the resource to given values), `_tag` / `_untag` (the record on the
resource) — and, for partial relaxes, `partial`; optionally `may_write` (every value it
may write to a key in one engagement), `fresh` (the managed values re-read just before
a relaxing write) and `own_tags` (the service's own tag read, for kinds listed through
the Resource Groups Tagging API). This class supplies the order of operations that the
invariants depend on:

engage:  tag (write-ahead) -> ledger (tolerated if unreachable) -> resource
         For a kind that `defers_tag` (its tag write spends a shared quota that its
         caps need first: SQS mappings on Lambda's 15/s), while the ledger answers:
         ledger (the write-ahead) -> resource, and the record tags follow in a second
         pass once the walk has engaged the kind (`take_deferred`, `write_deferred`;
         only inside the engine's engage walk, which sets TAGS_LATER and makes that pass);
         with the ledger unreachable, the tag-first order above. Either way nothing is
         changed before its original is durable, and the record ends on both copies:
         a tag the second pass could not write is written by the next walk, which
         finds the resource in posture with the ledger's record only (`_keep_copies`).
         Every write-ahead, either order, passes one check first (`may_write_ahead`).
         The record is one record from both copies (core.restore.merge: a recorded
         original is never replaced; an engage only adds applied values, a partial relax moves
         them: restore.advance). Without room for
         the two record tags (50 tags per resource), or when the tag write answers the
         tag limit, the resource is engaged through the ledger record only; with
         neither a tag nor the ledger it is left unchanged (`skipped`): a change with no
         record anywhere would break write-ahead (the original recorded before any
         change). A record the tagging index shows but the ledger cannot vouch for (no
         record there, or another one) is confirmed through the service's own tag API (one read) before it is trusted: the index may still list
         a record a restore removed. When the index shows no record the tag is written
         anyway, as it would be.
relax:   fresh read -> guard, resource -> guard, untag -> guard, forget the ledger record
         Each write is built from a read taken just before it, and each step only after
         the one before succeeded, so a crash anywhere leaves a record from which the
         next run finishes the job. A kind whose writes are serialised per resource
         (`serial_writes`: a mapping's caps) records each write's target and time in the
         ledger before sending it, over the record version it was decided on, and waits
         while the one before may still land (`_claim`, `_wait_for`).
"""

from __future__ import annotations

import contextvars
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Iterator, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_code, error_summary, error_text, too_many_tags
from holdfast.core import restore
from holdfast.core.audit import AuditResult, Progress
from holdfast.core.errors import Conflict, ReleasedByHand, Superseded, Vanished
from holdfast.core.kinds import Kind
from holdfast.core.model import (
    ALREADY,
    DRIFT_KEPT,
    ENGAGED,
    FAILED,
    PLANNED,
    RAISED,
    REFUSED_STALE,
    RESTORED,
    SKIPPED,
    VANISHED,
    Candidate,
    Guard,
    Outcome,
    Record,
    Resource,
    StalePlan,
)
from holdfast.core.own import NOT_OWN, Own
from holdfast.core.tags import MAX_TAGS, RECORD_KEYS, TagError, owner_tags, read_record, record_tags, room_for_record
from holdfast.iam import uses
from holdfast.ledger.leases import LEASE_SECONDS

# Set by the engine's engage walk (holdfast.engine), which writes the deferred tags in its
# second pass: an engage outside such a walk (one resource, a test) writes its tag first.
TAGS_LATER: contextvars.ContextVar[bool] = contextvars.ContextVar("holdfast_tags_later", default=False)
# Set by the engine's engage walk while it is a re-walk (it compares listings with an earlier
# finished walk of the same plan): no race to cap first there, so nothing is capped on an
# index's word before its own tags are read (holdfast.actuators.esm).
REWALK: contextvars.ContextVar[bool] = contextvars.ContextVar("holdfast_rewalk", default=False)


def make_resource(kind: str, arn: str, name: str, current: Mapping[str, Any], tags: Mapping[str, str],
                  ref: Mapping[str, Any] | None = None, *, confirmed: bool = True, selected: bool | None = None) -> Resource:
    """A Resource whose record is decoded from its tags (a garbled tag counts as none).
    `confirmed` False: the tags came from the Resource Groups Tagging API's index.
    `selected`: whether the tags carry the selector (None: not told)."""
    try:
        found = read_record(tags)
    except TagError:
        found = None
    record = Record(kind, arn, *found) if found else None
    return Resource(kind, arn, name, dict(current), record, dict(ref or {}), owner_tags(tags), confirmed, selected)


class TaggedActuator(ABC):
    """Engage and relax for a kind whose write-ahead record is a pair of tags."""

    spec: ClassVar[Kind]                          # the kind this actuator serves (core.kinds)
    kind: ClassVar[str] = ""                      # spec.name
    service = ""                                  # the boto3 service `_call` writes through
    not_found: tuple[str, ...] = ("ResourceNotFoundException",)
    tag_batch: ClassVar[int] = 1                  # resources one record-tag call can carry
    walk_batch: ClassVar[int] = 0                 # resources engaged together (0: tag_batch)
    # The reconciler's IAM policy allows this kind's restore writes only on a resource that
    # carries the selector or Holdfast's record tag (policies/reconciler.json, the
    # *WriteOnlyTagged and *RestoreRecorded statements); False: its writes need neither.
    restore_needs_tag: ClassVar[bool] = False
    # Relaxing writes serialised per resource (a mapping's caps, which a drain moves every few
    # minutes): each is recorded with its target in the ledger before it is sent, only over the
    # record version it was decided on, and waits while the one before may still land (_claim, _wait_for).
    serial_writes: ClassVar[bool] = False
    # While the ledger answers, its record is the write-ahead and the tags follow in the
    # walk's second pass (see the module doc).
    defers_tag: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "spec" in cls.__dict__:
            cls.kind = cls.spec.name

    def __init__(self, clients, settings, ledger, *, expired_queue_arn: str | None = None, own: Own = NOT_OWN):
        self.clients = clients
        self.settings = settings
        self.ledger = ledger
        self.expired_queue_arn = expired_queue_arn
        self.own = own
        self._retired_lock = threading.Lock()
        self._retired: dict[str, Record] = {}   # arn -> the ledger's record of a resource since recreated there
        # Engaged through the ledger's record, their tags still to write: (resource, record, outcome)
        self._deferred: list[tuple[Resource, Record, Outcome]] = []

    # ---- hooks a kind provides -------------------------------------------------------

    @abstractmethod
    def candidates(self) -> list[Candidate]:
        ...

    @abstractmethod
    def read(self, candidate: Candidate) -> Resource | None:
        ...

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """How much the automation of this resource can do while the region is impaired,
        from its listing alone (no call): an engage walks the highest first (0: no order
        beyond ARNs). `original`: the record's original values, when it is engaged — its
        harm is what it was before Holdfast's change, so its place in the order stays."""
        return 0

    def own_candidate(self, candidate: Candidate) -> dict[str, str] | None:
        """The note for a candidate the listing shows as one of Holdfast's own resources
        (holdfast.core.own), which an engage leaves alone; None for any other. From the
        listing's tags (no call): a kind overrides `listed_tags_all`."""
        if not self.own:
            return None
        tags = self.listed_tags_all(candidate)
        return self.own.why(candidate.arn, tags) if self.own.holds(candidate.arn, tags) else None

    def listed_tags_all(self, candidate: Candidate) -> Mapping[str, str]:
        """Every tag the listing shows for the candidate ({} when it shows none)."""
        return {}

    def relax_candidates(self, recorded: set[str]) -> list[Candidate]:
        """The candidates a relax walks, given the ARNs the ledger holds records for: every
        candidate by default (a record may be on a tag only)."""
        return self.candidates()

    def late_keys(self, listed: list[Candidate]) -> list[str]:
        """The steps of the later phase of an engage walk, in the order walked, from the
        listing alone (no call): each names a listing that finds resources the kind's
        listing cannot (holdfast.engine.bookkeeping). [] (no later phase) by default."""
        return []

    def late_candidates(self, key: str, listed: Mapping[str, Candidate]) -> tuple[list[Candidate], Outcome | None]:
        """The candidates step `key` finds that are not among `listed` (by ARN), and an
        outcome to report when its listing failed (its notes say what was left out)."""
        return [], None

    def read_recorded(self, candidate: Candidate) -> Resource | None:
        """`read`, for a relax (a kind may skip a read the ledger's record makes moot)."""
        return self.read(candidate)

    def discover(self) -> list[Resource]:
        return [r for c in self.candidates() if (r := self.read(c)) is not None]

    @abstractmethod
    def get(self, arn: str) -> Resource | None:
        ...

    @abstractmethod
    def audit(self, found: AuditResult, say: Progress) -> None:
        """`holdfast audit`'s reader (run by the CLI only, read-only): every resource of the
        kind in the account, selected or not, handed to the kind's rule (`spec.audit_rule`),
        its findings added to `found`. A listing or a resource that cannot be read is named
        in `found.unreadable` (`unreadable`) and the reader carries on with the rest."""

    @abstractmethod
    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        ...

    def partial(self, record: Record, current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
        raise ValueError(f"{self.kind} has no partial relax; use a full restore (target None)")

    def may_write(self, key: str, value: Any) -> list[Any]:
        """Every value Holdfast may write to `key` in an engagement that starts by writing
        `value` (recorded as Holdfast's from the first write-ahead on). One, by default."""
        return [value]

    def fresh(self, resource: Resource) -> Resource:
        """`resource` with its managed values read again, just before a relaxing write
        (for a write that replaces more than the keys it decides, or decides from a
        value a bulk listing gave at the start of the walk). The values as read, by default."""
        return resource

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any] | None:
        """The managed values as the bulk listing shows them, or None when it does not
        (a re-walk then reads only candidates it has not seen)."""
        return None

    def listed_tags(self, candidate: Candidate) -> Mapping[str, str] | None:
        """The tags as the bulk listing shows them, or None when it does not."""
        return None

    def own_tags(self, resource: Resource) -> Mapping[str, str]:
        """The resource's tags from its service's own tag API (for kinds whose `read` takes
        them from the tagging index)."""
        # Reached only for a resource not `confirmed`, which only kinds listed through the
        # tagging index produce, and each of those overrides this: a kind that does not is a
        # programming error, not an AWS answer.
        raise NotImplementedError(f"{self.kind} is listed through the tagging index but has no own_tags")

    @abstractmethod
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        ...

    @abstractmethod
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        ...

    @abstractmethod
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        ...

    def may_write_ahead(self, resource: Resource, record: Record) -> str | None:
        """Why `resource` may not be engaged now (None: it may): the one check every
        write-ahead of an engage passes, whichever copy is written first. Nothing is
        refused by default."""
        return None

    def identity_after_write(self, resource: Resource, tagged: bool) -> dict[str, Any] | None:
        """What tells this resource from a later one at its ARN, once an engage wrote it
        (`tagged`: the record is on its tag too), for the ledger's copy; None by default:
        kinds whose ARN carries a unique id need nothing."""
        return None

    def recreated(self, resource: Resource, ledger: Record) -> Resource | None:
        """`resource` (its tags confirmed, where that took a read) when it is another resource
        than the one the ledger's record `ledger` was written for, created at the same ARN
        since; None when it is the same one, or this kind cannot tell (by default: kinds
        whose ARN carries a unique id)."""
        return None

    def retire_tag(self, resource: Resource) -> None:
        """Remove the record tag of the resource `recreated` found gone, where it outlives
        that resource (before its ledger record is forgotten, so no later walk reads it as
        the new one's); nothing by default: a resource's tags go with it."""

    def _note_retired(self, outcome: Outcome) -> Outcome:
        with self._retired_lock:
            retired = self._retired.pop(outcome.arn, None)
        if retired is not None:
            outcome.notes["recreated"] = {
                "why": ("deleted and created again at this ARN since Holdfast engaged it: the record of the one before is "
                        "retired, never restored onto this one, which is engaged as any other"),
                "retired": {"original": dict(retired.original), "applied": dict(retired.applied)}}
        return outcome

    def record_on_resource(self, resource: Resource) -> bool:
        """Whether the resource carries the record tag the policy's restore statements name."""
        return resource.record is not None

    def restorable(self, resource: Resource) -> bool:
        """Whether the reconciler's IAM policy lets a restore write `resource`: its kind's
        writes need no tag, or it carries the selector, or Holdfast's record tag."""
        return not self.restore_needs_tag or resource.selected is not False or self.record_on_resource(resource)

    def _keep_selector(self) -> str:
        return (f"keep its selector tag {self.settings.selector_key}={self.settings.selector_value} until Holdfast "
                "has restored it: with no record tag on it, the reconciler's IAM policy allows the restore only "
                "while the selector is there")

    def _unrestorable(self, resource: Resource) -> Outcome:
        """A ledger-only record on a resource whose owner removed the selector: the restore's
        writes would be denied (the policy needs the selector or the record tag), so none is
        sent, and the outcome says how to finish it. The record stays."""
        key, value = self.settings.selector_key, self.settings.selector_value
        return Outcome(self.kind, resource.arn, SKIPPED, notes={"record": {
            "why": (f"not restored: its record is in the ledger only (no record tag on it) and its selector tag {key} "
                    "is gone, so the reconciler's IAM policy denies the restore's writes"),
            "fix": (f"tag it {key}={value} again (the next tick restores it and removes nothing of the owner's), or run "
                    f"`holdfast release {resource.arn}` with credentials that may write it"),
        }})

    # ---- the shared walk -------------------------------------------------------------

    def plan(self, resource: Resource) -> Outcome:
        """What engage would change, without writing."""
        changes = self.posture(resource.current)
        return Outcome(self.kind, resource.arn, PLANNED if changes else ALREADY, changes=self._changes(resource, changes))

    def known(self, resource: Resource) -> tuple[Resource, Record | None]:
        """The resource and its one record, from its tag and the ledger's copy.

        A record that only the tagging index shows, and that the ledger does not vouch for
        (no record there, or another original), is confirmed through the service's own
        tag API first: the index may still list a record a restore removed."""
        ledger = self.ledger.cached(resource.arn)
        if ledger is not None:
            other = self.recreated(resource, ledger)
            if other is not None:
                # The record is of a resource gone from this ARN: retired (reported with its
                # values by the outcome), and this one is engaged, or left, as unrecorded.
                self.retire_tag(other)
                self.ledger.forget(resource.arn)
                with self._retired_lock:
                    self._retired[resource.arn] = ledger
                return replace(other, record=None), None
        tag = resource.record
        vouched = ledger is not None and tag is not None and set(tag.original) <= set(ledger.original) \
            and not restore.conflicts(ledger.original, tag.original)
        if tag is not None and not resource.confirmed:
            # The ledger holding the same record vouches for the index (the engagement is
            # still on: a restore forgets the ledger's copy only after the untag).
            resource = replace(resource, confirmed=True) if vouched else self.confirm(resource)
        return resource, restore.merge(resource.record, ledger)

    def confirm(self, resource: Resource) -> Resource:
        """`resource` with its record read from the service's own tag API."""
        return self.with_tags(resource, self.own_tags(resource))

    def with_tags(self, resource: Resource, tags: Mapping[str, str]) -> Resource:
        """`resource` with its record from `tags`, as the service's own tag API gave them."""
        again = make_resource(self.kind, resource.arn, resource.name, resource.current, tags, resource.ref,
                              selected=resource.selected)
        return replace(again, current=resource.current, tag_count=max(again.tag_count, resource.tag_count))

    def engage(self, resource: Resource) -> Outcome:
        return self.engage_many([resource])[0]

    def engage_many(self, resources: list[Resource]) -> list[Outcome]:
        """Engage each of `resources`, in order, as `engage` does; the record tags of those
        that need a write are written first, together where the service's tag API takes
        several resources (`tag_batch`), and each resource is changed only after its own
        record is written (the tag, then the ledger's copy)."""
        results: list[Outcome | None] = [None] * len(resources)
        staged: list[tuple[int, Resource, Record, dict[str, Any], Outcome]] = []
        for i, resource in enumerate(resources):
            outcome = None
            try:
                resource, record = self.known(resource)
                # A value the owner changed while engaged is theirs (kept, reported): re-engaging,
                # like restoring, leaves it alone and reports it.
                changes, owner_changed = restore.without_drift(self.posture(resource.current), record,
                                                               resource.current)
                if not changes:
                    outcome = Outcome(self.kind, resource.arn, ALREADY, drift=owner_changed)
                    if record is not None:
                        self._keep_copies(resource, record, outcome)
                    results[i] = outcome
                    continue
                new = restore.grow(record, self.kind, resource.arn, resource.current, changes, self.may_write)
                outcome = Outcome(self.kind, resource.arn, ENGAGED, changes=self._changes(resource, changes),
                                  drift=owner_changed)
                staged.append((i, resource, new, changes, outcome))
            except (Vanished, Conflict, ClientError, BotoCoreError) as err:
                results[i] = self._engage_error(resources[i], outcome, err)
        allowed = []
        for item in staged:
            i, resource, new, _, _ = item
            refused = self.may_write_ahead(resource, new)
            if refused is None:
                allowed.append(item)
            else:
                results[i] = Outcome(self.kind, resource.arn, SKIPPED, notes={"write-ahead": {"why": refused}})
        staged = self._ledger_first(allowed, results) if self.defers_tag and TAGS_LATER.get() else allowed
        # Write-ahead: every staged resource's record tags, before any of them is changed.
        tagged_all = self._write_tags([(resource, new) for _, resource, new, _, _ in staged])
        for (i, resource, new, changes, outcome), tagged in zip(staged, tagged_all):
            try:
                if isinstance(tagged, Exception):
                    raise tagged
                tagged_ok, why = tagged
                # Then the ledger's copy (conditional: a recorded original stays; another
                # original there is a Conflict, and the resource is not changed; one released
                # by hand during this hold is left as released).
                outcome.ledger_written = self._write_ahead(resource, new, tagged_ok)
                if not tagged_ok and not outcome.ledger_written:
                    results[i] = Outcome(self.kind, resource.arn, SKIPPED, notes={"record": {
                        "why": (f"left unchanged: {why}, and the ledger is unreachable; changing it with no record "
                                "anywhere would lose its original"),
                        "fix": "the next walk with the ledger answering engages it through the ledger record"}})
                    continue
                outcome.recorded_in = (["tag"] if tagged_ok else []) + (["ledger"] if outcome.ledger_written else [])
                if not tagged_ok:
                    outcome.notes["record"] = {"why": f"{why}: engaged through the ledger record only",
                                               "fix": f"free {len(RECORD_KEYS)} of its tags for the record to be on the resource too"}
                    if self.restore_needs_tag:
                        outcome.notes["record"]["keep"] = self._keep_selector()
                self._write(resource, changes, restoring=False)
                identity = self.identity_after_write(resource, tagged_ok)
                if identity is not None and outcome.ledger_written:
                    self.ledger.put_identity(resource.arn, identity)
                results[i] = outcome
            except ReleasedByHand as err:
                results[i] = self._released(resource, err)
            except (Vanished, Conflict, ClientError, BotoCoreError) as err:
                results[i] = self._engage_error(resource, outcome, err)
        return [self._note_retired(o) for o in results]  # type: ignore[union-attr]

    def _released(self, resource: Resource, err: ReleasedByHand) -> Outcome:
        return Outcome(self.kind, resource.arn, SKIPPED, notes={"released": {
            "why": str(err), "fix": "`holdfast engage` protects it again now, if wanted"}})

    def _write_ahead(self, resource: Resource, record: Record, tagged: bool) -> bool:
        """The ledger's copy of an engage's record (after its tag): whether the ledger holds
        it. An operator's release mark of this engagement (ReleasedByHand, re-raised) wins
        over a walk that read the marks before it was written: the record tag just written
        is taken off again, so the released resource carries no record, as its release left it."""
        try:
            return self.ledger.put_original(record, resource.name, engage=True)
        except ReleasedByHand:
            if tagged:
                try:
                    self._untag(resource, list(RECORD_KEYS))
                except (Vanished, ClientError, BotoCoreError):
                    pass   # a record whose current is its original: a restore finds nothing to write and untags
            raise

    def _ledger_first(self, staged: list, results: list) -> list:
        """Engage each of `staged` through the ledger's record alone (the write-ahead), its
        tags deferred to the walk's second pass; what the ledger cannot take (unreachable)
        is returned, for the tag-first order."""
        rest = []
        for item in staged:
            i, resource, new, changes, outcome = item
            if not self.ledger.available and self.tags_unread(resource):
                results[i] = self._tags_unread_left(resource)
                continue
            if not self.ledger.available:
                rest.append(item)
                continue
            try:
                # Conditional, as always: a recorded original stays; another is a Conflict; one
                # released by hand during this hold is left as released (no tag written yet).
                outcome.ledger_written = self._write_ahead(resource, new, False)
                if not outcome.ledger_written:
                    if self.tags_unread(resource):
                        results[i] = self._tags_unread_left(resource)
                        continue
                    rest.append(item)   # the ledger failed just now: the tag comes first instead
                    continue
                outcome.recorded_in = ["ledger"]
                self._write(resource, changes, restoring=False)
                identity = self.identity_after_write(resource, False)
                if identity is not None:
                    self.ledger.put_identity(resource.arn, identity)
                with self._retired_lock:
                    self._deferred.append((resource, new, outcome))
                results[i] = outcome
            except ReleasedByHand as err:
                results[i] = self._released(resource, err)
            except (Vanished, Conflict, ClientError, BotoCoreError) as err:
                results[i] = self._engage_error(resource, outcome, err)
        return rest

    def tags_unread(self, resource: Resource) -> bool:
        """Whether `resource` was read without its own tags, for a cap before them (a kind
        that selects some resources without their tags: actuators.esm); such a resource is
        engaged only through the ledger's record, and its tags are read in the second pass."""
        return False

    def _tags_unread_left(self, resource: Resource) -> Outcome:
        """A resource read without its tags when the ledger stopped answering: the tag-first
        order needs its tags (a record on them is kept), so it is left for the next walk."""
        return Outcome(self.kind, resource.arn, FAILED, error=(
            "left unchanged: the ledger stopped answering before its write-ahead, and its tags were not read "
            "(a cap before its tags goes through the ledger's record only); the next walk reads them and engages it"))

    def take_deferred(self) -> list[tuple[Resource, Record, Outcome]]:
        """The resources engaged through the ledger's record whose tags are still to write
        (each once: taking them empties the list)."""
        with self._retired_lock:
            taken, self._deferred = self._deferred, []
        return taken

    def write_deferred(self, items: list[tuple[Resource, Record, Outcome]]) -> list[Outcome]:
        """The second pass: the record tags of resources engaged through the ledger's record
        (`tag_batch` a call). Each outcome says where its record now is; one whose tag could
        not be written keeps `notes["tag"]` (the next walk writes it: holdfast.engine)."""
        written = self._write_tags([(resource, record) for resource, record, _ in items])
        for (resource, record, outcome), tagged in zip(items, written):
            if isinstance(tagged, Exception):
                outcome.notes["tag"] = {
                    "why": f"engaged through the ledger's record; its record tag is not written yet ({error_text(tagged)})",
                    "fix": "the next walk writes it (the ledger's record restores it meanwhile)"}
                continue
            tagged_ok, why = tagged
            if tagged_ok:
                outcome.recorded_in = ["tag", "ledger"]
                continue
            outcome.notes["record"] = {"why": f"{why}: engaged through the ledger record only",
                                       "fix": f"free {len(RECORD_KEYS)} of its tags for the record to be on the resource too"}
            if self.restore_needs_tag:
                outcome.notes["record"]["keep"] = self._keep_selector()
        return [outcome for _, _, outcome in items]

    def _engage_error(self, resource: Resource, outcome: Outcome | None, err: Exception) -> Outcome:
        if isinstance(err, Vanished):
            return Outcome(self.kind, resource.arn, VANISHED)
        if isinstance(err, Conflict):
            return Outcome(self.kind, resource.arn, FAILED, error=f"conflict: {err}")
        if outcome is None:
            return Outcome(self.kind, resource.arn, FAILED, error=error_text(err))
        outcome.action, outcome.error = FAILED, error_text(err)
        return outcome

    def _tag_plan(self, resource: Resource, record: Record) -> tuple[dict[str, str] | None, bool, str]:
        """(the tags to write, or None; when None: whether the tag already holds the record, why not)."""
        if not room_for_record(resource.tag_count):
            return None, False, (f"no room for the record tags ({resource.tag_count} of {MAX_TAGS} tags are the owner's; "
                                 f"Holdfast needs {len(RECORD_KEYS)})")
        on_tag = resource.record
        if resource.confirmed and on_tag is not None and (on_tag.original, on_tag.applied) == (record.original, record.applied):
            return None, True, ""
        try:
            return record_tags(record.original, record.applied), False, ""
        except TagError as err:
            return None, False, f"the record does not fit in a tag ({err})"

    def _write_tags(self, items: list[tuple[Resource, Record]]) -> list:
        """Write each record's tags ahead of a change; per item (True, ""), (False, why) when
        the resource cannot take them, or the exception its own write raised. Up to
        `tag_batch` resources a call (`_tag_many`); when a batched call fails, each is
        written alone, so the error is that resource's."""
        out: list = [None] * len(items)
        batch: list[tuple[int, Resource, dict[str, str]]] = []
        for j, (resource, record) in enumerate(items):
            tags, done, why = self._tag_plan(resource, record)
            if tags is None:
                out[j] = (done, why)
            else:
                batch.append((j, resource, tags))
        for chunk in self._tag_chunks(batch):
            if len(chunk) > 1:
                try:
                    self._tag_many([(resource, tags) for _, resource, tags in chunk])
                    for j, _, _ in chunk:
                        out[j] = (True, "")
                    continue
                except (ClientError, BotoCoreError, Vanished):
                    pass   # one of them vanished or is at its tag limit: each alone says which
            for j, resource, tags in chunk:
                try:
                    out[j] = self._tag_one(resource, tags)
                except (Vanished, ClientError, BotoCoreError) as err:
                    out[j] = err
        return out

    def _tag_chunks(self, batch: list) -> list[list]:
        """The tag writes of `batch` ((j, resource, tags) each), one list per call: `tag_batch`
        at a time in order, by default."""
        size = max(1, self.tag_batch)
        return [batch[k:k + size] for k in range(0, len(batch), size)]

    def _tag_one(self, resource: Resource, tags: Mapping[str, str]) -> tuple[bool, str]:
        try:
            self._tag(resource, tags)
        except TagError as err:   # the kind's own room check (a function carries one record per qualifier)
            return False, str(err)
        except ClientError as err:
            if too_many_tags(err):
                return False, f"the tag write answered the tag limit ({error_text(err)})"
            raise
        return True, ""

    def _tag_many(self, items: list[tuple[Resource, Mapping[str, str]]]) -> None:
        """Several resources' record tags in one call (kinds with `tag_batch` > 1)."""
        for resource, tags in items:
            self._tag(resource, tags)

    def _untag_many(self, resources: list[Resource], keys: list[str]) -> None:
        """Several resources' record tags removed in one call (kinds with `tag_batch` > 1)."""
        for resource in resources:
            self._untag(resource, keys)

    def _write_tag(self, resource: Resource, record: Record) -> tuple[bool, str]:
        """Write the record's tags ahead of a change: (True, "") when the tag holds it,
        (False, why) when the resource cannot take them (no room, or too long)."""
        tags, done, why = self._tag_plan(resource, record)
        if tags is None:
            return done, why
        return self._tag_one(resource, tags)

    def _keep_copies(self, resource: Resource, record: Record, outcome: Outcome) -> None:
        """An engaged resource already in posture: put back whichever copy of its record
        is missing or short — the ledger's (engaged while it was unreachable), the tag
        (stripped by an IaC apply, or never seen by the tagging index)."""
        ledger = self.ledger.cached(resource.arn)
        if ledger is None or not restore.covers(ledger, record):
            outcome.ledger_written = self.ledger.put_original(record, resource.name)
        engaged = any(resource.current.get(k) != v for k, v in record.original.items())
        on_tag = resource.record
        tagged = on_tag is not None
        short = on_tag is None or not restore.covers(on_tag, record) or bool(restore.conflicts(on_tag.original, record.original))
        if engaged and short:
            tagged, why = self._write_tag(resource, record)
            if not tagged:
                outcome.notes["record"] = {"why": f"{why}: recorded in the ledger only",
                                           "fix": f"free {len(RECORD_KEYS)} of its tags for the record to be on the resource too"}
                if self.restore_needs_tag:
                    outcome.notes["record"]["keep"] = self._keep_selector()
        outcome.recorded_in = (["tag"] if tagged else []) + (["ledger"] if self.ledger.cached(resource.arn) else [])

    def relax(self, resource: Resource, target: Mapping[str, Any] | None, guard: Guard) -> Outcome:
        """A full restore (target None: restore_many of one resource, the one path every
        restore takes) or a partial relax to `target`; an error becomes its outcome as
        `_relax_error` maps it."""
        if target is None:
            return self.restore_many([resource], guard)[0]
        return self._note_retired(self._relax(resource, target, guard))

    def _relax(self, resource: Resource, target: Mapping[str, Any], guard: Guard) -> Outcome:
        try:
            resource, record = self.known(resource)
            if record is None:
                return Outcome(self.kind, resource.arn, ALREADY)
            if not self.restorable(resource):
                return self._unrestorable(resource)
            return self._raise(resource, record, target, guard)
        except Exception as err:   # noqa: BLE001  (mapped by _relax_error; others re-raised)
            return self._relax_error(resource, guard, err)

    def restore_many(self, resources: list[Resource], guard: Guard) -> list[Outcome]:
        """Full restores of several resources (`relax(resource, None, guard)` is this, of
        one), with the record tags of all of them removed together (`tag_batch` a call):
        each resource is written back, then the batch is untagged, then each ledger record
        is forgotten — each step only after the one before succeeded, every
        write behind the guard. A batched untag that fails is retried one by one, so an
        error is only its resource's."""
        results: list[Outcome | None] = [None] * len(resources)
        written: list[tuple[int, Resource, dict, dict]] = []
        for i, resource in enumerate(resources):
            try:
                resource, record = self.known(resource)
                if record is None:
                    results[i] = Outcome(self.kind, resource.arn, ALREADY)
                    continue
                if not self.restorable(resource):
                    results[i] = self._unrestorable(resource)
                    continue
                resource = self.fresh(resource)
                decisions = restore.decide(record.original, record.applied, resource.current)
                values = restore.writes(decisions)
                # Never forget a record while an earlier write to the resource may still land.
                self._wait_for(resource, record)
                if values:
                    guard()
                    claimed = self._claim(resource, record, values) if self.serial_writes else None
                    with self._settle_once_answered(claimed):
                        self._write(resource, values, restoring=True)
                written.append((i, resource, decisions, values))
            except Exception as err:   # noqa: BLE001  (mapped as relax maps them; others re-raised)
                results[i] = self._relax_error(resources[i], guard, err)
        # Untagged even when only the ledger knew the record but the tags came from the
        # tagging index: the index may not show a tag written moments ago.
        untag = [(i, r) for i, r, _, _ in written if r.record is not None or not r.confirmed]
        failed: dict[int, Outcome] = {}
        if untag:
            try:
                guard()
                batch = [r for _, r in untag]
                for k in range(0, len(batch), max(1, self.tag_batch)):
                    chunk = batch[k:k + max(1, self.tag_batch)]
                    try:
                        self._untag_many(chunk, list(RECORD_KEYS)) if len(chunk) > 1 else self._untag(chunk[0], list(RECORD_KEYS))
                    except (ClientError, BotoCoreError, Vanished) as err:
                        if len(chunk) == 1:   # already its own call: its error is its outcome
                            failed[next(j for j, r in untag if r is chunk[0])] = self._relax_error(chunk[0], guard, err)
                            continue
                        for resource in chunk:
                            i = next(j for j, r in untag if r is resource)
                            try:
                                self._untag(resource, list(RECORD_KEYS))
                            except Exception as err:   # noqa: BLE001
                                failed[i] = self._relax_error(resource, guard, err)
            except StalePlan as err:
                for i, resource in untag:
                    failed[i] = Outcome(self.kind, resource.arn, REFUSED_STALE, error=str(err) or None)
        for i, resource, decisions, values in written:
            if i in failed:
                results[i] = failed[i]
                continue
            try:
                guard()
                forgotten = self.ledger.forget(resource.arn)
                drift = restore.drift(decisions)
                results[i] = Outcome(self.kind, resource.arn, DRIFT_KEPT if drift else RESTORED,
                                     changes=self._changes(resource, values), drift=drift, ledger_written=forgotten)
            except Exception as err:   # noqa: BLE001
                results[i] = self._relax_error(resource, guard, err)
        return [self._note_retired(o) for o in results]  # type: ignore[union-attr]

    def _relax_error(self, resource: Resource, guard: Guard, err: Exception) -> Outcome:
        """The outcome `relax` gives for an error; an error it does not map is re-raised."""
        if isinstance(err, StalePlan):
            return Outcome(self.kind, resource.arn, REFUSED_STALE, error=str(err) or None)
        if isinstance(err, Vanished):
            return self.forget_vanished(resource.arn, guard)
        if isinstance(err, Conflict):
            return Outcome(self.kind, resource.arn, FAILED, error=f"conflict: {err}")
        if isinstance(err, (ClientError, BotoCoreError)):
            return Outcome(self.kind, resource.arn, FAILED, error=error_text(err))
        raise err

    def forget_vanished(self, arn: str, guard: Guard) -> Outcome:
        try:
            guard()
        except StalePlan as err:
            return Outcome(self.kind, arn, REFUSED_STALE, error=str(err) or None)
        return Outcome(self.kind, arn, VANISHED, ledger_written=self.ledger.forget(arn))

    def _raise(self, resource: Resource, record: Record, target: Mapping[str, Any], guard: Guard) -> Outcome:
        resource = self.fresh(resource)
        values = self.partial(record, resource.current, target)
        if not values:
            return Outcome(self.kind, resource.arn, ALREADY)
        self._wait_for(resource, record)
        # The values that can be Holdfast's once this write is made (restore.advance): the
        # record stays as short as the tag however many times a drain moves the cap; the
        # previous write's target stays in it until the resource shows it.
        late = restore.unseen(record.writing, resource.current) if self.serial_writes else None
        moved = Record(record.kind, record.arn, record.original,
                       restore.advance(record.applied, resource.current, values, self.may_write, late))
        ledger = self.ledger.cached(resource.arn)
        claimed = None
        if self.serial_writes:
            guard()
            claimed = self._claim(resource, moved, values)
            if claimed is None:
                return self._unmoved(resource)
        elif ledger is None or not restore.same(ledger, moved):
            # The ledger's copy missing (engaged while it was unreachable) or another: a relax
            # has the ledger, so both copies hold the record before the write. A copy not
            # moved stops the write: a relax trusts the ledger's copy without the tag
            # (read_recorded), and one without the new cap would call it the owner's.
            guard()
            if not self.ledger.put_original(moved, resource.name, advance=True):
                return self._unmoved(resource)
        with self._settle_once_answered(claimed):
            on_tag = resource.record
            if (on_tag is not None and not restore.same(on_tag, moved)) or \
                    (on_tag is None and not resource.confirmed and not restore.same(record, moved)):
                # On the tag too before the write (no room for it: the ledger's copy holds it).
                guard()
                self._write_tag(resource, moved)
            guard()
            self._write(resource, values, restoring=True)
        return Outcome(self.kind, resource.arn, RAISED, changes=self._changes(resource, values))

    def _unmoved(self, resource: Resource) -> Outcome:
        why = getattr(self.ledger, "error", None) or "unreachable"
        return Outcome(self.kind, resource.arn, FAILED, error=(
            f"the ledger's record could not be moved before the write ({why}): nothing written; "
            "the next tick tries again"))

    @contextmanager
    def _settle_once_answered(self, claimed: Record | None):
        """Around the steps from a claimed write to its answer: once AWS has answered it (done,
        or an error: its last attempt failed, and any earlier one AWS applied is on the
        resource already), or a step before it failed (a guard, the tag) so it was never
        sent, nothing of it can land later, and its claim is settled: no tick waits for it.
        A connection error or a timeout, or the tick dying, leaves the claim: the request
        may still be applied."""
        try:
            yield
        except BotoCoreError:
            raise
        except Exception:
            if claimed is not None:
                self.ledger.settle_write(claimed)
            raise
        if claimed is not None:
            self.ledger.settle_write(claimed)

    def _wait_for(self, resource: Resource, record: Record) -> None:
        """A kind whose writes are serialised per resource: Superseded (the resource is left
        to the next tick) while the last relaxing write to it may still land — not seen on
        it, and sent less than LEASE_SECONDS ago (core.restore.in_flight). Written over, it
        could land after this write; a restore that forgot the record first would leave
        it on a resource with no record."""
        if not self.serial_writes or not restore.in_flight(record.writing, resource.current, self.ledger.now(),
                                                          LEASE_SECONDS):
            return
        last = record.writing or {}
        raise Superseded(f"its last write ({last.get('values')}, sent at {last.get('at')}) does not show on it yet and may "
                         f"still land (a request the SDK retried or re-sent, for up to {LEASE_SECONDS} s): acting "
                         "next tick")

    def _claim(self, resource: Resource, record: Record, values: Mapping[str, Any]) -> Record | None:
        """The ledger's record of a serialised write, before it is sent: `record` and the write
        (`values`, now), only over the version this tick read (ResourceLedger.claim_write;
        Superseded when another controller wrote it since). A record on the tag only
        (engaged while the ledger was unreachable) is put in the ledger first. None: the
        ledger did not answer (a raise then writes nothing; an operator's restore from the
        tags goes on)."""
        read = self.ledger.cached(resource.arn)
        if read is None:
            if not self.ledger.put_original(record, resource.name, advance=True):
                # The ledger unreachable: nothing to serialise on. A tick's relax stops at its
                # guard (it needs the ledger); an operator's restore from the tags goes on.
                return None
            read = self.ledger.cached(resource.arn)
            if read is None:
                raise Superseded(f"the record of {resource.arn} was forgotten meanwhile: acting next tick")
        return self.ledger.claim_write(record, resource.name, dict(values), read=read)

    def _changes(self, resource: Resource, values: Mapping[str, Any]) -> dict[str, Any]:
        return {k: {"from": resource.current.get(k), "to": v} for k, v in values.items()}

    def _call(self, operation: str, **kwargs: Any) -> Any:
        """One write through `service`; a missing resource raises Vanished."""
        try:
            return getattr(self.clients(self.service), operation)(**kwargs)
        except ClientError as err:
            if error_code(err) in self.not_found:
                raise Vanished() from err
            raise


def pages(client, operation: str, key: str, **kwargs: Any) -> Iterator[dict]:
    """Every item under `key` of every page of a paginated read."""
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, ())


def unreadable(found: AuditResult, what: str, err: Exception) -> None:
    """An audit read that failed: named with AWS's answer, and the audit goes on."""
    found.unreadable.append(f"{what}: {error_summary(err)}")


class LambdaTagged:
    """Write-ahead tags on a Lambda resource (a function, or an event source mapping by its
    own ARN: mappings do not inherit their function's tags)."""

    @uses("lambda:TagResource", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        self._call("tag_resource", Resource=resource.arn, Tags=dict(tags))

    @uses("lambda:UntagResource", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._call("untag_resource", Resource=resource.arn, TagKeys=keys)

    @uses("lambda:ListTags", by=("reconciler", "cli", "readonly", "readiness"))
    def own_tags(self, resource: Resource) -> Mapping[str, str]:
        return self._call("list_tags", Resource=resource.arn)["Tags"]
