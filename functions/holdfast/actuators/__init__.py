"""One actuator per resource kind, all with one shape: candidates, read, engage, relax.

The contract and the write-ahead order they share are in `tagged.py` (TaggedActuator);
the plain data they exchange is holdfast.core.model. Each actuator names the Kind it
serves (`spec = kinds.ASG`, holdfast.core.kinds); `REGISTRY` maps each kind's name to
its actuator, built from those declarations, and tests/actuators/test_registry.py fails
when a Kind has no actuator or an actuator lacks a declaration. Actuators are
constructed as `Cls(clients, settings, ledger, *, lambda_bucket=None, expired_queue_arn=None)`;
adding a kind is one Kind in core/kinds.py, one module here and one line below.
"""

from __future__ import annotations

from holdfast.actuators.asg import AsgActuator
from holdfast.actuators.async_config import AsyncConfigActuator
from holdfast.actuators.esm import EsmActuator
from holdfast.actuators.nlb import NlbActuator
from holdfast.actuators.scalable_target import ScalableTargetActuator
from holdfast.actuators.tagged import TaggedActuator
from holdfast.core import kinds

ACTUATORS: tuple[type[TaggedActuator], ...] = (
    AsgActuator, EsmActuator, AsyncConfigActuator, NlbActuator, ScalableTargetActuator,
)


def _registry(classes) -> dict[str, type[TaggedActuator]]:
    """kind name -> actuator, in the order of core.kinds.ALL; a kind without an actuator,
    or an actuator without a Kind, stops the import with a message naming it."""
    by_kind = {}
    for cls in classes:
        spec = cls.__dict__.get("spec")
        if not isinstance(spec, kinds.Kind):
            raise TypeError(f"{cls.__name__} declares no Kind (spec = kinds.<KIND>)")
        if spec.name in by_kind:
            raise TypeError(f"{cls.__name__} and {by_kind[spec.name].__name__} both serve {spec.name}")
        by_kind[spec.name] = cls
    missing = [k.name for k in kinds.ALL if k.name not in by_kind]
    if missing:
        raise TypeError(f"no actuator for kind(s) {missing}")
    return {k.name: by_kind[k.name] for k in kinds.ALL}


REGISTRY = _registry(ACTUATORS)
