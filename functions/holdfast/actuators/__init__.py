"""One actuator per resource kind, all with one shape: discover, engage, relax.

See `base.py` for the contract and `common.py` for the write-ahead order they share.
`REGISTRY` maps a kind name to its actuator class, constructed as
`Cls(clients, settings, ledger, *, lambda_bucket=None, expired_queue_arn=None)`;
adding a kind is adding one module and one line here.
"""

from __future__ import annotations

from holdfast.actuators.asg import AsgActuator
from holdfast.actuators.async_config import AsyncConfigActuator
from holdfast.actuators.esm import EsmActuator
from holdfast.actuators.nlb import NlbActuator
from holdfast.actuators.scalable_target import ScalableTargetActuator

REGISTRY = {
    "asg": AsgActuator,
    "esm": EsmActuator,
    "async": AsyncConfigActuator,
    "nlb": NlbActuator,
    "scalable-target": ScalableTargetActuator,
}
