"""Network Load Balancer target groups: keep zones in DNS and fail open while engaged.

Keys are the four `target_group_health.*` attributes, with AWS's values as strings:

| key           | attribute                                                                 | AWS default |
|---------------|---------------------------------------------------------------------------|-------------|
| dns_count     | target_group_health.dns_failover.minimum_healthy_targets.count            | 1           |
| dns_pct       | target_group_health.dns_failover.minimum_healthy_targets.percentage       | off         |
| routing_count | target_group_health.unhealthy_state_routing.minimum_healthy_targets.count | 1           |
| routing_pct   | target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage | off    |

An attribute missing from DescribeTargetGroupAttributes counts as its AWS default (moto
stores none until one is set; AWS always returns them). All four are set in one
ModifyTargetGroupAttributes call, which AWS validates as a whole, so the engaged
values — validated at synth to keep dns_failover >= routing — never pass through an
invalid mix. Target groups of network load balancers: TCP, UDP, TLS, TCP_UDP, QUIC and
TCP_QUIC. A selected target group of another protocol (an ALB's HTTP/HTTPS, a Gateway
Load Balancer's GENEVE) is `skipped` and reported, never silently passed over.
"""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.actuators.selection import selected, tagged
from holdfast.actuators.tagged import TaggedActuator, make_resource, pages, unreadable
from holdfast.aws import AWS_ERRORS, error_code
from holdfast.core import kinds
from holdfast.core.audit import AuditResult, Progress
from holdfast.core.model import SKIPPED, Candidate, Outcome, Resource
from holdfast.iam import uses

PREFIX = "target_group_health."
ATTRIBUTES = {
    "dns_count": (PREFIX + "dns_failover.minimum_healthy_targets.count", "1"),
    "dns_pct": (PREFIX + "dns_failover.minimum_healthy_targets.percentage", "off"),
    "routing_count": (PREFIX + "unhealthy_state_routing.minimum_healthy_targets.count", "1"),
    "routing_pct": (PREFIX + "unhealthy_state_routing.minimum_healthy_targets.percentage", "off"),
}
NLB_PROTOCOLS = ("TCP", "UDP", "TLS", "TCP_UDP", "QUIC", "TCP_QUIC")
NOT_FOUND = ("TargetGroupNotFound", "TargetGroupNotFoundException")


class NlbActuator(TaggedActuator):
    spec = kinds.NLB
    # AddTags / RemoveTags take one tag set for all the ARNs of a call; the walk engages 60
    # at a time so that groups with the same record fill whole calls. 20 ARNs a call is an
    # assumption: the ELB API reference states "up to 20 resources in a single call" for
    # DescribeTags' ResourceArns and no maximum for AddTags' or RemoveTags'. A call AWS
    # refuses is made again one ARN at a time (tests/actuators/test_tag_batches.py).
    tag_batch = 20
    walk_batch = 60
    service = "elbv2"
    not_found = NOT_FOUND
    restore_needs_tag = True

    @uses("elasticloadbalancing:DescribeTargetGroups", by=("reconciler", "cli", "readonly", "readiness"))
    def candidates(self) -> list[Candidate]:
        """Tagged target groups of network load balancers. Their protocols from
        DescribeTargetGroups: by ARN (20 a call) for up to 20 of them, else every target
        group of the account, 400 a page (a Region holds at most 3,000: 8 pages, fewer
        calls than 20 a call past 160 groups, and usually one page)."""
        found = tagged(self.clients, self.settings, "elasticloadbalancing:targetgroup")
        arns = sorted(found)
        client = self.clients("elbv2")
        out = []
        if len(arns) > 20:
            pages = client.get_paginator("describe_target_groups").paginate(PaginationConfig={"PageSize": 400})
            groups = [g for page in pages for g in page["TargetGroups"] if g["TargetGroupArn"] in found]
            return sorted((Candidate(g["TargetGroupArn"], (g, found[g["TargetGroupArn"]])) for g in groups),
                          key=lambda c: c.arn)
        for i in range(0, len(arns), 20):
            try:
                groups = client.describe_target_groups(TargetGroupArns=arns[i : i + 20])["TargetGroups"]
            except client.exceptions.TargetGroupNotFoundException:
                # One of the batch was deleted since the listing: look at each alone.
                groups = [g for arn in arns[i : i + 20] for g in self._describe(arn)]
            out.extend(Candidate(g["TargetGroupArn"], (g, found[g["TargetGroupArn"]])) for g in groups)
        return sorted(out, key=lambda c: c.arn)

    def listed_tags_all(self, candidate: Candidate) -> Mapping[str, str]:
        return candidate.listed[1]

    def harm(self, candidate: Candidate, original: Mapping[str, Any] | None = None) -> int:
        """Target groups behind a load balancer first (an unattached group's health fails
        nothing over), the most load balancers first. The registered targets would be a
        finer measure, but only DescribeTargetHealth (one call per group) tells them."""
        group, _tags = candidate.listed
        return len(group.get("LoadBalancerArns") or ())

    def listed_tags(self, candidate: Candidate) -> Mapping[str, str]:
        return candidate.listed[1]

    def read(self, candidate: Candidate) -> Resource | None:
        group, tags = candidate.listed
        if not self._nlb(group):
            # Selected but not a Network Load Balancer's: reported by engage and plan.
            return make_resource(self.kind, group["TargetGroupArn"], group["TargetGroupName"], {}, tags,
                                 {"protocol": group.get("Protocol")})
        # The tags come from the tagging API's index: a record there is confirmed before use.
        return self._resource(group, tags, confirmed=False)

    @uses("elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetGroupAttributes",
          by=("cli",))
    def audit(self, found: AuditResult, say: Progress) -> None:
        """Every NLB target group of the account, with its attributes (one read each)."""
        client = self.clients("elbv2")
        try:
            groups = [g for g in pages(client, "describe_target_groups", "TargetGroups") if self._nlb(g)]
        except AWS_ERRORS as err:
            unreadable(found, "target groups", err)
            return
        for n, group in enumerate(groups, 1):
            say(f"reading target groups {n}/{len(groups)}")
            try:
                attributes = client.describe_target_group_attributes(TargetGroupArn=group["TargetGroupArn"])["Attributes"]
            except AWS_ERRORS as err:
                if error_code(err) == "TargetGroupNotFound":
                    continue  # deleted since it was listed
                unreadable(found, f"target group {group.get('TargetGroupName', group['TargetGroupArn'])}", err)
                continue
            values = {a["Key"]: a["Value"] for a in attributes}
            found.add(self.spec.audit_rule(group, values, self.settings, self.clients.region))

    def _not_nlb(self, resource: Resource) -> Outcome | None:
        protocol = resource.ref.get("protocol")
        if protocol is None:
            return None
        return Outcome(self.kind, resource.arn, SKIPPED, notes={"protocol": {
            "why": (f"protocol {protocol}: not a Network Load Balancer's target group; Holdfast engages NLB target "
                    f"groups ({', '.join(NLB_PROTOCOLS)}) only"),
            "fix": "remove the selector tag from it, or protect its load balancer's failover by hand",
        }})

    def plan(self, resource: Resource) -> Outcome:
        return self._not_nlb(resource) or super().plan(resource)

    def engage(self, resource: Resource) -> Outcome:
        return self._not_nlb(resource) or super().engage(resource)

    def engage_many(self, resources: list[Resource]) -> list[Outcome]:
        early = [self._not_nlb(r) for r in resources]
        rest = iter(super().engage_many([r for r, o in zip(resources, early) if o is None]))
        return [o if o is not None else next(rest) for o in early]

    @uses("elasticloadbalancing:DescribeTags", by=("reconciler", "cli", "readonly", "readiness"))
    def own_tags(self, resource: Resource) -> Mapping[str, str]:
        descriptions = self.clients("elbv2").describe_tags(ResourceArns=[resource.arn])["TagDescriptions"]
        return {t["Key"]: t["Value"] for d in descriptions for t in d["Tags"]}

    @uses("elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTags",
          "elasticloadbalancing:DescribeTargetGroupAttributes", by=("reconciler", "cli", "readonly", "readiness"))
    def get(self, arn: str) -> Resource | None:
        groups = self._describe(arn)
        if not groups:
            return None
        descriptions = self.clients("elbv2").describe_tags(ResourceArns=[arn])["TagDescriptions"]
        tags = {t["Key"]: t["Value"] for d in descriptions for t in d["Tags"]}
        return self._resource(groups[0], tags)

    def _describe(self, arn: str) -> list[dict]:
        client = self.clients("elbv2")
        try:
            return client.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"]
        except client.exceptions.TargetGroupNotFoundException:
            return []

    @staticmethod
    def _nlb(group: Mapping[str, Any]) -> bool:
        return group.get("Protocol") in NLB_PROTOCOLS

    @uses("elasticloadbalancing:DescribeTargetGroupAttributes", by=("reconciler", "cli", "readonly", "readiness"))
    def _resource(self, group: Mapping[str, Any], tags: Mapping[str, str], *, confirmed: bool = True) -> Resource | None:
        client = self.clients("elbv2")
        try:
            attributes = client.describe_target_group_attributes(TargetGroupArn=group["TargetGroupArn"])["Attributes"]
        except client.exceptions.TargetGroupNotFoundException:
            return None
        values = {a["Key"]: a["Value"] for a in attributes}
        current = {key: values.get(name, default) for key, (name, default) in ATTRIBUTES.items()}
        return make_resource(self.kind, group["TargetGroupArn"], group["TargetGroupName"], current, tags,
                             confirmed=confirmed, selected=selected(self.settings, tags))

    def engaged_values(self) -> dict[str, str]:
        s = self.settings
        return {
            "dns_count": str(s.nlb_dns_failover_minimum_healthy_count),
            "dns_pct": str(s.nlb_dns_failover_minimum_healthy_percentage),
            "routing_count": str(s.nlb_routing_minimum_healthy_count),
            "routing_pct": str(s.nlb_routing_minimum_healthy_percentage),
        }

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in self.engaged_values().items() if current.get(k) != v}

    @uses("elasticloadbalancing:ModifyTargetGroupAttributes", by=("reconciler", "cli"))
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        self._call("modify_target_group_attributes", TargetGroupArn=resource.arn,
                   Attributes=[{"Key": ATTRIBUTES[k][0], "Value": v} for k, v in values.items()])

    @uses("elasticloadbalancing:AddTags", by=("reconciler", "cli"))
    def _tag(self, resource: Resource, tags: Mapping[str, str]) -> None:
        self._call("add_tags", ResourceArns=[resource.arn], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])

    def _tag_chunks(self, batch: list) -> list[list]:
        """One AddTags per distinct record (groups engaged from the same original have the
        same one), up to 20 ARNs each."""
        by_tags: dict[tuple, list] = {}
        for item in batch:
            by_tags.setdefault(tuple(sorted(item[2].items())), []).append(item)
        return [same[k:k + self.tag_batch] for same in by_tags.values() for k in range(0, len(same), self.tag_batch)]

    @uses("elasticloadbalancing:AddTags", by=("reconciler", "cli"))
    def _tag_many(self, items) -> None:
        """Up to 20 groups with one tag set (`_tag_chunks`), in one AddTags."""
        (tags,) = {tuple(sorted(tags.items())) for _, tags in items}
        self._call("add_tags", ResourceArns=[resource.arn for resource, _ in items],
                   Tags=[{"Key": k, "Value": v} for k, v in tags])

    @uses("elasticloadbalancing:RemoveTags", by=("reconciler", "cli"))
    def _untag(self, resource: Resource, keys: list[str]) -> None:
        self._call("remove_tags", ResourceArns=[resource.arn], TagKeys=keys)

    @uses("elasticloadbalancing:RemoveTags", by=("reconciler", "cli"))
    def _untag_many(self, resources: list[Resource], keys: list[str]) -> None:
        arns = [r.arn for r in resources]
        for i in range(0, len(arns), 20):
            self._call("remove_tags", ResourceArns=arns[i:i + 20], TagKeys=keys)
