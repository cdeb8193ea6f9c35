"""SQS event source mappings: ScalingConfig.MaximumConcurrency at the floor while engaged.

Key `MaximumConcurrency`: the cap, None for none (Lambda then scales to about 1,000
concurrent batches). Engaging never raises a cap: an owner cap at or below the floor
stays. A partial relax `{"MaximumConcurrency": n}` raises the cap to n but never above
the original (no original cap = unlimited), and never over a cap the owner set while
engaged (drift: kept, and reported by the restore). An empty ScalingConfig removes the cap
(UpdateEventSourceMapping). Disabled mappings are capped too, so re-enabling one while
engaged does not flood its function.

Two rules of AWS the walk keeps (Lambda Developer Guide, "Configuring scaling behavior
for SQS event source mappings"):
- maximum concurrency and provisioned mode (ProvisionedPollerConfig) "are mutually
  exclusive options": a mapping in provisioned mode is `skipped` and reported, never
  written (its MaximumPollers is the owner's to lower by hand; the note says how);
- a cap above the function's reserved concurrency only produces throttles: Holdfast's
  own caps (the floor, each drain step) never exceed it (GetFunctionConcurrency, once
  per function); a function whose reserved concurrency is below the floor is already
  limited harder than Holdfast would, and is skipped; an owner cap above it is kept
  (exact restore) and reported.

Selected by the mapping's own tag or its function's. Mappings carry their own tags
(by their own ARN; they do not inherit the function's), read with ListTags for each SQS
mapping: the tagging API does not list mappings.
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
from holdfast.actuators.tagged import LambdaTagged, TaggedActuator, make_resource
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

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._reserved_by_function: dict[str, int | None] = {}

    @uses("lambda:GetFunctionConcurrency", by=("reconciler", "cli"))
    def _reserved(self, function_arn: str) -> int | None:
        """The function's reserved concurrency (None: none reserved), once per function."""
        function = unqualified(function_arn)
        with self._lock:
            if function in self._reserved_by_function:
                return self._reserved_by_function[function]
        client = self.clients("lambda")
        try:
            reserved = client.get_function_concurrency(FunctionName=function).get("ReservedConcurrentExecutions")
        except client.exceptions.ResourceNotFoundException:
            reserved = None
        with self._lock:
            self._reserved_by_function[function] = reserved
        return reserved

    @uses("lambda:ListEventSourceMappings", by=("reconciler", "cli"))
    def candidates(self) -> list[Candidate]:
        """Every SQS mapping; selected already when its function carries the selector."""
        functions = set(tagged(self.clients, self.settings, "lambda:function"))
        pages = self.clients("lambda").get_paginator("list_event_source_mappings").paginate()
        found = [
            Candidate(self._arn(m), m, selected=unqualified(m["FunctionArn"]) in functions)
            for page in pages
            for m in page["EventSourceMappings"]
            if _service(m.get("EventSourceArn", "")) == "sqs"   # any partition: aws, aws-us-gov, aws-cn
        ]
        return sorted(found, key=lambda c: c.arn)

    @uses("lambda:ListTags", by=("reconciler", "cli"))
    def read(self, candidate: Candidate) -> Resource | None:
        client = self.clients("lambda")
        try:
            tags = client.list_tags(Resource=candidate.arn)["Tags"]
        except client.exceptions.ResourceNotFoundException:
            return None  # deleted since the listing
        if candidate.selected or selected(self.settings, tags):
            return self._resource(candidate.listed, tags)
        return None

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        """The cap as listed (no call: the reserved concurrency only if this run read it)."""
        mapping = candidate.listed
        with self._lock:
            reserved = self._reserved_by_function.get(unqualified(mapping["FunctionArn"]))
        return {KEY: (mapping.get("ScalingConfig") or {}).get(KEY),
                "provisioned": mapping.get("ProvisionedPollerConfig") or None, "reserved": reserved}

    @uses("lambda:GetEventSourceMapping", "lambda:ListTags", by=("reconciler", "cli"))
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
        # Observed with the cap, never written: provisioned mode and the function's reserved concurrency.
        current = {KEY: cap, "provisioned": mapping.get("ProvisionedPollerConfig") or None,
                   "reserved": self._reserved(mapping["FunctionArn"])}
        return make_resource(self.kind, self._arn(mapping), name, current, tags, {"uuid": mapping["UUID"]})

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        cap = current.get(KEY)
        if current.get("provisioned") or (current.get("reserved") is not None and current["reserved"] < self.settings.esm_floor):
            return {}   # see engage: skipped and reported
        return {KEY: self.settings.esm_floor} if cap is None or cap > self.settings.esm_floor else {}

    def may_write(self, key: str, value: Any) -> list[Any]:
        """The floor and every cap step: an engagement may write each (issue 11, finding 4)."""
        return [value, self.settings.esm_floor, *self.settings.esm_cap_steps]

    @uses("lambda:GetEventSourceMapping", by=("reconciler", "cli"))
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
        if set(target) != {KEY} or not isinstance(target[KEY], int):
            raise ValueError(f"an event source mapping relaxes to {{'{KEY}': int}}, got {dict(target)!r}")
        original = record.original.get(KEY, current.get(KEY))
        cap = target[KEY] if original is None else min(target[KEY], original)
        if current.get("reserved") is not None:
            # Holdfast's own steps never pass the function's reserved concurrency (nor go below the floor).
            cap = max(min(cap, current["reserved"]), min(self.settings.esm_floor, cap))
        now = current.get(KEY)
        if KEY in record.applied and now not in restore.holdfast_values(record.applied[KEY]):
            return {}  # the owner set it while engaged: theirs, kept now and reported on restore
        return {} if now is None or now >= cap else {KEY: cap}

    @uses("lambda:UpdateEventSourceMapping", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        cap = values[KEY]
        self._call("update_event_source_mapping", UUID=resource.ref["uuid"],
                   ScalingConfig={} if cap is None else {KEY: cap})
