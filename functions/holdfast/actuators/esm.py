"""SQS event source mappings: ScalingConfig.MaximumConcurrency at the floor while engaged.

Key `MaximumConcurrency`: the cap, None for none (Lambda then scales to about 1,000
concurrent batches). Engaging never raises a cap: an owner cap at or below the floor
stays. A partial relax `{"MaximumConcurrency": n}` raises the cap to n but never above
the original (no original cap = unlimited), and never over a cap the owner set while
engaged (drift: kept, and reported by the restore). An empty ScalingConfig removes the cap
(UpdateEventSourceMapping). Disabled mappings are capped too, so re-enabling one while
engaged does not flood its function.

Selected by the mapping's own tag or its function's. Mappings carry their own tags
(by their own ARN; they do not inherit the function's), read with ListTags for each SQS
mapping: the tagging API does not list mappings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from holdfast.core import restore
from holdfast.core.errors import Vanished
from holdfast.core import kinds
from holdfast.iam import uses
from holdfast.core.model import Candidate, Record, Resource
from holdfast.actuators.tagged import LambdaTagged, TaggedActuator, make_resource
from holdfast.actuators.selection import selected, tagged

KEY = "MaximumConcurrency"


def unqualified(function_arn: str) -> str:
    return ":".join(function_arn.split(":")[:7])


class EsmActuator(LambdaTagged, TaggedActuator):
    spec = kinds.ESM
    service = "lambda"
    lambda_limited = True

    @uses("lambda:ListEventSourceMappings", by=("reconciler", "cli"))
    def candidates(self) -> list[Candidate]:
        """Every SQS mapping; selected already when its function carries the selector."""
        functions = set(tagged(self.clients, self.settings, "lambda:function"))
        pages = self.clients("lambda").get_paginator("list_event_source_mappings").paginate()
        found = [
            Candidate(self._arn(m), m, selected=unqualified(m["FunctionArn"]) in functions)
            for page in pages
            for m in page["EventSourceMappings"]
            if m.get("EventSourceArn", "").startswith("arn:aws:sqs:")
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
        return {KEY: (candidate.listed.get("ScalingConfig") or {}).get(KEY)}

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
        return make_resource(self.kind, self._arn(mapping), name, {KEY: cap}, tags, {"uuid": mapping["UUID"]})

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        cap = current.get(KEY)
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
        return replace(resource, current={KEY: (mapping.get("ScalingConfig") or {}).get(KEY)})

    def partial(self, record: Record, current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
        if set(target) != {KEY} or not isinstance(target[KEY], int):
            raise ValueError(f"an event source mapping relaxes to {{'{KEY}': int}}, got {dict(target)!r}")
        original = record.original.get(KEY, current.get(KEY))
        cap = target[KEY] if original is None else min(target[KEY], original)
        now = current.get(KEY)
        if KEY in record.applied and now not in restore.holdfast_values(record.applied[KEY]):
            return {}  # the owner set it while engaged: theirs, kept now and reported on restore
        return {} if now is None or now >= cap else {KEY: cap}

    @uses("lambda:UpdateEventSourceMapping", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        cap = values[KEY]
        self._call("update_event_source_mapping", UUID=resource.ref["uuid"],
                   ScalingConfig={} if cap is None else {KEY: cap})
