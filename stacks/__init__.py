"""Kept for existing imports: Holdfast's CDK code now ships in the `holdfast` wheel as
`holdfast.cdk` (the construct, the stack, the org StackSet, the game day), with its
IAM policies as package data. Import from there."""

from holdfast.cdk import HoldfastStack
from holdfast.cdk import role_policies as policies

__all__ = ["HoldfastStack", "policies"]
