"""One actuator per resource kind, all with one shape: candidates, read, engage, relax,
and `audit` (`holdfast audit`'s reader of the kind, which hands each resource to the
kind's rule in its module of holdfast.core.kinds).

The contract and the write-ahead order they share are in `tagged.py` (TaggedActuator);
the plain data they exchange is holdfast.core.model. Each actuator names the Kind it
serves (`spec = kinds.ASG`, holdfast.core.kinds); `REGISTRY` maps each kind's name to
its actuator, built from those declarations, and tests/actuators/test_registry.py fails
when a Kind has no actuator or an actuator lacks a declaration. Actuators are
constructed as `Cls(clients, settings, ledger, *, expired_queue_arn=None)`.

Every module of this package is imported and its concrete TaggedActuator subclasses are
the actuators: adding a kind is its module in core/kinds/ (the Kind, its audit rule and
its words), its module here under the same name, and the kind's statements in policies/.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from holdfast.actuators.tagged import TaggedActuator
from holdfast.core import kinds


def _discover() -> tuple[type[TaggedActuator], ...]:
    """The concrete TaggedActuator subclasses defined in this package's modules, in the
    order of the kinds they serve (core.kinds.ALL), then any that serve none."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, TaggedActuator) and value.__module__ == module.__name__
                    and not inspect.isabstract(value)):
                found.append(value)
    order = {k: i for i, k in enumerate(kinds.ALL)}
    return tuple(sorted(found, key=lambda c: order.get(c.__dict__.get("spec"), len(order))))


ACTUATORS: tuple[type[TaggedActuator], ...] = _discover()


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
