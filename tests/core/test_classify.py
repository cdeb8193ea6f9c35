"""The classifier over a corpus of launch-failure messages in the wordings AWS documents
("Troubleshoot Amazon EC2 Auto Scaling: EC2 instance launch failures", the EC2 API
error codes, and the mixed-instances "Could not launch ... Instances. <Code> - ..." form)."""

import pytest

from holdfast.core.classify import CAPACITY, CONFIGURATION, UNKNOWN, classify
from holdfast.core.signals import parse_event
from tests.support.factory import REGION, SETTINGS, launch, utc

CORPUS = [
    # --- capacity: the region cannot give a correct request an instance ---------------
    ("We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). "
     "Our system will be working on provisioning additional capacity. You can currently get m5.large capacity by "
     "not specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c. Launching EC2 instance failed.",
     CAPACITY),
    ("Launching a new EC2 instance. Status Reason: We currently do not have sufficient c5.xlarge capacity in the "
     "Availability Zone you requested (us-east-1d). Launching EC2 instance failed.", CAPACITY),
    ("Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
     "m5.large capacity in the Availability Zone you requested (us-east-1a). Launching EC2 instance failed.", CAPACITY),
    ("Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that "
     "matches your request. Launching EC2 instance failed.", CAPACITY),
    ("There is no Spot capacity available that matches your request. Launching EC2 instance failed.", CAPACITY),
    ("Server.InsufficientInstanceCapacity: Insufficient capacity.", CAPACITY),
    ("Insufficient capacity. Launching EC2 instance failed.", CAPACITY),
    ("Could not launch On-Demand Instances. InsufficientHostCapacity - There is not enough capacity to fulfill "
     "your Dedicated Host request. Launching EC2 instance failed.", CAPACITY),
    ("Could not launch On-Demand Instances. RequestLimitExceeded - Request limit exceeded. Launching EC2 instance failed.",
     CAPACITY),
    ("Request limit exceeded. Launching EC2 instance failed.", CAPACITY),
    ("RequestLimitExceeded: Request limit exceeded.", CAPACITY),
    # --- configuration: one broken group ----------------------------------------------
    ("The image id '[ami-0123456789abcdef0]' does not exist. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidAMIID.NotFound - The image id '[ami-0123456789abcdef0]' does "
     "not exist. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidAMIID.Malformed - Invalid id: \"ami-xyz\". Launching EC2 instance failed.",
     CONFIGURATION),
    ("AMI ami-0123456789abcdef0 is pending, and cannot be run. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidLaunchTemplateName.NotFoundException - The specified launch "
     "template, with template name my-template, does not exist. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidLaunchTemplateId.VersionNotFound - Could not find launch "
     "template version 7 for template lt-0123456789abcdef0. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. UnauthorizedOperation - You are not authorized to perform this "
     "operation. Encoded authorization failure message: AbC123. Launching EC2 instance failed.", CONFIGURATION),
    ("You are not authorized to use launch template: lt-0123456789abcdef0", CONFIGURATION),
    ("You are not subscribed to this service. Please see https://aws.amazon.com/.", CONFIGURATION),
    ("The key pair 'my-key' does not exist. Launching EC2 instance failed.", CONFIGURATION),
    ("The security group 'sg-0123456789abcdef0' does not exist in VPC 'vpc-0123'. Launching EC2 instance failed.",
     CONFIGURATION),
    ("The subnet ID 'subnet-0123456789abcdef0' does not exist. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidSubnetID.NotFound - The subnet ID 'subnet-0123' does not exist. "
     "Launching EC2 instance failed.", CONFIGURATION),
    ("Invalid device name /dev/sdz. Launching EC2 instance failed.", CONFIGURATION),
    ("Value (ephemeral9) for parameter virtualName is invalid. Launching EC2 instance failed.", CONFIGURATION),
    ("EBS block device mappings not supported for instance-store AMIs. Launching EC2 instance failed.", CONFIGURATION),
    ("Your requested instance type (m5.large) is not supported in your requested Availability Zone (us-east-1e). "
     "Please retry your request by not specifying an Availability Zone or choosing us-east-1a, us-east-1b. "
     "Launching EC2 instance failed.", CONFIGURATION),
    ("The requested configuration is currently not supported. Please check the documentation for supported "
     "configurations. Launching EC2 instance failed.", CONFIGURATION),
    ("Placement groups may not be used with instances of type 'm1.large'. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity than your "
     "current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to. Please "
     "visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. "
     "Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InstanceLimitExceeded - Your quota allows for 0 more running "
     "instance(s). You requested at least 1. Launching EC2 instance failed.", CONFIGURATION),
    ("20 instance(s) are already running. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch Spot Instances. MaxSpotInstanceCountExceeded - Max spot instance count exceeded. "
     "Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch Spot Instances. SpotMaxPriceTooLow - Your Spot request price of 0.015 is lower than the "
     "minimum required Spot request fulfillment price of 0.0735. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidParameterCombination - The parameter iops is not supported for "
     "gp2 volumes. Launching EC2 instance failed.", CONFIGURATION),
    ("Could not launch On-Demand Instances. InvalidParameterValue - Value (my-profile) for parameter "
     "iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name. Launching EC2 instance failed.", CONFIGURATION),
    ("Client.InternalError: Client error on launch.", CONFIGURATION),
    ("There are not enough free addresses in subnet 'subnet-0123' to satisfy the requested number of instances. "
     "Launching EC2 instance failed.", CONFIGURATION),
    # A mixed-instances group with one error per market: configuration wins.
    ("Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that "
     "matches your request. Could not launch On-Demand Instances. InvalidAMIID.NotFound - The image id "
     "'[ami-0123]' does not exist. Launching EC2 instance failed.", CONFIGURATION),
    # --- unknown: not evidence of anything ----------------------------------------------
    ("Instance became unhealthy while waiting for instance to be in InService state. Termination Reason: Client.InstanceInitiatedShutdown",
     UNKNOWN),
    ("An internal error occurred. Launching EC2 instance failed.", UNKNOWN),
    ("", UNKNOWN),
]


@pytest.mark.parametrize("message, expected", CORPUS, ids=[f"{i:02d}-{c}" for i, (_, c) in enumerate(CORPUS)])
def test_classifies_documented_messages(message, expected):
    klass, reason = classify(message)
    assert klass == expected, reason
    assert reason


def test_cause_is_read_only_when_the_message_says_nothing_known():
    # The Cause says why a launch was tried ("difference between desired and actual capacity").
    routine_cause = "At 2025-10-20T06:48:20Z an instance was started in response to a difference between desired and actual capacity."
    assert classify("", routine_cause).klass == UNKNOWN
    assert classify("Request limit exceeded.", routine_cause).klass == CAPACITY
    assert classify(None, "The key pair 'k' does not exist").klass == CONFIGURATION


@pytest.mark.parametrize("message, expected", CORPUS[::4])
def test_the_event_parser_uses_the_classifier(message, expected):
    parsed = parse_event(launch("web", "us-east-1a", utc(2025, 10, 20, 7), message=message.replace("{", "{{").replace("}", "}}")),
                         region=REGION, settings=SETTINGS)
    assert parsed.report_class == expected
    assert parsed.signal.klass == expected
