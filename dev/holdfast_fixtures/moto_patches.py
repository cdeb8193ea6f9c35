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
        stack.enter_context(
            mock.patch.object(ApplicationAutoScalingResponse, "describe_scalable_targets", describe_scalable_targets)
        )
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "put_function_event_invoke_config", put))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "update_function_event_invoke_config", update))
        for fn in (tag_resource, untag_resource, list_tags_for_resource):
            stack.enter_context(mock.patch.object(ApplicationAutoScalingResponse, fn.__name__, fn, create=True))
        yield


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
