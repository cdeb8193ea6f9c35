"""One actuator per resource kind, all with one shape: discover, engage, relax.

See `base.py` for the contract. `REGISTRY` maps a kind name to its actuator class;
adding a kind is adding one module and one line here.
"""

from __future__ import annotations

from .asg import AsgActuator

REGISTRY = {
    "asg": AsgActuator,
}
