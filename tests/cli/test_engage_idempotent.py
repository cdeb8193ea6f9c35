"""`holdfast engage` run again on an engaged fleet writes nothing: for every kind and every
posture the first engage can leave a resource in (engaged in full, bounded in part,
already safe as its owner left it, skipped), the second engage only reads.

`holdfast.cli.main` runs in this process (tests/cli/cli_inprocess.py: its own stdin, stdout,
stderr and exit code, as the console script would have) against the session's moto server, with
AWS's semantics where moto departs from them (holdfast_fixtures.moto_patches: Lambda's
destination check against the execution role, Put/Update of async configs per
qualifier, provisioned mappings, Application Auto Scaling tagging). Each run's JSON
document counts its calls by operation (`api_calls_by_operation`)."""

from __future__ import annotations

import json

import pytest

from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from tests.cli import cli_inprocess
from tests.conftest import REGION
from tests.support.fleet import (
    aws_semantics,  # noqa: F401  (a fixture)
    make_asg,
    make_function,
    make_mapping,
    make_queue,
    make_service_target,
    make_target_group,
    role,
)

# Every API operation that changes something, by the verbs AWS names them with.
WRITES = ("Put", "Update", "Delete", "Create", "Tag", "Untag", "Suspend", "Resume", "Modify", "Register",
          "AddTags", "RemoveTags", "Publish", "Send", "Start")


def holdfast(server, *args: str) -> dict:
    proc = cli_inprocess.run(["--endpoint-url", server.url, "--region", REGION, "--json", *args])
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def writes(doc: dict) -> dict[str, int]:
    """The calls of a run that change AWS (the ledger's DynamoDB table aside)."""
    return {op: n for op, n in doc["api_calls_by_operation"].items()
            if op.split(":")[1].startswith(WRITES) and not op.startswith("dynamodb:")}


@pytest.fixture
def fleet(moto_server, aws_semantics):
    """Every posture variant of every kind, each selected by the opt-in tag."""
    moto_server.reset()
    clients = moto_server.clients()
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    expired = make_queue(clients, "HoldfastStack-ExpiredEvents1A2B")
    clients("ssm").put_parameter(Name="/holdfast/HoldfastStack/expired-queue-arn", Value=expired, Type="String")
    lam = clients("lambda")

    # Auto Scaling groups: nothing suspended; one of Holdfast's processes suspended by its
    # owner; every process Holdfast suspends already suspended.
    make_asg(clients, "asg-open")
    make_asg(clients, "asg-part", suspended=("AZRebalance",))
    make_asg(clients, "asg-shut", suspended=("ReplaceUnhealthy", "AZRebalance", "HealthCheck", "Launch", "Terminate",
                                             "AddToLoadBalancer", "AlarmNotification", "InstanceRefresh",
                                             "ScheduledActions"))

    # Async configs: no config; an owner's destination; a role Lambda lets deliver to
    # Holdfast's queue; a role it refuses (bounded in retries only), with and without a
    # config of its own; the owner's opt-in to dropping expired events; already safe;
    # an alias with a config of its own.
    narrow = role(clients, "narrow", policy=None)
    make_function(clients, "fn-none")
    make_function(clients, "fn-owner-dest")
    lam.put_function_event_invoke_config(FunctionName="fn-owner-dest", MaximumRetryAttempts=2,
                                         DestinationConfig={"OnFailure": {"Destination": make_queue(clients, "owner-dlq")}})
    make_function(clients, "fn-granted")
    lam.put_function_event_invoke_config(FunctionName="fn-granted", MaximumEventAgeInSeconds=7200)
    make_function(clients, "fn-refused", role_arn=narrow)
    lam.put_function_event_invoke_config(FunctionName="fn-refused", MaximumEventAgeInSeconds=7200)
    make_function(clients, "fn-refused-bare", role_arn=narrow)
    make_function(clients, "fn-refused-low", role_arn=narrow)
    lam.put_function_event_invoke_config(FunctionName="fn-refused-low", MaximumRetryAttempts=0)
    make_function(clients, "fn-discard", role_arn=narrow, tags={"holdfast:expired-events": "discard"})
    make_function(clients, "fn-safe")
    lam.put_function_event_invoke_config(FunctionName="fn-safe", MaximumRetryAttempts=0, MaximumEventAgeInSeconds=60)
    make_function(clients, "fn-alias", role_arn=narrow)
    version = lam.publish_version(FunctionName="fn-alias")["Version"]
    lam.create_alias(FunctionName="fn-alias", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="fn-alias", Qualifier="live", MaximumRetryAttempts=2)

    # Event source mappings: uncapped; capped high; at the floor; disabled; provisioned
    # (held through its pollers); a function reserved below the floor (skipped); selected by its own tag.
    consumer = make_function(clients, "consumer")
    make_mapping(clients, consumer, "q-open")
    make_mapping(clients, consumer, "q-high", cap=50)
    make_mapping(clients, consumer, "q-floor", cap=2)
    make_mapping(clients, consumer, "q-off", enabled=False)
    lam.create_event_source_mapping(FunctionName=consumer, EventSourceArn=make_queue(clients, "q-provisioned"),
                                    ProvisionedPollerConfig={"MinimumPollers": 2, "MaximumPollers": 20})
    tiny = make_function(clients, "tiny")
    lam.put_function_concurrency(FunctionName="tiny", ReservedConcurrentExecutions=1)
    make_mapping(clients, tiny, "q-tiny")
    make_mapping(clients, make_function(clients, "untagged", selected=False), "q-own-tag",
                 tags={"holdfast:protect": "true"})

    # Target groups: AWS's defaults; an owner's thresholds; failover off; an ALB's (skipped).
    make_target_group(clients, "tg-default")
    make_target_group(clients, "tg-owner", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "2",
        "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count": "2"})
    make_target_group(clients, "tg-off", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "off"})
    make_target_group(clients, "tg-http", protocol="HTTP")

    # ECS scalable targets: scaling in; already suspended by its owner; selected by its own tag.
    make_service_target(clients, "svc-open")
    make_service_target(clients, "svc-held", suspended={"DynamicScalingInSuspended": True})
    make_service_target(clients, "svc-own-tag", tag_service=False, tag_target=True)
    return clients


def test_a_second_engage_writes_nothing_for_any_posture_of_any_kind(fleet, moto_server):
    first = holdfast(moto_server, "engage")
    actions = {r["arn"].rsplit(":", 1)[-1].rsplit("/", 1)[-1]: r["action"] for r in first["resources"]}
    # The fleet covers the variants: engaged, already safe, and skipped, of every kind.
    assert {r["kind"] for r in first["resources"] if r["action"] == "engaged"} == {
        "asg", "esm", "async", "nlb", "scalable-target"}
    assert {"already", "skipped"} <= set(actions.values())
    refused = [r for r in first["resources"] if r["arn"].endswith(":fn-refused")]
    assert refused and refused[0]["action"] == "engaged" and "destination" in refused[0]["notes"]

    second = holdfast(moto_server, "engage")
    assert writes(second) == {}, [r for r in second["resources"] if r["action"] != "already"]
    assert {r["action"] for r in second["resources"]} <= {"already", "skipped"}
    third = holdfast(moto_server, "engage")
    assert writes(third) == {}


def test_a_second_engage_with_no_queue_known_writes_nothing(fleet, moto_server):
    holdfast(moto_server, "--expired-queue-arn", "none", "engage")
    second = holdfast(moto_server, "--expired-queue-arn", "none", "engage")
    assert writes(second) == {}
