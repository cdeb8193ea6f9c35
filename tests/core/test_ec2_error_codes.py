"""Every error code in the EC2 API reference ("Error codes for the Amazon EC2 API"), as a
table: each code to the class Holdfast gives a launch that failed with it, in both forms
Auto Scaling reports a code ("Could not launch On-Demand Instances. <Code> - <message>" and
"<Code>: <message>").

The lists are the reference's own sections, copied here independently of
holdfast.core.ec2_errors, so a code the module lacks (or one it invents) fails.
"""

import pytest

from holdfast.core.classify import CAPACITY, CONFIGURATION, UNKNOWN, classify
from holdfast.core.ec2_errors import EC2_ERROR_CODES

COMMON_CLIENT_ERRORS = """
AuthFailure Blocked DryRunOperation IdempotentParameterMismatch IncompleteSignature InvalidAction
InvalidCharacter InvalidClientTokenId InvalidPaginationToken InvalidParameter InvalidParameterCombination
InvalidParameterValue InvalidQueryParameter MalformedQueryString MissingAction MissingAuthenticationToken
MissingParameter OptInRequired PendingVerification RequestExpired UnauthorizedOperation UnknownParameter
UnsupportedInstanceAttribute UnsupportedOperation UnsupportedProtocol ValidationError
"""

CLIENT_ERRORS_FOR_SPECIFIC_ACTIONS = """
ActiveVpcPeeringConnectionPerVpcLimitExceeded AddressLimitExceeded AsnConflict AttachmentLimitExceeded
BootForVolumeTypeUnsupported BundlingInProgress CannotDelete ClientVpnAuthorizationRuleLimitExceeded
ClientVpnCertificateRevocationListLimitExceeded ClientVpnEndpointAssociationExists
ClientVpnEndpointLimitExceeded ClientVpnRouteLimitExceeded ClientVpnTerminateConnectionsLimitExceeded
CidrConflict ConcurrentCreateImageNoRebootLimitExceeded ConcurrentSnapshotLimitExceeded ConcurrentTagAccess
CreditSpecificationUpdateInProgress CustomerGatewayLimitExceeded CustomerKeyHasBeenRevoked
DeleteConversionTaskError DefaultSubnetAlreadyExistsInAvailabilityZone DefaultVpcAlreadyExists
DefaultVpcDoesNotExist DependencyViolation DisallowedForDedicatedTenancyNetwork DiskImageSizeTooLarge
DuplicateSubnetsInSameZone EIPMigratedToVpc EncryptedVolumesNotSupported ExistingVpcEndpointConnections
FleetNotInModifiableState FlowLogAlreadyExists FlowLogsLimitExceeded FilterLimitExceeded Gateway.NotAttached
HostAlreadyCoveredByReservation HostLimitExceeded IdempotentInstanceTerminated InaccessibleStorageLocation
IncorrectInstanceState IncorrectModificationState IncorrectState IncompatibleHostRequirements
InstanceAlreadyLinked InstanceCreditSpecification.NotSupported InstanceLimitExceeded InsufficientCapacityOnHost
InsufficientFreeAddressesInSubnet InsufficientReservedInstancesCapacity InterfaceInUseByTrafficMirrorSession
InterfaceInUseByTrafficMirrorTarget InternetGatewayLimitExceeded InvalidAddress.Locked InvalidAddress.Malformed
InvalidAddress.NotFound InvalidAddressID.NotFound InvalidAffinity InvalidAllocationID.NotFound
InvalidAMIAttributeItemValue InvalidAMIID.Malformed InvalidAMIID.NotFound InvalidAMIID.Unavailable
InvalidAMIName.Duplicate InvalidAMIName.Malformed InvalidAssociationID.NotFound InvalidAttachment.NotFound
InvalidAttachmentID.NotFound InvalidAutoPlacement InvalidAvailabilityZone InvalidBlockDeviceMapping
InvalidBundleID.NotFound InvalidCidr.InUse InvalidClientToken InvalidClientVpnAssociationIdNotFound
InvalidClientVpnConnection.IdNotFound InvalidClientVpnConnection.UserNotFound
InvalidClientVpnDuplicateAssociationException InvalidClientVpnDuplicateAuthorizationRule
InvalidClientVpnDuplicateRoute InvalidClientVpnEndpointAuthorizationRuleNotFound InvalidClientVpnRouteNotFound
InvalidClientVpnSubnetId.DifferentAccount InvalidClientVpnSubnetId.DuplicateAz InvalidClientVpnSubnetId.NotFound
InvalidClientVpnSubnetId.OverlappingCidr InvalidClientVpnActiveAssociationNotFound
InvalidClientVpnEndpointId.NotFound InvalidConversionTaskId InvalidConversionTaskId.Malformed
InvalidCpuCredits.Malformed InvalidCustomerGateway.DuplicateIpAddress InvalidCustomerGatewayId.Malformed
InvalidCustomerGatewayID.NotFound InvalidCustomerGatewayState InvalidDevice.InUse InvalidDhcpOptionID.NotFound
InvalidDhcpOptionsID.NotFound InvalidDhcpOptionsId.Malformed InvalidExportTaskID.NotFound InvalidFilter
InvalidFlowLogId.NotFound InvalidFormat InvalidFpgaImageID.Malformed InvalidFpgaImageID.NotFound
InvalidGatewayID.NotFound InvalidGroup.Duplicate InvalidGroupId.Malformed InvalidGroup.InUse
InvalidGroup.NotFound InvalidGroup.Reserved InvalidHostConfiguration InvalidHostId InvalidHostID.Malformed
InvalidHostId.Malformed InvalidHostID.NotFound InvalidHostId.NotFound InvalidHostReservationId.Malformed
InvalidHostReservationOfferingId.Malformed InvalidHostState InvalidIamInstanceProfileArn.Malformed InvalidID
InvalidInput InvalidInstanceAttributeValue InvalidInstanceCreditSpecification.DuplicateInstanceId
InvalidInstanceFamily InvalidInstanceID InvalidInstanceID.Malformed InvalidInstanceID.NotFound
InvalidInstanceID.NotLinkable InvalidInstanceState InvalidInstanceType InvalidInterface.IpAddressLimitExceeded
InvalidInternetGatewayId.Malformed InvalidInternetGatewayID.NotFound InvalidIPAddress.InUse
InvalidKernelId.Malformed InvalidKey.Format InvalidKeyPair.Duplicate InvalidKeyPair.Format
InvalidKeyPair.NotFound InvalidCapacityReservationIdMalformedException
InvalidCapacityReservationIdNotFoundException InvalidLaunchTemplateId.Malformed InvalidLaunchTemplateId.NotFound
InvalidLaunchTemplateId.VersionNotFound InvalidLaunchTemplateName.AlreadyExistsException
InvalidLaunchTemplateName.MalformedException InvalidLaunchTemplateName.NotFoundException InvalidManifest
InvalidMaxResults InvalidNatGatewayID.NotFound InvalidNetworkAclEntry.NotFound InvalidNetworkAclId.Malformed
InvalidNetworkAclID.NotFound InvalidNetworkLoadBalancerArn.Malformed InvalidNetworkLoadBalancerArn.NotFound
InvalidNetworkInterfaceAttachmentId.Malformed InvalidNetworkInterface.InUse InvalidNetworkInterfaceId.Malformed
InvalidNetworkInterfaceID.NotFound InvalidNextToken InvalidOption.Conflict InvalidPermission.Duplicate
InvalidPermission.Malformed InvalidPermission.NotFound InvalidPlacementGroup.Duplicate
InvalidPlacementGroup.InUse InvalidPlacementGroup.Unknown InvalidPolicyDocument InvalidPrefixListId.Malformed
InvalidPrefixListId.NotFound InvalidProductInfo InvalidPurchaseToken.Expired InvalidPurchaseToken.Malformed
InvalidQuantity InvalidRamDiskId.Malformed InvalidRegion InvalidRequest InvalidReservationID.Malformed
InvalidReservationID.NotFound InvalidReservedInstancesId InvalidReservedInstancesOfferingId
InvalidResourceType.Unknown InvalidRoute.InvalidState InvalidRoute.Malformed InvalidRoute.NotFound
InvalidRouteTableId.Malformed InvalidRouteTableID.NotFound InvalidScheduledInstance
InvalidSecurityGroupId.Malformed InvalidSecurityGroupID.NotFound InvalidSecurity.RequestHasExpired
InvalidServiceName InvalidSnapshotID.Malformed InvalidSnapshot.InUse InvalidSnapshot.NotFound
InvalidSpotDatafeed.NotFound InvalidSpotFleetRequestConfig InvalidSpotFleetRequestId.Malformed
InvalidSpotFleetRequestId.NotFound InvalidSpotInstanceRequestID.Malformed InvalidSpotInstanceRequestID.NotFound
InvalidState InvalidStateTransition InvalidSubnet InvalidSubnet.Conflict InvalidSubnetID.Malformed
InvalidSubnetID.NotFound InvalidSubnet.Range InvalidTagKey.Malformed InvalidTargetArn.Unknown InvalidTenancy
InvalidTime InvalidTrafficMirrorFilterNotFound InvalidTrafficMirrorFilterRuleNotFound
InvalidTrafficMirrorSessionNotFound InvalidTrafficMirrorTargetNoFound InvalidUserID.Malformed
InvalidVolumeID.Duplicate InvalidVolumeID.Malformed InvalidVolumeID.ZoneMismatch InvalidVolume.NotFound
InvalidVolume.ZoneMismatch InvalidVpcEndpointId.Malformed InvalidVpcEndpoint.NotFound
InvalidVpcEndpointId.NotFound InvalidVpcEndpointService.NotFound InvalidVpcEndpointServiceId.NotFound
InvalidVpcEndpointType InvalidVpcID.Malformed InvalidVpcID.NotFound InvalidVpcPeeringConnectionId.Malformed
InvalidVpcPeeringConnectionID.NotFound InvalidVpcPeeringConnectionState.DnsHostnamesDisabled InvalidVpcRange
InvalidVpcState InvalidVpnConnectionID InvalidVpnConnectionID.NotFound InvalidVpnConnection.InvalidState
InvalidVpnConnection.InvalidType InvalidVpnGatewayAttachment.NotFound InvalidVpnGatewayID.NotFound
InvalidVpnGatewayState InvalidZone.NotFound KeyPairLimitExceeded LegacySecurityGroup LimitPriceExceeded
LogDestinationNotFoundException LogDestinationPermissionIssue MaxConfigLimitExceededException
MaxIOPSLimitExceeded MaxScheduledInstanceCapacityExceeded MaxSpotFleetRequestCountExceeded
MaxSpotInstanceCountExceeded MaxTemplateLimitExceeded MaxTemplateVersionLimitExceeded MissingInput
NatGatewayLimitExceeded NatGatewayMalformed NatGatewayNotFound NetworkAclEntryAlreadyExists
NetworkAclEntryLimitExceeded NetworkAclLimitExceeded NetworkInterfaceLimitExceeded
NetworkInterfaceNotFoundException NetworkInterfaceNotSupportedException NetworkLoadBalancerNotFoundException
NlbInUseByTrafficMirrorTargetException NonEBSInstance NoSuchVersion NotExportable OperationNotPermitted
OutstandingVpcPeeringConnectionLimitExceeded PendingSnapshotLimitExceeded
PendingVpcPeeringConnectionLimitExceeded PlacementGroupLimitExceeded PrivateIpAddressLimitExceeded
RequestResourceCountExceeded ReservationCapacityExceeded ReservedInstancesCountExceeded
ReservedInstancesLimitExceeded ReservedInstancesUnavailable Resource.AlreadyAssigned Resource.AlreadyAssociated
ResourceCountExceeded ResourceCountLimitExceeded ResourceLimitExceeded RouteAlreadyExists RouteLimitExceeded
RouteTableLimitExceeded RulesPerSecurityGroupLimitExceeded ScheduledInstanceLimitExceeded
ScheduledInstanceParameterMismatch ScheduledInstanceSlotNotOpen ScheduledInstanceSlotUnavailable
SecurityGroupLimitExceeded SecurityGroupsPerInstanceLimitExceeded SecurityGroupsPerInterfaceLimitExceeded
SignatureDoesNotMatch SnapshotCopyUnsupported.InterRegion SnapshotCreationPerVolumeRateExceeded
SnapshotLimitExceeded SubnetLimitExceeded TagLimitExceeded TargetCapacityLimitExceededException
TrafficMirrorFilterInUse TrafficMirrorSessionsPerInterfaceLimitExceeded
TrafficMirrorSessionsPerTargetLimitExceeded TrafficMirrorSourcesPerTargetLimitExceeded
TrafficMirrorTargetInUseException TrafficMirrorFilterLimitExceeded TrafficMirrorFilterRuleLimitExceeded
TrafficMirrorSessionLimitExceeded TrafficMirrorTargetLimitExceeded TrafficMirrorFilterRuleAlreadyExists
UnavailableHostRequirements UnknownPrincipalType.Unsupported UnknownVolumeType Unsupported UnsupportedException
UnsupportedHibernationConfiguration UnsupportedHostConfiguration UnsupportedInstanceTypeOnHost
UnsupportedTenancy UpdateLimitExceeded VolumeInUse VolumeIOPSLimit VolumeLimitExceeded
VolumeModificationSizeLimitExceeded VolumeTypeNotAvailableInZone VpcCidrConflict VPCIdNotSpecified
VpcEndpointLimitExceeded VpcLimitExceeded VpcPeeringConnectionAlreadyExists
VpcPeeringConnectionsPerVpcLimitExceeded VPCResourceNotSpecified VpnConnectionLimitExceeded
VpnGatewayAttachmentLimitExceeded VpnGatewayLimitExceeded ZonesMismatched
"""

SERVER_ERRORS = """
InsufficientAddressCapacity InsufficientCapacity InsufficientInstanceCapacity InsufficientHostCapacity
InsufficientReservedInstanceCapacity InsufficientVolumeCapacity InternalError InternalFailure
RequestLimitExceeded ServiceUnavailable Unavailable
"""

# On the current page, not in the older copy the sections above follow.
ADDED_SINCE = """
VcpuLimitExceeded UnfulfillableCapacity InsufficientCapacityOnOutpost SpotMaxPriceTooLow
"""

# The region could not serve a correct request: every other code is the group's own problem.
CAPACITY_CLASS = {
    "InsufficientAddressCapacity", "InsufficientCapacity", "InsufficientHostCapacity", "InsufficientInstanceCapacity",
    "InsufficientReservedInstanceCapacity", "InsufficientReservedInstancesCapacity", "InsufficientVolumeCapacity",
    "UnfulfillableCapacity", "RequestLimitExceeded", "InternalError", "InternalFailure", "ServiceUnavailable",
    "Unavailable",
}

DOCUMENTED = sorted({c for text in (COMMON_CLIENT_ERRORS, CLIENT_ERRORS_FOR_SPECIFIC_ACTIONS, SERVER_ERRORS, ADDED_SINCE)
                     for c in text.split()})
TABLE = [(code, CAPACITY if code in CAPACITY_CLASS else CONFIGURATION) for code in DOCUMENTED]


def test_the_module_lists_exactly_the_documented_codes():
    assert len(DOCUMENTED) == 383
    assert EC2_ERROR_CODES == set(DOCUMENTED)
    assert CAPACITY_CLASS <= set(DOCUMENTED)


@pytest.mark.parametrize("code, expected", TABLE, ids=[c for c, _ in TABLE])
def test_each_documented_code_maps_to_its_class(code, expected):
    mixed = f"Could not launch On-Demand Instances. {code} - The request could not be completed. Launching EC2 instance failed."
    plain = f"{code}: The request could not be completed."
    for message in (mixed, plain):
        klass, reason = classify(message)
        assert klass == expected, (message, reason)
        assert code in reason


@pytest.mark.parametrize("code", ["InsufficientInstanceCapacity", "InternalError", "InvalidAMIID.NotFound"])
def test_eC2s_own_server_and_client_prefixes(code):
    assert classify(f"Client.{code}: Client error on launch.").klass == CONFIGURATION
    assert classify(f"Server.{code}: Server error on launch.").klass == CAPACITY


def test_a_code_the_reference_does_not_list_is_not_evidence():
    # Not a documented code, no Server./Client. prefix, and words that say nothing known.
    assert classify("Could not launch On-Demand Instances. FluxCapacitorOffline - Try later.").klass == UNKNOWN
    # The words still decide when they are known.
    assert classify("Could not launch On-Demand Instances. FluxCapacitorOffline - Request limit exceeded.").klass == CAPACITY


def test_the_sda1_mapping_message_is_configuration():
    klass, reason = classify("The device 'sda1' is used in more than one block-device mapping. Launching EC2 instance failed.")
    assert (klass, reason) == (CONFIGURATION, "block device mapping")


def test_an_sdk_error_code_field_is_read():
    text = ("Launching EC2 instance failed. (Service: AmazonEC2; Status Code: 500; Error Code: InsufficientInstanceCapacity; "
            "Request ID: 0b1c)")
    assert classify(text).klass == CAPACITY


@pytest.mark.parametrize("value", [42, {"m": "x"}, ["InsufficientInstanceCapacity"], b"RequestLimitExceeded: x"])
def test_a_message_that_is_not_text_is_unknown_never_an_error(value):
    assert classify(value, value).klass == UNKNOWN
