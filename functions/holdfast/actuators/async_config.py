"""Lambda async invoke configs: shorter event age, fewer retries, a place for what expires.

Keys (None = not set, so Lambda's default applies: 21,600 s and 2 retries):
`config` (whether the function has an event invoke config at all), `max_age`,
`max_retries`, `on_failure` (the on-failure destination ARN). `OnSuccess` is read
but never managed. Engaging lowers age and retries to the settings (an owner value
already lower stays) and sets Holdfast's expired-events queue as the on-failure
destination only when the owner has none.

The API shapes the writes: PutFunctionEventInvokeConfig replaces the whole config,
UpdateFunctionEventInvokeConfig changes only what it names but answers
ResourceNotFoundException when there is no config. So: no config -> Put (and a restore
deletes it); an existing config -> Update with only what changes; a restore Puts the
whole config back, built from the current config with Holdfast's keys decided, so the
owner's destinations and any drift survive.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from holdfast.core import kinds
from holdfast.iam import uses
from holdfast.core.model import Candidate, Resource
from holdfast.actuators.tagged import LambdaTagged, TaggedActuator, make_resource
from holdfast.actuators.selection import tagged

DEFAULT_MAX_AGE = 21600
DEFAULT_MAX_RETRIES = 2
MANAGED = ("config", "max_age", "max_retries", "on_failure")


def _destination(config: Mapping[str, Any], which: str) -> str | None:
    return ((config.get("DestinationConfig") or {}).get(which) or {}).get("Destination") or None


def _request(values: Mapping[str, Any]) -> dict[str, Any]:
    """Put/Update parameters for the given values (None = leave out)."""
    out: dict[str, Any] = {}
    if values.get("max_age") is not None:
        out["MaximumEventAgeInSeconds"] = values["max_age"]
    if values.get("max_retries") is not None:
        out["MaximumRetryAttempts"] = values["max_retries"]
    destinations = {
        which: {"Destination": values[key]}
        for which, key in (("OnSuccess", "on_success"), ("OnFailure", "on_failure"))
        if values.get(key)
    }
    if destinations:
        out["DestinationConfig"] = destinations
    return out


class AsyncConfigActuator(LambdaTagged, TaggedActuator):
    spec = kinds.ASYNC
    service = "lambda"
    lambda_limited = True

    def candidates(self) -> list[Candidate]:
        return [Candidate(arn, tags) for arn, tags in sorted(tagged(self.clients, self.settings, "lambda:function").items())]

    def listed_tags(self, candidate: Candidate) -> Mapping[str, str]:
        return candidate.listed

    def read(self, candidate: Candidate) -> Resource | None:
        # The tags come from the tagging API's index: a record there is confirmed before use.
        return self._resource(candidate.arn, candidate.listed, confirmed=False)

    @uses("lambda:GetFunction", "lambda:GetFunctionEventInvokeConfig", by=("reconciler", "cli"))
    def get(self, arn: str) -> Resource | None:
        client = self.clients("lambda")
        try:
            tags = client.get_function(FunctionName=arn).get("Tags", {})
        except client.exceptions.ResourceNotFoundException:
            return None
        return self._resource(arn, tags)

    @uses("lambda:GetFunctionEventInvokeConfig", by=("reconciler", "cli"))
    def _resource(self, arn: str, tags: Mapping[str, str], *, confirmed: bool = True) -> Resource:
        client = self.clients("lambda")
        try:
            config = client.get_function_event_invoke_config(FunctionName=arn)
        except client.exceptions.ResourceNotFoundException:
            config = None  # no config (or the function is gone: the first write will say so)
        current = {
            "config": config is not None,
            "max_age": (config or {}).get("MaximumEventAgeInSeconds"),
            "max_retries": (config or {}).get("MaximumRetryAttempts"),
            "on_failure": _destination(config or {}, "OnFailure"),
            "on_success": _destination(config or {}, "OnSuccess"),
        }
        return make_resource(self.kind, arn, arn.split(":")[6], current, tags, confirmed=confirmed)

    def fresh(self, resource: Resource) -> Resource:
        """The config read again just before a restore, which Puts the whole config: built
        from this read, it keeps whatever the owner changed meanwhile (an OnSuccess
        destination, say)."""
        return replace(resource, current=self._resource(resource.arn, {}).current)

    def posture(self, current: Mapping[str, Any]) -> dict[str, Any]:
        s = self.settings
        changes: dict[str, Any] = {}
        max_age = current.get("max_age")
        if (DEFAULT_MAX_AGE if max_age is None else max_age) > s.async_max_event_age_seconds:
            changes["max_age"] = s.async_max_event_age_seconds
        max_retries = current.get("max_retries")
        if (DEFAULT_MAX_RETRIES if max_retries is None else max_retries) > s.async_max_retry_attempts:
            changes["max_retries"] = s.async_max_retry_attempts
        if current.get("on_failure") is None and self.expired_queue_arn:
            changes["on_failure"] = self.expired_queue_arn
        if changes and not current.get("config"):
            changes["config"] = True
        return changes

    @uses(
        "lambda:PutFunctionEventInvokeConfig",
        "lambda:UpdateFunctionEventInvokeConfig",
        "lambda:DeleteFunctionEventInvokeConfig",
        by=("reconciler", "cli"),
    )
    def _write(self, resource: Resource, values: Mapping[str, Any], *, restoring: bool) -> None:
        current = resource.current
        target = {**current, **values}
        whole = _request(target)
        if not target["config"] and not whole:
            self._call("delete_function_event_invoke_config", FunctionName=resource.arn)
        elif restoring or not current["config"]:
            self._call("put_function_event_invoke_config", FunctionName=resource.arn, **whole)
        else:
            changed = _request(values)
            if "on_failure" in values:
                # DestinationConfig is one member: name both destinations so OnSuccess stays.
                changed["DestinationConfig"] = whole["DestinationConfig"]
            self._call("update_function_event_invoke_config", FunctionName=resource.arn, **changed)
