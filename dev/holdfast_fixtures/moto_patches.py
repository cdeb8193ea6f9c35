"""Moto patches: AWS's documented semantics where moto 5.2.5 departs from them.

One place holds every departure from moto that Holdfast depends on; the tests
(tests/actuators/fleet.py's `aws_semantics` fixture) and the demo's embedded AWS
(holdfast_demo.embedded) both use it. Each patch says which AWS behaviour it restores:

- Lambda async invoke config: AWS's PutFunctionEventInvokeConfig replaces the whole
  config (moto keeps the first put); UpdateFunctionEventInvokeConfig merges the
  members it names and answers ResourceNotFoundException when the function has no
  config (moto replaces, and creates one).
- Application Auto Scaling TagResource / UntagResource / ListTagsForResource on a
  scalable target's ARN exist in AWS; moto has none of them.
- DescribeScalableTargets pagination: moto's NextToken is the index within the page,
  not within all targets, so past two pages it repeats itself and botocore's paginator
  stops ("The same next token was received twice"). AWS's token moves on.
- At most 50 user tags per resource (tags whose key starts with `aws:` do not count):
  "Tagging AWS resources", Tag naming limits and requirements; the Lambda and Auto Scaling
  developer guides give 50 for functions, mappings and groups. Moto 5.2.5 has no limit
  for either. Lambda TagResource answers InvalidParameterValueException (the one
  client error its API reference lists), Auto Scaling CreateOrUpdateTags LimitExceeded.
  (Moto's ELB AddTags already refuses past 10 tags, stricter than AWS's 50.)

And one cost: moto's TransactWriteItems deep-copies every table it names, for its
rollback. The reconciler's plan guard is a transaction before every relaxing write,
and the ledger holds thousands of signal items by the recovery, so each guard cost
about 0.1 s and the copies piled up to gigabytes. The patch snapshots only the items a
transaction touches and rolls those back; the outcome of every transaction is moto's.
"""

from __future__ import annotations

import copy
import json
import threading
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock


@contextmanager
def aws_semantics() -> Iterator[None]:
    """Patch moto's backends to AWS's semantics (above) until the block ends."""
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.awslambda import models as lambda_models
    from moto.awslambda.exceptions import UnknownEventConfig
    from moto.core.exceptions import JsonRESTError

    def put(self, function_name, config):
        fn = self.get_function(function_name)
        event_config = lambda_models.EventInvokeConfig(fn.function_arn, fn.last_modified, config)
        fn.event_invoke_config = [event_config]
        return event_config.response()

    def update(self, function_name, config):
        fn = self.get_function(function_name)
        if not fn.event_invoke_config:
            raise UnknownEventConfig(fn.function_arn)
        return put(self, function_name, {**fn.event_invoke_config[0].config, **config})

    tags: dict[str, dict[str, str]] = {}

    def known(backend, arn: str) -> None:
        if not any(t.arn == arn for targets in backend.targets.values() for t in targets.values()):
            raise JsonRESTError("ResourceNotFoundException", f"No scalable target {arn}")

    def tag_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        tags.setdefault(arn, {}).update(self._get_param("Tags"))
        return "{}"

    def untag_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        for key in self._get_param("TagKeys"):
            tags.get(arn, {}).pop(key, None)
        return "{}"

    def list_tags_for_resource(self):
        arn = self._get_param("ResourceARN")
        known(self.applicationautoscaling_backend, arn)
        return json.dumps({"Tags": tags.get(arn, {})})

    original_describe = ApplicationAutoScalingResponse.describe_scalable_targets

    def describe_scalable_targets(self):
        body = json.loads(original_describe(self))
        if body.get("NextToken") is not None:
            start = int(self._get_param("NextToken") or -1) + 1
            body["NextToken"] = str(start + len(body["ScalableTargets"]) - 1)
        return json.dumps(body)

    with ExitStack() as stack:
        _cheap_transactions(stack)
        _tag_limits(stack)
        stack.enter_context(
            mock.patch.object(ApplicationAutoScalingResponse, "describe_scalable_targets", describe_scalable_targets)
        )
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "put_function_event_invoke_config", put))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "update_function_event_invoke_config", update))
        for fn in (tag_resource, untag_resource, list_tags_for_resource):
            stack.enter_context(mock.patch.object(ApplicationAutoScalingResponse, fn.__name__, fn, create=True))
        yield


TAG_LIMIT = 50


def _over_limit(tags) -> bool:
    return sum(1 for key in tags if not key.lower().startswith("aws:")) > TAG_LIMIT


def _tag_limits(stack: ExitStack) -> None:
    from moto.autoscaling.exceptions import AutoscalingClientError
    from moto.autoscaling.models import AutoScalingBackend
    from moto.awslambda.exceptions import InvalidParameterValueException
    from moto.awslambda.models import LambdaBackend

    lambda_tag = LambdaBackend.tag_resource
    asg_tags = AutoScalingBackend.create_or_update_tags

    def tag_resource(self, resource_arn, tags):
        resource = self._get_resource_by_arn(resource_arn)
        if _over_limit({**resource.tags, **tags}):
            raise InvalidParameterValueException(
                f"Number of tags exceeds resource tag limit ({TAG_LIMIT}) for {resource_arn}")
        return lambda_tag(self, resource_arn, tags)

    class LimitExceeded(AutoscalingClientError):
        code = "LimitExceeded"

    def create_or_update_tags(self, tags):
        by_group: dict[str, set[str]] = {}
        for tag in tags:
            group = self.autoscaling_groups.get(tag["ResourceId"])
            if group is not None:
                keys = by_group.setdefault(tag["ResourceId"], {t["Key"] for t in group.tags})
                keys.add(tag["Key"])
        for name, keys in by_group.items():
            if _over_limit(keys):
                raise LimitExceeded(f"The quota of {TAG_LIMIT} tags for Auto Scaling group {name} would be exceeded")
        return asg_tags(self, tags)

    stack.enter_context(mock.patch.object(LambdaBackend, "tag_resource", tag_resource))
    stack.enter_context(mock.patch.object(AutoScalingBackend, "create_or_update_tags", create_or_update_tags))


def _cheap_transactions(stack: ExitStack) -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    transact = DynamoDBBackend.transact_write_items
    inside = threading.local()

    def table_deepcopy(self, memo):
        if getattr(inside, "transaction", False):
            return self  # moto's whole-table backup: the touched items are saved instead
        clone = copy.copy(self)
        memo[id(self)] = clone
        clone.__dict__ = copy.deepcopy(self.__dict__, memo)
        return clone

    def transact_write_items(self, transact_items):
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            key = op.get("Key") or {k: op["Item"][k] for k in (table.hash_key_attr, table.range_key_attr) if k}
            saved.append((table, key, copy.deepcopy(self.get_item(table.name, key))))
        inside.transaction = True
        try:
            return transact(self, transact_items)
        except Exception:
            for table, key, item in reversed(saved):
                hash_key, range_key = self.get_keys_value(table, key)
                table.delete_item(hash_key, range_key)
                if item is not None:
                    (table.items[hash_key].__setitem__(range_key, item) if table.has_range_key
                     else table.items.__setitem__(hash_key, item))
            raise
        finally:
            inside.transaction = False

    stack.enter_context(mock.patch.object(Table, "__deepcopy__", table_deepcopy, create=True))
    stack.enter_context(mock.patch.object(DynamoDBBackend, "transact_write_items", transact_write_items))


@contextmanager
def lagging_tag_index(client) -> Iterator[None]:
    """The Resource Groups Tagging API's index behind the services' own tags, as AWS keeps
    it (updated asynchronously: DESIGN.md, issue 11 finding 2): inside the block,
    GetResources answers every request as it answered the first request with the same
    parameters, so tags written or removed since then do not show. Moto's index is
    always current. `client` is a resourcegroupstaggingapi client."""
    answers: dict[str, dict] = {}

    class _Http:  # what botocore reads of a short-circuited answer
        status_code = 200
        headers: dict = {}

    def before(params, context, **_):
        key = json.dumps(params, sort_keys=True, default=str)
        context["lagging_index_key"] = key
        if key in answers:
            return _Http(), copy.deepcopy(answers[key])
        return None

    def after(parsed, context, **_):
        key = context.get("lagging_index_key")
        if key is not None:
            answers.setdefault(key, copy.deepcopy(parsed))

    client.meta.events.register("before-call.resource-groups-tagging-api.GetResources", before)
    client.meta.events.register("after-call.resource-groups-tagging-api.GetResources", after)
    try:
        yield
    finally:
        client.meta.events.unregister("before-call.resource-groups-tagging-api.GetResources", before)
        client.meta.events.unregister("after-call.resource-groups-tagging-api.GetResources", after)
