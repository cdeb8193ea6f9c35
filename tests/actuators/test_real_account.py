"""AWS rules moto does not enforce, emulated in holdfast_fixtures.moto_patches, and what
Holdfast does about each: async destinations checked against the execution
role, one async config per qualifier, reserved concurrency (provisioned-mode mappings:
test_esm_provisioned.py),
the capacity adjustment of RegisterScalableTarget, and ARNs of other partitions.
Each test fails on the code that ignored the rule."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from holdfast.core import model
from holdfast.core.model import ENGAGED, RAISED, RESTORED

SKIPPED = getattr(model, "SKIPPED", "skipped")
from holdfast.core.tags import ORIGINAL_KEY
from tests.support import walks
from tests.support.fleet import make_function, make_mapping, make_service_target, role

QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired"
pytestmark = pytest.mark.usefixtures("aws_semantics")


def run(clients, settings, ledger_table, kind, verb="engage", queue=QUEUE, **kw):
    fn = walks.engage_all if verb == "engage" else walks.relax_all
    report = fn(clients, settings, ledger_table, kinds=(kind,), expired_queue_arn=queue, **kw)
    return {o.arn: o for o in report.outcomes}, report


def config(clients, name, qualifier=None):
    lam = clients("lambda")
    try:
        c = lam.get_function_event_invoke_config(FunctionName=name, **({"Qualifier": qualifier} if qualifier else {}))
    except lam.exceptions.ResourceNotFoundException:
        return None
    return {k: v for k, v in c.items() if k not in ("ResponseMetadata", "LastModified", "FunctionArn")}


# ---- the moto emulations themselves ------------------------------------------------------


def test_emulated_lambda_refuses_a_destination_the_execution_role_cannot_send_to(clients):
    narrow = role(clients, "narrow", policy=None)
    make_function(clients, "f", role_arn=narrow)
    with pytest.raises(ClientError) as caught:
        clients("lambda").put_function_event_invoke_config(
            FunctionName="f", DestinationConfig={"OnFailure": {"Destination": QUEUE}})
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValueException"
    assert "execution role does not have permissions to call SendMessage" in caught.value.response["Error"]["Message"]
    clients("iam").put_role_policy(RoleName="narrow", PolicyName="send", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE}]}))
    clients("lambda").put_function_event_invoke_config(FunctionName="f", DestinationConfig={"OnFailure": {"Destination": QUEUE}})


def test_emulated_configs_are_per_qualifier(clients):
    lam = clients("lambda")
    make_function(clients, "f")
    version = lam.publish_version(FunctionName="f")["Version"]
    lam.create_alias(FunctionName="f", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumRetryAttempts=2)
    assert config(clients, "f") is None and config(clients, "f", "live") == {"MaximumRetryAttempts": 2}
    listed = lam.list_function_event_invoke_configs(FunctionName="f")["FunctionEventInvokeConfigs"]
    assert [c["FunctionArn"].rsplit(":", 1)[1] for c in listed] == ["live"]
    with pytest.raises(ClientError):
        lam.put_function_event_invoke_config(FunctionName="f", Qualifier="nope", MaximumRetryAttempts=1)


# ---- item 1: never drop events silently ----------------------------------------------------


def test_no_destination_attachable_bounds_retries_and_keeps_the_event_age(clients, ledger_table, settings):
    """GIVEN three functions without a destination of their own: one whose role may send to
    Holdfast's queue, one whose role may not, and one whose owner opted in to discarding
    expired events (and whose role may not send either), WHEN engaged, THEN only the first
    gets the queue and a shorter age; the second keeps its age, bounds its retries and is
    told what to grant; the third's age is shortened with no destination, as asked."""
    narrow = role(clients, "narrow", policy=None)
    make_function(clients, "granted")
    make_function(clients, "refused", role_arn=narrow)
    make_function(clients, "discard", role_arn=narrow, tags={"holdfast:expired-events": "discard"})
    clients("lambda").put_function_event_invoke_config(FunctionName="refused", MaximumEventAgeInSeconds=7200)

    out, _ = run(clients, settings, ledger_table, "async")
    by_name = {arn.split(":")[6]: o for arn, o in out.items()}
    assert config(clients, "granted") == {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 1,
                                          "DestinationConfig": {"OnFailure": {"Destination": QUEUE}}}
    assert config(clients, "refused") == {"MaximumEventAgeInSeconds": 7200, "MaximumRetryAttempts": 1}
    assert config(clients, "discard") == {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 1}

    refused = by_name["refused"]
    assert refused.action == ENGAGED and set(refused.changes) == {"max_retries"}
    note = refused.notes["destination"]
    assert "event age kept at 7200 s" in note["why"] and note["role"] == narrow
    assert note["policy"]["Statement"] == [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE}]
    assert "aws iam put-role-policy --role-name narrow" in note["command"]

    # The grant it gives is the one that works: applied, the next engagement attaches the
    # queue. A walk again within this one asks Lambda no more (engaging is idempotent).
    clients("iam").put_role_policy(RoleName="narrow", PolicyName="holdfast-expired-events",
                                   PolicyDocument=json.dumps(note["policy"]))
    out, _ = run(clients, settings, ledger_table, "async")
    assert {o.action for o in out.values()} == {"already"}
    assert config(clients, "refused") == {"MaximumEventAgeInSeconds": 7200, "MaximumRetryAttempts": 1}
    refused_arn = next(arn for arn in out if arn.endswith(":refused"))
    assert walks.engine(clients, settings, ledger_table, kinds=("async",), expired_queue_arn=QUEUE
                        ).release(refused_arn).action == RESTORED
    out, _ = run(clients, settings, ledger_table, "async")
    assert config(clients, "refused")["DestinationConfig"] == {"OnFailure": {"Destination": QUEUE}}
    assert config(clients, "refused")["MaximumEventAgeInSeconds"] == 900

    out, _ = run(clients, settings, ledger_table, "async", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    assert config(clients, "refused") == {"MaximumEventAgeInSeconds": 7200}
    assert config(clients, "granted") is None and config(clients, "discard") is None


def test_no_queue_known_keeps_the_age_and_says_why(clients, ledger_table, settings):
    make_function(clients, "f")
    out, _ = run(clients, settings, ledger_table, "async", queue=None)
    (outcome,) = out.values()
    assert config(clients, "f") == {"MaximumRetryAttempts": 1}
    assert "no expired-events queue is known" in outcome.notes["destination"]["why"]
    assert "holdfast:expired-events=discard" in outcome.notes["destination"]["opt_in"]


def test_a_grant_names_the_queues_kms_key():
    from holdfast.actuators.async_config import grant

    arn = "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q"
    statements = grant("arn:aws-us-gov:iam::123456789012:role/path/r", arn, "1234abcd-12ab")["policy"]["Statement"]
    assert statements[1] == {"Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                             "Resource": "arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/1234abcd-12ab"}
    assert len(grant("arn:aws:iam::1:role/r", QUEUE, "alias/aws/sqs")["policy"]["Statement"]) == 1


# ---- item 2: every qualifier with a config -------------------------------------------------


def test_every_qualifier_with_a_config_is_engaged_and_restored_with_its_own_record(clients, ledger_table, settings):
    lam = clients("lambda")
    arn = make_function(clients, "f")
    version = lam.publish_version(FunctionName="f")["Version"]
    lam.create_alias(FunctionName="f", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumRetryAttempts=2,
                                         MaximumEventAgeInSeconds=21600)
    lam.put_function_event_invoke_config(FunctionName="f", Qualifier=version, MaximumRetryAttempts=0)

    out, _ = run(clients, settings, ledger_table, "async")
    assert {a: o.action for a, o in out.items()} == {arn: ENGAGED, f"{arn}:live": ENGAGED, f"{arn}:{version}": ENGAGED}
    assert config(clients, "f", "live") == {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 1,
                                            "DestinationConfig": {"OnFailure": {"Destination": QUEUE}}}
    tags = lam.list_tags(Resource=arn)["Tags"]
    assert {ORIGINAL_KEY, f"{ORIGINAL_KEY}:live", f"{ORIGINAL_KEY}:{version}"} <= set(tags)

    out, _ = run(clients, settings, ledger_table, "async", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    assert config(clients, "f", "live") == {"MaximumEventAgeInSeconds": 21600, "MaximumRetryAttempts": 2}
    assert config(clients, "f", version) == {"MaximumRetryAttempts": 0}
    assert config(clients, "f") is None
    assert not [k for k in lam.list_tags(Resource=arn)["Tags"] if k.startswith(("holdfast:original", "holdfast:applied"))]


def test_a_long_alias_name_is_keyed_by_a_hash_within_the_tag_key_limit():
    from holdfast.actuators.async_config import record_keys

    keys = record_keys("a" * 128)
    assert all(len(k) <= 128 for k in keys) and keys[0].startswith("holdfast:original:@")
    assert record_keys("live") == ("holdfast:original:live", "holdfast:applied:live")
    assert record_keys(None) == record_keys("$LATEST") == ("holdfast:original", "holdfast:applied")


def test_a_function_without_room_for_a_record_is_engaged_through_the_ledger_only_or_not_at_all(clients, ledger_table,
                                                                                               settings):
    """No room for the record tags: with the ledger, engaged through its record only (never
    a failure retried every tick); without it, not changed at all."""
    make_function(clients, "full", tags={f"owner-{i}": "x" for i in range(47)})   # 49 with selector and team
    out, _ = run(clients, settings, "no-such-table", "async")
    (outcome,) = out.values()
    assert outcome.action == "skipped" and "no room" in outcome.notes["record"]["why"]
    assert config(clients, "full") is None
    out, _ = run(clients, settings, ledger_table, "async")
    (outcome,) = out.values()
    assert outcome.action == "engaged" and outcome.recorded_in == ["ledger"] and "no room" in outcome.notes["record"]["why"]
    assert config(clients, "full") is not None
    assert not [k for k in clients("lambda").list_tags(Resource=outcome.arn)["Tags"] if k.startswith("holdfast:original")]


# ---- item 3: reserved concurrency (provisioned mode: test_esm_provisioned.py) ----------------


def test_caps_never_exceed_reserved_concurrency_and_an_owner_cap_above_it_is_reported(clients, ledger_table, settings):
    lam = clients("lambda")
    fn = make_function(clients, "consumer")
    lam.put_function_concurrency(FunctionName="consumer", ReservedConcurrentExecutions=10)
    over = make_mapping(clients, fn, "q-over", cap=50)
    none = make_mapping(clients, fn, "q-none")
    tiny = make_function(clients, "tiny")
    lam.put_function_concurrency(FunctionName="tiny", ReservedConcurrentExecutions=1)
    below = make_mapping(clients, tiny, "q-tiny")

    out, _ = run(clients, settings, ledger_table, "esm")
    assert out[over["EventSourceMappingArn"]].action == ENGAGED
    assert "above the function's reserved concurrency 10" in out[over["EventSourceMappingArn"]].notes["reserved"]["why"]
    assert out[below["EventSourceMappingArn"]].action == SKIPPED

    out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=lambda r: {"MaximumConcurrency": 100})
    assert out[none["EventSourceMappingArn"]].action == RAISED
    assert lam.get_event_source_mapping(UUID=none["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 10}
    assert lam.get_event_source_mapping(UUID=over["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 10}

    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    assert lam.get_event_source_mapping(UUID=over["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 50}   # exact


# ---- item 4: the capacity adjustment of RegisterScalableTarget ---------------------------


def test_a_service_scaled_above_its_maximum_is_skipped_not_scaled_in(clients, ledger_table, settings):
    inside = make_service_target(clients, "inside")
    above = make_service_target(clients, "above")
    clients("ecs").update_service(cluster="c", service="above", desiredCount=9)   # Max is 4

    # The emulation: a register moves the capacity into [Min, Max].
    clients("application-autoscaling").register_scalable_target(
        ServiceNamespace="ecs", ResourceId="service/c/inside", ScalableDimension="ecs:service:DesiredCount",
        SuspendedState={"DynamicScalingInSuspended": False})
    out, report = run(clients, settings, ledger_table, "scalable-target")
    assert out[inside].action == ENGAGED
    assert out[above].action == SKIPPED and "scale it in to 4" in out[above].notes["capacity"]["why"]
    desired = clients("ecs").describe_services(cluster="c", services=["above"])["services"][0]["desiredCount"]
    assert desired == 9
    assert report.failed == []

    # Scaled above its maximum while engaged: the restore leaves it alone too, and says so.
    clients("ecs").update_service(cluster="c", service="inside", desiredCount=7)
    out, _ = run(clients, settings, ledger_table, "scalable-target", "relax")
    assert out[inside].action == SKIPPED
    assert clients("ecs").describe_services(cluster="c", services=["inside"])["services"][0]["desiredCount"] == 7
    clients("ecs").update_service(cluster="c", service="inside", desiredCount=3)
    out, _ = run(clients, settings, ledger_table, "scalable-target", "relax")
    assert out[inside].action == RESTORED


# ---- item 9: ARNs of other partitions ------------------------------------------------------


def test_mappings_of_queues_in_govcloud_are_found(settings, aws):
    from moto.iam.models import iam_backends

    from holdfast.aws import Clients
    from holdfast.ledger.table import ensure_table

    gov = Clients(region="us-gov-west-1")
    ensure_table(gov("dynamodb"), "holdfast-ledger")
    # Moto's IAM API files every role under partition aws; GovCloud's Lambda looks in aws-us-gov.
    gov_role = iam_backends["123456789012"]["aws-us-gov"].create_role(
        "gov-fn", "{}", "/", None, "", [], None).arn
    fn = make_function(gov, "consumer", role_arn=gov_role)
    assert fn.startswith("arn:aws-us-gov:lambda:")
    mapping = make_mapping(gov, fn, "q")
    assert mapping["EventSourceArn"].startswith("arn:aws-us-gov:sqs:")
    out, _ = run(gov, settings, "holdfast-ledger", "esm", queue=None)
    assert [o.action for o in out.values()] == [ENGAGED]
    assert gov.partition == "aws-us-gov"


# ---- item 9: QUIC target groups are NLB target groups ---------------------------------------


def test_quic_target_groups_are_engaged_and_other_protocols_reported(clients, ledger_table, settings):
    from tests.support.fleet import make_target_group

    quic = make_target_group(clients, "quic", protocol="QUIC")
    tcp_quic = make_target_group(clients, "tcp-quic", protocol="TCP_QUIC")
    gwlb = make_target_group(clients, "geneve", protocol="GENEVE")
    assert clients("elbv2").describe_target_groups(TargetGroupArns=[quic])["TargetGroups"][0]["Protocol"] == "QUIC"
    out, report = run(clients, settings, ledger_table, "nlb")
    assert (out[quic].action, out[tcp_quic].action) == (ENGAGED, ENGAGED)
    assert out[gwlb].action == SKIPPED and "GENEVE" in out[gwlb].notes["protocol"]["why"]
    assert report.failed == []
