"""Build a fleet of protectable resources through the AWS APIs, and snapshot it.

A library for tests, benchmarks and the demo: it works on any `holdfast.aws.Clients`
(moto in-process, a moto server, a real account). Nothing here knows Holdfast's
internals; it only creates what an account owner would have, so that Holdfast can be
run against it and the fleet compared before and after.

    fleet = build_fleet(clients, asgs=10, esms=10, asyncs=10, nlbs=5, services=5)
    before = snapshot(clients, fleet)
    ...  # engage, resume
    assert snapshot(clients, fleet) == before

Owner states vary across the fleet on purpose (index modulo a small number), so a
fleet of any size carries the hard cases: processes the owner already suspended, a
mapping with no cap, one already at the floor, a disabled mapping, a function with no
async config, with the owner's own destination or with limits stricter than Holdfast's,
custom NLB thresholds, a scalable target with scheduled scaling already suspended.
Every Auto Scaling group spans three zones. `provisioned` selected mappings (the first by
index) are in provisioned mode instead of having a cap: PROVISIONED's pollers.

Selection follows the issue: an event source mapping is selected by its own tag or
its function's (a function selected that way is then also an `async` resource); a
scalable target by its ECS service's tag. Every kind also gets `unselected` twins
that carry no selector tag and must never change.
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from holdfast.core import pollers
from holdfast.core.kinds import KINDS
from holdfast.iam import uses

# Who runs this code: the operator (or the demo), with their own credentials.
BY = ("cli",)

DEFAULT_SELECTOR = "holdfast:protect=true"
OWNER_TAG = {"team": "payments"}

# Every group spans this many Availability Zones (the detector needs failures in two).
ZONES = 3

# A provisioned-mode mapping's pollers: a big consumer, up to 1,000 concurrent batches (10 a poller).
PROVISIONED = {"MinimumPollers": 5, "MaximumPollers": 100}

# App Auto Scaling for ECS services: the one dimension Holdfast protects here.
ECS_DIMENSION = "ecs:service:DesiredCount"


@dataclass
class Fleet:
    """ARNs by kind, selected and unselected, plus what snapshot() needs to read them."""

    selector: str
    selected: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    unselected: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    # ARN -> what the read APIs take: ASG name, ESM UUID, function name, TG ARN,
    # scalable target resource id.
    handles: dict[str, str] = field(default_factory=dict)
    zones: list[str] = field(default_factory=list)  # the zones every group spans
    # Selected target group ARN -> the Network Load Balancer it serves (a listener each).
    load_balancers: dict[str, str] = field(default_factory=dict)

    def arns(self, kind: str | None = None) -> list[str]:
        kinds = KINDS if kind is None else (kind,)
        return [arn for k in kinds for arn in self.selected[k] + self.unselected[k]]

    def kind_of(self, arn: str) -> str:
        return next(k for k in KINDS if arn in self.selected[k] or arn in self.unselected[k])

    def count(self) -> int:
        return sum(len(v) for v in self.selected.values())


def _split_selector(selector: str) -> tuple[str, str]:
    key, sep, value = selector.partition("=")
    if not sep or not key:
        raise ValueError(f"selector must be KEY=VALUE, got {selector!r}")
    return key, value


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


class _Builder:
    def __init__(self, clients, selector: str, prefix: str, workers: int, provisioned: int = 0):
        self.c = clients
        self.provisioned = provisioned
        self.key, self.value = _split_selector(selector)
        self.fleet = Fleet(selector=selector)
        self.prefix = prefix
        self.workers = workers
        self._shared: dict[str, Any] = {}
        # moto's ELBv2 backend iterates its target groups unlocked while creating one, so
        # parallel CreateTargetGroup calls on a moto server can fail with a 500 ("OrderedDict
        # mutated during iteration"); AWS has no such limit. Target groups are made one at a time.
        self._elbv2 = threading.Lock()

    # ---- shared infrastructure, created once ------------------------------------------

    @uses("ec2:CreateVpc", "ec2:DescribeAvailabilityZones", "ec2:CreateSubnet", "ec2:CreateLaunchTemplate", by=BY)
    def network(self) -> dict[str, Any]:
        if "vpc" not in self._shared:
            ec2 = self.c("ec2")
            vpc = ec2.create_vpc(CidrBlock="10.80.0.0/16")["Vpc"]["VpcId"]
            zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:ZONES]
            subnets = [
                ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.80.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
                for i, zone in enumerate(zones)
            ]
            template = self.c("ec2").create_launch_template(
                LaunchTemplateName=f"{self.prefix}-lt",
                LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"},
            )["LaunchTemplate"]["LaunchTemplateId"]
            self._shared.update(vpc=vpc, subnets=subnets, template=template)
            self.fleet.zones = zones
        return self._shared

    @uses("iam:CreateRole", "iam:PutRolePolicy", by=BY)
    def role(self) -> str:
        if "role" not in self._shared:
            trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
            name = f"{self.prefix}-fn"
            self._shared["role"] = self.c("iam").create_role(
                RoleName=name, AssumeRolePolicyDocument=json.dumps(trust)
            )["Role"]["Arn"]
            # The owners granted their functions' role the queues of this account, Holdfast's
            # expired-events queue among them (Lambda checks a destination against the
            # execution role when it is written; docs/deploy.md, "What a real account needs").
            send = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage",
                                                             "Resource": "arn:aws:sqs:*:*:*"}]}
            self.c("iam").put_role_policy(RoleName=name, PolicyName="send-to-queues", PolicyDocument=json.dumps(send))
            self._shared["zip"] = _zip()
        return self._shared["role"]

    def owner_queue(self) -> str:
        """The queue some owners already use as their async on-failure destination."""
        if "owner_dlq" not in self._shared:
            self._shared["owner_dlq"] = self.queue(f"{self.prefix}-owner-dlq")
        return self._shared["owner_dlq"]

    @uses("ecs:CreateCluster", "ecs:RegisterTaskDefinition", by=BY)
    def cluster(self) -> str:
        if "cluster" not in self._shared:
            ecs = self.c("ecs")
            ecs.create_cluster(clusterName=f"{self.prefix}-cluster")
            ecs.register_task_definition(
                family=f"{self.prefix}-task",
                containerDefinitions=[{"name": "app", "image": "public.ecr.aws/nginx/nginx", "memory": 128}],
            )
            self._shared["cluster"] = f"{self.prefix}-cluster"
        return self._shared["cluster"]

    @uses("sqs:CreateQueue", "sqs:GetQueueAttributes", by=BY)
    def queue(self, name: str) -> str:
        sqs = self.c("sqs")
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    @uses("lambda:CreateFunction", "lambda:TagResource", by=BY)
    def function(self, name: str, tagged: bool) -> str:
        tags = {**OWNER_TAG, **({self.key: self.value} if tagged else {})}
        return self.c("lambda").create_function(
            FunctionName=name, Runtime="python3.12", Role=self.role(), Handler="index.handler",
            Code={"ZipFile": self._shared["zip"]}, Tags=tags,
            Timeout=60,   # a batch of 10 at a second a message (holdfast_demo.world) takes 10 s
        )["FunctionArn"]

    def _add(self, kind: str, arn: str, handle: str, selected: bool) -> None:
        (self.fleet.selected if selected else self.fleet.unselected)[kind].append(arn)
        self.fleet.handles[arn] = handle

    # ---- one resource of each kind; `i` picks the owner's state -----------------------

    @uses("autoscaling:CreateAutoScalingGroup", "autoscaling:CreateOrUpdateTags", "autoscaling:SuspendProcesses",
          "autoscaling:DescribeAutoScalingGroups", by=BY)
    def asg(self, i: int, selected: bool) -> None:
        net = self.network()
        name = f"{self.prefix}-asg-{i}{'' if selected else '-twin'}"
        tags = [{"Key": k, "Value": v, "PropagateAtLaunch": False} for k, v in OWNER_TAG.items()]
        if selected:
            tags.append({"Key": self.key, "Value": self.value, "PropagateAtLaunch": False})
        asg = self.c("autoscaling")
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name, MinSize=0, MaxSize=4, DesiredCapacity=0,
            LaunchTemplate={"LaunchTemplateId": net["template"], "Version": "$Latest"},
            VPCZoneIdentifier=",".join(net["subnets"]), Tags=tags,
        )
        # Every third owner already suspended AZRebalance (one of Holdfast's set) and
        # every fifth a process outside it: restore must leave both suspended.
        owner_suspended = (["AZRebalance"] if i % 3 == 1 else []) + (["ScheduledActions"] if i % 5 == 2 else [])
        if owner_suspended:
            asg.suspend_processes(AutoScalingGroupName=name, ScalingProcesses=owner_suspended)
        arn = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]["AutoScalingGroupARN"]
        self._add("asg", arn, name, selected)

    @uses("lambda:CreateEventSourceMapping", "lambda:TagResource", by=BY)
    def esm(self, i: int, selected: bool) -> None:
        suffix = "" if selected else "-twin"
        queue = self.queue(f"{self.prefix}-q-{i}{suffix}")
        # Every fourth selected mapping is selected through its function's tag instead of
        # its own; that function is then an `async` resource too.
        by_function = selected and i % 4 == 3
        fn_name = f"{self.prefix}-consumer-{i}{suffix}"
        fn_arn = self.function(fn_name, tagged=by_function)
        if by_function:
            self._add("async", fn_arn, fn_name, True)
        spec: dict[str, Any] = {"EventSourceArn": queue, "FunctionName": fn_name, "BatchSize": 10, "Enabled": i % 6 != 5}
        if selected and i < self.provisioned:   # in provisioned mode: pollers, no cap
            spec["ProvisionedPollerConfig"] = dict(PROVISIONED)
        elif i % 3 != 0:  # every third owner left the mapping uncapped; one in eight sits at the floor
            spec["ScalingConfig"] = {"MaximumConcurrency": 2 if i % 8 == 7 else (50, 500)[i % 2]}
        tags = {**OWNER_TAG, **({self.key: self.value} if selected and not by_function else {})}
        mapping = self.c("lambda").create_event_source_mapping(**spec, Tags=tags)
        self._add("esm", mapping["EventSourceMappingArn"], mapping["UUID"], selected)

    @uses("lambda:PutFunctionEventInvokeConfig", by=BY)
    def async_config(self, i: int, selected: bool) -> None:
        name = f"{self.prefix}-fn-{i}{'' if selected else '-twin'}"
        arn = self.function(name, tagged=selected)
        lam = self.c("lambda")
        if i % 4 == 1:  # the owner wrote AWS's defaults out
            lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=2, MaximumEventAgeInSeconds=21600)
        elif i % 4 == 2:  # the owner has their own destination, which must be kept
            lam.put_function_event_invoke_config(
                FunctionName=name, MaximumEventAgeInSeconds=3600,
                DestinationConfig={"OnFailure": {"Destination": self.owner_queue()}},
            )
        elif i % 4 == 3:  # stricter than Holdfast's posture already: engaging must not raise it
            lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=0, MaximumEventAgeInSeconds=300)
        # i % 4 == 0: no async config at all; restore must leave none.
        self._add("async", arn, name, selected)

    @uses("elasticloadbalancing:CreateTargetGroup", "elasticloadbalancing:AddTags",
          "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:CreateListener", by=BY)
    def nlb(self, i: int, selected: bool) -> None:
        with self._elbv2:
            self._nlb(i, selected)

    def _nlb(self, i: int, selected: bool) -> None:
        net = self.network()
        tags = [{"Key": k, "Value": v} for k, v in OWNER_TAG.items()]
        if selected:
            tags.append({"Key": self.key, "Value": self.value})
        elb = self.c("elbv2")
        arn = elb.create_target_group(
            Name=f"{self.prefix[:12]}-tg-{i}{'' if selected else '-t'}"[:32], Protocol="TCP", Port=80,
            VpcId=net["vpc"], TargetType="instance", Tags=tags,
        )["TargetGroups"][0]["TargetGroupArn"]
        # Moto stores no defaults for these, so every group gets explicit values (AWS's
        # defaults, or the owner's custom thresholds on every other group).
        custom = i % 2 == 1
        elb.modify_target_group_attributes(TargetGroupArn=arn, Attributes=[
            {"Key": "target_group_health.dns_failover.minimum_healthy_targets.count", "Value": "2" if custom else "1"},
            {"Key": "target_group_health.dns_failover.minimum_healthy_targets.percentage", "Value": "off"},
            {"Key": "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count", "Value": "2" if custom else "1"},
            {"Key": "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage", "Value": "25" if custom else "off"},
        ])
        if selected:
            # Behind the fleet's NLB, so that its health has the metrics AWS publishes for it.
            self.c("elbv2").create_listener(LoadBalancerArn=self.load_balancer(), Protocol="TCP", Port=8000 + i,
                                            DefaultActions=[{"Type": "forward", "TargetGroupArn": arn}])
            self.fleet.load_balancers[arn] = self.load_balancer()
        self._add("nlb", arn, arn, selected)

    @uses("elasticloadbalancing:CreateLoadBalancer", by=BY)
    def load_balancer(self) -> str:
        if "nlb" not in self._shared:
            net = self.network()
            self._shared["nlb"] = self.c("elbv2").create_load_balancer(
                Name=f"{self.prefix[:20]}-nlb", Subnets=net["subnets"], Type="network", Scheme="internal",
            )["LoadBalancers"][0]["LoadBalancerArn"]
        return self._shared["nlb"]

    @uses("ecs:CreateService", "ecs:TagResource", "application-autoscaling:RegisterScalableTarget", by=BY)
    def service(self, i: int, selected: bool) -> None:
        cluster = self.cluster()
        name = f"{self.prefix}-svc-{i}{'' if selected else '-twin'}"
        tags = [{"key": k, "value": v} for k, v in OWNER_TAG.items()]
        if selected:
            tags.append({"key": self.key, "value": self.value})
        self.c("ecs").create_service(cluster=cluster, serviceName=name, taskDefinition=f"{self.prefix}-task", desiredCount=1, tags=tags)
        resource_id = f"service/{cluster}/{name}"
        # Every third owner already suspended scheduled scaling; that flag must survive.
        suspended = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": i % 3 == 2}
        arn = self.c("application-autoscaling").register_scalable_target(
            ServiceNamespace="ecs", ResourceId=resource_id, ScalableDimension=ECS_DIMENSION,
            MinCapacity=1, MaxCapacity=10, SuspendedState=suspended,
        )["ScalableTargetARN"]
        self._add("scalable-target", arn, resource_id, selected)

    def build(self, counts: dict[str, int], unselected: int) -> Fleet:
        makers: dict[str, Callable[[int, bool], None]] = {
            "asg": self.asg, "esm": self.esm, "async": self.async_config, "nlb": self.nlb, "scalable-target": self.service,
        }
        # Shared pieces first, so the parallel builders never race to create them.
        if counts["asg"] or counts["nlb"]:
            self.network()
        if counts["nlb"]:
            self.load_balancer()
        if counts["esm"] or counts["async"]:
            self.role()
        if counts["async"] > 2:
            self.owner_queue()
        if counts["scalable-target"]:
            self.cluster()
        jobs = [(makers[k], i, True) for k in KINDS for i in range(counts[k])]
        jobs += [(makers[k], i, False) for k in KINDS if counts[k] for i in range(unselected)]
        with ThreadPoolExecutor(self.workers) as pool:
            for future in [pool.submit(fn, i, sel) for fn, i, sel in jobs]:
                future.result()
        for arns in (*self.fleet.selected.values(), *self.fleet.unselected.values()):
            arns.sort()
        return self.fleet


def build_fleet(
    clients,
    *,
    asgs: int = 0,
    esms: int = 0,
    asyncs: int = 0,
    nlbs: int = 0,
    services: int = 0,
    unselected: int = 1,
    selector: str = DEFAULT_SELECTOR,
    prefix: str = "fleet",
    workers: int = 8,
    provisioned: int = 0,
) -> Fleet:
    """Create `asgs` Auto Scaling groups, `esms` SQS queues each with a consumer function
    and an event source mapping, `asyncs` functions with varied async configs, `nlbs` TCP
    target groups and `services` ECS services with scalable targets, all carrying
    `selector`; plus `unselected` untagged twins of every kind that has any. The first
    `provisioned` selected mappings are in provisioned mode (PROVISIONED).
    """
    counts = {"asg": asgs, "esm": esms, "async": asyncs, "nlb": nlbs, "scalable-target": services}
    return _Builder(clients, selector, prefix, workers, provisioned).build(counts, unselected)


def batches(mapping: dict[str, Any]) -> int | None:
    """The most concurrent batches a mapping as Lambda lists it may run: its MaximumConcurrency
    (None: uncapped), or in provisioned mode what its MaximumPollers carry (holdfast.core.pollers)."""
    if pollers.provisioned(mapping.get("ProvisionedPollerConfig")):
        return pollers.cap_of(pollers.config(mapping["ProvisionedPollerConfig"])[pollers.MAX_KEY])
    return (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")


# ---- snapshot ---------------------------------------------------------------------------

def _tag_dict(tags: Iterable[dict], key: str = "Key", value: str = "Value") -> dict[str, str]:
    return {t[key]: t[value] for t in tags}


def _without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys and k != "ResponseMetadata"}


def _chunks(items: list[str], n: int) -> Iterable[list[str]]:
    for start in range(0, len(items), n):
        yield items[start:start + n]


@uses(
    "autoscaling:DescribeAutoScalingGroups", "lambda:GetEventSourceMapping", "lambda:ListTags",
    "lambda:GetFunctionEventInvokeConfig", "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTargetGroupAttributes", "application-autoscaling:DescribeScalableTargets",
    "ecs:ListTagsForResource", by=BY,
)
def snapshot(clients, fleet: Fleet) -> dict[str, dict[str, Any]]:
    """Every fleet resource's full relevant configuration and tags, by ARN.

    Only fields the owner sets are kept (no timestamps or states AWS changes by
    itself), so two snapshots are equal exactly when nothing the owner configured
    changed. A resource that no longer exists maps to None.
    """
    out: dict[str, dict[str, Any]] = {}
    asg = clients("autoscaling")
    for names in _chunks([fleet.handles[a] for a in fleet.arns("asg")], 50):
        for g in asg.describe_auto_scaling_groups(AutoScalingGroupNames=names, MaxRecords=100)["AutoScalingGroups"]:
            out[g["AutoScalingGroupARN"]] = {
                "SuspendedProcesses": sorted(p["ProcessName"] for p in g["SuspendedProcesses"]),
                "MinSize": g["MinSize"], "MaxSize": g["MaxSize"], "DesiredCapacity": g["DesiredCapacity"],
                "Tags": _tag_dict(g["Tags"]),
            }

    lam = clients("lambda")
    for arn in fleet.arns("esm"):
        try:
            m = lam.get_event_source_mapping(UUID=fleet.handles[arn])
        except lam.exceptions.ResourceNotFoundException:
            out[arn] = None
            continue
        if not m.get("ScalingConfig"):  # no cap: AWS may answer {} after an update removed one
            m.pop("ScalingConfig", None)
        out[arn] = {
            **_without(m, "LastModified", "State", "StateTransitionReason", "LastProcessingResult"),
            # Enabling/Updating are AWS's transitions; whether the owner disabled it is config.
            "Enabled": m.get("State") not in ("Disabled", "Disabling"),
            "Tags": lam.list_tags(Resource=arn)["Tags"],
        }
    for arn in fleet.arns("async"):
        try:
            config = _without(lam.get_function_event_invoke_config(FunctionName=fleet.handles[arn]), "LastModified")
        except lam.exceptions.ResourceNotFoundException:
            config = None
        out[arn] = {"EventInvokeConfig": config, "Tags": lam.list_tags(Resource=arn)["Tags"]}

    elb = clients("elbv2")
    tg_arns = fleet.arns("nlb")
    tg_tags: dict[str, dict[str, str]] = {}
    for chunk in _chunks(tg_arns, 20):  # DescribeTags takes up to 20 ARNs
        for d in elb.describe_tags(ResourceArns=chunk)["TagDescriptions"]:
            tg_tags[d["ResourceArn"]] = _tag_dict(d["Tags"])
    for arn in tg_arns:
        attrs = elb.describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]
        out[arn] = {"Attributes": _tag_dict(attrs), "Tags": tg_tags.get(arn, {})}

    ids = {fleet.handles[a]: a for a in fleet.arns("scalable-target")}
    aas, ecs = clients("application-autoscaling"), clients("ecs")
    for chunk in _chunks(list(ids), 50):
        for t in aas.describe_scalable_targets(ServiceNamespace="ecs", ResourceIds=chunk)["ScalableTargets"]:
            service_arn = _service_arn(ecs, t["ResourceId"])
            out[ids[t["ResourceId"]]] = {
                **_without(t, "CreationTime"),
                "ServiceTags": _tag_dict(ecs.list_tags_for_resource(resourceArn=service_arn)["tags"], "key", "value"),
            }
    for arn in fleet.arns():
        out.setdefault(arn, None)
    return out


@uses("ecs:DescribeServices", by=BY)
def _service_arn(ecs, resource_id: str) -> str:
    _, cluster, name = resource_id.split("/")
    return ecs.describe_services(cluster=cluster, services=[name])["services"][0]["serviceArn"]
