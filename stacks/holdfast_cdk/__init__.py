"""Holdfast for CDK apps: the construct, its stacks, the game day and the organization.

Imported only at synth (it needs aws-cdk-lib and constructs: `pip install holdfast[cdk]`);
it is left out of the controllers' Lambda asset (`holdfast_cdk.code`).

- `Holdfast`: the whole of Holdfast as one construct, for a stack of your own.
- `SlackChannel`, `TeamsChannel`: AWS Chatbot channels for its `chat_channels` prop.
- `HoldfastStack`: that construct in a stack of its own (what `app.py` deploys per target).
- `RegionSwitchAccess`, `RegionSwitchSteps`: Holdfast's steps in an ARC Region switch
  plan (hold the Region the plan leaves, lift it after recovery; holdfast_cdk.region_switch).
- `GameDay`: an AWS FIS experiment template that rehearses a regional launch impairment.
- `HoldfastOrgStack` and friends (`holdfast_cdk.org`): every account of an OU, every
  region named, through a service-managed CloudFormation StackSet.

The IAM policies of the two controller roles are package data in `policies/`
(`holdfast_cdk.role_policies` reads and fills them).
"""

from holdfast_cdk.construct import Holdfast
from holdfast_cdk.constructs.notifications import SlackChannel, TeamsChannel
from holdfast_cdk.game_day import GameDay
from holdfast_cdk.region_switch import RegionSwitchAccess, RegionSwitchSteps
from holdfast_cdk.stack import HoldfastStack

__all__ = ["GameDay", "Holdfast", "HoldfastStack", "RegionSwitchAccess", "RegionSwitchSteps", "SlackChannel",
           "TeamsChannel"]
