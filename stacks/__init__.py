"""Holdfast's CDK stack and the constructs it is made of.

`HoldfastStack` composes the constructs in `stacks.constructs`; each is usable on its
own in another CDK app. `stacks.policies` turns policies/<role>.json into the
controllers' IAM policies.
"""

from stacks.holdfast_stack import HoldfastStack

__all__ = ["HoldfastStack"]
