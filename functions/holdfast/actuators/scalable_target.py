"""Application Auto Scaling targets: dynamic scale-in suspended while engaged.

Key `DynamicScalingInSuspended` (bool). The owner's other two flags
(DynamicScalingOutSuspended, ScheduledScalingSuspended) are sent back as a read just
before the write found them: RegisterScalableTarget takes SuspendedState as one object,
so every write names all three.

RegisterScalableTarget also *creates* a target that does not exist, so each write first
checks the target is still there: Holdfast must never register a target its owner
deleted. Targets are selected by their own tag (ListTagsForResource, one call each:
the tagging API does not list them) or, for ECS, by their service's tag.
"""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core import kinds
from holdfast.iam import uses
from holdfast.core.model import Candidate, Resource
from holdfast.actuators.tagged import TaggedActuator, make_resource
from holdfast.core.errors import Vanished
from holdfast.actuators.selection import selected, tagged

KEY = "DynamicScalingInSuspended"
FLAGS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")
# Namespaces whose scale-in removes compute while new capacity cannot be launched.
NAMESPACES = ("ecs", "ec2", "elasticmapreduce", "sagemaker")


class ScalableTargetActuator(TaggedActuator):
    spec = kinds.SCALABLE_TARGET
    service = "application-autoscaling"

    @uses("application-autoscaling:DescribeScalableTargets", by=("reconciler", "cli"))
    def candidates(self) -> list[Candidate]:
        """Every target in NAMESPACES; selected already when its ECS service carries the selector."""
        services = {arn.split(":", 5)[5] for arn in tagged(self.clients, self.settings, "ecs:service")}
        found = [
            Candidate(t["ScalableTargetARN"], t, selected=t["ServiceNamespace"] == "ecs" and t["ResourceId"] in services)
            for t in self._targets()
        ]
        return sorted(found, key=lambda c: c.arn)

    @uses("application-autoscaling:ListTagsForResource", by=("reconciler", "cli"))
    def read(self, candidate: Candidate) -> Resource | None:
        client = self.clients("application-autoscaling")
        try:
            tags = client.list_tags_for_resource(ResourceARN=candidate.arn)["Tags"]
        except client.exceptions.ResourceNotFoundException:
            return None  # deregistered since the listing
        if candidate.selected or selected(self.settings, tags):
            return self._resource(candidate.listed, tags)
        return None

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        return self._resource(candidate.listed, {}).current

    @uses("application-autoscaling:DescribeScalableTargets", "application-autoscaling:ListTagsForResource",
          by=("reconciler", "cli"))
    def get(self, arn: str) -> Resource | None:
        client = self.clients("application-autoscaling")
        for target in self._targets():
            if target["ScalableTargetARN"] == arn:
                return self._resource(target, client.list_tags_for_resource(ResourceARN=arn)["Tags"])
        return None

    def _targets(self, namespaces=NAMESPACES, **filters: Any):
        paginator = self.clients("application-autoscaling").get_paginator("describe_scalable_targets")
        for namespace in namespaces:
            for page in paginator.paginate(ServiceNamespace=namespace, **filters):
                yield from (t for t in page["ScalableTargets"] if t.get("ScalableTargetARN"))

    def _resource(self, target: Mapping[str, Any], tags: Mapping[str, str]) -> Resource:
        state = target.get("SuspendedState") or {}
        ref = {k: target[k] for k in ("ServiceNamespace", "ResourceId", "ScalableDimension")}
        return make_resource(self.kind, target["ScalableTargetARN"], target["ResourceId"],
                             {f: bool(state.get(f, False)) for f in FLAGS}, tags, ref)

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        return {} if current.get(KEY) else {KEY: True}

    @uses("application-autoscaling:DescribeScalableTargets", "application-autoscaling:RegisterScalableTarget",
          by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        ref = resource.ref
        still = self._targets((ref["ServiceNamespace"],), ResourceIds=[ref["ResourceId"]],
                              ScalableDimension=ref["ScalableDimension"])
        found = [t for t in still if t["ScalableTargetARN"] == resource.arn]
        if not found:
            raise Vanished()
        # The other flags from this read, just before the write: the owner's changes since
        # the walk read the target stay (RegisterScalableTarget takes all three at once).
        now = found[0].get("SuspendedState") or {}
        state = {f: bool(values[f]) if f in values else bool(now.get(f, False)) for f in FLAGS}
        self.clients("application-autoscaling").register_scalable_target(**ref, SuspendedState=state)

    @uses("application-autoscaling:TagResource", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        self._call("tag_resource", ResourceARN=resource.arn, Tags=dict(tags))

    @uses("application-autoscaling:UntagResource", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._call("untag_resource", ResourceARN=resource.arn, TagKeys=keys)
