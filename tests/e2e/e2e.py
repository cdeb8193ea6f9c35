"""The opt-in end-to-end run's AWS side: a small fleet with hard owner states, its exact
snapshot, and clean-up. `tests/e2e/run.sh` drives it; `make e2e` runs that.

Commands (each prints JSON or one line, exits non-zero on failure):

    preflight                      the credentials are the sandbox account's, in its region
    prepare  --prefix P --selector K=V   the stop alarm and the fleet
    snapshot --prefix P            every owner setting Holdfast may touch, as JSON on stdout
    compare  BEFORE AFTER          exact equality, or the differences and exit 1
    provoke  --prefix P --selector K=V --minutes M   launches while the experiment runs (replace one
                                   instance per selected group each 2 minutes)
    retained --stack S             the stack's resources kept on delete, as JSON
    destroy  --prefix P [--retained FILE]   everything the run made, whatever state it is in

The fleet (all names start with the prefix; "selected" carries the opt-in tag):
- three selected Auto Scaling groups in different zones, one instance each (t4g.nano);
  the owner suspended AZRebalance on the first and ScheduledActions on the second
  (Holdfast must resume neither), and an unselected twin;
- an SQS queue consumed by a function through two mappings: one with the owner's
  MaximumConcurrency of 7, one without a cap;
- a function whose async config the owner set (no retries, 1 hour, its own on-failure
  queue) and one without any config;
- an NLB target group with the owner's own health thresholds (DNS failover count 2).
Nothing here is Holdfast's code: it is the account Holdfast is let loose on.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import zipfile
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})
AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
ALARM_SUFFIX = "stop"


def client(name: str):
    return boto3.client(name, config=CONFIG)


def _tags(selector: str, selected: bool, prefix: str) -> dict[str, str]:
    key, value = selector.split("=", 1)
    return {"holdfast-e2e": prefix, "owner": "e2e", **({key: value} if selected else {})}


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("index.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def _ignore(codes: tuple[str, ...], fn, *args, **kwargs) -> Any:
    try:
        return fn(*args, **kwargs)
    except ClientError as err:
        if err.response["Error"]["Code"] in codes:
            return None
        raise


# ---- preflight -----------------------------------------------------------------------


def preflight(account: str, region: str) -> None:
    actual = client("sts").get_caller_identity()["Account"]
    session_region = boto3.session.Session().region_name
    if actual != account:
        sys.exit(f"e2e: refusing to run: the credentials are account {actual}, HOLDFAST_E2E_ACCOUNT is {account}")
    if session_region != region:
        sys.exit(f"e2e: refusing to run: the session region is {session_region}, HOLDFAST_E2E_REGION is {region}")
    print(f"e2e: sandbox {account} in {region}")


# ---- the fleet ---------------------------------------------------------------------------


def prepare(prefix: str, selector: str, *, ami: str | None = None, instance_type: str = "t4g.nano", desired: int = 1) -> dict:
    ec2, asg, lam, sqs, elb, iam, cw = (client(n) for n in ("ec2", "autoscaling", "lambda", "sqs", "elbv2", "iam", "cloudwatch"))
    made: dict[str, Any] = {"prefix": prefix}
    # The stop condition: an alarm that breaches only if the drill itself breaks the account
    # (any Holdfast controller error); FIS stops the experiment when it fires.
    cw.put_metric_alarm(
        AlarmName=f"{prefix}-{ALARM_SUFFIX}", Namespace="AWS/Lambda", MetricName="Errors", Statistic="Sum",
        Dimensions=[{"Name": "FunctionName", "Value": f"{prefix}-never"}], Period=60, EvaluationPeriods=1,
        Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="notBreaching",
    )
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpc:
        sys.exit("e2e: the sandbox region needs its default VPC (the fleet's groups and target group use it)")
    vpc_id = vpc[0]["VpcId"]
    subnets = sorted(
        ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "default-for-az", "Values": ["true"]}])["Subnets"],
        key=lambda s: s["AvailabilityZone"],
    )
    if len(subnets) < 3:
        sys.exit("e2e: the default VPC needs default subnets in at least 3 zones")
    image = ami or client("ssm").get_parameter(Name=AMI_PARAMETER)["Parameter"]["Value"]
    ec2.create_launch_template(
        LaunchTemplateName=f"{prefix}-lt",
        LaunchTemplateData={"ImageId": image, "InstanceType": instance_type},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": "holdfast-e2e", "Value": prefix}]}],
    )
    owner_suspended = {0: ["AZRebalance"], 1: ["ScheduledActions"]}
    for i, selected in enumerate((True, True, True, False)):
        name = f"{prefix}-asg-{i}"
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateName": f"{prefix}-lt", "Version": "$Latest"},
            MinSize=desired, MaxSize=desired + 1, DesiredCapacity=desired, VPCZoneIdentifier=subnets[i % 3]["SubnetId"],
            Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": False} for k, v in _tags(selector, selected, prefix).items()],
        )
        if i in owner_suspended:
            asg.suspend_processes(AutoScalingGroupName=name, ScalingProcesses=owner_suspended[i])
    role = iam.create_role(
        RoleName=f"{prefix}-fn",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        Tags=[{"Key": "holdfast-e2e", "Value": prefix}],
    )["Role"]["Arn"]
    owner_dlq = sqs.create_queue(QueueName=f"{prefix}-owner-dlq")["QueueUrl"]
    owner_dlq_arn = sqs.get_queue_attributes(QueueUrl=owner_dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    work = sqs.create_queue(QueueName=f"{prefix}-work")["QueueUrl"]
    work_arn = sqs.get_queue_attributes(QueueUrl=work, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    iam.put_role_policy(RoleName=f"{prefix}-fn", PolicyName="fleet", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"], "Resource": work_arn},
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": owner_dlq_arn},
    ]}))
    _wait_for_role(role)
    for name, selected in (("consumer", True), ("owned-async", True), ("bare-async", True), ("twin", False)):
        _create_function(lam, f"{prefix}-{name}", role, _tags(selector, selected, prefix))
    lam.create_event_source_mapping(FunctionName=f"{prefix}-consumer", EventSourceArn=work_arn, BatchSize=10,
                                    ScalingConfig={"MaximumConcurrency": 7}, Tags=_tags(selector, True, prefix))
    lam.create_event_source_mapping(FunctionName=f"{prefix}-consumer", EventSourceArn=work_arn, BatchSize=5,
                                    Tags=_tags(selector, True, prefix))
    lam.put_function_event_invoke_config(
        FunctionName=f"{prefix}-owned-async", MaximumRetryAttempts=0, MaximumEventAgeInSeconds=3600,
        DestinationConfig={"OnFailure": {"Destination": owner_dlq_arn}},
    )
    tg = elb.create_target_group(Name=f"{prefix}-tg"[:32], Protocol="TCP", Port=80, VpcId=vpc_id, TargetType="instance",
                                 Tags=[{"Key": k, "Value": v} for k, v in _tags(selector, True, prefix).items()])
    elb.modify_target_group_attributes(TargetGroupArn=tg["TargetGroups"][0]["TargetGroupArn"], Attributes=[
        {"Key": "target_group_health.dns_failover.minimum_healthy_targets.count", "Value": "2"},
        {"Key": "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count", "Value": "1"},
    ])
    made.update(alarm=f"{prefix}-{ALARM_SUFFIX}", vpc=vpc_id)
    return made


def _create_function(lam, name: str, role: str, tags: dict[str, str]) -> None:
    for attempt in range(10):  # a new role takes a few seconds to be assumable by Lambda
        try:
            lam.create_function(FunctionName=name, Runtime="python3.13", Role=role, Handler="index.handler",
                                Code={"ZipFile": _zip()}, Architectures=["arm64"], Tags=tags)
            return
        except ClientError as err:
            if err.response["Error"]["Code"] != "InvalidParameterValueException" or attempt == 9:
                raise
            time.sleep(3)


def _wait_for_role(arn: str) -> None:
    client("iam").get_waiter("role_exists").wait(RoleName=arn.rsplit("/", 1)[1])


# ---- the snapshot -------------------------------------------------------------------------


def snapshot(prefix: str) -> dict[str, Any]:
    """Every owner setting Holdfast may change, keyed by resource; tags included (Holdfast's
    write-ahead tags must be gone after a full restore)."""
    asg, lam, elb = client("autoscaling"), client("lambda"), client("elbv2")
    out: dict[str, Any] = {}
    for page in asg.get_paginator("describe_auto_scaling_groups").paginate(
        Filters=[{"Name": "tag:holdfast-e2e", "Values": [prefix]}]
    ):
        for g in page["AutoScalingGroups"]:
            out[f"asg:{g['AutoScalingGroupName']}"] = {
                "MinSize": g["MinSize"], "MaxSize": g["MaxSize"], "DesiredCapacity": g["DesiredCapacity"],
                "SuspendedProcesses": sorted(p["ProcessName"] for p in g.get("SuspendedProcesses", [])),
                "Tags": sorted((t["Key"], t["Value"], t["PropagateAtLaunch"]) for t in g.get("Tags", [])),
                "HealthCheckType": g["HealthCheckType"], "AZs": sorted(g["AvailabilityZones"]),
            }
    for page in lam.get_paginator("list_functions").paginate():
        for f in page["Functions"]:
            name = f["FunctionName"]
            if not name.startswith(f"{prefix}-"):
                continue
            config = _ignore(("ResourceNotFoundException",), lam.get_function_event_invoke_config, FunctionName=name)
            out[f"async:{name}"] = None if config is None else {
                k: config.get(k) for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig")
            }
            out[f"tags:{name}"] = sorted(lam.list_tags(Resource=f["FunctionArn"])["Tags"].items())
            for m in lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
                tags = lam.list_tags(Resource=m["EventSourceMappingArn"])["Tags"]
                out[f"esm:{name}:batch{m['BatchSize']}"] = {
                    "ScalingConfig": m.get("ScalingConfig") or {}, "State": m["State"], "Tags": sorted(tags.items()),
                }
    for page in elb.get_paginator("describe_target_groups").paginate():
        for tg in page["TargetGroups"]:
            if tg["TargetGroupName"].startswith(prefix[:32]):
                attributes = elb.describe_target_group_attributes(TargetGroupArn=tg["TargetGroupArn"])["Attributes"]
                tags = elb.describe_tags(ResourceArns=[tg["TargetGroupArn"]])["TagDescriptions"][0]["Tags"]
                out[f"tg:{tg['TargetGroupName']}"] = {
                    "Attributes": {a["Key"]: a["Value"] for a in attributes if a["Key"].startswith("target_group_health.")},
                    "Tags": sorted((t["Key"], t["Value"]) for t in tags),
                }
    return json.loads(json.dumps(out))  # tuples as lists, as a file round trip gives them


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each resource whose owner settings differ, with both values; empty when restored exactly."""
    differences = []
    for key in sorted(set(before) | set(after)):
        if key not in after:
            differences.append(f"{key}: gone after the drill")
        elif key not in before:
            differences.append(f"{key}: appeared during the drill: {after[key]}")
        elif before[key] != after[key]:
            differences.append(f"{key}: before {json.dumps(before[key])}, after {json.dumps(after[key])}")
    return differences


# ---- launches while the experiment runs ---------------------------------------------------


def provoke(prefix: str, selector: str, minutes: int, *, every_seconds: int = 120, sleep=time.sleep) -> int:
    """Replace one instance of each selected group every two minutes, so the groups try to
    launch while FIS fails their launches (a group at its desired capacity launches nothing).
    The owner's settings are untouched: ShouldDecrementDesiredCapacity is false."""
    asg = client("autoscaling")
    key, value = selector.split("=", 1)
    replaced = 0
    for _ in range(max(1, minutes * 60 // every_seconds)):
        groups = asg.describe_auto_scaling_groups(Filters=[{"Name": "tag:holdfast-e2e", "Values": [prefix]}])["AutoScalingGroups"]
        for g in groups:
            selected = {(t["Key"], t["Value"]) for t in g.get("Tags", [])} >= {(key, value)}
            in_service = [i for i in g["Instances"] if i["LifecycleState"] == "InService"]
            if selected and in_service:
                asg.terminate_instance_in_auto_scaling_group(InstanceId=in_service[0]["InstanceId"], ShouldDecrementDesiredCapacity=False)
                replaced += 1
        sleep(every_seconds)
    return replaced


# ---- clean-up ------------------------------------------------------------------------------


def retained(stack: str) -> dict[str, list[str]]:
    """What `cdk destroy` leaves behind on purpose (RETAIN): the ledger, log groups, keys."""
    cfn = client("cloudformation")
    kept: dict[str, list[str]] = {"AWS::DynamoDB::Table": [], "AWS::Logs::LogGroup": [], "AWS::KMS::Key": []}
    try:
        pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for page in pages:
            for r in page["StackResourceSummaries"]:
                if r["ResourceType"] in kept and r.get("PhysicalResourceId"):
                    kept[r["ResourceType"]].append(r["PhysicalResourceId"])
    except ClientError as err:
        if "does not exist" not in str(err):
            raise
    return kept


def destroy(prefix: str, kept: dict[str, list[str]] | None = None) -> list[str]:
    """Delete everything the run made; every step tolerates what is already gone."""
    asg, ec2, lam, sqs, elb, iam, cw = (client(n) for n in ("autoscaling", "ec2", "lambda", "sqs", "elbv2", "iam", "cloudwatch"))
    done: list[str] = []
    gone = ("ResourceNotFoundException", "NoSuchEntity", "ValidationError", "TargetGroupNotFound", "AWS.SimpleQueueService.NonExistentQueue",
            "InvalidLaunchTemplateName.NotFoundException", "ResourceNotFound", "ResourceInUse")
    groups = asg.describe_auto_scaling_groups(Filters=[{"Name": "tag:holdfast-e2e", "Values": [prefix]}])["AutoScalingGroups"]
    for g in groups:
        _ignore(gone, asg.delete_auto_scaling_group, AutoScalingGroupName=g["AutoScalingGroupName"], ForceDelete=True)
        done.append(g["AutoScalingGroupName"])
    for page in lam.get_paginator("list_functions").paginate():
        for f in page["Functions"]:
            if f["FunctionName"].startswith(f"{prefix}-"):
                for m in lam.list_event_source_mappings(FunctionName=f["FunctionName"])["EventSourceMappings"]:
                    _ignore(gone, lam.delete_event_source_mapping, UUID=m["UUID"])
                _ignore(gone, lam.delete_function, FunctionName=f["FunctionName"])
                done.append(f["FunctionName"])
    for url in sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", []):
        _ignore(gone, sqs.delete_queue, QueueUrl=url)
        done.append(url)
    for page in elb.get_paginator("describe_target_groups").paginate():
        for tg in page["TargetGroups"]:
            if tg["TargetGroupName"].startswith(prefix[:32]):
                _ignore(gone, elb.delete_target_group, TargetGroupArn=tg["TargetGroupArn"])
                done.append(tg["TargetGroupName"])
    _ignore(gone, iam.delete_role_policy, RoleName=f"{prefix}-fn", PolicyName="fleet")
    if _ignore(gone, iam.delete_role, RoleName=f"{prefix}-fn") is not None:
        done.append(f"{prefix}-fn")
    cw.delete_alarms(AlarmNames=[f"{prefix}-{ALARM_SUFFIX}"])
    _wait_for_groups_gone(asg, [g["AutoScalingGroupName"] for g in groups])
    templates = ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": [f"{prefix}-lt"]}])["LaunchTemplates"]
    for template in templates:
        _ignore(gone, ec2.delete_launch_template, LaunchTemplateId=template["LaunchTemplateId"])
        done.append(f"{prefix}-lt")
    for table in (kept or {}).get("AWS::DynamoDB::Table", []):
        _ignore(gone, client("dynamodb").delete_table, TableName=table)
        done.append(table)
    for group in (kept or {}).get("AWS::Logs::LogGroup", []):
        _ignore(gone, client("logs").delete_log_group, logGroupName=group)
        done.append(group)
    for key in (kept or {}).get("AWS::KMS::Key", []):
        _ignore(gone + ("KMSInvalidStateException", "NotFoundException"), client("kms").schedule_key_deletion, KeyId=key, PendingWindowInDays=7)
        done.append(key)
    return done


def _wait_for_groups_gone(asg, names: list[str], *, timeout: float = 900, sleep=time.sleep) -> None:
    deadline = time.monotonic() + timeout
    while names and time.monotonic() < deadline:
        left = asg.describe_auto_scaling_groups(AutoScalingGroupNames=names)["AutoScalingGroups"]
        if not left:
            return
        sleep(10)


# ---- command line -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/e2e/e2e.py")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("preflight")
    p = sub.add_parser("prepare")
    p.add_argument("--prefix", required=True)
    p.add_argument("--selector", required=True)
    p = sub.add_parser("snapshot")
    p.add_argument("--prefix", required=True)
    p = sub.add_parser("compare")
    p.add_argument("before")
    p.add_argument("after")
    p = sub.add_parser("provoke")
    p.add_argument("--prefix", required=True)
    p.add_argument("--selector", required=True)
    p.add_argument("--minutes", type=int, required=True)
    p = sub.add_parser("retained")
    p.add_argument("--stack", required=True)
    p = sub.add_parser("destroy")
    p.add_argument("--prefix", required=True)
    p.add_argument("--retained")
    args = parser.parse_args(argv)

    if args.command == "preflight":
        preflight(os.environ["HOLDFAST_E2E_ACCOUNT"], os.environ["HOLDFAST_E2E_REGION"])
    elif args.command == "prepare":
        print(json.dumps(prepare(args.prefix, args.selector)))
    elif args.command == "snapshot":
        print(json.dumps(snapshot(args.prefix), indent=1, sort_keys=True))
    elif args.command == "compare":
        with open(args.before) as b, open(args.after) as a:
            differences = compare(json.load(b), json.load(a))
        for line in differences:
            print(f"e2e: not restored: {line}")
        if differences:
            return 1
        print("e2e: every resource restored exactly")
    elif args.command == "provoke":
        print(f"e2e: replaced {provoke(args.prefix, args.selector, args.minutes)} instances while the experiment ran")
    elif args.command == "retained":
        print(json.dumps(retained(args.stack)))
    elif args.command == "destroy":
        kept = None
        if args.retained and os.path.exists(args.retained):
            with open(args.retained) as f:
                kept = json.load(f)
        print(json.dumps(destroy(args.prefix, kept)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
