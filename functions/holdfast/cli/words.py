"""The CHANGES column in plain words: what each recorded key's change means on the resource;
and `status`'s SETTING column: each recorded key and its values as an operator reads them.

The actuators record changes under their own keys (an Auto Scaling process name mapped to
"suspended", NLB attributes by short names); `ReplaceUnhealthy: false -> true` reads as
"turned on" when it means suspended. Each (kind, key) here says it the way the AWS
console does. A key without a phrase is printed as `key: from -> to`.
"""

from __future__ import annotations

import json
from typing import Any

from holdfast.core import pollers

AWS_DEFAULT_RETRIES = 2          # Lambda async: MaximumRetryAttempts when none is set
AWS_DEFAULT_AGE = 21600          # ... MaximumEventAgeInSeconds when none is set


def _raw(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _age(seconds: Any) -> str:
    if seconds is None:
        return "6 h (AWS's default)"
    seconds = int(seconds)
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def _healthy(value: Any, unit: str = "") -> str:
    return "off" if value in (None, "off") else f"{value}{unit}"


def _asg(key: str, old: Any, new: Any) -> str:
    return f"{key} {'suspended' if new else 'resumed'}"


def _esm(key: str, old: Any, new: Any) -> str:
    if key == "MaximumPollers":   # provisioned mode
        carries = f" (up to {pollers.cap_of(new)} concurrent batches)" if isinstance(new, int) else ""
        return f"pollers at most {old} -> {new}{carries}"
    if key == "MinimumPollers":
        return f"pollers at least {old} -> {new}"
    if key != "MaximumConcurrency":
        return ""
    if new is None:
        return f"concurrency cap removed (was {old})"
    if old is None:
        return f"concurrency capped at {new} (was uncapped)"
    return f"concurrency cap {old} -> {new}"


def _async(key: str, old: Any, new: Any) -> str:
    if key == "max_retries":
        was = f"{AWS_DEFAULT_RETRIES} (AWS's default)" if old is None else old
        return f"async retries {was} -> {AWS_DEFAULT_RETRIES if new is None else new}"
    if key == "max_age":
        return f"async event age {_age(old)} -> {_age(new)}"
    if key == "on_failure":
        if new is None:
            return f"on-failure destination removed (was {str(old).rsplit(':', 1)[-1]})"
        return f"failed events to {str(new).rsplit(':', 1)[-1]}" + (f" (was {str(old).rsplit(':', 1)[-1]})" if old else "")
    if key == "config":
        return "async config created" if new else "async config deleted"
    return ""


def _nlb(key: str, old: Any, new: Any) -> str:
    if key == "dns_count":
        return ("DNS failover off" if _healthy(new) == "off" else f"DNS failover below {new} healthy targets") \
            + f" (was {'off' if _healthy(old) == 'off' else f'below {old}'})"
    if key == "dns_pct":
        return ("DNS failover by share off" if _healthy(new) == "off" else f"DNS failover below {new}% healthy") \
            + f" (was {_healthy(old, '%')})"
    if key == "routing_count":
        return f"traffic to all targets below {new} healthy (was {old})"
    if key == "routing_pct":
        return ("traffic to all targets by share off" if _healthy(new) == "off"
                else f"traffic to all targets below {new}% healthy") + f" (was {_healthy(old, '%')})"
    return ""


def _scalable(key: str, old: Any, new: Any) -> str:
    if key == "DynamicScalingInSuspended":
        return f"dynamic scale-in {'suspended' if new else 'resumed'}"
    return ""


PHRASES = {"asg": _asg, "esm": _esm, "async": _async, "nlb": _nlb, "scalable-target": _scalable}


def change(kind: str, key: str, old: Any, new: Any) -> str:
    """One change in words, e.g. `ReplaceUnhealthy suspended`, `DNS failover off (was below 1)`."""
    phrase = PHRASES.get(kind)
    said = phrase(key, old, new) if phrase else ""
    return said or f"{key}: {_raw(old)} -> {_raw(new)}"


def drift(kind: str, key: str, current: Any) -> str:
    return f"{key}: the owner's {_raw(current)} kept (changed while engaged)"


# `status`: (kind, key) -> the setting's name as the AWS console shows it; a key not
# listed is printed as it is recorded (an Auto Scaling group's keys are its process names).
SETTINGS = {
    ("esm", "MaximumConcurrency"): "maximum concurrency (cap)",
    ("esm", "MaximumPollers"): "maximum pollers (provisioned mode)",
    ("esm", "MinimumPollers"): "minimum pollers (provisioned mode)",
    ("async", "max_retries"): "async retry attempts",
    ("async", "max_age"): "async maximum event age",
    ("async", "on_failure"): "async on-failure destination",
    ("async", "config"): "async invoke config",
    ("nlb", "dns_count"): "DNS failover: minimum healthy targets",
    ("nlb", "dns_pct"): "DNS failover: minimum healthy targets %",
    ("nlb", "routing_count"): "unhealthy state routing: minimum healthy targets",
    ("nlb", "routing_pct"): "unhealthy state routing: minimum healthy targets %",
    ("scalable-target", "DynamicScalingInSuspended"): "dynamic scale-in",
}


def setting(kind: str, key: str) -> str:
    """A recorded key's name for `status`, e.g. `process ReplaceUnhealthy`, `DNS failover: minimum healthy targets`."""
    if kind == "asg":
        return f"process {key}"
    return SETTINGS.get((kind, key), key)


def value(kind: str, key: str, v: Any) -> str:
    """A recorded value for `status`: `suspended`, `uncapped`, `6 h (AWS's default)`, `off`."""
    if kind == "asg" or (kind, key) == ("scalable-target", "DynamicScalingInSuspended"):
        return "suspended" if v else ("not suspended" if v is not None else "-")
    if (kind, key) == ("esm", "MaximumConcurrency"):
        return "uncapped" if v is None else str(v)
    if kind == "async":
        if key == "max_retries":
            return f"{AWS_DEFAULT_RETRIES} (AWS's default)" if v is None else str(v)
        if key == "max_age":
            return _age(v)
        if key == "on_failure":
            return "none" if not v else str(v).rsplit(":", 1)[-1]
        if key == "config":
            return "exists" if v else "none"
    if kind == "nlb" and key in ("dns_count", "dns_pct", "routing_count", "routing_pct"):
        return _healthy(v, "%" if key.endswith("_pct") else "")
    return _raw(v)
