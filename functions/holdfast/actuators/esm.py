"""SQS event source mappings: ScalingConfig.MaximumConcurrency at the floor while engaged.

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
  exclusive options": a mapping in provisioned mode is `skipped` and reported, never
  written (its MaximumPollers is the owner's to lower by hand; the note says how);
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
(by their own ARN; they do not inherit the function's), read with ListTags for each SQS
mapping an engage walks: the record on the mapping is only there (an engage while the
ledger was unreachable wrote it nowhere else), and Holdfast has found no AWS reference
that the Tagging API's GetResources indexes mappings (moto does not). A relax skips the
ListTags of a mapping the ledger holds a record for: the ledger's record is the
engagement, and the untag is sent whether or not the tag is still there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import threading

from holdfast.core import restore
from holdfast.core.errors import Vanished
from holdfast.core import kinds
from holdfast.iam import uses
from holdfast.core.model import SKIPPED, Candidate, Outcome, Record, Resource
from holdfast.actuators.tagged import LambdaTagged, TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS
from holdfast.core.audit import AuditResult, Progress
from holdfast.actuators.selection import selected, tagged

KEY = "MaximumConcurrency"


def _service(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[2] if len(parts) > 5 and parts[0] == "arn" else None


def unqualified(function_arn: str) -> str:
    return ":".join(function_arn.split(":")[:7])


class EsmActuator(LambdaTagged, TaggedActuator):
    spec = kinds.ESM
    service = "lambda"
    lambda_limited = True
    # A mapping's write-ahead tag would spend a Lambda call before its cap: while the ledger
    # answers, its record comes first and the tag in the walk's second pass (actuators.tagged).
    defers_tag = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._reserved_by_function: dict[str, int | None] = {}

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
        """Every SQS mapping; selected already when its function carries the selector."""
        functions = tagged(self.clients, self.settings, "lambda:function")
        with self._lock:
            self._function_tags = functions
        pages = self.clients("lambda").get_paginator("list_event_source_mappings").paginate()
        found = [
            Candidate(self._arn(m), m, selected=unqualified(m["FunctionArn"]) in functions)
            for page in pages
            for m in page["EventSourceMappings"]
            if _service(m.get("EventSourceArn", "")) == "sqs"   # any partition: aws, aws-us-gov, aws-cn
        ]
        return sorted(found, key=lambda c: c.arn)

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
        then the highest caps (an engaged one's original cap); disabled mappings after
        enabled ones of the same cap (they flood nothing until re-enabled); provisioned
        ones, which Holdfast does not cap, last."""
        mapping = candidate.listed
        if mapping.get("ProvisionedPollerConfig"):
            return 0
        cap = (original or {}).get(KEY, (mapping.get("ScalingConfig") or {}).get(KEY))
        harm = 2 * (1001 if cap is None else int(cap))
        return harm if mapping.get("State") in ("Disabled", "Disabling") else harm + 1

    @uses("lambda:ListTags", by=("reconciler", "cli", "readonly", "readiness"))
    def read(self, candidate: Candidate) -> Resource | None:
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
        reserved = self._known_reserved(mapping["FunctionArn"])
        return {KEY: (mapping.get("ScalingConfig") or {}).get(KEY),
                "provisioned": mapping.get("ProvisionedPollerConfig") or None, "reserved": reserved}

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
        provisioned = mapping.get("ProvisionedPollerConfig") or None
        # Observed with the cap, never written: provisioned mode and the function's reserved
        # concurrency — read only where the floor would lower the cap (see the module doc).
        lowers = not provisioned and (cap is None or cap > self.settings.esm_floor)
        reserved = self._reserved(mapping["FunctionArn"]) if lowers else self._known_reserved(mapping["FunctionArn"])
        current = {KEY: cap, "provisioned": provisioned, "reserved": reserved}
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
        if current.get("provisioned") or (current.get("reserved") is not None and current["reserved"] < self.settings.esm_floor):
            return {}   # see engage: skipped and reported
        return {KEY: self.settings.esm_floor} if cap is None or cap > self.settings.esm_floor else {}

    def may_write(self, key: str, value: Any) -> list[Any]:
        """The floor: an engagement writes it, so it stays Holdfast's through the drain. The
        drain's controller decides its caps as it goes; each moves the record before it is
        written (TaggedActuator._raise, core.restore.advance)."""
        return [value, self.settings.esm_floor]

    @uses("lambda:GetEventSourceMapping", by=("reconciler", "cli", "readonly", "readiness"))
    def fresh(self, resource: Resource) -> Resource:
        """The cap read again just before a relaxing write: the walk's listing may be a minute old."""
        client = self.clients("lambda")
        try:
            mapping = client.get_event_source_mapping(UUID=resource.ref["uuid"])
        except client.exceptions.ResourceNotFoundException as err:
            raise Vanished() from err
        return replace(resource, current={**resource.current, KEY: (mapping.get("ScalingConfig") or {}).get(KEY)})

    def plan(self, resource: Resource) -> Outcome:
        return self._skipped(resource) or super().plan(resource)

    def engage(self, resource: Resource) -> Outcome:
        skipped = self._skipped(resource)
        if skipped is not None:
            return skipped
        outcome = super().engage(resource)
        cap, reserved = resource.current.get(KEY), resource.current.get("reserved")
        if reserved is not None and cap is not None and cap > reserved:
            outcome.notes["reserved"] = {"why": (f"the owner's cap {cap} is above the function's reserved concurrency "
                                                 f"{reserved}: it only produces throttles; it is restored as it was")}
        return outcome

    def _skipped(self, resource: Resource) -> Outcome | None:
        current = resource.current
        if current.get("provisioned") and resource.record is None:
            pollers = current["provisioned"]
            return Outcome(self.kind, resource.arn, SKIPPED, notes={"provisioned": {
                "why": (f"provisioned mode ({pollers}): ScalingConfig cannot be combined with it, so Holdfast does not "
                        "cap this mapping"),
                "fix": (f"lower its pollers by hand while the dependency recovers: aws lambda update-event-source-mapping "
                        f"--uuid {resource.ref['uuid']} --provisioned-poller-config MinimumPollers=1,MaximumPollers=N"),
            }})
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
        original = record.original.get(KEY, current.get(KEY))
        cap = n if original is None else min(n, original)   # never above the owner's own cap
        if current.get("reserved") is not None:
            # Holdfast's own steps never pass the function's reserved concurrency (nor go below the floor).
            cap = max(min(cap, current["reserved"]), min(self.settings.esm_floor, cap))
        now = current.get(KEY)
        if KEY in record.applied and now not in restore.holdfast_values(record.applied[KEY]):
            return {}  # the owner set it while engaged: theirs, kept now and reported on restore
        return {} if now == cap else {KEY: cap}

    @uses("lambda:UpdateEventSourceMapping", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        cap = values[KEY]
        self._call("update_event_source_mapping", UUID=resource.ref["uuid"],
                   ScalingConfig={} if cap is None else {KEY: cap})
