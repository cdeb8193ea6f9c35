"""Moto patches: AWS's documented semantics where moto 5.2.5 departs from them.

One place holds every departure from moto that Holdfast depends on; the tests
(tests/support/fleet.py's `aws_semantics` fixture) and the demo's embedded AWS
(holdfast_demo.embedded) both use it. Each patch says which AWS behaviour it restores:

- Lambda async invoke config: AWS's PutFunctionEventInvokeConfig replaces the whole
  config (moto keeps the first put); UpdateFunctionEventInvokeConfig merges the
  members it names and answers ResourceNotFoundException when the function has no
  config (moto replaces, and creates one).
- Each qualifier has its own async invoke config (Lambda API reference,
  PutFunctionEventInvokeConfig: "To configure options for asynchronous invocation, use
  PutFunctionEventInvokeConfig ... Qualifier: A version number or alias name"; the
  unqualified config is $LATEST's, and ListFunctionEventInvokeConfigs lists every
  qualifier's). Moto keeps one config per function and ignores the qualifier. A
  qualifier that is neither $LATEST, a version nor an alias is ResourceNotFoundException.
  Each config's LastModified is the time of its last Put or Update ("The date and time
  that the configuration was last updated"; moto answers one fixed time), and deleting a
  function deletes its configs with its versions and aliases (DeleteFunction: "all
  versions and aliases are deleted"; a version deleted by its Qualifier takes its own),
  so a function recreated under the same name starts with none.
- Destinations are checked against the function's execution role when a config is
  written: "Your function's execution role must have permission to send records to
  the destination" (Lambda Developer Guide, "Capturing records of Lambda asynchronous
  invocations"), and Lambda answers InvalidParameterValueException "The provided
  execution role does not have permissions to call SendMessage on SQS" otherwise.
  Moto checks nothing. The emulation evaluates the role's identity policies (inline
  and attached, holdfast_fixtures.iam_policy) for sqs:SendMessage on a queue
  destination (sns:Publish, lambda:InvokeFunction, events:PutEvents on the others); a
  queue's resource policy is not consulted, as the documented requirement is on the
  execution role.
- Application Auto Scaling TagResource / UntagResource / ListTagsForResource on a
  scalable target's ARN exist in AWS; moto has none of them. A target's tags go with it
  when it is deregistered.
- RegisterScalableTarget on an existing target adjusts the resource's capacity into
  [MinCapacity, MaxCapacity]: "If you call the RegisterScalableTarget API to update an
  existing scalable target, Application Auto Scaling retrieves the current capacity of
  the resource. If it's below the minimum capacity or above the maximum capacity,
  Application Auto Scaling adjusts the capacity of the scalable target to place it
  within these bounds, even if you don't include the MinCapacity or MaxCapacity in the
  request" (Application Auto Scaling API reference, RegisterScalableTarget). Moto
  changes nothing; the emulation moves an ECS service's desired count.
- Lambda event source mappings: ScalingConfig (maximum concurrency) and provisioned
  mode (ProvisionedPollerConfig) "are mutually exclusive options" (Lambda Developer
  Guide, "Configuring scaling behavior for SQS event source mappings"): a create or
  update that would leave both set is InvalidParameterValueException. Moto keeps both.
  An SQS mapping's pollers are bounded: MinimumPollers "For Amazon SQS events source
  mappings, default is 2, and minimum 2 required" (at most 200), MaximumPollers "For
  Amazon SQS event source mappings, the accepted range is between 2 and 10,000" (Lambda API
  reference, ProvisionedPollerConfig), and a minimum above the maximum names no range to
  scale between; moto stores any numbers (and returns the config as it was last given,
  which the emulation keeps). Each is InvalidParameterValueException.
- ELB target groups of Network Load Balancers may use the QUIC and TCP_QUIC protocols
  (ELB API reference, CreateTargetGroup: Protocol "HTTP | HTTPS | TCP | TLS | UDP |
  TCP_UDP | GENEVE | QUIC | TCP_QUIC"; botocore's model has them). Moto 5.2.5 rejects
  both; the emulation creates them (as UDP / TCP underneath) and reports their protocol.
- IAM SimulatePrincipalPolicy, which moto lacks: holdfast_fixtures.iam_simulation, with
  the API's request and response shapes and its errors (NoSuchEntity, InvalidInput,
  PolicyEvaluation); its docstring says what it does not simulate.
- DescribeScalableTargets pagination: moto's NextToken is the index within the page,
  not within all targets, so past two pages it repeats itself and botocore's paginator
  stops ("The same next token was received twice"). AWS's token moves on.
- STS AssumeRole of a role that does not exist answers AccessDenied in AWS; moto assumes
  any ARN (`assume_role_needs_the_role`, a context of its own: only the fleet view's
  tests assume roles).
- At most 50 user tags per resource (tags whose key starts with `aws:` do not count):
  "Tagging AWS resources", Tag naming limits and requirements; the Lambda and Auto Scaling
  developer guides give 50 for functions, mappings and groups. Moto 5.2.5 has no limit
  for either. Lambda TagResource answers InvalidParameterValueException (the one
  client error its API reference lists), Auto Scaling CreateOrUpdateTags LimitExceeded.
  (Moto's ELB AddTags already refuses past 10 tags, stricter than AWS's 50.)

- The Resource Groups Tagging API's GetResources lists Lambda event source mappings
  (resource type `lambda:event-source-mapping`, ARN
  `arn:aws:lambda:<region>:<account>:event-source-mapping:<uuid>`): "The GetResources,
  GetTagKeys, and GetTagValues operations support all resource types", with named
  exceptions that do not include them (Resource Groups Tagging API reference, "Services
  that support the Resource Groups Tagging API"), and mappings are taggable by their own
  ARN (Lambda Developer Guide, "Using tags on event source mappings"). moto 5.2.5's Lambda
  backend indexes functions only; the patch adds each tagged mapping with its tags.

- Lambda UpdateAlias gives the alias a new RevisionId (GetAlias: "A unique identifier
  that changes when you update the alias"); moto keeps the one it was created with. (DeleteAlias's
  reference does not say whether an alias's async config goes with it; the emulation
  keeps it, as moto does, and tests/actuators/test_recreated.py covers both answers.)

- Lambda ListAliases takes the function's name or ARN (API reference, ListAliases:
  FunctionName "The name or ARN of the Lambda function", name formats "Function name",
  "Function ARN", "Partial ARN"). moto 5.2.5 reads the name from the request path without
  URL-decoding it, so an ARN answers ResourceNotFoundException; the patch decodes it.

- Lambda GetFunction's `Concurrency` (API reference: "The function's reserved
  concurrency") is in the answer whenever a reserved concurrency is set, 0 included (a
  function throttled to nothing). moto 5.2.5 leaves it out when it is 0 (`if
  self.reserved_concurrency:`); the patch puts it in.

- Lambda GetAccountSettings (the account's concurrency quota and what is left unreserved)
  exists in AWS; moto has no such route. The emulation answers it from the functions'
  reserved concurrency (`_account_settings`).

- CloudWatch GetMetricData (API reference): at most 500 MetricDataQueries a call, each
  Id unique and matching `[a-z][a-zA-Z0-9_]*` ("the first character must be a lowercase
  letter"), StartTime rounded down to the whole minute (data under 15 days old), and
  results paginated with NextToken past MaxDatapoints (default 100,800), a query cut off
  by a page answering StatusCode PartialData. moto takes any number of queries and any
  Id, never paginates, and matches a metric by dimensions without its namespace. The
  patch answers MetricStat queries (SampleCount, Sum, Average, Minimum, Maximum) itself,
  matching namespace, name and the exact set of dimensions, as CloudWatch does; metric
  math and Metrics Insights queries still go to moto.
- Elastic Load Balancing ARNs: a Network Load Balancer's ARN is
  `...:loadbalancer/net/<name>/<id>` (a Gateway Load Balancer's `gwy`, an Application
  Load Balancer's `app`), and the `LoadBalancer` dimension of its CloudWatch metrics is
  the part after `loadbalancer/` ("net/my-load-balancer/50dc6c495c0c9188", ELB's
  CloudWatch metrics pages). moto names every load balancer `app/...`.
- AWS services' own metrics (AWS/NetworkELB, AWS/SQS, AWS/Lambda, ...) are published by
  the services; a caller cannot publish into a namespace that begins with "AWS/"
  (PutMetricData: "you should not specify a namespace that begins with AWS/"; CloudWatch
  answers InvalidParameterValue). moto accepts it; the patch refuses it, and
  `publish_service_metrics(account, region, namespace, data)` writes datapoints as the
  service itself would, for tests and the demo to emulate what AWS emits.

And three costs. moto's DynamoDB answers go through its generic, shape-walking response
serializer, about 3 ms an item: a Query of the few hundred signals the reconciler reads
each tick took most of a second. The patch answers Query and Scan with moto's own result
as JSON, as moto's DynamoDB did before that serializer (the result is the same document).
A base-table Query in moto reads every item of the table, sorted, and keeps those of
the partition; the patch hands it only the partition's items (the same ones, in the
same order), so a Query of one controller's leases no longer sorts the night's signals.
And moto's TransactWriteItems deep-copies every table it names, for its
rollback. The reconciler's plan guard is a transaction before every relaxing write,
and the ledger holds thousands of signal items by the recovery, so each guard cost
about 0.1 s and the copies piled up to gigabytes. The patch snapshots only the items a
transaction touches and rolls those back; the outcome of every transaction is moto's.
A DynamoDB transaction is serializable against every other write (DynamoDB Developer
Guide, "Isolation levels for DynamoDB transactions"); a moto server answers requests on
several threads, and a failing transaction's rollback could restore items another
controller's transaction had written meanwhile (the plan history losing a generation).
So the patch runs each backend's writes (PutItem, UpdateItem, DeleteItem and the
transactions) one at a time.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from contextlib import ExitStack, contextmanager
from typing import Iterator
from unittest import mock
from urllib.parse import unquote

from holdfast_fixtures import iam_policy

# The action Lambda needs the execution role to hold for each destination service
# (Lambda Developer Guide, "Capturing records of Lambda asynchronous invocations").
DESTINATION_ACTIONS = {"sqs": "sqs:SendMessage", "sns": "sns:Publish", "lambda": "lambda:InvokeFunction",
                       "events": "events:PutEvents"}
DESTINATION_REFUSED = "The provided execution role does not have permissions to call {call} on {service}"


@contextmanager
def aws_semantics() -> Iterator[None]:
    """Patch moto's backends to AWS's semantics (above) until the block ends."""
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.awslambda import models as lambda_models
    from moto.awslambda.exceptions import UnknownEventConfig
    from moto.awslambda.responses import LambdaResponse
    from moto.core.exceptions import JsonRESTError

    configs: dict[tuple[str, str], dict] = {}   # (unqualified function ARN, qualifier) -> config
    modified: dict[tuple[str, str], float] = {}  # -> its LastModified (epoch seconds)
    clock = [1700000000.0]

    def stamp(key) -> None:
        clock[0] += 1.0   # each write later than the one before (a counter: tests stay deterministic)
        modified[key] = clock[0]

    def target(response, suffix: int):
        """The function (unqualified) and the qualifier a request names."""
        name = unquote(response.path.rsplit("/", suffix)[1])
        qualifier = response.querystring.get("Qualifier", [None])[0]
        backend = response.backend
        if name.startswith("arn:"):
            base, short, in_name = backend._lambdas.split_function_arn(name)
        else:
            short, _, in_name = name.partition(":")
        qualifier = in_name or qualifier or "$LATEST"
        fn = backend.get_function(short)
        if qualifier != "$LATEST":
            backend.get_function(short, qualifier)   # ResourceNotFoundException if no such version or alias
        return fn, qualifier

    def shown(fn, qualifier: str, config: dict) -> str:
        return json.dumps({"FunctionArn": f"{fn.function_arn}:{qualifier}",
                           "LastModified": modified.get((fn.function_arn, qualifier), 1700000000.0), **config})

    def check_destinations(response, fn, config: dict) -> None:
        lambda_models.EventInvokeConfig(fn.function_arn, fn.last_modified, config)  # moto's own validation
        for which in ("OnSuccess", "OnFailure"):
            destination = ((config.get("DestinationConfig") or {}).get(which) or {}).get("Destination")
            if destination:
                _role_may_send(response.current_account, fn.role, destination)

    def put_config(self):
        fn, qualifier = target(self, 2)
        config = dict(self.json_body)
        check_destinations(self, fn, config)
        configs[(fn.function_arn, qualifier)] = config
        stamp((fn.function_arn, qualifier))
        return 200, {}, shown(fn, qualifier, config)

    def get_config(self):
        fn, qualifier = target(self, 2)
        if (fn.function_arn, qualifier) not in configs:
            raise UnknownEventConfig(f"{fn.function_arn}:{qualifier}")
        return 200, {}, shown(fn, qualifier, configs[(fn.function_arn, qualifier)])

    def update_config(self):
        fn, qualifier = target(self, 2)
        if (fn.function_arn, qualifier) not in configs:
            raise UnknownEventConfig(f"{fn.function_arn}:{qualifier}")
        merged = {**configs[(fn.function_arn, qualifier)], **self.json_body}
        check_destinations(self, fn, merged)
        configs[(fn.function_arn, qualifier)] = merged
        stamp((fn.function_arn, qualifier))
        return 200, {}, shown(fn, qualifier, merged)

    def delete_config(self):
        fn, qualifier = target(self, 2)
        if configs.pop((fn.function_arn, qualifier), None) is None:
            raise UnknownEventConfig(f"{fn.function_arn}:{qualifier}")
        return 204, {}, ""

    def list_configs(self):
        name = unquote(self.path.rsplit("/", 3)[1])
        fn = self.backend.get_function(name.split(":function:")[-1].split(":")[0] if name.startswith("arn:") else name)
        found = [json.loads(shown(fn, q, c)) for (arn, q), c in sorted(configs.items()) if arn == fn.function_arn]
        return 200, {}, json.dumps({"FunctionEventInvokeConfigs": found})

    original_delete_function = lambda_models.LambdaBackend.delete_function

    def delete_function(self, function_name, qualifier=None):
        try:
            arn = self.get_function(function_name).function_arn
        except Exception:   # moto answers for a missing function itself, below
            arn = None
        answer = original_delete_function(self, function_name, qualifier)
        for key in [k for k in configs if k[0] == arn and (qualifier is None or k[1] == qualifier)]:
            configs.pop(key, None)
            modified.pop(key, None)
        return answer

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

    from moto.applicationautoscaling.models import ApplicationAutoscalingBackend as ApplicationAutoScalingBackend
    from moto.awslambda.exceptions import InvalidParameterValueException

    original_register = ApplicationAutoScalingBackend.register_scalable_target

    original_deregister = ApplicationAutoScalingBackend.deregister_scalable_target

    def deregister_scalable_target(self, namespace, r_id, dimension):
        """A target's tags go with it."""
        target = self.targets.get(dimension, {}).get(r_id)
        original_deregister(self, namespace, r_id, dimension)
        if target is not None:
            tags.pop(target.arn, None)

    def register_scalable_target(self, namespace, r_id, dimension, min_capacity, max_capacity, role_arn, suspended_state):
        existed = self._scalable_target_exists(r_id, dimension)
        target = original_register(self, namespace, r_id, dimension, min_capacity, max_capacity, role_arn, suspended_state)
        if existed and namespace == "ecs" and dimension == "ecs:service:DesiredCount":
            _, cluster, name = r_id.split("/")
            (service,), _ = self.ecs_backend.describe_services(cluster, [name])
            low, high = target.min_capacity, target.max_capacity
            service.desired_count = min(max(service.desired_count, low), high)
        return target

    original_create_esm = lambda_models.LambdaBackend.create_event_source_mapping
    original_update_esm = lambda_models.LambdaBackend.update_event_source_mapping

    def exclusive(scaling, poller) -> None:
        if (scaling or {}).get("MaximumConcurrency") and poller:
            raise InvalidParameterValueException(
                "ScalingConfig (MaximumConcurrency) cannot be used with ProvisionedPollerConfig (provisioned mode)")

    def sqs_pollers(source_arn: str, poller) -> None:
        if not poller or ":sqs:" not in (source_arn or ""):
            return
        low, high = poller.get("MinimumPollers"), poller.get("MaximumPollers")
        if low is not None and not 2 <= low <= 200:
            raise InvalidParameterValueException(
                f"MinimumPollers {low}: for Amazon SQS event source mappings it is from 2 to 200")
        if high is not None and not 2 <= high <= 10_000:
            raise InvalidParameterValueException(
                f"MaximumPollers {high}: for Amazon SQS event source mappings it is from 2 to 10000")
        if (2 if low is None else low) > (200 if high is None else high):
            raise InvalidParameterValueException(
                f"MinimumPollers {low} is above MaximumPollers {200 if high is None else high}")

    def create_esm(self, spec):
        exclusive(spec.get("ScalingConfig"), spec.get("ProvisionedPollerConfig"))
        sqs_pollers(spec.get("EventSourceArn"), spec.get("ProvisionedPollerConfig"))
        return original_create_esm(self, spec)

    def update_esm(self, uuid, spec):
        esm = self.get_event_source_mapping(uuid)
        if esm is not None:
            exclusive(spec.get("ScalingConfig", esm.scaling_config), spec.get("ProvisionedPollerConfig", esm.poller_config))
            sqs_pollers(esm.event_source_arn, spec.get("ProvisionedPollerConfig"))
        return original_update_esm(self, uuid, spec)

    from moto.elbv2.models import ELBv2Backend

    original_create_tg = ELBv2Backend.create_target_group

    def create_target_group(self, name, **kwargs):
        quic = kwargs.get("protocol") if kwargs.get("protocol") in ("QUIC", "TCP_QUIC") else None
        if quic:
            kwargs["protocol"] = "UDP" if quic == "QUIC" else "TCP_UDP"
        group = original_create_tg(self, name, **kwargs)
        if quic:
            group.protocol = quic
        return group

    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self):
        from moto.iam.models import iam_backends

        from . import iam_simulation

        request = {name: self._get_param(name) for name in ("ActionNames", "ResourceArns", "PolicyInputList",
                                                             "ContextEntries", "MaxItems", "Marker")}
        source = self._get_param("PolicySourceArn")
        try:
            backend = iam_backends[self.current_account][source.split(":")[1] if source else "aws"]
            answer = iam_simulation.simulate(iam_simulation.principal_policies(backend, source or ""), request)
        except iam_simulation.SimulationError as err:
            body = (f'<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error><Type>Sender</Type>'
                    f"<Code>{err.code}</Code><Message>{err.message}</Message></Error>"
                    "<RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>")
            return err.status, {"status": err.status}, body
        return ActionResult(answer)

    original_alias_update = lambda_models.LambdaAlias.update

    def alias_update(self, *args, **kwargs):
        original_alias_update(self, *args, **kwargs)
        self.revision_id = str(lambda_models.random.uuid4())

    def list_aliases(self):
        name = unquote(self.path.rsplit("/", 2)[-2])
        if name.startswith("arn:"):
            name = self.backend._lambdas.split_function_arn(name)[1]
        aliases = self.backend.list_aliases(name)
        return 200, {}, json.dumps({"Aliases": [alias.to_json() for alias in aliases]})

    original_get_code = lambda_models.LambdaFunction.get_code

    def get_code(self):
        answer = original_get_code(self)
        if self.reserved_concurrency is not None and "Concurrency" not in answer:
            answer["Concurrency"] = {"ReservedConcurrentExecutions": int(self.reserved_concurrency)}
        return answer

    original_tagged = lambda_models.LambdaBackend.iter_tagged_resources

    def iter_tagged_resources(self):
        from moto.core.resource_tagging import TaggedResource

        yield from original_tagged(self)
        for esm in list(self._event_source_mappings.values()):
            yield TaggedResource(arn=esm.arn, tags=esm.tags, resource_type="lambda:event-source-mapping")

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(lambda_models.LambdaFunction, "get_code", get_code))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "iter_tagged_resources",
                                              iter_tagged_resources))
        stack.enter_context(mock.patch.object(lambda_models.LambdaAlias, "update", alias_update))
        stack.enter_context(mock.patch.object(LambdaResponse, "list_aliases", list_aliases))
        _cheap_transactions(stack)
        _cheap_query_answers(stack)
        _partition_queries(stack)
        _metric_data(stack)
        _load_balancer_arns(stack)
        stack.enter_context(mock.patch.object(IamResponse, "simulate_principal_policy", simulate_principal_policy, create=True))
        stack.enter_context(mock.patch.object(ELBv2Backend, "create_target_group", create_target_group))
        stack.enter_context(mock.patch.object(ApplicationAutoScalingBackend, "register_scalable_target", register_scalable_target))
        stack.enter_context(mock.patch.object(ApplicationAutoScalingBackend, "deregister_scalable_target",
                                              deregister_scalable_target))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "create_event_source_mapping", create_esm))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "update_event_source_mapping", update_esm))
        stack.enter_context(mock.patch.object(lambda_models.LambdaBackend, "delete_function", delete_function))
        _tag_limits(stack)
        stack.enter_context(
            mock.patch.object(ApplicationAutoScalingResponse, "describe_scalable_targets", describe_scalable_targets)
        )
        for name, fn in (("put_function_event_invoke_config", put_config), ("get_function_event_invoke_config", get_config),
                         ("update_function_event_invoke_config", update_config),
                         ("delete_function_event_invoke_config", delete_config),
                         ("list_function_event_invoke_configs", list_configs)):
            stack.enter_context(mock.patch.object(LambdaResponse, name, fn))
        for fn in (tag_resource, untag_resource, list_tags_for_resource):
            stack.enter_context(mock.patch.object(ApplicationAutoScalingResponse, fn.__name__, fn, create=True))
        _account_settings(stack)
        yield


# Lambda's default concurrency quota per account and region (Lambda quotas: 1,000).
CONCURRENCY_QUOTA = 1000


def _account_settings(stack: ExitStack) -> None:
    """Lambda GetAccountSettings (GET /2016-08-19/account-settings/), which moto lacks:
    AccountLimit.ConcurrentExecutions (the quota: 1,000 by default, moto's own
    MOTO_LAMBDA_CONCURRENCY_QUOTA when set) and UnreservedConcurrentExecutions, the quota
    less every function's reserved concurrency (Lambda API reference, AccountLimit)."""
    import os

    from moto.awslambda import urls as lambda_urls
    from moto.awslambda.responses import LambdaResponse

    def get_account_settings(self):
        quota = int(os.environ.get("MOTO_LAMBDA_CONCURRENCY_QUOTA", CONCURRENCY_QUOTA))
        functions = list(self.backend.list_functions())
        reserved = sum(int(f.reserved_concurrency or 0) for f in functions)
        return 200, {}, json.dumps({
            "AccountLimit": {"TotalCodeSize": 80530636800, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800,
                             "ConcurrentExecutions": quota, "UnreservedConcurrentExecutions": quota - reserved},
            "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": len(functions)},
        })

    stack.enter_context(mock.patch.dict(lambda_urls.url_paths, {
        r"{0}/(?P<api_version>[^/]+)/account-settings/?$": LambdaResponse.dispatch}))
    stack.enter_context(mock.patch.object(LambdaResponse, "get_account_settings", get_account_settings, create=True))


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


def _cheap_query_answers(stack: ExitStack) -> None:
    import base64

    from moto.dynamodb.responses import DynamoHandler

    def as_json(value):
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode()
        if isinstance(value, (set, frozenset)):
            return sorted(value)
        raise TypeError(f"not JSON: {type(value).__name__}")

    for name in ("query", "scan"):
        original = getattr(DynamoHandler, name)

        def answer(self, _original=original):
            # moto's own result (a dict of DynamoDB JSON), without the shape-walking serializer.
            return json.dumps(_original(self).result, default=as_json)

        stack.enter_context(mock.patch.object(DynamoHandler, name, answer))


def _partition_queries(stack: ExitStack) -> None:
    """A base-table Query reads its partition alone, the items its key condition selects
    (the ones moto's loop keeps, by the same comparison), each item's size worked out once.

    moto's Table.query sorts every item of the table and walks them all, and asks each
    item its size (a walk over every attribute value) twice: for the 1 MB page limit,
    then to add it up. Here `all_items` answers the partition's items that the sort-key
    condition selects, in sort-key order (DynamoDB reads only those, and counts only
    those against the 1 MB page), and `Item.size` is remembered for the length of the
    Query. An index Query (moto passes its name positionally) and a Query without a
    partition key go to moto as they are."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table

    query, all_items, item_size = Table.query, Table.all_items, Item.size
    only = threading.local()

    def partition_query(self, hash_key, range_comparison=None, range_objs=(), *args, **kwargs):
        # Table.query(hash_key, range_comparison, range_objs, limit, exclusive_start_key,
        # scan_index_forward, projection_expressions, index_name, ...)
        index_name = args[4] if len(args) > 4 else kwargs.get("index_name")
        if index_name or hash_key is None:
            return query(self, hash_key, range_comparison, range_objs, *args, **kwargs)
        only.partition, only.sizes = (self, hash_key, range_comparison, range_objs), {}
        try:
            return query(self, hash_key, range_comparison, range_objs, *args, **kwargs)
        finally:
            only.partition = only.sizes = None

    def items_of(self):
        table, hash_key, comparison, objs = getattr(only, "partition", None) or (None, None, None, None)
        if table is not self:
            return all_items(self)
        # The items a base-table Query keeps (`item.hash_key == hash_key`): the partition's.
        # moto keys `items` by the same DynamoType, whose hash and equality agree.
        held = self.items.get(hash_key)
        if held is None:
            return []
        if not self.range_key_attr:
            return [held]
        items = held.values()
        if comparison:
            items = [item for item in items if item.range_key.compare(comparison, objs)]
        # DynamoType orders by its cast value (one type per key attribute): the same order.
        return sorted(items, key=lambda item: item.range_key.cast_value)

    def size(self):
        sizes = getattr(only, "sizes", None)
        if sizes is None:
            return item_size(self)
        known = sizes.get(id(self))   # the table's own item, held by the Query while it runs
        if known is None:
            known = sizes[id(self)] = item_size(self)
        return known

    stack.enter_context(mock.patch.object(Table, "query", partition_query))
    stack.enter_context(mock.patch.object(Item, "size", size))
    stack.enter_context(mock.patch.object(Table, "all_items", items_of))


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
    writes = {"transact_write_items": transact_write_items}
    for name in ("put_item", "update_item", "delete_item"):
        writes[name] = getattr(DynamoDBBackend, name)
    for name, write in writes.items():
        stack.enter_context(mock.patch.object(DynamoDBBackend, name, _serialized(write)))


_WRITE_LOCKS: dict[int, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _serialized(write):
    """`write` holding its backend's write lock: DynamoDB's writes are serializable."""
    def locked(self, *args, **kwargs):
        with _WRITE_LOCKS_GUARD:
            lock = _WRITE_LOCKS.setdefault(id(self), threading.RLock())
        with lock:
            return write(self, *args, **kwargs)

    return locked


def role_documents(account: str, role_arn: str) -> list[str]:
    """The identity-policy documents of a role in moto's IAM: inline and attached."""
    from moto.iam.models import iam_backends

    backend = iam_backends[account][role_arn.split(":")[1]]
    role = backend.get_role_by_arn(role_arn)
    documents = list(role.policies.values())
    for policy in role.managed_policies.values():
        documents += [v.document for v in policy.versions if v.is_default]
    return documents


def _role_may_send(account: str, role_arn: str, destination: str) -> None:
    """Lambda's write-time destination check, on the execution role (see the module doc)."""
    from moto.awslambda.exceptions import InvalidParameterValueException

    service = destination.split(":")[2]
    action = DESTINATION_ACTIONS.get(service)
    if action is None:
        return
    if not iam_policy.allows(role_documents(account, role_arn), action, destination):
        raise InvalidParameterValueException(DESTINATION_REFUSED.format(
            call=action.split(":")[1], service={"sqs": "SQS", "sns": "SNS", "lambda": "Lambda", "events": "EventBridge"}[service]))


def publish_public_parameter(account: str, region: str, name: str, value: str) -> None:
    """A public SSM parameter as AWS publishes it (e.g. Powertools' layer ARNs under
    /aws/service/powertools/...; Powertools for AWS Lambda documentation, "Lambda Layer ...
    SSM Parameter Store"). Moto ships only a few public trees and refuses PutParameter
    under /aws, so a test that needs one adds it to moto's store directly."""
    import datetime

    from moto.ssm.models import Parameter, ssm_backends

    store = ssm_backends[account][region]._parameters
    store[name].append(Parameter(account_id=account, name=name, value=value, parameter_type="String",
                                 description=None, allowed_pattern=None, keyid=None,
                                 last_modified_date=datetime.datetime.now(datetime.timezone.utc).timestamp(),
                                 version=1, data_type="text"))


# ---- CloudWatch ---------------------------------------------------------------------------

MAX_QUERIES = 500
DEFAULT_MAX_DATAPOINTS = 100_800
_QUERY_ID = r"[a-z][a-zA-Z0-9_]*"
_INDEXES: dict[int, dict] = {}


def publish_service_metrics(account: str, region: str, namespace: str, data: list[dict]) -> None:
    """Datapoints an AWS service publishes: `data` holds {"MetricName", "Dimensions": [{"Name",
    "Value"}], "Timestamp" (aware), and "Value" or "StatisticValues" ({"SampleCount", "Sum",
    "Minimum", "Maximum"}: many samples at once, such as a minute of invocations' Duration)}.
    Written straight into moto's CloudWatch (the in-process backend that a moto server or
    mock_aws serves), as the service would."""
    from moto.cloudwatch.models import MetricAggregatedDatum, MetricDatum, cloudwatch_backends

    def datum(d):
        stats = d.get("StatisticValues")
        if stats is not None:
            return MetricAggregatedDatum(namespace, d["MetricName"], float(stats["Minimum"]), float(stats["Maximum"]),
                                         float(stats["SampleCount"]), float(stats["Sum"]), d.get("Dimensions", []),
                                         d["Timestamp"], d.get("Unit"))
        return MetricDatum(namespace, d["MetricName"], float(d["Value"]), d.get("Dimensions", []), d["Timestamp"], d.get("Unit"))

    backend = cloudwatch_backends[account][region]
    with _lock(backend):
        backend.metric_data.extend(datum(d) for d in data)


def _lock(backend) -> threading.Lock:
    return _INDEXES.setdefault(id(backend), {"lock": threading.Lock(), "seen": 0, "series": {}})["lock"]


def _series(backend) -> dict:
    """(namespace, name, dimensions) -> [(timestamp, datum)] sorted, built incrementally from
    moto's append-only list of datapoints."""
    import bisect
    from datetime import timezone

    index = _INDEXES.setdefault(id(backend), {"lock": threading.Lock(), "seen": 0, "series": {}})
    data = backend.metric_data
    for datum in data[index["seen"]:]:
        key = (datum.namespace, datum.name, frozenset((d.name, d.value) for d in datum.dimensions))
        t = datum.timestamp if datum.timestamp.tzinfo else datum.timestamp.replace(tzinfo=timezone.utc)
        bisect.insort(index["series"].setdefault(key, []), (t, id(datum), datum))
    index["seen"] = len(data)
    return index["series"]


_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d{1,2})?|100)")


def _stat(stat: str, datums: list) -> float | None:
    """One period's statistic. Percentiles (`p90`, `p99.9`) by nearest rank over the raw
    values. As CloudWatch documents (GetMetricStatistics, API Reference): percentiles need
    raw data points; a statistic set counts only when its SampleCount is 1 or its Min equals
    its Max; none when any value is negative. Without them a period has no percentile
    datapoint (None). Moto 5.2.5 raises KeyError on any extended statistic."""
    values, sums, counts, mins, maxs = [], 0.0, 0.0, [], []
    raw = True
    for d in datums:
        if hasattr(d, "value"):
            sums, counts = sums + d.value, counts + 1
            mins.append(d.value)
            maxs.append(d.value)
            values.append(d.value)
        else:  # a StatisticSet (moto's MetricAggregatedDatum: sum, min, max, sample_count)
            sums, counts = sums + d.sum, counts + d.sample_count
            mins.append(d.min)
            maxs.append(d.max)
            if d.sample_count == 1 or d.min == d.max:
                values += [d.min] * int(d.sample_count)
            else:
                raw = False
    match = _PERCENTILE.fullmatch(stat)
    if match:
        if not raw or not values or min(values) < 0:
            return None
        ranked = sorted(values)
        rank = max(1, math.ceil(float(match.group(1)) / 100 * len(ranked)))
        return ranked[rank - 1]
    return {"Sum": sums, "SampleCount": counts, "Average": sums / counts if counts else 0.0,
            "Minimum": min(mins), "Maximum": max(maxs)}[stat]


def _metric_data(stack: ExitStack) -> None:
    import bisect
    import re
    from datetime import timedelta, timezone

    from moto.cloudwatch.exceptions import InvalidParameterValue, ValidationError
    from moto.cloudwatch.models import CloudWatchBackend
    from moto.cloudwatch.responses import CloudWatchResponse
    from moto.core.responses import ActionResult

    original = CloudWatchResponse.get_metric_data
    original_put = CloudWatchBackend.put_metric_data

    def put_metric_data(self, namespace, metric_data):
        if str(namespace).startswith("AWS/"):
            raise InvalidParameterValue(f"The value {namespace} for parameter Namespace is invalid.")
        with _lock(self):
            return original_put(self, namespace, metric_data)

    def get_metric_data(self):
        params = self._get_params()
        queries = params.get("MetricDataQueries", [])
        if len(queries) > MAX_QUERIES:
            raise ValidationError(f"The collection MetricDataQueries must not have a size greater than {MAX_QUERIES}.")
        ids = [q.get("Id") or "" for q in queries]
        for i in ids:
            if not re.fullmatch(_QUERY_ID, i):
                raise ValidationError(f"Invalid metric data query id {i!r}: letters, numbers and underscore, "
                                      "the first character a lowercase letter.")
        if len(set(ids)) != len(ids):
            raise ValidationError("The values of MetricDataQueries.member.N.Id must be unique.")
        if any("MetricStat" not in q for q in queries):
            return original(self)
        aware = lambda t: t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        start = aware(params["StartTime"]).replace(second=0, microsecond=0)
        end = aware(params["EndTime"])
        if end <= start:
            raise ValidationError("The parameter EndTime must be greater than StartTime.")
        descending = (params.get("ScanBy") or "TimestampDescending") == "TimestampDescending"
        limit = int(params.get("MaxDatapoints") or DEFAULT_MAX_DATAPOINTS)
        skip = int(params.get("NextToken") or 0)
        backend = self.cloudwatch_backend
        with _lock(backend):
            series = _series(backend)
            results = []
            for q in queries:
                stat_q = q["MetricStat"]
                metric = stat_q["Metric"]
                key = (metric["Namespace"], metric["MetricName"],
                       frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
                points = series.get(key, [])
                period = timedelta(seconds=int(stat_q["Period"]))
                stamps, values, t = [], [], start
                while t < end:
                    lo = bisect.bisect_left(points, (t,))
                    hi = bisect.bisect_left(points, (t + period,))
                    value = _stat(stat_q["Stat"], [d for _, _, d in points[lo:hi]]) if hi > lo else None
                    if value is not None:
                        stamps.append(t)
                        values.append(value)
                    t += period
                if descending:
                    stamps.reverse()
                    values.reverse()
                results.append((q, stamps, values))
        page, emitted, position, token = [], 0, 0, None
        for q, stamps, values in results:
            n = len(stamps)
            if position + n <= skip:   # wholly on earlier pages
                position += n
                continue
            first = max(0, skip - position)
            room = limit - emitted
            take = min(n - first, room)
            cut = first + take < n
            page.append({"Id": q["Id"], "Label": q.get("Label") or metric_label(q),
                         "Timestamps": stamps[first:first + take], "Values": values[first:first + take],
                         "StatusCode": "PartialData" if cut else "Complete"})
            emitted += take
            position += n
            if cut:
                token = str(skip + emitted)
                break
        body = {"MetricDataResults": page, "Messages": []}
        if token:
            body["NextToken"] = token
        return ActionResult(body)

    def metric_label(q) -> str:
        return f"{q['MetricStat']['Metric']['MetricName']}"

    stack.enter_context(mock.patch.object(CloudWatchResponse, "get_metric_data", get_metric_data))
    stack.enter_context(mock.patch.object(CloudWatchBackend, "put_metric_data", put_metric_data))


# ---- Elastic Load Balancing ----------------------------------------------------------------

def _load_balancer_arns(stack: ExitStack) -> None:
    from moto.elbv2 import models as elbv2_models

    making = threading.local()
    create = elbv2_models.ELBv2Backend.create_load_balancer
    make_arn = elbv2_models.make_arn_for_load_balancer
    prefixes = {"network": "net", "gateway": "gwy"}

    def create_load_balancer(self, *args, **kwargs):
        making.kind = kwargs.get("loadbalancer_type")
        try:
            return create(self, *args, **kwargs)
        finally:
            making.kind = None

    def make_arn_for_load_balancer(*args, **kwargs):
        arn = make_arn(*args, **kwargs)
        prefix = prefixes.get(getattr(making, "kind", None) or "")
        return arn.replace(":loadbalancer/app/", f":loadbalancer/{prefix}/", 1) if prefix else arn

    stack.enter_context(mock.patch.object(elbv2_models.ELBv2Backend, "create_load_balancer", create_load_balancer))
    stack.enter_context(mock.patch.object(elbv2_models, "make_arn_for_load_balancer", make_arn_for_load_balancer))


@contextmanager
def assume_role_needs_the_role() -> Iterator[None]:
    """STS AssumeRole as AWS answers it for a role that does not exist: AccessDenied.

    Moto assumes any role ARN, existing or not ("the role does not need to exist"). AWS
    answers `AccessDenied` ("User: <caller> is not authorized to perform: sts:AssumeRole
    on resource: <role>") both when the role is missing and when its trust policy does
    not name the caller (STS API Reference, AssumeRole, Errors; IAM User Guide,
    "Troubleshoot IAM roles"). This restores the first case; moto evaluates no trust
    policy, so the second is not emulated.
    """
    from moto.iam.models import iam_backends
    from moto.sts.exceptions import STSClientError
    from moto.sts.models import STSBackend

    original = STSBackend.assume_role

    def assume_role(self, region_name, role_session_name, role_arn, *args, **kwargs):
        account, partition = role_arn.split(":")[4], role_arn.split(":")[1]
        try:
            iam_backends[account][partition].get_role_by_arn(role_arn)
        except Exception:
            raise STSClientError(
                "AccessDenied",
                f"User: arn:{partition}:iam::{self.account_id}:user/moto is not authorized to perform: "
                f"sts:AssumeRole on resource: {role_arn}",
            ) from None
        return original(self, region_name, role_session_name, role_arn, *args, **kwargs)

    import warnings

    with mock.patch.object(STSBackend, "assume_role", assume_role), warnings.catch_warnings():
        # STS's model has no AccessDenied shape (AWS answers it all the same); moto warns.
        warnings.filterwarnings("ignore", message=r"Exception\(STSClientError\) with code AccessDenied")
        yield


@contextmanager
def lagging_tag_index(client) -> Iterator[None]:
    """The Resource Groups Tagging API's index behind the services' own tags, as AWS keeps
    it (updated asynchronously, so it can lag the services' own tags): inside the block,
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
