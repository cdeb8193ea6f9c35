"""SQS event source mappings: ScalingConfig.MaximumConcurrency at the floor while engaged (in
provisioned mode, the pollers: see below).

Key `MaximumConcurrency`: the cap, None for none (Lambda then scales to about 1,000
concurrent batches). Engaging never raises a cap: an owner cap at or below the floor
stays. A partial relax `{"MaximumConcurrency": n}` sets the cap to n — up (a raise) or
down (the drain controller's cut on a downstream alarm), both written the same guarded
way — but never above the original (no original cap = unlimited), and never over a cap
the owner set while engaged (drift: kept, and reported by the restore). An empty
ScalingConfig removes the cap (UpdateEventSourceMapping). Disabled mappings are capped
too, so re-enabling one while engaged does not flood its function.

Two rules of AWS the walk keeps (Lambda Developer Guide, "Configuring scaling behavior
for SQS event source mappings"):
- maximum concurrency and provisioned mode (ProvisionedPollerConfig) "are mutually
  exclusive options": a mapping in provisioned mode is held through its pollers instead
  (keys `MaximumPollers` and `MinimumPollers`, holdfast.core.pollers): engaging lowers
  MaximumPollers to the floor cap's pollers (at least 2, the API's least: up to 20
  concurrent invokes), and MinimumPollers with it where it is above; the drain's caps are
  written as pollers (10 concurrent invokes each, rounded down); each write sends the whole
  ProvisionedPollerConfig, and the restore puts the original pollers back;
- a cap above the function's reserved concurrency only produces throttles: Holdfast's
  own caps (the floor, each of the drain controller's caps) never exceed it. It is read
  with GetFunction (its `Concurrency`), once per function and only where it decides
  something: for a mapping the floor would lower (no cap, or one above the floor), and
  before a partial relax. GetFunction has its own 100/s budget, apart from the 15/s the
  rest of Lambda's control plane shares (GetFunctionConcurrency spends that one). A
  function whose reserved concurrency is below the floor is already limited harder than
  Holdfast would, and such a mapping is skipped; an owner cap above it is kept (exact
  restore) and reported. (A mapping already at or below the floor needs no write
  whatever its function reserves: `already`, without the read.)

Selected by the mapping's own tag or its function's. Mappings carry their own tags
(by their own ARN; they do not inherit the function's), read with ListTags: the record
on the mapping may be only there (an engage while the ledger was unreachable wrote it
nowhere else). The Tagging API's GetResources "support[s] all resource types" but the
exceptions it names (Resource Groups Tagging API reference, "Services that support the
Resource Groups Tagging API"; mappings are not among them), so the listing also reads
the mappings that carry the selector from it, in bulk and off Lambda's budget
(`lambda:event-source-mapping`, actuators.selection.tagged): the index. It is an index,
not the tags: AWS updates it asynchronously (it may lag a tag written or removed), and
an account may show no mappings in it at all; a failed read counts as empty.

A mapping its function's tag selects, or one the index lists, is capped before its tags
are read: during an engage walk whose tags come in the second pass (TAGS_LATER), with
the ledger answering and holding no record of it, and its cap about to be lowered, it is
capped through the ledger's record (`tags_unread`), one Lambda call instead of two, and
its ListTags is made in the second pass, just before its record tag (`write_deferred`).
There a record tag the ledger did not know is reconciled: the value the cap found was
the owner's (Holdfast's own writes after an engagement all go through the ledger first),
so the owner's change while engaged is what a restore puts back, and it is reported as
drift; a value the tag's record shows as Holdfast's own (only if the ledger lost the
record) keeps the tag unwritten and says so. A mapping only the index selected is
confirmed there too, before its record tag: when its own tags do not carry the selector
(the index lagged a tag its owner removed), no record tag is written and it is restored
at once from the ledger's record just written (`_not_selected`: the value the cap found
put back, an owner's change since kept, the record forgotten; no plan guard, as no plan
engages a mapping that is not selected), and reported skipped; while the index still
lists it, the first walk of each plan generation caps and restores it so; a re-walk
(REWALK) caps nothing on the index's word, reading the tags first. With the ledger
failing before such a cap, the mapping is left for the next walk (FAILED), never tagged
without its tags read.

A mapping neither selects costs ListTags (to learn whether its own tag selects it) and
the cap. The walk's order is harm per Lambda call before the cap (`calls_before_cap`,
core.order.per_call); when the index lists any mapping, those it does not list come after
every one it does (`likely`: they are expected not to be selected, and each costs a call
to find out), so no ListTags of the walk's first pass precedes an indexed mapping's cap.
When it lists none, every mapping is as likely as before the index. A relax skips the
ListTags of a mapping the ledger holds a record for: the ledger's record is the
engagement, and the untag is sent whether or not the tag is still there.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Mapping

from holdfast.actuators.selection import selected, tagged
from holdfast.actuators.tagged import REWALK, TAGS_LATER, LambdaTagged, TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import kinds, pollers, restore
from holdfast.core.audit import AuditResult, Progress
from holdfast.core.errors import Vanished
from holdfast.core.model import FAILED, SKIPPED, VANISHED, Candidate, Outcome, Record, Resource, no_guard
from holdfast.iam import uses

KEY = "MaximumConcurrency"
TAGS_UNREAD = "tags_unread"   # Resource.ref: read without its own tags, for a cap before them
BY_INDEX = "by_index"         # Resource.ref: selected by the Tagging API's index alone, not yet by its tags
INDEX_TYPE = "lambda:event-source-mapping"


def _service(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[2] if len(parts) > 5 and parts[0] == "arn" else None


def unqualified(function_arn: str) -> str:
    return ":".join(function_arn.split(":")[:7])


class EsmActuator(LambdaTagged, TaggedActuator):
    spec = kinds.ESM
    service = "lambda"
    # A cap write that lands late (throttled and retried, re-sent after a read timeout AWS
    # had processed) must not be read as the owner's, nor land after the final restore.
    serial_writes = True
    # A mapping's write-ahead tag would spend a Lambda call before its cap: while the ledger
    # answers, its record comes first and the tag in the walk's second pass (actuators.tagged).
    defers_tag = True
    # Lambda calls before a cap: 1 or 2 (calls_before_cap); the walk orders by harm per call.
    most_calls_before_cap = 2

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._reserved_by_function: dict[str, int | None] = {}
        self._indexed: frozenset[str] = frozenset()   # mappings the Tagging API's index lists as selected

    @uses("lambda:GetFunction", by=("reconciler", "cli", "readonly", "readiness"))
    def _reserved(self, function_arn: str) -> int | None:
        """The function's reserved concurrency (None: none reserved), once per function:
        GetFunction's `Concurrency` (GetFunction has its own budget, GetFunctionConcurrency
        spends the control plane's)."""
        function = unqualified(function_arn)
        with self._lock:
            if function in self._reserved_by_function:
                return self._reserved_by_function[function]
        client = self.clients("lambda")
        try:
            reserved = (client.get_function(FunctionName=function).get("Concurrency") or {}).get(
                "ReservedConcurrentExecutions")
        except client.exceptions.ResourceNotFoundException:
            reserved = None
        with self._lock:
            self._reserved_by_function[function] = reserved
        return reserved

    @uses("lambda:ListEventSourceMappings", by=("reconciler", "cli", "readonly", "readiness"))
    def candidates(self) -> list[Candidate]:
        """Every SQS mapping; selected already when its function carries the selector. The
        mappings the Tagging API's index lists as selected are kept for the walk (`indexed`)."""
        functions = tagged(self.clients, self.settings, "lambda:function")
        indexed = self._index()
        with self._lock:
            self._function_tags = functions
            self._indexed = indexed
        pages = self.clients("lambda").get_paginator("list_event_source_mappings").paginate()
        found = [
            Candidate(self._arn(m), m, selected=unqualified(m["FunctionArn"]) in functions)
            for page in pages
            for m in page["EventSourceMappings"]
            if _service(m.get("EventSourceArn", "")) == "sqs"   # any partition: aws, aws-us-gov, aws-cn
        ]
        return sorted(found, key=lambda c: c.arn)

    def _index(self) -> frozenset[str]:
        """The mappings the Tagging API's index lists with the selector (module doc); empty
        when it cannot be read: the walk is then as without an index, one ListTags first."""
        try:
            return frozenset(tagged(self.clients, self.settings, INDEX_TYPE))
        except AWS_ERRORS:
            return frozenset()

    def indexed(self, candidate: Candidate) -> bool:
        """Whether the Tagging API's index lists the mapping as carrying the selector."""
        with self._lock:
            return candidate.arn in self._indexed

    @uses("lambda:ListEventSourceMappings", by=("cli",))
    def audit(self, found: AuditResult, say: Progress) -> None:
        say("reading event source mappings")
        try:
            for mapping in pages(self.clients("lambda"), "list_event_source_mappings", "EventSourceMappings"):
                found.add(self.spec.audit_rule(mapping, self.settings, self.clients.region))
        except AWS_ERRORS as err:
            unreadable(found, "event source mappings", err)

    def own_candidate(self, candidate: Candidate) -> dict[str, str] | None:
        """A mapping is Holdfast's when its function is (holdfast.core.own)."""
        if not self.own:
            return None
        function = unqualified(candidate.listed["FunctionArn"])
        tags = getattr(self, "_function_tags", {}).get(function, {})
        return self.own.why(function, tags) if self.own.holds(function, tags) else None

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """Uncapped mappings first (Lambda scales one to about 1,000 concurrent batches),
        then the highest caps (an engaged one's original cap; a provisioned one's, the
        batches its MaximumPollers carry); disabled mappings after enabled ones of the same
        cap (they flood nothing until re-enabled)."""
        mapping = candidate.listed
        if pollers.provisioned(mapping.get("ProvisionedPollerConfig")):
            most = (original or {}).get(pollers.MAX_KEY, pollers.config(mapping["ProvisionedPollerConfig"])[pollers.MAX_KEY])
            cap = pollers.cap_of(most)
        else:
            cap = (original or {}).get(KEY, (mapping.get("ScalingConfig") or {}).get(KEY))
        harm = 2 * (1001 if cap is None else int(cap))
        return harm if mapping.get("State") in ("Disabled", "Disabling") else harm + 1

    def calls_before_cap(self, candidate: Candidate) -> int:
        """Lambda calls an engage spends on the mapping before its cap: one (the cap) when its
        function's tag selects it or the index lists it, two (ListTags, then the cap) when
        only its own tags can tell."""
        return 1 if candidate.selected or self.indexed(candidate) else 2

    def likely(self, candidate: Candidate) -> bool:
        """Whether the walk expects the mapping to be selected: False only for one neither its
        function's tag nor the index selects while the index lists other mappings."""
        with self._lock:
            return candidate.selected or not self._indexed or candidate.arn in self._indexed

    def _cap_before_tags(self, candidate: Candidate) -> bool:
        """Whether this engage may cap the mapping before reading its tags (module doc)."""
        by_index = self.indexed(candidate) and not REWALK.get()
        return bool(TAGS_LATER.get() and (candidate.selected or by_index)
                    and self.ledger.cached(candidate.arn) is None and self.ledger.available)

    def tags_unread(self, resource: Resource) -> bool:
        return bool(resource.ref.get(TAGS_UNREAD))

    @uses("lambda:ListTags", by=("reconciler", "cli", "readonly", "readiness"))
    def read(self, candidate: Candidate) -> Resource | None:
        if self._cap_before_tags(candidate):
            resource = self._resource(candidate.listed, {})
            if self.posture(resource.current):
                unread = {TAGS_UNREAD: True, **({} if candidate.selected else {BY_INDEX: True})}
                return replace(resource, confirmed=False, ref={**resource.ref, **unread})
            # Nothing to write (already at the floor, or held harder by its reserved
            # concurrency): its tags are read now, so a record on them is kept as ever.
        client = self.clients("lambda")
        try:
            tags = client.list_tags(Resource=candidate.arn)["Tags"]
        except client.exceptions.ResourceNotFoundException:
            return None  # deleted since the listing
        if candidate.selected or selected(self.settings, tags):
            return self._resource(candidate.listed, tags)
        return None

    def read_recorded(self, candidate: Candidate) -> Resource | None:
        """For a relax: a mapping the ledger holds a record for needs no ListTags (its
        record is the ledger's; the tags count as unconfirmed, so the untag is sent)."""
        if self.ledger.cached(candidate.arn) is None:
            return self.read(candidate)
        return replace(self._resource(candidate.listed, {}), confirmed=False)

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        """The cap as listed (no call: the reserved concurrency only if this run read it)."""
        mapping = candidate.listed
        return _current(mapping, self._known_reserved(mapping["FunctionArn"]))

    @uses("lambda:GetEventSourceMapping", "lambda:ListTags", by=("reconciler", "cli", "readonly", "readiness"))
    def get(self, arn: str) -> Resource | None:
        client = self.clients("lambda")
        try:
            mapping = client.get_event_source_mapping(UUID=arn.rsplit(":", 1)[-1])
            tags = client.list_tags(Resource=arn)["Tags"]
        except client.exceptions.ResourceNotFoundException:
            return None
        return self._resource(mapping, tags)

    def _arn(self, mapping: Mapping[str, Any]) -> str:
        if mapping.get("EventSourceMappingArn"):
            return mapping["EventSourceMappingArn"]
        partition, region, account = mapping["FunctionArn"].split(":")[1:2] + mapping["FunctionArn"].split(":")[3:5]
        return f"arn:{partition}:lambda:{region}:{account}:event-source-mapping:{mapping['UUID']}"

    def _resource(self, mapping: Mapping[str, Any], tags: Mapping[str, str]) -> Resource:
        cap = (mapping.get("ScalingConfig") or {}).get(KEY)
        name = f"{mapping['FunctionArn'].split(':')[6]}<-{mapping['EventSourceArn'].split(':')[-1]}"
        # Observed with the cap, never written: the function's reserved concurrency — read
        # only where the floor would lower a cap (see the module doc; pollers are no cap).
        lowers = not pollers.provisioned(mapping.get("ProvisionedPollerConfig")) and (
            cap is None or cap > self.settings.esm_floor)
        reserved = self._reserved(mapping["FunctionArn"]) if lowers else self._known_reserved(mapping["FunctionArn"])
        current = _current(mapping, reserved)
        return make_resource(self.kind, self._arn(mapping), name, current, tags,
                             {"uuid": mapping["UUID"], "function": mapping["FunctionArn"]})

    def _known_reserved(self, function_arn: str) -> int | None:
        with self._lock:
            return self._reserved_by_function.get(unqualified(function_arn))

    def _raise(self, resource: Resource, record: Record, target: Mapping[str, Any], guard) -> Outcome:
        """A partial relax's cap never passes the function's reserved concurrency: read it."""
        if "function" in resource.ref:
            resource = replace(resource, current={**resource.current, "reserved": self._reserved(resource.ref["function"])})
        return super()._raise(resource, record, target, guard)

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        cap = current.get(KEY)
        if current.get("provisioned"):
            return pollers.posture(current, self._floor_pollers())
        if current.get("reserved") is not None and current["reserved"] < self.settings.esm_floor:
            return {}   # see engage: skipped and reported
        return {KEY: self.settings.esm_floor} if cap is None or cap > self.settings.esm_floor else {}

    def _floor_pollers(self) -> int:
        return pollers.floor_pollers(self.settings.esm_floor)

    def may_write(self, key: str, value: Any) -> list[Any]:
        """The floor (for pollers, the floor cap's pollers): an engagement writes it, so it
        stays Holdfast's through the drain. The drain's controller decides its caps as it
        goes; each moves the record before it is written (TaggedActuator._raise,
        core.restore.advance)."""
        return [value, self._floor_pollers() if key in pollers.KEYS else self.settings.esm_floor]

    @uses("lambda:GetEventSourceMapping", by=("reconciler", "cli", "readonly", "readiness"))
    def fresh(self, resource: Resource) -> Resource:
        """The cap read again just before a relaxing write: the walk's listing may be a minute old."""
        client = self.clients("lambda")
        try:
            mapping = client.get_event_source_mapping(UUID=resource.ref["uuid"])
        except client.exceptions.ResourceNotFoundException as err:
            raise Vanished() from err
        return replace(resource, current=_current(mapping, resource.current.get("reserved")))

    def plan(self, resource: Resource) -> Outcome:
        outcome = self._skipped(resource) or super().plan(resource)
        if outcome.changes and resource.current.get("provisioned"):
            outcome.notes["provisioned"] = self._provisioned_note()
        return outcome

    def engage(self, resource: Resource) -> Outcome:
        skipped = self._skipped(resource)
        if skipped is not None:
            return skipped
        outcome = super().engage(resource)
        cap, reserved = resource.current.get(KEY), resource.current.get("reserved")
        if outcome.changes and resource.current.get("provisioned"):
            outcome.notes["provisioned"] = self._provisioned_note()
        if reserved is not None and cap is not None and cap > reserved:
            outcome.notes["reserved"] = {"why": (f"the owner's cap {cap} is above the function's reserved concurrency "
                                                 f"{reserved}: it only produces throttles; it is restored as it was")}
        return outcome

    def write_deferred(self, items: list) -> list[Outcome]:
        """The second pass (actuators.tagged), with the tags of a mapping capped before them
        read first (ListTags): a record tag the ledger did not know is reconciled (module doc)."""
        ready = []
        for resource, record, outcome in items:
            if self.tags_unread(resource):
                try:
                    tags = self.own_tags(resource)
                except (Vanished, *AWS_ERRORS) as err:
                    why = "it vanished" if isinstance(err, Vanished) else error_text(err)
                    outcome.notes["tag"] = {
                        "why": f"capped through the ledger's record; its tags could not be read yet ({why})",
                        "fix": "the next walk reads them and writes its record tag (the ledger's record restores it meanwhile)"}
                    continue
                resource = self.with_tags(resource, tags)
                if resource.ref.get(BY_INDEX) and not selected(self.settings, tags):
                    self._not_selected(resource, outcome)
                    continue
                if not self._reconcile(resource, record, outcome):
                    continue
            ready.append((resource, record, outcome))
        super().write_deferred(ready)
        return [outcome for _, _, outcome in items]

    def _not_selected(self, resource: Resource, outcome: Outcome) -> None:
        """A mapping the index listed as selected whose own tags do not carry the selector:
        restored from the ledger's record this walk wrote (never from a record on its tags,
        an older engagement's, which is left as it is), so it ends as the cap found it (an
        owner's change since kept), with no record anywhere of this walk's. No plan guard:
        no plan engages a mapping that is not selected. `outcome` becomes what happened."""
        [restored] = self.restore_many([replace(resource, record=None)], no_guard)
        key, value = self.settings.selector_key, self.settings.selector_value
        note = {"why": (f"the Tagging API's index listed it with {key}={value} but its own tags (ListTags) do not "
                        "carry it (the index lags the tags): capped before its tags were read, then restored from "
                        "the record this walk wrote"),
                "restore": {"action": restored.action, "changes": restored.changes, "drift": restored.drift}}
        outcome.changes, outcome.drift, outcome.recorded_in = {}, restored.drift, []
        if restored.action in (FAILED, VANISHED) or restored.error:
            outcome.action, outcome.error = restored.action, restored.error
            if restored.action == FAILED:
                outcome.recorded_in = ["ledger"]
                note["fix"] = (f"its ledger record restores it at the relax; `holdfast release {resource.arn}` "
                               "restores it now")
        else:
            outcome.action = SKIPPED
        outcome.notes["selection"] = note

    def _reconcile(self, resource: Resource, record: Record, outcome: Outcome) -> bool:
        """A record tag found after the cap (an engagement while the ledger was unreachable)
        against the ledger's record just written: whether the record tag is to be written.
        Holdfast's writes after an engagement all claim the ledger first (serial_writes), so
        a value the tag's record does not show as Holdfast's was the owner's, set while
        engaged: the ledger's record (that value as the original) is what a restore puts
        back, the owner's change kept, and it is reported as drift. A value the tag shows as
        Holdfast's own means the ledger lost the record: the tag, the older record, is kept
        as it is, and the outcome says so."""
        found = resource.record
        if found is None:
            return True
        differ = restore.conflicts(found.original, record.original)
        if not differ:
            return True
        ours = [k for k in differ if record.original.get(k) in restore.holdfast_values(found.applied.get(k))]
        if ours:
            outcome.notes["record"] = {
                "why": (f"its tag holds an earlier engagement's record (original {dict(found.original)}) that the "
                        f"ledger did not, and the value the cap found ({ {k: record.original.get(k) for k in ours} }) "
                        "was Holdfast's own: the tag is kept as it is; the ledger's record holds that value as the "
                        "original"),
                "fix": (f"check the mapping's original; `holdfast release {resource.arn}` restores the ledger's "
                        "record's original")}
            return False
        for k in differ:
            outcome.drift[k] = {"original": found.original.get(k), "applied": found.applied.get(k),
                                "current": record.original.get(k)}
        outcome.notes["drift"] = {
            "why": ("its tag held the record of an engagement made while the ledger was unreachable, and the owner "
                    "had changed it since; it was capped again before that record was read (its tags are read after "
                    "the caps): the owner's value is what a restore puts back"),
        }
        return True

    def _provisioned_note(self) -> dict[str, str]:
        floor = self._floor_pollers()
        return {"why": (f"provisioned mode: held through its pollers (ScalingConfig cannot be combined with it), "
                        f"MaximumPollers {floor}, which carry up to {pollers.cap_of(floor)} concurrent invokes "
                        f"({pollers.INVOKES_PER_POLLER} a poller; {pollers.LEAST_POLLERS} pollers is the least the API "
                        "takes); the drain's caps are written as pollers, rounded down")}

    def _skipped(self, resource: Resource) -> Outcome | None:
        current = resource.current
        if current.get("provisioned"):
            return None   # pollers are no cap above the reserved concurrency: never skipped for it
        reserved = current.get("reserved")
        if reserved is not None and reserved < self.settings.esm_floor and resource.record is None:
            return Outcome(self.kind, resource.arn, SKIPPED, notes={"reserved": {
                "why": (f"the function's reserved concurrency is {reserved}, below the floor {self.settings.esm_floor}: "
                        "it is already limited harder than a cap would, and a cap above it only produces throttles"),
            }})
        return None

    def partial(self, record: Record, current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
        n = target.get(KEY) if set(target) == {KEY} else None
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 1000:
            raise ValueError(f"an event source mapping relaxes to {{'{KEY}': 2..1000}}, got {dict(target)!r}")
        if bool(current.get("provisioned")) != (pollers.MAX_KEY in record.original):
            # The owner switched the mapping's scaling mode while engaged: the setting
            # Holdfast recorded is gone, and one it has no original for is never written.
            return {}
        if current.get("provisioned"):
            return self._partial_pollers(record, current, n)
        original = record.original.get(KEY, current.get(KEY))
        cap = n if original is None else min(n, original)   # never above the owner's own cap
        cap = self._within_reserved(cap, current)
        now = current.get(KEY)
        if KEY in record.applied and now not in restore.holdfast_values(record.applied[KEY]):
            return {}  # the owner set it while engaged: theirs, kept now and reported on restore
        return {} if now == cap else {KEY: cap}

    def _within_reserved(self, cap: int, current: Mapping[str, Any]) -> int:
        """Holdfast's own steps never pass the function's reserved concurrency (nor go below the floor)."""
        if current.get("reserved") is None:
            return cap
        return max(min(cap, current["reserved"]), min(self.settings.esm_floor, cap))

    def _partial_pollers(self, record: Record, current: Mapping[str, Any], n: int) -> dict[str, Any]:
        """A provisioned mapping's step to the drain's cap `n`: the cap's pollers (rounded
        down, never below the API's least), never above the owner's own MaximumPollers nor
        below its MinimumPollers in force (the minimum stays where the engagement left it)."""
        most = pollers.pollers_for(self._within_reserved(n, current))
        most = max(min(most, record.original[pollers.MAX_KEY]), current.get(pollers.MIN_KEY) or pollers.LEAST_POLLERS)
        now = current.get(pollers.MAX_KEY)
        if now not in restore.holdfast_values(record.applied.get(pollers.MAX_KEY)):
            return {}  # the owner set it while engaged: theirs, kept now and reported on restore
        return {} if now == most else {pollers.MAX_KEY: most}

    @uses("lambda:UpdateEventSourceMapping", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        """One UpdateEventSourceMapping: the cap as ScalingConfig (an empty one removes it),
        or the whole ProvisionedPollerConfig (holdfast.core.pollers.to_write)."""
        update: dict[str, Any] = {}
        if KEY in values:
            update["ScalingConfig"] = {} if values[KEY] is None else {KEY: values[KEY]}
        if any(k in values for k in pollers.KEYS):
            update["ProvisionedPollerConfig"] = pollers.to_write(resource.current, values)
        self._call("update_event_source_mapping", UUID=resource.ref["uuid"], **update)

    def _changes(self, resource: Resource, values: Mapping[str, Any]) -> dict[str, Any]:
        """As written: a restored MinimumPollers brought down to an owner's lower maximum shows that."""
        if any(k in values for k in pollers.KEYS) and resource.current.get("provisioned"):
            sent = pollers.to_write(resource.current, values)
            values = {**values, **{k: sent[k] for k in pollers.KEYS if k in values}}
        return super()._changes(resource, values)


def _current(mapping: Mapping[str, Any], reserved: int | None) -> dict[str, Any]:
    """The values Holdfast manages on a mapping as listed or read: the cap, and for one in
    provisioned mode its pollers (an absent field as its default, holdfast.core.pollers);
    with them, observed only, the raw ProvisionedPollerConfig and the function's reserved
    concurrency."""
    raw = mapping.get("ProvisionedPollerConfig")
    current: dict[str, Any] = {KEY: (mapping.get("ScalingConfig") or {}).get(KEY),
                               "provisioned": dict(raw) if pollers.provisioned(raw) else None, "reserved": reserved}
    if current["provisioned"]:
        current.update(pollers.config(raw))
    return current
