"""Why did a launch fail? Capacity (the region), configuration (one group), or unknown.

Pure: no boto3. Auto Scaling puts EC2's answer in an activity's StatusMessage (and
Cause): "Could not launch On-Demand Instances. <Code> - <message>", "<Code>: <message>",
"Server.<Code>: ...", or only the message's words. The classifier reads the EC2 error
code first, wherever the message carries one, and falls back to the words.

- By code (holdfast.core.ec2_errors lists every code in the EC2 API reference):
  - capacity: the region could not serve a correct request. The Insufficient*Capacity
    codes EC2 answers when it runs out (instances, hosts, Reserved Instance capacity,
    addresses, volumes, Spot's UnfulfillableCapacity), RequestLimitExceeded (in October
    launches resumed into "request limit exceeded"), and EC2's own server errors
    (InternalError, InternalFailure, ServiceUnavailable, Unavailable). A `Server.` prefix
    is EC2 saying the same.
  - configuration: every other documented code, and anything with a `Client.` prefix.
    They are client errors: the group's request is wrong (an AMI, a launch template, a
    key pair, a subnet, a block device mapping, a parameter), it is not authorized, or
    it exceeds an account quota (VcpuLimitExceeded, InstanceLimitExceeded, ...: a quota
    the owner must raise; a regional outage lowers nobody's quota), or it needs the
    owner's own capacity (InsufficientCapacityOnHost on their Dedicated Host,
    InsufficientCapacityOnOutpost on their Outpost, InsufficientFreeAddressesInSubnet in
    their subnet).
  A code the reference does not list is not evidence: the words decide.
- By words, for messages without a code, in the wordings of "Troubleshoot Amazon EC2
  Auto Scaling: EC2 instance launch failures" (table below).
- unknown: anything else. Unknown never counts toward impairment: a message Holdfast
  cannot read is not evidence that the region is down. `holdfast detect` reports it and
  the detector Lambda counts it (metric LaunchFailuresUnknown).

When a message names both kinds (a mixed-instances group can report one error per
market), configuration wins: a group that cannot launch even with capacity is one
broken group, and Holdfast must never engage because of one broken group.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from holdfast.core.ec2_errors import EC2_ERROR_CODES

CAPACITY, CONFIGURATION, UNKNOWN = "capacity", "configuration", "unknown"


class Cause(NamedTuple):
    klass: str
    reason: str


# The codes that mean "the region", each with why; every other documented code is configuration.
CAPACITY_CODES = {
    "InsufficientInstanceCapacity": "insufficient instance capacity",
    "InsufficientCapacity": "insufficient capacity",
    "InsufficientHostCapacity": "insufficient Dedicated Host capacity",
    "InsufficientReservedInstanceCapacity": "insufficient Reserved Instance capacity",
    "InsufficientReservedInstancesCapacity": "insufficient Reserved Instance capacity",
    "InsufficientAddressCapacity": "insufficient address capacity",
    "InsufficientVolumeCapacity": "insufficient EBS volume capacity",
    "UnfulfillableCapacity": "Spot capacity cannot be fulfilled",
    "RequestLimitExceeded": "request limit exceeded (throttled launches)",
    "InternalError": "EC2 server error",
    "InternalFailure": "EC2 server error",
    "ServiceUnavailable": "EC2 unavailable",
    "Unavailable": "EC2 unavailable",
}

# Why a configuration code is the group's own problem, by the code's family (first match).
_CODE_FAMILIES = [
    (r"^(AuthFailure|Blocked|OptInRequired|PendingVerification|UnauthorizedOperation|SignatureDoesNotMatch|"
     r"IncompleteSignature|InvalidClientTokenId|MissingAuthenticationToken|RequestExpired)$", "not authorized"),
    (r"LimitExceeded|CountExceeded|Limit$|CapacityExceeded|ResourceCountExceeded", "an account quota (not the region)"),
    (r"^InsufficientCapacityOn|^InsufficientFreeAddresses", "the owner's own capacity (host, Outpost or subnet)"),
    (r"AMI|Image|Snapshot|BlockDevice|Volume|Device", "AMI, snapshot or block device mapping"),
    (r"LaunchTemplate", "launch template"),
    (r"KeyPair|Key\.", "key pair"),
    (r"Subnet|Group|Vpc|VPC|Network|Gateway|Address|Route|Cidr|Placement", "network configuration"),
    (r"^Unsupported|NotSupported|NotAvailable|Unavailable$|^Unknown", "not offered or not supported here"),
    (r"^(Invalid|Missing|Malformed|Unknown|Validation)|Malformed|NotFound|Duplicate|Mismatch", "invalid or missing parameters"),
]

# (pattern, reason) over the words, for messages that carry no code. Configuration first.
_CONFIGURATION = [
    (r"InvalidAMIID|image id .* does not exist|AMI .* is (pending|invalid)|InvalidImageID", "AMI not found or invalid"),
    (r"InvalidLaunchTemplate|launch template.*(does not exist|not found|is invalid)|launch configuration .*(does not exist|not found)",
     "launch template or configuration not found or invalid"),
    (r"UnauthorizedOperation|not authorized|AuthFailure|AccessDenied|not subscribed to this service|OptInRequired",
     "not authorized"),
    (r"InvalidKeyPair|key pair .* does not exist", "key pair not found"),
    (r"InvalidSubnet|subnet .* does not exist|InvalidGroup\.NotFound|security group .* does not exist", "subnet or security group not found"),
    (r"InsufficientFreeAddressesInSubnet|not enough free addresses in subnet", "subnet out of addresses"),
    (r"block[- ]device|device name|virtualName|InvalidBlockDeviceMapping|InvalidSnapshot|instance-store AMIs|"
     r"device .* is used in more than one", "block device mapping"),
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
_FAMILIES = [(re.compile(p), reason) for p, reason in _CODE_FAMILIES]

# An error code where EC2 and Auto Scaling put one: "<Code> - <message>" (one per market in
# a mixed-instances group), "<Code>: <message>", with an optional Server./Client. prefix;
# or the SDKs' "Error Code: <Code>".
_CODE_AT = re.compile(
    r"(?<![\w.])(?:(Server|Client)\.)?([A-Z][A-Za-z0-9]*(?:\.[A-Z][A-Za-z0-9]*)?)(?=\s+-\s|:\s|:$|;)"
    r"|Error Code:\s*(?:(Server|Client)\.)?([A-Z][A-Za-z0-9]*(?:\.[A-Z][A-Za-z0-9]*)?)"
)


def classify(status_message: Any, cause: Any = None) -> Cause:
    """Class and reason of one failed launch, from its StatusMessage, else its Cause.

    The Cause usually says why a launch was attempted ("a difference between desired
    and actual capacity"), so it is read only when the StatusMessage says nothing we
    recognise. A value that is not text is no message (never an exception)."""
    texts = [t for t in (status_message, cause) if isinstance(t, str) and t]
    for text in texts:
        found = by_code(text) or by_words(text)
        if found:
            return found
    if texts:
        return Cause(UNKNOWN, "unrecognised launch failure")
    return Cause(UNKNOWN, "launch failure without a message")


def codes_in(text: str) -> list[tuple[str | None, str]]:
    """(prefix, code) of every EC2 error code the text carries, in order: documented codes,
    and any code EC2 itself marked Server. or Client."""
    out = []
    for m in _CODE_AT.finditer(text):
        prefix, code = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
        if prefix or code in EC2_ERROR_CODES:
            out.append((prefix, code))
    return out


def code_class(prefix: str | None, code: str) -> Cause:
    """What one EC2 error code means for Holdfast."""
    if prefix == "Client":
        return Cause(CONFIGURATION, f"Client.{code}: an EC2 client error (the group's own request)")
    if code in CAPACITY_CODES:
        return Cause(CAPACITY, f"{code}: {CAPACITY_CODES[code]}")
    if prefix == "Server":
        return Cause(CAPACITY, f"Server.{code}: an EC2 server error")
    family = next((reason for pattern, reason in _FAMILIES if pattern.search(code)), "an EC2 client error")
    return Cause(CONFIGURATION, f"{code}: {family}")


def by_code(text: str) -> Cause | None:
    causes = [code_class(prefix, code) for prefix, code in codes_in(text)]
    for klass in (CONFIGURATION, CAPACITY):  # configuration wins
        for c in causes:
            if c.klass == klass:
                return c
    return None


def by_words(text: str) -> Cause | None:
    for klass, table in _TABLES:
        for pattern, reason in table:
            if pattern.search(text):
                return Cause(klass, reason)
    return None
