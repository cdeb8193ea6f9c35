"""Why did a launch fail? Capacity (the region), configuration (one group), or unknown.

Pure: a table of patterns over the text Auto Scaling puts in an activity's
StatusMessage (and Cause). The wordings come from AWS's documentation: "Troubleshoot
Amazon EC2 Auto Scaling: EC2 instance launch failures", the EC2 API error codes, and
the mixed-instances form "Could not launch On-Demand Instances. <Code> - <message>".

- capacity: the region could not give the group an instance it asked for correctly:
  InsufficientInstanceCapacity in its wordings (including "There is no Spot capacity
  available"), other Insufficient*Capacity codes, and RequestLimitExceeded / throttled
  launches (in October launches resumed into "request limit exceeded").
- configuration: the group itself is broken, and no amount of waiting fixes it: bad or
  missing AMI, launch template, key pair, subnet, security group, block device
  mapping, IAM profile, unauthorized, invalid parameters, an instance type the zone
  does not offer, Spot price too low. Account limits (VcpuLimitExceeded,
  InstanceLimitExceeded, MaxSpotInstanceCountExceeded, "instance(s) are already
  running") are configuration too: a quota the owner must raise, not the region
  running out — a region-wide outage does not lower anyone's quota.
- unknown: anything else. Unknown never counts toward impairment: a message we cannot
  read is not evidence that the region is down.

When a message names both kinds (a mixed-instances group can report one error per
market), configuration wins: a group that cannot launch even with capacity is one
broken group, and Holdfast must never engage because of one broken group.
"""

from __future__ import annotations

import re
from typing import NamedTuple

CAPACITY, CONFIGURATION, UNKNOWN = "capacity", "configuration", "unknown"


class Cause(NamedTuple):
    klass: str
    reason: str


# (pattern, reason). Checked configuration first, then capacity.
_CONFIGURATION = [
    (r"InvalidAMIID|image id .* does not exist|AMI .* is (pending|invalid)|InvalidImageID", "AMI not found or invalid"),
    (r"InvalidLaunchTemplate|launch template.*(does not exist|not found|is invalid)|launch configuration .*(does not exist|not found)",
     "launch template or configuration not found or invalid"),
    (r"UnauthorizedOperation|not authorized|AuthFailure|AccessDenied|not subscribed to this service|OptInRequired",
     "not authorized"),
    (r"InvalidKeyPair|key pair .* does not exist", "key pair not found"),
    (r"InvalidSubnet|subnet .* does not exist|InvalidGroup\.NotFound|security group .* does not exist", "subnet or security group not found"),
    (r"InsufficientFreeAddressesInSubnet|not enough free addresses in subnet", "subnet out of addresses"),
    (r"block device|device name|virtualName|InvalidBlockDeviceMapping|InvalidSnapshot|instance-store AMIs", "block device mapping"),
    (r"instance profile|InvalidParameterValue.*iamInstanceProfile", "IAM instance profile"),
    (r"VcpuLimitExceeded|more vCPU capacity than your current vCPU limit", "account vCPU limit (a quota, not the region)"),
    (r"InstanceLimitExceeded|MaxSpotInstanceCountExceeded|instance\(s\) are already running|quota allows for",
     "account instance limit (a quota, not the region)"),
    (r"SpotMaxPriceTooLow|Spot request price .* lower than the minimum", "Spot max price too low"),
    (r"is not supported in your requested Availability Zone|Unsupported\b|requested configuration is currently not supported|"
     r"Availability Zone is no longer supported|Placement groups may not be used",
     "configuration not offered in this zone"),
    (r"InvalidParameter|InvalidParameterCombination|MissingParameter|Invalid \w+|is invalid|Client\.InternalError|KMS",
     "invalid parameters or combination"),
]

_CAPACITY = [
    (r"InsufficientInstanceCapacity|do not have sufficient .* capacity|no Spot capacity available|Insufficient capacity",
     "insufficient instance capacity"),
    (r"Insufficient\w*Capacity", "insufficient capacity"),
    (r"RequestLimitExceeded|Request limit exceeded|Throttl|Rate exceeded", "request limit exceeded (throttled launches)"),
]


def _compile(table):
    return [(re.compile(pattern, re.IGNORECASE), reason) for pattern, reason in table]


_TABLES = ((CONFIGURATION, _compile(_CONFIGURATION)), (CAPACITY, _compile(_CAPACITY)))


def classify(status_message: str | None, cause: str | None = None) -> Cause:
    """Class and reason of one failed launch, from its StatusMessage, else its Cause.

    The Cause usually says why a launch was attempted ("a difference between desired
    and actual capacity"), so it is read only when the StatusMessage says nothing we
    recognise."""
    for text in (status_message, cause):
        if text:
            for klass, table in _TABLES:
                for pattern, reason in table:
                    if pattern.search(text):
                        return Cause(klass, reason)
    if status_message or cause:
        return Cause(UNKNOWN, "unrecognised launch failure")
    return Cause(UNKNOWN, "launch failure without a message")
