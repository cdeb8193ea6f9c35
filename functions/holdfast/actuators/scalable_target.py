"""Application Auto Scaling targets of ECS services: dynamic scale-in suspended while engaged.

Key `DynamicScalingInSuspended` (bool). The owner's other two flags
(DynamicScalingOutSuspended, ScheduledScalingSuspended) are sent back as a read just
before the write found them: RegisterScalableTarget takes SuspendedState as one object,
so every write names all three.

Three rules of RegisterScalableTarget shape the writes (Application Auto Scaling API
reference, RegisterScalableTarget):
- It *creates* a target that does not exist, so each write first checks the target is
  still there: Holdfast must never register a target its owner deleted.
- Its caller must hold the target service's own permissions (for ECS,
  ecs:DescribeServices and ecs:UpdateService), or every write is a ValidationException.
  Holdfast serves the `ecs` namespace only (NAMESPACES): its policy grants those two and
  limits RegisterScalableTarget to `application-autoscaling:service-namespace` = ecs.
  Spot Fleet, EMR and SageMaker targets would each need their service's write
  permissions too; `holdfast audit` still lists them, with the commands to pause them.
- "If you call the RegisterScalableTarget API to update an existing scalable target,
  Application Auto Scaling retrieves the current capacity of the resource. If it's
  below the minimum capacity or above the maximum capacity, Application Auto Scaling
  adjusts the capacity ... even if you don't include the MinCapacity or MaxCapacity".
  A service an operator scaled above its maximum during an event would be scaled in
  by Holdfast's "protective" write. So each write first reads the service's desired
  count (DescribeServices), and a service outside [MinCapacity, MaxCapacity] is
  `skipped` and reported, engage and restore alike (a restore skipped leaves the
  record: `holdfast release` finishes it once the capacity is back in range).

Targets are selected by their own tag (ListTagsForResource, one call each: the tagging
API does not list them) or by their service's tag. Holdfast's role holds ecs:UpdateService
only on services carrying the selector (policies/reconciler.json,
`EcsServicesForRegisterScalableTargetOnlyTagged`: the Service Authorization Reference lists
aws:ResourceTag/${TagKey} for it on the service), so a target selected by its own tag
whose service does not carry the selector is `skipped`, saying to tag the service: its
register would be refused, and an engage its restore could not undo must not be written.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from botocore.exceptions import ClientError

from holdfast.actuators.selection import selected, tagged
from holdfast.actuators.tagged import TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS
from holdfast.core import kinds
from holdfast.core.audit import AuditResult, Progress
from holdfast.core.errors import Vanished
from holdfast.core.model import SKIPPED, Candidate, Guard, Outcome, Record, Resource
from holdfast.iam import uses

KEY = "DynamicScalingInSuspended"
FLAGS = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")
# The namespaces Holdfast can write (see the module doc); the audit reads more.
NAMESPACES = ("ecs",)
# Namespaces whose scale-in removes compute while new capacity cannot be launched. Holdfast
# engages only ECS targets; the audit lists them all.
AUDITED_NAMESPACES = ("ecs", "ec2", "elasticmapreduce", "sagemaker")


class OutOfBounds(ClientError):
    """The service's capacity is outside the target's bounds: a write would move it."""

    def __init__(self, message: str):
        super().__init__({"Error": {"Code": "HoldfastCapacityOutOfBounds", "Message": message}}, "RegisterScalableTarget")


class ScalableTargetActuator(TaggedActuator):
    spec = kinds.SCALABLE_TARGET
    service = "application-autoscaling"

    @uses("application-autoscaling:DescribeScalableTargets", by=("reconciler", "cli", "readonly", "readiness"))
    def candidates(self) -> list[Candidate]:
        """Every ECS target; selected already when its service carries the selector."""
        listed = tagged(self.clients, self.settings, "ecs:service")
        services = {arn.split(":", 5)[5] for arn in listed}
        self._service_tags = {arn.split(":", 5)[5]: tags for arn, tags in listed.items()}
        found = [
            Candidate(t["ScalableTargetARN"], t, selected=t["ServiceNamespace"] == "ecs" and t["ResourceId"] in services)
            for t in self._targets()
        ]
        return sorted(found, key=lambda c: c.arn)

    @uses("application-autoscaling:DescribeScalableTargets", by=("cli",))
    def audit(self, found: AuditResult, say: Progress) -> None:
        say("reading scalable targets")
        try:
            # Discovery decides what Holdfast selects (the target's tag or its ECS service's).
            holdfasts = {r.arn for r in self.discover()}
            client = self.clients("application-autoscaling")
            for namespace in AUDITED_NAMESPACES:
                for target in pages(client, "describe_scalable_targets", "ScalableTargets", ServiceNamespace=namespace):
                    is_selected = target.get("ScalableTargetARN") in holdfasts
                    found.add(self.spec.audit_rule(target, is_selected, self.clients.region))
        except AWS_ERRORS as err:
            unreadable(found, "scalable targets", err)

    def listed_tags_all(self, candidate: Candidate) -> Mapping[str, str]:
        """Its ECS service's tags, from the listing (a target is Holdfast's when its service is)."""
        return getattr(self, "_service_tags", {}).get(candidate.listed.get("ResourceId"), {})

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """The widest room to scale in first (MaxCapacity - MinCapacity tasks)."""
        target = candidate.listed
        return max(0, int(target.get("MaxCapacity") or 0) - int(target.get("MinCapacity") or 0))

    @uses("application-autoscaling:ListTagsForResource", by=("reconciler", "cli", "readonly", "readiness"))
    def read(self, candidate: Candidate) -> Resource | None:
        client = self.clients("application-autoscaling")
        try:
            tags = client.list_tags_for_resource(ResourceARN=candidate.arn)["Tags"]
        except client.exceptions.ResourceNotFoundException:
            return None  # deregistered since the listing
        if candidate.selected or selected(self.settings, tags):
            resource = self._resource(candidate.listed, tags)
            # Whether its ECS service carries the selector (the tagging API's listing said).
            return replace(resource, ref={**resource.ref, "service_selected": bool(candidate.selected)})
        return None

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        return self._resource(candidate.listed, {}).current

    @uses("application-autoscaling:DescribeScalableTargets", "application-autoscaling:ListTagsForResource",
          by=("reconciler", "cli", "readonly", "readiness"))
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
        bounds = {"min": target.get("MinCapacity"), "max": target.get("MaxCapacity")}
        created = target.get("CreationTime")
        created = created.timestamp() if hasattr(created, "timestamp") else created
        return make_resource(self.kind, target["ScalableTargetARN"], target["ResourceId"],
                             {f: bool(state.get(f, False)) for f in FLAGS}, tags,
                             {**ref, "bounds": bounds, "created": created})

    def identity_after_write(self, resource: Resource, tagged: bool) -> dict[str, Any] | None:
        """The target's CreationTime ("The Unix timestamp for when the scalable target was
        created", DescribeScalableTargets): a target deregistered and registered again
        (its service deleted and recreated under its name, say) is a new target."""
        created = resource.ref.get("created")
        return None if created is None else {"created": created}

    def recreated(self, resource: Resource, ledger: Record) -> Resource | None:
        """A target created since the record was written, at the same ARN: another target.
        (Holdfast's own RegisterScalableTarget updates a target; its CreationTime stays.)"""
        recorded, now = (ledger.identity or {}).get("created"), resource.ref.get("created")
        return resource if recorded is not None and now is not None and recorded != now else None

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        return {} if current.get(KEY) else {KEY: True}

    # ---- the capacity rule -----------------------------------------------------------

    def plan(self, resource: Resource) -> Outcome:
        if self.posture(resource.current):
            skipped = self._skip_if_service_untagged(resource) or \
                self._skip_if_out_of_bounds(resource, resource.ref.get("bounds") or {})
            if skipped is not None:
                return skipped
        return super().plan(resource)

    def engage(self, resource: Resource) -> Outcome:
        if self.posture(resource.current):
            skipped = self._skip_if_service_untagged(resource) or \
                self._skip_if_out_of_bounds(resource, resource.ref.get("bounds") or {})
            if skipped is not None:
                return skipped
        return super().engage(resource)

    def _skip_if_service_untagged(self, resource: Resource) -> Outcome | None:
        """A target selected by its own tag whose ECS service does not carry the selector:
        RegisterScalableTarget needs ecs:UpdateService on the service, which Holdfast's role
        holds only on services carrying it. Unknown (a target read by ARN): not skipped."""
        if resource.ref.get("service_selected") is not False or resource.record is not None:
            return None
        service = resource.ref["ResourceId"]
        key, value = self.settings.selector_key, self.settings.selector_value
        why = (f"its ECS service {service} does not carry the selector {key}={value}: RegisterScalableTarget needs "
               "ecs:UpdateService on the service, which Holdfast's role holds only on services carrying it")
        _, cluster, name = service.split("/", 2)
        return Outcome(self.kind, resource.arn, SKIPPED, error=why, notes={"selector": {
            "why": why,
            "fix": (f"tag the service: aws ecs tag-resource --resource-arn <arn of service {name} in cluster {cluster}> "
                    f"--tags key={key},value={value}"),
        }})

    def relax(self, resource: Resource, target: Mapping[str, Any] | None, guard: Guard) -> Outcome:
        if resource.record is not None or self.ledger.get(resource.arn) is not None:
            skipped = self._skip_if_out_of_bounds(resource, resource.ref.get("bounds") or {})
            if skipped is not None:
                return skipped
        return super().relax(resource, target, guard)

    def _skip_if_out_of_bounds(self, resource: Resource, bounds: Mapping[str, Any]) -> Outcome | None:
        try:
            problem = self._out_of_bounds(resource, bounds)
        except ClientError:
            return None  # the write's own check reads again and reports what fails
        if problem is None:
            return None
        return Outcome(self.kind, resource.arn, SKIPPED, error=problem, notes={"capacity": {
            "why": problem,
            "fix": (f"bring the service back inside [{bounds.get('min')}, {bounds.get('max')}] or raise the target's "
                    f"bounds (aws application-autoscaling register-scalable-target --service-namespace ecs "
                    f"--resource-id {resource.ref['ResourceId']} --scalable-dimension {resource.ref['ScalableDimension']} "
                    f"--max-capacity N), then `holdfast release {resource.arn}` if it is engaged"),
        }})

    @uses("ecs:DescribeServices", by=("reconciler", "cli", "readonly", "readiness"))
    def _out_of_bounds(self, resource: Resource, bounds: Mapping[str, Any]) -> str | None:
        """Why a register would change the service's capacity; None when it would not."""
        ref = resource.ref
        if ref.get("ServiceNamespace") != "ecs" or ref.get("ScalableDimension") != "ecs:service:DesiredCount":
            return None
        _, cluster, service = ref["ResourceId"].split("/", 2)
        found = self.clients("ecs").describe_services(cluster=cluster, services=[service]).get("services", [])
        if not found:
            return None  # gone: the write's existence check says so
        desired = found[0].get("desiredCount")
        low, high = bounds.get("min"), bounds.get("max")
        if desired is None or low is None or high is None or low <= desired <= high:
            return None
        return (f"service {service} runs {desired} tasks, outside the target's [{low}, {high}]: re-registering the "
                f"target would {'scale it in' if desired > high else 'scale it out'} to {high if desired > high else low}")

    # RegisterScalableTarget requires its caller to hold the target service's own
    # permissions (ECS: DescribeServices and UpdateService): declared here, though
    # UpdateService is never called directly.
    @uses("application-autoscaling:DescribeScalableTargets", "application-autoscaling:RegisterScalableTarget",
          "ecs:DescribeServices", "ecs:UpdateService", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        ref = {k: resource.ref[k] for k in ("ServiceNamespace", "ResourceId", "ScalableDimension")}
        still = [t for t in self._targets((ref["ServiceNamespace"],), ResourceIds=[ref["ResourceId"]],
                                          ScalableDimension=ref["ScalableDimension"])
                 if t["ScalableTargetARN"] == resource.arn]
        if not still:
            raise Vanished()
        problem = self._out_of_bounds(resource, {"min": still[0].get("MinCapacity"), "max": still[0].get("MaxCapacity")})
        if problem is not None:
            raise OutOfBounds(problem)   # the bounds moved since the read: the next walk skips it
        # The other flags from this read, just before the write: the owner's changes since
        # the walk read the target stay (RegisterScalableTarget takes all three at once).
        now = still[0].get("SuspendedState") or {}
        state = {f: bool(values[f]) if f in values else bool(now.get(f, False)) for f in FLAGS}
        self.clients("application-autoscaling").register_scalable_target(**ref, SuspendedState=state)

    @uses("application-autoscaling:TagResource", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        self._call("tag_resource", ResourceARN=resource.arn, Tags=dict(tags))

    @uses("application-autoscaling:UntagResource", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._call("untag_resource", ResourceARN=resource.arn, TagKeys=keys)
