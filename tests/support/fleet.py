"""Builders for a small moto fleet (selected resources and unselected twins), the narrow
moto patches the actuators need (each says which AWS behaviour it restores), and a
fault injector."""

from __future__ import annotations

import io
import zipfile

import pytest

SELECTOR = {"holdfast:protect": "true"}
REGION = "us-east-1"
ACCOUNT = "123456789012"


def describe_asg(clients, name):
    return clients("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]


def make_asg(clients, name, *, selected=True, suspended=(), tags=None):
    ec2 = clients("ec2")
    if not ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": ["holdfast-lt"]}])["LaunchTemplates"]:
        ec2.create_launch_template(LaunchTemplateName="holdfast-lt", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"})
    all_tags = {**(SELECTOR if selected else {}), "team": "owner", **(tags or {})}
    clients("autoscaling").create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": "holdfast-lt"},
        MinSize=0,
        MaxSize=2,
        DesiredCapacity=0,
        AvailabilityZones=[f"{REGION}a"],
        Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": True} for k, v in all_tags.items()],
    )
    if suspended:
        clients("autoscaling").suspend_processes(AutoScalingGroupName=name, ScalingProcesses=list(suspended))
    return describe_asg(clients, name)["AutoScalingGroupARN"]


MUTATING = ("Create", "Put", "Update", "Delete", "Suspend", "Resume", "Tag", "Untag", "Modify", "Register")


class FailKth:
    """Raise on the k-th mutating AWS call (any of `services`), counting from 1; k=0 never
    fails. A context manager: the hook is gone after the block."""

    def __init__(self, clients, services, k):
        self.k = k
        self.seen = 0
        self._clients = [clients(s) for s in services]

    def __enter__(self):
        for client in self._clients:
            client.meta.events.register("before-call", self)
        return self

    def __exit__(self, *exc):
        for client in self._clients:
            client.meta.events.unregister("before-call", self)

    def __call__(self, model, **_):
        from botocore.exceptions import ClientError

        if model.name.startswith(MUTATING):
            self.seen += 1
            if self.seen == self.k:
                raise ClientError({"Error": {"Code": "InjectedFault", "Message": f"fault at call {self.k}"}}, model.name)


# ---- moto patches ----------------------------------------------------------------------


@pytest.fixture
def aws_semantics(aws):
    """Give moto 5.2.5 the AWS semantics the actuators rely on, narrowly: async invoke
    config Put replaces / Update merges or answers ResourceNotFoundException, Application
    Auto Scaling tagging on scalable targets, and DescribeScalableTargets pagination.
    The patches and the reason for each live in holdfast_fixtures.moto_patches, which the demo's
    embedded AWS uses too."""
    from holdfast_fixtures.moto_patches import aws_semantics as patched

    with patched():
        yield


# ---- builders --------------------------------------------------------------------------


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", "def handler(e, c):\n    return e\n")
    return buf.getvalue()


SEND_ANY_QUEUE = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:*:*:*"}]}


def role(clients, name="fn-role", policy=SEND_ANY_QUEUE) -> str:
    """An execution role; by default one whose owner granted it every queue (so Lambda's
    destination check passes). `policy=None`: a role that may send nowhere."""
    import json

    iam = clients("iam")
    try:
        return iam.get_role(RoleName=name)["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        if policy is not None:
            iam.put_role_policy(RoleName=name, PolicyName="owner", PolicyDocument=json.dumps(policy))
        return arn


def make_function(clients, name, *, selected=True, tags=None, role_arn=None) -> str:
    return clients("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role_arn or role(clients),
        Handler="index.handler",
        Code={"ZipFile": _zip()},
        Tags={**(SELECTOR if selected else {}), "team": "owner", **(tags or {})},
    )["FunctionArn"]


def make_queue(clients, name) -> str:
    sqs = clients("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def make_mapping(clients, function, queue, *, cap=None, enabled=True, tags=None, pollers=None) -> dict:
    """An SQS mapping: `cap` its MaximumConcurrency, or `pollers` its ProvisionedPollerConfig."""
    kwargs = {"ScalingConfig": {"MaximumConcurrency": cap}} if cap else {}
    if pollers is not None:
        kwargs["ProvisionedPollerConfig"] = dict(pollers)
    mapping = clients("lambda").create_event_source_mapping(
        FunctionName=function, EventSourceArn=make_queue(clients, queue), Enabled=enabled, Tags=tags or {}, **kwargs
    )
    return mapping


def make_target_group(clients, name, *, selected=True, protocol="TCP", attributes=None) -> str:
    ec2 = clients("ec2")
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    elb = clients("elbv2")
    arn = elb.create_target_group(Name=name, Protocol=protocol, Port=80, VpcId=vpc, TargetType="instance")[
        "TargetGroups"][0]["TargetGroupArn"]
    elb.add_tags(ResourceArns=[arn], Tags=[{"Key": k, "Value": v}
                                           for k, v in {**(SELECTOR if selected else {}), "team": "owner"}.items()])
    if attributes:
        elb.modify_target_group_attributes(TargetGroupArn=arn, Attributes=[{"Key": k, "Value": v} for k, v in attributes.items()])
    return arn


def make_service_target(clients, service, *, tag_service=True, tag_target=False, suspended=None) -> str:
    ecs = clients("ecs")
    if not ecs.describe_clusters(clusters=["c"])["clusters"]:
        ecs.create_cluster(clusterName="c")
        ecs.register_task_definition(family="t", containerDefinitions=[{"name": "x", "image": "x", "memory": 128}])
    ecs.create_service(cluster="c", serviceName=service, taskDefinition="t", desiredCount=1,
                       tags=[{"key": k, "value": v} for k, v in (SELECTOR if tag_service else {}).items()])
    aas = clients("application-autoscaling")
    kwargs = {"SuspendedState": suspended} if suspended else {}
    arn = aas.register_scalable_target(ServiceNamespace="ecs", ResourceId=f"service/c/{service}",
                                       ScalableDimension="ecs:service:DesiredCount", MinCapacity=1, MaxCapacity=4,
                                       **kwargs)["ScalableTargetARN"]
    if tag_target:
        aas.tag_resource(ResourceARN=arn, Tags=SELECTOR)
    return arn


def describe_target(clients, service) -> dict:
    found = clients("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="ecs", ResourceIds=[f"service/c/{service}"])["ScalableTargets"]
    return found[0] if found else {}
