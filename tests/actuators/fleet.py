"""Builders for a small moto fleet (selected resources and unselected twins), the narrow
moto patches the actuators need (each says which AWS behaviour it restores), and a
fault injector."""

from __future__ import annotations

import io
import json
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
    """Raise on the k-th mutating AWS call (any service), counting from 1; k=0 never fails."""

    def __init__(self, clients, services, k):
        self.k = k
        self.seen = 0
        for service in services:
            clients(service).meta.events.register("before-call", self)

    def __call__(self, model, **_):
        from botocore.exceptions import ClientError

        if model.name.startswith(MUTATING):
            self.seen += 1
            if self.seen == self.k:
                raise ClientError({"Error": {"Code": "InjectedFault", "Message": f"fault at call {self.k}"}}, model.name)
