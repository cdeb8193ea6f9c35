"""Auto Scaling groups: suspend `settings.asg_processes` while engaged.

Keys are process names, values True when suspended. Only processes the owner had not
suspended are recorded, so a restore resumes exactly those Holdfast suspended and
never one the owner had. Groups are found in bulk with a `tag:KEY` filter (100 a page;
the tagging API returns nothing for Auto Scaling groups) and their tags come with them.
"""

from __future__ import annotations

from typing import Any, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.actuators.selection import selected
from holdfast.actuators.tagged import TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS, error_code, error_message, error_text
from holdfast.core import kinds
from holdfast.core.audit import AuditResult, Progress
from holdfast.core.errors import Vanished
from holdfast.core.kinds.asg import PROCESSES as ASG_PROCESSES
from holdfast.core.model import VANISHED, Candidate, Outcome, Resource
from holdfast.iam import uses


class AsgActuator(TaggedActuator):
    spec = kinds.ASG
    # Record tags of 12 groups a call (two tags each: 24). An assumption, not a documented
    # limit: the CreateOrUpdateTags API reference gives no maximum for Tags.member.N, and
    # 25 a call is the figure Holdfast assumes. A batch AWS refuses (for its size or any
    # other reason) is written again one group a call (`TaggedActuator._write_tags`, and
    # `restore_many` for DeleteTags); tests/actuators/test_tag_batches.py holds both.
    tag_batch = 12
    restore_needs_tag = True

    @uses("autoscaling:DescribeAutoScalingGroups", by=("reconciler", "cli", "readonly", "readiness"))
    def candidates(self) -> list[Candidate]:
        pages = self.clients("autoscaling").get_paginator("describe_auto_scaling_groups").paginate(
            Filters=[{"Name": f"tag:{self.settings.selector_key}", "Values": [self.settings.selector_value]}],
            PaginationConfig={"PageSize": 100},
        )
        groups = [g for page in pages for g in page["AutoScalingGroups"]]
        return sorted((Candidate(g["AutoScalingGroupARN"], g) for g in groups), key=lambda c: c.arn)

    @uses("autoscaling:DescribeAutoScalingGroups", by=("cli",))
    def audit(self, found: AuditResult, say: Progress) -> None:
        say("reading Auto Scaling groups")
        try:
            for group in pages(self.clients("autoscaling"), "describe_auto_scaling_groups", "AutoScalingGroups"):
                found.add(self.spec.audit_rule(group, self.settings, self.clients.region))
        except AWS_ERRORS as err:
            unreadable(found, "Auto Scaling groups", err)

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """The most instances first: what ReplaceUnhealthy and AZRebalance can terminate."""
        group = candidate.listed
        return max(int(group.get("DesiredCapacity") or 0), len(group.get("Instances") or ()))

    def read(self, candidate: Candidate) -> Resource | None:
        return self._resource(candidate.listed)  # the listing carries everything

    def listed_tags_all(self, candidate: Candidate) -> Mapping[str, str]:
        return {t["Key"]: t["Value"] for t in candidate.listed.get("Tags", [])}

    def listed_current(self, candidate: Candidate) -> Mapping[str, Any]:
        return self._resource(candidate.listed).current

    @uses("autoscaling:DescribeAutoScalingGroups", by=("reconciler", "cli", "readonly", "readiness"))
    def get(self, arn: str) -> Resource | None:
        name = arn.split(":autoScalingGroupName/", 1)[-1]
        groups = self.clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        found = [g for g in groups["AutoScalingGroups"] if g["AutoScalingGroupARN"] == arn]
        return self._resource(found[0]) if found else None

    def engage_many(self, resources: list[Resource]) -> list[Outcome]:
        """`TaggedActuator.engage_many`, from a read of the groups it changes taken just
        before their write-ahead (the listing may be minutes old)."""
        moving = [r.name for r in resources if self.posture(r.current)]
        if not moving:
            return super().engage_many(resources)
        try:
            now = {g["AutoScalingGroupName"]: g for g in self._describe(moving)}
        except (ClientError, BotoCoreError) as err:
            return [Outcome(self.kind, r.arn, "failed", error=error_text(err)) for r in resources]
        early: list[Outcome | None] = []
        fresh: list[Resource] = []
        for r in resources:
            group = now.get(r.name) if r.name in moving else None
            if r.name in moving and (group is None or group["AutoScalingGroupARN"] != r.arn):
                early.append(Outcome(self.kind, r.arn, VANISHED))   # deleted (or recreated) since the listing
                continue
            early.append(None)
            fresh.append(self._resource(group) if group is not None else r)
        rest = iter(super().engage_many(fresh))
        return [o if o is not None else next(rest) for o in early]

    @uses("autoscaling:DescribeAutoScalingGroups", by=("reconciler", "cli"))
    def _describe(self, names: list[str]) -> list[dict]:
        pages = self.clients("autoscaling").get_paginator("describe_auto_scaling_groups").paginate(
            AutoScalingGroupNames=names, PaginationConfig={"PageSize": 100})
        return [g for page in pages for g in page["AutoScalingGroups"]]

    def _resource(self, group: Mapping[str, Any]) -> Resource:
        suspended = {p["ProcessName"] for p in group.get("SuspendedProcesses", [])}
        tags = {t["Key"]: t["Value"] for t in group.get("Tags", [])}
        return make_resource(self.kind, group["AutoScalingGroupARN"], group["AutoScalingGroupName"],
                             {p: p in suspended for p in ASG_PROCESSES}, tags, selected=selected(self.settings, tags))

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        return {p: True for p in self.settings.asg_processes if not current.get(p)}

    # ---- the capacity stage's reads and resets (holdfast.stages.capacity) -----------------

    @uses("autoscaling:DescribeAutoScalingGroups", by=("reconciler",))
    def groups(self, arns: list[str]) -> dict[str, dict]:
        """The groups named, as DescribeAutoScalingGroups describes them (their instances'
        HealthStatus, their target groups, their tags), by ARN; a group gone is absent."""
        names = sorted({a.split(":autoScalingGroupName/", 1)[-1] for a in arns})
        wanted = set(arns)
        found: dict[str, dict] = {}
        for i in range(0, len(names), 100):   # 100 names a call at most (AutoScalingGroupNames)
            for g in self._describe(names[i:i + 100]):
                if g["AutoScalingGroupARN"] in wanted:
                    found[g["AutoScalingGroupARN"]] = g
        return found

    def resource_of(self, group: Mapping[str, Any]) -> Resource:
        """The Resource of a group from its description (for an engage of it again)."""
        return self._resource(group)

    @uses("ec2:DescribeInstanceStatus", "elasticloadbalancing:DescribeTargetHealth", by=("reconciler",))
    def healthy_now(self, groups: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
        """Group ARN -> its instances marked Unhealthy whose health checks pass now: EC2's
        instance and system status `ok` on a running instance and, for a group that uses ELB
        health checks, `healthy` in each of its target groups. A group whose health check
        Holdfast cannot read (a Classic Load Balancer, VPC Lattice, EBS) gets none: what is
        marked stays marked. AWS errors pass to the caller."""
        marked = {arn: unhealthy(g) for arn, g in groups.items()}
        ids = sorted({i for found in marked.values() for i in found})
        status = self._instance_status_ok(ids)
        out: dict[str, tuple[str, ...]] = {}
        for arn, group in groups.items():
            kinds = set(str(group.get("HealthCheckType") or "EC2").split(","))
            if kinds - {"EC2", "ELB"} or ("ELB" in kinds and group.get("LoadBalancerNames")):
                out[arn] = ()
                continue
            healthy = {i for i in marked[arn] if status.get(i)}
            if "ELB" in kinds:
                for tg in group.get("TargetGroupARNs") or ():
                    healthy &= self._targets_healthy(tg)
            out[arn] = tuple(sorted(healthy))
        return out

    def _instance_status_ok(self, ids: list[str]) -> dict[str, bool]:
        ec2 = self.clients("ec2")
        ok: dict[str, bool] = {}
        for i in range(0, len(ids), 100):
            chunk = ids[i:i + 100]
            try:
                answers = ec2.describe_instance_status(InstanceIds=chunk, IncludeAllInstances=True)["InstanceStatuses"]
            except ClientError as err:
                if error_code(err) != "InvalidInstanceID.NotFound":
                    raise
                # One of them is gone (terminated since the listing): ask one by one.
                answers = []
                for one in chunk:
                    try:
                        answers += ec2.describe_instance_status(InstanceIds=[one], IncludeAllInstances=True)["InstanceStatuses"]
                    except ClientError as again:
                        if error_code(again) != "InvalidInstanceID.NotFound":
                            raise
            for s in answers:
                ok[s["InstanceId"]] = (s.get("InstanceState", {}).get("Name") == "running"
                                       and s.get("InstanceStatus", {}).get("Status") == "ok"
                                       and s.get("SystemStatus", {}).get("Status") == "ok")
        return ok

    def _targets_healthy(self, target_group_arn: str) -> set[str]:
        answer = self.clients("elbv2").describe_target_health(TargetGroupArn=target_group_arn)
        return {d["Target"]["Id"] for d in answer["TargetHealthDescriptions"]
                if d.get("TargetHealth", {}).get("State") == "healthy"}

    @uses("autoscaling:SetInstanceHealth", by=("reconciler",))
    def set_healthy(self, instance_ids: tuple[str, ...]) -> None:
        """Mark each instance Healthy again: a mark set while ReplaceUnhealthy was suspended
        never clears by itself, and resuming would terminate it."""
        client = self.clients("autoscaling")
        for instance in instance_ids:
            client.set_instance_health(InstanceId=instance, HealthStatus="Healthy")

    @uses("autoscaling:SuspendProcesses", "autoscaling:ResumeProcesses", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        client = self.clients("autoscaling")
        suspend = sorted(p for p, on in values.items() if on)
        resume = sorted(p for p, on in values.items() if not on)
        try:
            if suspend:
                client.suspend_processes(AutoScalingGroupName=resource.name, ScalingProcesses=suspend)
            if resume:
                client.resume_processes(AutoScalingGroupName=resource.name, ScalingProcesses=resume)
        except client.exceptions.ClientError as err:
            _vanished(err)
            raise

    @uses("autoscaling:CreateOrUpdateTags", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        client = self.clients("autoscaling")
        try:
            client.create_or_update_tags(Tags=[
                {"ResourceId": resource.name, "ResourceType": "auto-scaling-group", "Key": k, "Value": v,
                 "PropagateAtLaunch": False}
                for k, v in tags.items()
            ])
        except client.exceptions.ClientError as err:
            _vanished(err)
            raise

    @uses("autoscaling:CreateOrUpdateTags", by=("reconciler", "cli"))
    def _tag_many(self, items) -> None:
        """Several groups' record tags in one call (`tag_batch` groups)."""
        client = self.clients("autoscaling")
        try:
            client.create_or_update_tags(Tags=[
                {"ResourceId": resource.name, "ResourceType": "auto-scaling-group", "Key": k, "Value": v,
                 "PropagateAtLaunch": False}
                for resource, tags in items for k, v in tags.items()
            ])
        except client.exceptions.ClientError as err:
            _vanished(err)
            raise

    @uses("autoscaling:DeleteTags", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._untag_many([resource], keys)

    @uses("autoscaling:DeleteTags", by=("reconciler", "cli"))
    def _untag_many(self, resources: list[Resource], keys: list[str]) -> None:
        self.clients("autoscaling").delete_tags(Tags=[
            {"ResourceId": resource.name, "ResourceType": "auto-scaling-group", "Key": k}
            for resource in resources for k in keys
        ])


def unhealthy(group: Mapping[str, Any]) -> tuple[str, ...]:
    """The group's instances marked Unhealthy (what a resume of ReplaceUnhealthy terminates)."""
    return tuple(sorted(i["InstanceId"] for i in group.get("Instances") or () if i.get("HealthStatus") == "Unhealthy"))


def _vanished(err) -> None:
    # Auto Scaling answers a missing group with a ValidationError naming it.
    if error_code(err) == "ValidationError" and "not found" in error_message(err).lower():
        raise Vanished() from err
