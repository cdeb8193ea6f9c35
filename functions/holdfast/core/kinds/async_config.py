"""Lambda async invoke configs: the declaration, the audit rule and the words (the actuator
is holdfast.actuators.async_config). Pure: no boto3."""

from __future__ import annotations

import json
from typing import Any, Mapping

from holdfast.core.audit import Finding, aws
from holdfast.core.kinds.kind import ARN, FRESH_WORK, LAMBDA, SAMPLE, Kind, Words

ASYNC_DEFAULT_MAX_AGE = 21600   # 6 hours
ASYNC_DEFAULT_RETRIES = 2


def async_finding(function: Mapping[str, Any], config: Mapping[str, Any] | None, settings, region: str) -> Finding | None:
    """A function's unqualified async invoke config (None: it has none) at the defaults or
    without an on-failure destination.

    Every function is checked, not only those with a known asynchronous trigger: anything
    (S3, SNS, EventBridge, any caller with InvocationType=Event) can invoke any function
    asynchronously, and the audit cannot see them all. A function with no config runs at
    the defaults whenever that happens.
    """
    name = function["FunctionName"]
    age = (config or {}).get("MaximumEventAgeInSeconds", ASYNC_DEFAULT_MAX_AGE)
    retries = (config or {}).get("MaximumRetryAttempts", ASYNC_DEFAULT_RETRIES)
    on_failure = (((config or {}).get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    problems = []
    if age >= ASYNC_DEFAULT_MAX_AGE:
        problems.append("events kept up to 6 hours")
    if retries >= ASYNC_DEFAULT_RETRIES:
        problems.append("retried twice")
    if not on_failure:
        problems.append("no on-failure destination, so expired events are lost")
    if not problems:
        return None
    prefix = "no async invoke config (the defaults): " if config is None else "async invoke config: "
    pause, resume = _async_commands(name, config, age, retries, settings, region)
    return Finding(
        kind="async",
        resource=function["FunctionArn"],
        name=name,
        problem=prefix + "; ".join(problems),
        pause_command=pause,
        resume_command=resume,
    )


def _async_commands(name, config, age, retries, settings, region: str) -> tuple[str | None, str | None]:
    current = {"--maximum-event-age-in-seconds": age, "--maximum-retry-attempts": retries}
    posture = {
        "--maximum-event-age-in-seconds": min(age, settings.async_max_event_age_seconds),
        "--maximum-retry-attempts": min(retries, settings.async_max_retry_attempts),
    }
    changed = [word for option, value in posture.items() if value != current[option] for word in (option, value)]
    if not changed:
        return None, None  # already at or below Holdfast's posture: nothing to pause
    if config is None:
        all_values = [word for option, value in posture.items() for word in (option, value)]
        return (
            aws(region, "lambda", "put-function-event-invoke-config", "--function-name", name, *all_values),
            aws(region, "lambda", "delete-function-event-invoke-config", "--function-name", name),
        )
    # Update changes only what it names; Put replaces the whole config, so the resume
    # command names every setting the owner had, and only those.
    original = []
    if "MaximumEventAgeInSeconds" in config:
        original += ["--maximum-event-age-in-seconds", config["MaximumEventAgeInSeconds"]]
    if "MaximumRetryAttempts" in config:
        original += ["--maximum-retry-attempts", config["MaximumRetryAttempts"]]
    destinations = {k: v for k, v in (config.get("DestinationConfig") or {}).items() if v and v.get("Destination")}
    if destinations:
        original += ["--destination-config", json.dumps(destinations, separators=(",", ":"), sort_keys=True)]
    return (
        aws(region, "lambda", "update-function-event-invoke-config", "--function-name", name, *changed),
        aws(region, "lambda", "put-function-event-invoke-config", "--function-name", name, *original),
    )


def _age(seconds: Any) -> str:
    if seconds is None:
        return "6 h (AWS's default)"
    seconds = int(seconds)
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def _change(key: str, old: Any, new: Any) -> str:
    if key == "max_retries":
        was = f"{ASYNC_DEFAULT_RETRIES} (AWS's default)" if old is None else old
        return f"async retries {was} -> {ASYNC_DEFAULT_RETRIES if new is None else new}"
    if key == "max_age":
        return f"async event age {_age(old)} -> {_age(new)}"
    if key == "on_failure":
        if new is None:
            return f"on-failure destination removed (was {str(old).rsplit(':', 1)[-1]})"
        return f"failed events to {str(new).rsplit(':', 1)[-1]}" + (f" (was {str(old).rsplit(':', 1)[-1]})" if old else "")
    if key == "config":
        return "async config created" if new else "async config deleted"
    return ""


# The keys the actuator records (holdfast.actuators.async_config.MANAGED), by name.
SETTINGS = {
    "max_retries": "async retry attempts",
    "max_age": "async maximum event age",
    "on_failure": "async on-failure destination",
    "config": "async invoke config",
}


def _value(key: str, v: Any) -> str | None:
    if key == "max_retries":
        return f"{ASYNC_DEFAULT_RETRIES} (AWS's default)" if v is None else str(v)
    if key == "max_age":
        return _age(v)
    if key == "on_failure":
        return "none" if not v else str(v).rsplit(":", 1)[-1]
    if key == "config":
        return "exists" if v else "none"
    return None


ASYNC = Kind(
    name="async", label="async invoke configs", relaxed_in=FRESH_WORK, service=LAMBDA, audit_rule=async_finding,
    arn_pattern=ARN + r"lambda:[^:]+:\d{12}:function:[^:]+(:[^:]+)?",
    sample_arn=SAMPLE + "lambda:{region}:{account}:function:holdfast-doctor",
    tag_condition_prefixes=("aws",), write_context=(), controlled=False, evidence=None,
    words=Words(keys=tuple(SETTINGS), change=_change, setting=SETTINGS.get, value=_value))
