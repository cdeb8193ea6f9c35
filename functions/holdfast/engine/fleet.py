"""The fleet-level walk: engage, relax, release and status over every selected resource.

    Engine(runtime, kinds=KINDS, deadline=None, progress=None, ledger=None)

An Engine is built once per tick (or per CLI command): one view of the tick's ledger
(`ledger`, holdfast.ledger.store; a command's own without one) and one actuator per kind,
shared by every walk it makes. Kinds of different services are walked
at once (Auto Scaling, ELB and Application Auto Scaling beside Lambda: each has its own
rate budget), one service's kinds one after another, most dangerous first; each kind's
calls are counted apart through a context tag (`Clients.tagged`). Within a kind,
resources are written by a small thread pool. Every call's pace is the clients' rate
budgets (holdfast.runtime.govern, holdfast.budget): Lambda's control plane at
`settings.lambda_writes_per_second`, each other service on its own; a throttle slows the
budget and is retried until the walk's deadline, never stacked on an application loop.

The walk never stops for one resource: failures, vanished resources and stale-plan
refusals are outcomes in the Report. `deadline()` returning True stops the walk cleanly
(`complete` False) and the next run continues — engage and relax are both idempotent.

An engage walk lists each kind's candidates in bulk (cheap), checks the blast radius on
that count, then reads and engages them most harmful first. Where a walk stands and what
the next walk of a kind may pass over — each candidate's `position`, the `Report.cursor`
a kind resumes after, the `settled` candidates a resumed walk passes over, the walk keys
of `Report.seen` a re-walk compares listings with — is the engine's walk bookkeeping
(holdfast.engine.bookkeeping). A kind whose listing cannot name every resource (async
configs: aliases with no config) finds the rest in a later phase of its walk
(`late_keys`, `late_candidates`), run only once every listed candidate finished, and
resumed across ticks from the kind's cursor; what it finds counts against max_resources
as the listing did, and past it is left unchanged (`notes["limit"]`).

Two engage walks: `engage` lists every kind before any write and counts them together
against max_resources (a plan, a dry run); `engage_as_listed` walks each kind as soon as
it is listed, so its first protective write does not wait for the slowest service's
listing (the tick's walk, and the command's engage with `count_together`).

A kind whose actuator `defers_tag` (SQS mappings) writes ahead to the ledger while it
answers and leaves its record tags to a second pass, the last step of its service's lane
(core.order.lane_steps): every cap of the lane before any of those tags. A tag that pass
did not write (the deadline, an error) leaves the kind unfinished and its cursor before
that resource, so the next walk reads it again and writes the tag.

Holdfast's own resources (holdfast.core.own: its controllers, their mappings) are left
out of every engage walk whatever their tags, each reported `skipped` with the reason
(`notes["own"]`); a relax walk still restores one that was engaged.

A relax walk lists the candidates, then reads each one just before it relaxes it, and
takes the ledger's records from the tick's one Query; when that Query fails the walk is
incomplete (`complete` False): records it could not see are not "nothing to do".
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.actuators import REGISTRY
from holdfast.actuators.tagged import REWALK, TAGS_LATER, make_resource
from holdfast.aws import CALL_TAG, error_text
from holdfast.core import kinds, order, restore
from holdfast.core.kinds import KINDS, kind_of
from holdfast.core.model import ALREADY, FAILED, LEAVE, SKIPPED, Candidate, Guard, Outcome, Resource, no_guard
from holdfast.engine import bookkeeping
from holdfast.engine.bookkeeping import NOT_WALKED, position
from holdfast.ledger import Ledger
from holdfast.runtime import Runtime

WRITERS = 8
# The service whose rate budget each kind's calls spend: kinds of different services are
# walked at once, kinds of one service one after another.
SERVICE_OF = {k.name: k.service.name for k in kinds.ALL}

Progress = Callable[[str], None]
Deadline = Callable[[], bool]


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    ledger_available: bool = True
    api_calls: dict[str, int] = field(default_factory=dict)          # kind -> calls
    operations: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> {"service:Op": n}
    complete: bool = True
    refused: str | None = None   # the blast-radius limit stopped the run before any write
    ledger_error: str | None = None
    cursor: dict[str, str | None] = field(default_factory=dict)   # kind -> resume after this position (engage)
    seen: dict[str, set[str]] = field(default_factory=dict)   # kind -> walk keys of finished candidates
    # Kinds the deadline cut short (`complete` is False when any is): a walk of several kinds
    # at once says which of them finished (holdfast.reconciler marks each kind apart).
    unfinished: set[str] = field(default_factory=set)
    # Kinds the blast-radius limit refused, when each kind is counted on its own (Engine.engage_as_listed).
    refused_kinds: set[str] = field(default_factory=set)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == FAILED]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcomes": [o.to_dict() for o in self.outcomes],
            "ledger_available": self.ledger_available,
            "ledger_error": self.ledger_error,
            "api_calls": self.api_calls,
            "operations": self.operations,
            "complete": self.complete,
            "refused": self.refused,
            "cursor": self.cursor,
        }

    @property
    def skipped(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == SKIPPED]


class WalkReport(Protocol):
    """What a tick reads of a walk's report (holdfast.reconciler): Report has it, and so
    must every engine a test puts in the Engine's place."""

    outcomes: list[Outcome]
    complete: bool
    refused: str | None
    api_calls: dict[str, int]
    cursor: dict[str, str | None]
    seen: dict[str, set[str]]
    unfinished: set[str]
    refused_kinds: set[str]


@runtime_checkable
class TickEngine(Protocol):
    """The engine as a tick uses it: the kinds it serves, its engage walks and a relax walk
    (the keyword arguments of Engine.engage, Engine.engage_as_listed and Engine.relax).
    tests/reconciler checks the in-memory fakes against it."""

    actuators: Mapping[str, Any]

    def engage(self, *, kinds: Iterable[str] | None = None, dry_run: bool = False,
               after: Mapping[str, str | None] | None = None, stuck: Iterable[str] = (),
               seen: Mapping[str, set[str]] | None = None, skip: frozenset[str] = frozenset()) -> WalkReport: ...

    def engage_as_listed(self, *, kinds: Iterable[str] | None = None, dry_run: bool = False,
                         after: Mapping[str, str | None] | None = None, stuck: Iterable[str] = (),
                         seen: Mapping[str, set[str]] | None = None, skip: frozenset[str] = frozenset(),
                         count_together: bool = False) -> WalkReport: ...

    def relax(self, *, kinds: Iterable[str] | None = None,
              target_for: Callable[[Resource], Mapping[str, Any] | None] | None = None,
              guard: Guard = no_guard, only: Iterable[str] | None = None) -> WalkReport: ...


class _Run:
    """Bookkeeping of one walk: per-kind call counts, progress, the deadline."""

    def __init__(self, clients, ledger, progress: Progress | None, deadline: Deadline | None, writers: int = WRITERS):
        self.clients = clients
        self.writers = writers
        self._lock = threading.Lock()   # kinds of different services report at once
        self.ledger = ledger
        self.progress = progress or (lambda _msg: None)
        self.report = Report()
        given = deadline or (lambda: False)

        def cut() -> bool:
            # The kind being walked is the calls' context tag (run.kind): it is the one cut short.
            if not given():
                return False
            kind = CALL_TAG.get(None)
            if kind:
                with self._lock:
                    self.report.unfinished.add(kind)
            return True

        self.deadline = cut

    def kind(self, kind: str, body: Callable[[], None]) -> None:
        """Run one kind's part, counting its calls; a failed listing is that kind's FAILED outcome.
        Its calls are tagged with the kind (aws.CALL_TAG), so kinds walked at once are
        counted apart."""
        token = CALL_TAG.set(kind)
        before = Counter(self.clients.tagged.get(kind, {}))
        try:
            body()
        except (ClientError, BotoCoreError) as err:
            with self._lock:
                self.report.outcomes.append(Outcome(kind, f"discover:{kind}", FAILED, error=error_text(err)))
        finally:
            CALL_TAG.reset(token)
            made = Counter(self.clients.tagged.get(kind, {})) - before
            with self._lock:
                # A kind can be walked more than once in one run (discover, then engage): add up.
                merged = Counter(self.report.operations.get(kind, {})) + made
                self.report.operations[kind] = dict(sorted(merged.items()))
                self.report.api_calls[kind] = sum(merged.values())

    def services(self, kinds: Iterable[str], walk: Callable[[str], None],
                 tags: Callable[[str], None] | None = None, defers_tag: frozenset[str] = frozenset()) -> None:
        """Walk kinds of different services at once (each service has its own rate budget:
        Auto Scaling, ELB and Application Auto Scaling beside Lambda), and the kinds of one
        service one after another, in the order given (the most dangerous first); then,
        last in its lane, `tags(kind)` for each kind of `defers_tag` (core.order.lane_steps)."""
        lanes: dict[str, list[str]] = {}
        for kind in kinds:
            lanes.setdefault(SERVICE_OF[kind], []).append(kind)

        def lane(members: list[str]) -> None:
            for step in order.lane_steps(members, defers_tag if tags is not None else ()):
                (walk if step.phase == order.ENGAGE else tags)(step.kind)

        if len(lanes) <= 1:
            for members in lanes.values():
                lane(members)
            return
        parent = contextvars.copy_context()
        with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
            for done in [pool.submit(parent.copy().run, lane, members) for members in lanes.values()]:
                done.result()

    def each(self, verb: str, kind: str, items: list, work: Callable[[Any], Outcome | None]) -> list:
        """Walk `items`; per item, in order: its Outcome, None (nothing to report) or NOT_WALKED."""
        return self.each_many(verb, kind, items, 1, lambda chunk: [work(chunk[0])])

    def each_many(self, verb: str, kind: str, items: list, size: int, work: Callable[[list], list]) -> list:
        """Walk `items`, `size` at a time: `work(chunk)` gives one result per item (its
        Outcome, None or NOT_WALKED); a chunk the deadline reaches is skipped whole."""
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        done, results = 0, []

        def one(chunk):
            if self.deadline():
                self.report.complete = False
                return [NOT_WALKED] * len(chunk)
            return work(chunk)

        parent = contextvars.copy_context()   # the kind's call tag, in every writer thread
        with ThreadPoolExecutor(max_workers=self.writers) as pool:
            for out in pool.map(lambda chunk: parent.copy().run(one, chunk), chunks):
                for result in out:
                    if isinstance(result, Outcome):
                        with self._lock:
                            self.report.outcomes.append(result)
                    results.append(result)
                done += len(out)
                self.progress(f"{verb} {kind}: {done}/{len(items)}")
        return results

    def finish(self) -> Report:
        self.report.ledger_available = self.ledger.available
        self.report.ledger_error = self.ledger.error
        return self.report


class Engine:
    """One tick's (or one command's) walks over the fleet: one ledger, one Lambda budget,
    one actuator per kind. `deadline()` True stops a walk cleanly; `progress(msg)` hears
    how far it got."""

    def __init__(self, runtime: Runtime, *, kinds: Iterable[str] = KINDS, deadline: Deadline | None = None,
                 progress: Progress | None = None, writers: int = WRITERS,
                 ledger: Ledger | None = None):
        unknown = [k for k in kinds if k not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown resource kind(s) {unknown}; known: {sorted(REGISTRY)}")
        self.runtime = runtime
        self.clients, self.settings = runtime.clients, runtime.settings
        # The tick's ledger (a command's own without one): its view of the resource records.
        self.ledger = (ledger or runtime.ledger()).resources()
        # Every call is paced by the clients' rate budgets (runtime.govern, holdfast.budget).
        self.actuators = {
            k: REGISTRY[k](runtime.clients, runtime.settings, self.ledger,
                           expired_queue_arn=runtime.expired_queue_arn, own=runtime.own)
            for k in kinds
        }
        self.deadline = deadline
        self.progress = progress
        self.writers = writers  # resources written at once within a kind
    def _acts(self, kinds: Iterable[str] | None) -> dict[str, Any]:
        if kinds is None:
            return self.actuators
        missing = [k for k in kinds if k not in self.actuators]
        if missing:
            raise ValueError(f"kind(s) {missing} not in this engine ({sorted(self.actuators)})")
        return {k: self.actuators[k] for k in kinds}

    def _run(self) -> "_Run":
        return _Run(self.clients, self.ledger, self.progress, self.deadline, self.writers)

    def engage(self, *, kinds: Iterable[str] | None = None, dry_run: bool = False,
               after: Mapping[str, str | None] | None = None, stuck: Iterable[str] = (),
               seen: Mapping[str, set[str]] | None = None, skip: frozenset[str] = frozenset()) -> Report:
        """Put every selected resource into posture (or, with dry_run, say what would change),
        every kind listed before any write and all of them counted together against
        max_resources: over it, nothing is changed.

        `after` (kind -> position) resumes each kind's walk after it; see Report.cursor.
        `stuck`: ARNs whose failure does not stop the cursor. `seen` (kind -> walk keys):
        a re-walk, which skips the candidates whose listing is unchanged since they were walked.
        `skip`: ARNs left alone (mappings their drain controller already drives in this hold)."""
        walk = _EngageWalk(self, kinds, dry_run=dry_run, after=after, stuck=stuck, seen=seen, skip=skip)
        run, limit = walk.run, walk.limit
        run.services(walk.acts, walk.list_kind)
        walk.listed = {k: walk.listed[k] for k in walk.acts if k in walk.listed}   # the kinds' order, whichever listed first
        walk.read, selected = _count_selected(walk.acts, walk.listed, limit)
        walk.counted = selected
        if selected > limit:
            run.report.refused = (
                f"the selector {self.settings.selector} matches {selected} resources, more than max_resources "
                f"({limit}); nothing was changed"
            )
            return run.finish()
        run.services(walk.listed, walk.engage_kind, walk.tags_of, walk.defers)
        return run.finish()

    def engage_as_listed(self, *, kinds: Iterable[str] | None = None, dry_run: bool = False,
                         after: Mapping[str, str | None] | None = None, stuck: Iterable[str] = (),
                         seen: Mapping[str, set[str]] | None = None, skip: frozenset[str] = frozenset(),
                         count_together: bool = False) -> Report:
        """As `engage`, but each kind walked as soon as it is listed, instead of all kinds'
        listings before any write (the tick's walk: its first protective write does not wait
        for the slowest service's listing), and each kind counted against max_resources on
        its own (Report.refused_kinds).

        `count_together`: the kinds' counts add up against max_resources as each is listed,
        so the walk never writes more than max_resources resources in all; a kind whose
        listing takes the sum past it is refused, whole, and so is every kind listed after
        it (the command's engage: its mappings are capped before Lambda's slowest listing,
        one call per function for the async configs, is made)."""
        walk = _EngageWalk(self, kinds, dry_run=dry_run, after=after, stuck=stuck, seen=seen, skip=skip)
        walk.together = count_together
        walk.run.services(walk.acts, lambda kind: walk.list_and_engage(kind, count_together), walk.tags_of,
                          walk.defers)
        return walk.run.finish()

    def relax(self, *, kinds: Iterable[str] | None = None,
              target_for: Callable[[Resource], Mapping[str, Any] | None] | None = None,
              guard: Guard = no_guard, only: Iterable[str] | None = None) -> Report:
        """Relax every engaged resource: fully (target None) or to `target_for(resource)`
        (LEAVE: nothing this time).

        Engaged = a record on its tag or in the ledger. A ledger record whose resource is not
        among the selected ones (it lost its selector tag, or vanished) is looked up by ARN.
        Each resource is read just before it is relaxed. `only`: relax just these ARNs
        (each looked up by ARN), e.g. the stuck ones a later tick retries.
        """
        acts = self._acts(kinds)
        run = self._run()
        records = self.ledger.records()
        if not self.ledger.available:
            # A Query that failed is not an empty ledger: records this walk cannot see may
            # still be engaged, so it cannot be complete.
            run.report.complete = False
        wanted = None if only is None else set(only)

        def relax_kind(kind: str) -> None:
            act = acts[kind]

            def walk() -> None:
                run.progress(f"discover {kind}")
                recorded = {rec.arn for rec in records if rec.kind == kind}
                if wanted is None:
                    candidates = act.relax_candidates(recorded)
                    listed = {c.arn for c in candidates}
                    items: list = candidates + sorted(recorded - listed)
                else:
                    items = sorted(a for a in wanted if kind_of(a) == kind)

                def prepare(item):
                    """The item's Outcome or None (nothing to do), or (resource, target) to relax."""
                    resource = act.read_recorded(item) if isinstance(item, Candidate) else act.get(item)
                    arn = item.arn if isinstance(item, Candidate) else item
                    if resource is None and isinstance(item, Candidate) and arn in recorded:
                        resource = act.get(arn)  # no longer selected, or gone: by its ARN
                    if resource is None:
                        return act.forget_vanished(arn, guard) if arn in recorded or wanted else None
                    if resource.record is None and arn not in recorded:
                        return None  # not engaged
                    target = target_for(resource) if target_for else None
                    if target == LEAVE:
                        return Outcome(kind, resource.arn, ALREADY)
                    return resource, target

                def one(item):
                    ready = prepare(item)
                    return _named(act.relax(*ready, guard), ready[0]) if isinstance(ready, tuple) else ready

                def many(chunk: list) -> list:
                    """Prepare each of `chunk`; the full restores among them go together (their
                    record tags removed in one call), partial relaxes one by one."""
                    results: list = [_safe(kind, prepare)(item) for item in chunk]
                    full = [(j, r[0]) for j, r in enumerate(results) if isinstance(r, tuple) and r[1] is None]
                    for j, r in enumerate(results):
                        if isinstance(r, tuple) and r[1] is not None:
                            results[j] = _named(_safe(kind, lambda res: act.relax(res, r[1], guard))(r[0]), r[0])
                    if full:
                        for (j, res), outcome in zip(full, act.restore_many([res for _, res in full], guard)):
                            results[j] = _named(outcome, res)
                    return results

                if act.tag_batch > 1:
                    run.each_many("relax", kind, items, act.walk_batch or act.tag_batch, many)
                else:
                    run.each("relax", kind, items, _safe(kind, one))

            run.kind(kind, walk)

        run.services(acts, relax_kind)
        return run.finish()

    def release(self, arn: str) -> Outcome:
        """Restore one resource now, with no plan guard, and forget it."""
        kind = kind_of(arn)
        act = self._acts((kind,))[kind]

        def one(_arn: str) -> Outcome:
            resource = act.get(arn)
            if resource is None:
                return act.forget_vanished(arn, no_guard)
            return _named(act.relax(resource, None, no_guard), resource)

        return _safe(kind, one)(arn)

    def status(self, *, kinds: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every engaged resource: kind, arn, name, original, applied, current and drift."""
        records = {r.arn: r for r in self.ledger.records()}
        rows = []
        for kind, act in self._acts(kinds).items():
            resources = {r.arn: r for r in act.discover() if r.record is not None}
            for rec in records.values():
                if rec.kind == kind and rec.arn not in resources:
                    resources[rec.arn] = act.get(rec.arn) or make_resource(kind, rec.arn, "", {}, {})
            for arn, res in sorted(resources.items()):
                record = restore.merge(res.record, records.get(arn))
                if record is None:
                    continue
                vanished = not res.current
                decisions = restore.decide(record.original, record.applied, res.current)
                rows.append({
                    "kind": kind,
                    "arn": arn,
                    "name": res.name,
                    "original": dict(record.original),
                    "applied": dict(record.applied),
                    "current": None if vanished else {k: res.current.get(k) for k in record.original},
                    "drift": {} if vanished else restore.drift(decisions),
                    "vanished": vanished,
                    "recorded_in": [w for w, has in (("tag", res.record is not None), ("ledger", arn in records)) if has],
                })
        return rows


class _EngageWalk:
    """One engage walk's state and steps (Engine.engage, Engine.engage_as_listed): each kind
    listed, read and engaged most harmful first (holdfast.engine.bookkeeping), and the
    deferred record tags of the kinds that defer them, last in their service's lane."""

    def __init__(self, engine: "Engine", kinds: Iterable[str] | None, *, dry_run: bool,
                 after: Mapping[str, str | None] | None, stuck: Iterable[str],
                 seen: Mapping[str, set[str]] | None, skip: frozenset[str]):
        self.ledger, self.settings = engine.ledger, engine.settings
        self.dry_run, self.after, self.stuck = dry_run, after or {}, frozenset(stuck)
        self.seen, self.skip = seen, skip
        self.acts = engine._acts(kinds)
        self.run = engine._run()
        self.limit = self.settings.max_resources
        self.listed: dict[str, list[Candidate]] = {}
        self.read: dict[str, Resource | None] = {}
        self.tagging: dict[str, Callable[[], None]] = {}   # kind -> its finish, after its deferred tags
        self.counted = 0   # selected resources of the kinds listed so far (count_together)
        # Whether max_resources counts the kinds together (`counted`) or each on its own
        # (`per_kind`): the resources a kind's later phase finds are counted the same way.
        self.together = True
        self.per_kind: dict[str, int] = {}
        self.defers = frozenset(k for k, a in self.acts.items() if a.defers_tag) if not dry_run else frozenset()

    def list_kind(self, kind: str) -> None:
        run = self.run
        run.progress(f"list {kind}")
        run.report.cursor[kind] = self.after.get(kind)  # a failed listing makes no progress
        run.kind(kind, lambda: self.listed.__setitem__(kind, self.acts[kind].candidates()))

    def list_and_engage(self, kind: str, count_together: bool) -> None:
        run, limit = self.run, self.limit
        self.list_kind(kind)
        if kind not in self.listed:
            return   # its listing failed: that kind's FAILED outcome
        got, selected = _count_selected({kind: self.acts[kind]}, {kind: self.listed[kind]}, limit)
        with run._lock:
            self.counted += selected
            self.per_kind[kind] = selected
            over = self.counted > limit if count_together else selected > limit
            if over:
                run.report.refused_kinds.add(kind)
                run.report.refused = (
                    f"the selector {self.settings.selector} matches {self.counted} resources so far, {selected} of them "
                    f"{kind}, more than max_resources ({limit}); nothing of the {kind} resources was changed"
                    if count_together else
                    f"the selector {self.settings.selector} matches {selected} {kind} resources, more than "
                    f"max_resources ({limit}); nothing of them was changed"
                )
        if over:
            return
        with run._lock:
            self.read.update(got)
        self.engage_kind(kind)

    def engage_kind(self, kind: str) -> None:
        run, read, ledger, dry_run = self.run, self.read, self.ledger, self.dry_run
        act, start = self.acts[kind], self.after.get(kind)
        known = (self.seen or {}).get(kind)
        work = act.plan if dry_run else act.engage

        def one(c: Candidate) -> Outcome | None:
            resource = read[c.arn] if c.arn in read else act.read(c)
            return None if resource is None else _named(work(resource), resource)

        def many(chunk: list[Candidate]) -> list:
            """Read each of `chunk`, then engage them together (their record tags in one call)."""
            results: list = [None] * len(chunk)
            ready: list[tuple[int, Resource]] = []
            for j, c in enumerate(chunk):
                try:
                    resource = read[c.arn] if c.arn in read else act.read(c)
                except (ClientError, BotoCoreError) as err:
                    results[j] = Outcome(kind, c.arn, FAILED, error=error_text(err))
                    continue
                if resource is not None:
                    ready.append((j, resource))
            for (j, resource), outcome in zip(ready, act.engage_many([r for _, r in ready])):
                results[j] = _named(outcome, resource)
            return results

        def engage_found(found: list[Candidate]) -> list:
            """The results of candidates a later-phase step found, engaged as the listed ones are."""
            if act.tag_batch > 1 and not dry_run:
                return many(found)
            return [_safe(kind, one)(c) for c in found]

        def walk() -> None:
            # In the kind's call context: the ledger's one Query is counted with the kind that made it.
            # Holdfast's own resources are never engaged, whatever their tags (holdfast.core.own).
            own = [(c, note) for c in self.listed[kind] if (note := act.own_candidate(c)) is not None]
            with run._lock:
                run.report.outcomes.extend(Outcome(kind, c.arn, SKIPPED, notes={"own": note}) for c, note in own)
            mine = {c.arn for c, _ in own}
            candidates = sorted((c for c in self.listed[kind] if c.arn not in mine),
                                key=lambda c: position(act, c, ledger))   # most harmful first
            prints = {c.arn: bookkeeping.walk_key(c) for c in candidates}
            todo = [c for c in candidates if c.arn not in self.skip
                    and bookkeeping.to_walk(act, c, ledger, after=start, seen=known)]
            later = act.defers_tag and not dry_run
            token = TAGS_LATER.set(later)   # its record tags in the second pass (tags_of)
            again = REWALK.set(known is not None)
            try:
                if act.tag_batch > 1 and not dry_run:
                    results = run.each_many("engage", kind, todo, act.walk_batch or act.tag_batch, many)
                else:
                    results = run.each("plan" if dry_run else "engage", kind, todo, _safe(kind, one))
                late: tuple[str | None, set[str]] | None = None
                if bookkeeping.walked_through(todo, results, self.stuck):
                    # Every listed candidate finished: the later phase, if the kind has one.
                    late = self.late_phase(kind, candidates, start, known, engage_found)
            finally:
                REWALK.reset(again)
                TAGS_LATER.reset(token)

            def finish() -> None:
                # After the deferred tags, if any: a tag left unwritten stops the cursor before its resource.
                cursor = bookkeeping.cursor(act, ledger, todo, results, start, self.stuck)
                if late is not None and bookkeeping.walked_through(todo, results, self.stuck):
                    cursor = late[0]
                run.report.cursor[kind] = cursor
                run.report.seen[kind] = {prints[c.arn] for c, r in zip(todo, results) if bookkeeping.finished(r)} \
                    | (late[1] if late is not None else set())

            if later:
                self.tagging[kind] = finish   # after the deferred tags, last in the lane
            else:
                finish()

        run.kind(kind, walk)

    def late_phase(self, kind: str, listed: list[Candidate], start: str | None, known: set[str] | None,
                   engage_found: Callable[[list[Candidate]], list]) -> tuple[str | None, set[str]]:
        """The kind's later phase (holdfast.engine.bookkeeping): its steps after the one the
        cursor `start` names (on a re-walk, `known`, those no finished walk has), each
        listing and engaging what it finds. Returns the kind's cursor (None: every step
        finished) and the walk keys of the steps finished."""
        run, act = self.run, self.acts[kind]
        keys = act.late_keys(listed)
        if not keys:
            return None, set()
        resume = order.late_key(start)
        steps = [k for k in keys if (not resume or k > resume)
                 and (known is None or bookkeeping.late_walk_key(k) not in known)]
        by_arn = {c.arn: c for c in self.listed[kind]}

        def step(key: str) -> tuple[bool, bool]:
            """(finished, listed): a step whose listing failed is finished but not listed."""
            found, note = act.late_candidates(key, by_arn)
            outcomes: list = [note] if note is not None else []
            found = [c for c in found if c.arn not in self.skip and act.own_candidate(c) is None]
            allowed = self.take(kind, len(found))
            if allowed:
                outcomes += engage_found(found)
            else:
                outcomes += [Outcome(kind, c.arn, SKIPPED, notes={"limit": {
                    "why": f"found by the later phase of the walk past max_resources ({self.limit}): left unchanged",
                    "fix": "raise max_resources, or narrow the selector"}}) for c in found]
            outcomes = [o for o in outcomes if o is not None]
            with run._lock:
                run.report.outcomes.extend(o for o in outcomes if isinstance(o, Outcome))
            return bookkeeping.step_finished(outcomes, self.stuck), note is None

        def safe_step(key: str):
            try:
                return step(key)
            except (ClientError, BotoCoreError) as err:
                # A listing that failed (a kind says so in its own outcome; this is for what it
                # does not catch): as a failed listing of the kind, retried by the next walk
                # until it is stuck.
                failed = f"discover:{kind}"
                with run._lock:
                    run.report.outcomes.append(Outcome(kind, failed, FAILED, error=f"{key}: {error_text(err)}"))
                return failed in self.stuck, False

        results = run.each("list late" if not self.dry_run else "plan late", kind, steps, safe_step)
        cursor = bookkeeping.late_cursor(steps, [r if r is NOT_WALKED else r[0] for r in results], start)
        prints = {bookkeeping.late_walk_key(k) for k, r in zip(steps, results) if r is not NOT_WALKED and all(r)}
        return cursor, prints

    def take(self, kind: str, n: int) -> bool:
        """Whether `n` more resources of `kind`, found by its later phase, stay within
        max_resources, counted as its listing's were (then they are counted)."""
        with self.run._lock:
            total = self.counted if self.together else self.per_kind.get(kind, 0)
            if n and total + n > self.limit:
                return False
            if self.together:
                self.counted += n
            else:
                self.per_kind[kind] = total + n
            return True

    def tags_of(self, kind: str) -> None:
        """The second pass: the record tags of what `kind` engaged through the ledger's
        record; a tag the deadline or an error left unwritten leaves the kind unfinished,
        so the next walk reads that resource again and writes it (_keep_copies)."""
        run = self.run
        finish = self.tagging.pop(kind, None)
        if finish is None:
            return   # its listing failed, or it was refused: nothing engaged
        act = self.acts[kind]

        def write(chunk: list) -> list:
            act.write_deferred(chunk)
            return [None] * len(chunk)

        def walk() -> None:
            deferred = act.take_deferred()
            done = run.each_many("tag", kind, deferred, max(1, act.tag_batch), write)
            for (_, _, outcome), result in zip(deferred, done):
                if result is NOT_WALKED:
                    outcome.notes["tag"] = {
                        "why": "engaged through the ledger's record; the deadline came before its record tag",
                        "fix": "the next walk writes it (the ledger's record restores it meanwhile)"}
            if any("tag" in outcome.notes for _, _, outcome in deferred):
                with run._lock:
                    run.report.complete = False
                    run.report.unfinished.add(kind)
            finish()

        run.kind(kind, walk)


def _count_selected(acts, listed: Mapping[str, list[Candidate]], limit: int) -> tuple[dict[str, Resource | None], int]:
    """How many resources are selected, for the blast radius, reading as few as it can.

    Holdfast's own resources are never engaged, so they are not counted: a stack tagged as a
    whole does not reach the limit through Holdfast's functions and mappings. Candidates
    that only their own tags can select are counted as selected unless that would exceed
    `limit`; only then are they read (and the reads kept for the walk)."""
    listed = {kind: [c for c in cs if acts[kind].own_candidate(c) is None] for kind, cs in listed.items()}
    certain = sum(1 for cs in listed.values() for c in cs if c.selected)
    unsure = [(kind, c) for kind, cs in listed.items() for c in cs if not c.selected]
    if certain + len(unsure) <= limit:
        return {}, certain + len(unsure)
    read: dict[str, Resource | None] = {}
    for kind, c in unsure:
        try:
            read[c.arn] = acts[kind].read(c)
        except (ClientError, BotoCoreError):
            pass  # counted as selected; the walk reads it again and reports the error
    return read, certain + sum(1 for _, c in unsure if read.get(c.arn, c) is not None)
















def _named(outcome: Outcome | None, resource: Resource) -> Outcome | None:
    """The outcome with its resource's name (the group, function, queue mapping or target
    group name the CLI's tables show instead of the ARN)."""
    if outcome is not None and not outcome.name and resource.name:
        outcome.name = resource.name
    return outcome


def _safe(kind: str, work: Callable[[Any], Outcome]) -> Callable[[Any], Outcome]:
    """Read errors on one resource (a describe that fails) become its FAILED outcome."""

    def run(item):
        try:
            return work(item)
        except (ClientError, BotoCoreError) as err:
            arn = item if isinstance(item, str) else item.arn
            return Outcome(kind, arn, FAILED, error=error_text(err))

    return run
