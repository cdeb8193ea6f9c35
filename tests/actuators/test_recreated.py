"""A resource deleted and created again at the same ARN is another resource: it never
inherits the record of the one Holdfast engaged (moto with the real engine; the async
config emulation keeps AWS's LastModified and deletes a function's configs with it).

- A Lambda function's ARN is its name. The record of a function since recreated is
  retired (reported with its values) and the new function is engaged afresh; its restore
  gives back its own config, never the old function's.
- A tag an IaC apply stripped from the same function is not a recreation: the record holds.
- Target groups carry a unique id in their ARN, so one recreated under its name is a new
  ARN: engaged afresh, the old record forgotten as vanished.
"""

from __future__ import annotations

import pytest

from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, RESTORED, VANISHED
from holdfast.core.tags import ORIGINAL_KEY, RECORD_KEYS
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import make_function, make_target_group

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired-events"
OPTIONS = {"kinds": ("async",), "expired_queue_arn": QUEUE}


def config(clients, name="f") -> tuple:
    c = clients("lambda").get_function_event_invoke_config(FunctionName=name)
    return c.get("MaximumRetryAttempts"), c.get("MaximumEventAgeInSeconds"), c.get("DestinationConfig")


def test_a_function_deleted_and_recreated_under_its_name_is_engaged_afresh_and_restored_to_its_own_config(
        clients, ledger_table):
    lam = clients("lambda")
    # GIVEN function f (2 retries, 7,200 s) engaged
    make_function(clients, "f")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=2, MaximumEventAgeInSeconds=7200)
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes
    assert outcome.action == ENGAGED

    # WHEN it is deleted and a new f is created (1 retry, 3,600 s), and the walk comes round again
    lam.delete_function(FunctionName="f")
    make_function(clients, "f")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=1, MaximumEventAgeInSeconds=3600)
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes

    # THEN the new f is protected like any function, and the old record is reported, not used
    assert outcome.action == ENGAGED and outcome.drift == {}, outcome
    assert outcome.notes["recreated"]["retired"]["original"]["max_retries"] == 2
    retries, age, destination = config(clients)
    assert retries == SETTINGS.async_max_retry_attempts and age == SETTINGS.async_max_event_age_seconds
    [record] = ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records()
    assert record.original["max_age"] == 3600 and record.original.get("max_retries", 1) == 1

    # AND its restore gives back its own config
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes
    assert (outcome.action, outcome.drift) == (RESTORED, {})
    assert config(clients) == (1, 3600, None)


def test_a_recreated_function_found_by_a_restore_is_left_as_its_owner_made_it(clients, ledger_table):
    lam = clients("lambda")
    make_function(clients, "f")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=2, MaximumEventAgeInSeconds=7200)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    lam.delete_function(FunctionName="f")
    make_function(clients, "f")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=SETTINGS.async_max_retry_attempts,
                                         MaximumEventAgeInSeconds=3600)

    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes

    assert outcome.action == ALREADY and "recreated" in outcome.notes
    assert config(clients) == (SETTINGS.async_max_retry_attempts, 3600, None)
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []


def test_a_tag_stripped_from_the_same_function_keeps_its_record(clients, ledger_table):
    lam = clients("lambda")
    arn = make_function(clients, "f")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=2, MaximumEventAgeInSeconds=7200)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    lam.untag_resource(Resource=arn, TagKeys=list(RECORD_KEYS))   # what an IaC apply does to tags it does not know

    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes
    assert outcome.action == ALREADY and "recreated" not in outcome.notes
    assert ORIGINAL_KEY in lam.list_tags(Resource=arn)["Tags"]   # written again from the ledger
    [outcome] = walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS).outcomes
    assert outcome.action == RESTORED and config(clients) == (2, 7200, None)


def test_a_target_group_recreated_under_its_name_is_a_new_arn_engaged_afresh(clients, ledger_table):
    elb = clients("elbv2")
    old = make_target_group(clients, "web")
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("nlb",)).outcomes
    assert outcome.action == ENGAGED
    elb.delete_target_group(TargetGroupArn=old)
    new = make_target_group(clients, "web", attributes={
        "target_group_health.dns_failover.minimum_healthy_targets.count": "2"})
    assert new != old

    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("nlb",)).outcomes
    assert (outcome.arn, outcome.action) == (new, ENGAGED)
    outcomes = {o.arn: o for o in walks.relax_all(clients, SETTINGS, ledger_table, kinds=("nlb",)).outcomes}
    assert outcomes[old].action == VANISHED and outcomes[new].action == RESTORED
    attributes = {a["Key"]: a["Value"] for a in elb.describe_target_group_attributes(TargetGroupArn=new)["Attributes"]}
    assert attributes["target_group_health.dns_failover.minimum_healthy_targets.count"] == "2"


def _target(service):
    from moto.applicationautoscaling.models import applicationautoscaling_backends

    backend = applicationautoscaling_backends["123456789012"]["us-east-1"]
    return backend.targets["ecs:service:DesiredCount"][f"service/c/{service}"]


def test_a_scalable_target_registered_again_at_the_same_arn_is_engaged_afresh(clients, ledger_table):
    """Whether AWS gives a target deregistered and registered again a new ARN is not in the
    API reference (moto does); if it keeps the ARN, the target's CreationTime tells them apart."""
    from tests.support.fleet import describe_target, make_service_target

    aas = clients("application-autoscaling")
    arn = make_service_target(clients, "web")
    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("scalable-target",)).outcomes
    assert outcome.action == ENGAGED and describe_target(clients, "web")["SuspendedState"]["DynamicScalingInSuspended"]

    # the service's target deregistered and registered again by its owner, scale-in suspended this time
    aas.deregister_scalable_target(ServiceNamespace="ecs", ResourceId="service/c/web",
                                   ScalableDimension="ecs:service:DesiredCount")
    aas.register_scalable_target(ServiceNamespace="ecs", ResourceId="service/c/web",
                                 ScalableDimension="ecs:service:DesiredCount", MinCapacity=1, MaxCapacity=4,
                                 SuspendedState={"DynamicScalingInSuspended": True})
    target = _target("web")
    target.arn, target.creation_time = arn, target.creation_time + 60   # the same ARN, created later

    [outcome] = walks.engage_all(clients, SETTINGS, ledger_table, kinds=("scalable-target",)).outcomes
    # its restore leaves the owner's suspension: nothing of the old target's record is applied
    walks.relax_all(clients, SETTINGS, ledger_table, kinds=("scalable-target",))
    assert describe_target(clients, "web")["SuspendedState"]["DynamicScalingInSuspended"] is True
    assert outcome.action == ALREADY and "recreated" in outcome.notes
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).records() == []


# ---- an alias deleted and created again on a function that lives on ---------------------
# Lambda tags functions only, so an alias's record is on its function's tags and outlives
# the alias. The alias's RevisionId (GetAlias: "a unique identifier that changes when you
# update the alias") is recorded with the config's LastModified after Holdfast's write.

ALIAS = "arn:aws:lambda:us-east-1:123456789012:function:f:live"


def aliased(clients, retries=2, age=7200) -> None:
    lam = clients("lambda")
    make_function(clients, "f")
    version = lam.publish_version(FunctionName="f")["Version"]
    lam.create_alias(FunctionName="f", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumRetryAttempts=retries,
                                         MaximumEventAgeInSeconds=age)


def alias_config(clients) -> tuple:
    c = clients("lambda").get_function_event_invoke_config(FunctionName="f", Qualifier="live")
    return c.get("MaximumRetryAttempts"), c.get("MaximumEventAgeInSeconds"), c.get("DestinationConfig")


def recreate_alias(clients, retries, age, *, config_kept=True) -> None:
    """The owner deletes alias live and creates it again, with a config of its own.
    `config_kept`: whether the old alias's config outlived it (DeleteAlias's reference does
    not say; False deletes it first, as a DeleteAlias that took it would)."""
    lam = clients("lambda")
    version = lam.get_alias(FunctionName="f", Name="live")["FunctionVersion"]
    if not config_kept:
        lam.delete_function_event_invoke_config(FunctionName="f", Qualifier="live")
    lam.delete_alias(FunctionName="f", Name="live")
    lam.create_alias(FunctionName="f", Name="live", FunctionVersion=version)
    lam.put_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumRetryAttempts=retries,
                                         MaximumEventAgeInSeconds=age)


def alias_outcome(result):
    return next(o for o in result.outcomes if o.arn == ALIAS)


@pytest.mark.parametrize("config_kept", [True, False])
def test_an_alias_deleted_and_recreated_on_a_living_function_is_engaged_afresh_and_restored_to_its_own_config(
        clients, ledger_table, config_kept):
    # GIVEN alias live of f (2 retries, 7,200 s) engaged
    aliased(clients)
    assert alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)).action == ENGAGED

    # WHEN the owner deletes live and creates it again (1 retry, 3,600 s), and the walk comes round
    recreate_alias(clients, 1, 3600, config_kept=config_kept)
    outcome = alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))

    # THEN the new live is protected like any alias, and the old record is reported, not used
    assert outcome.action == ENGAGED and outcome.drift == {}, outcome
    assert outcome.notes["recreated"]["retired"]["original"]["max_retries"] == 2
    retries, age, _ = alias_config(clients)
    assert retries == SETTINGS.async_max_retry_attempts and age == SETTINGS.async_max_event_age_seconds
    record = ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).get(ALIAS)
    assert record.original["max_age"] == 3600 and record.original.get("max_retries", 1) == 1

    # AND its restore gives back its own config
    outcome = alias_outcome(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert (outcome.action, outcome.drift) == (RESTORED, {})
    assert alias_config(clients) == (1, 3600, None)


def test_a_recreated_alias_found_by_a_restore_is_left_as_its_owner_made_it_and_its_old_tag_removed(
        clients, ledger_table):
    aliased(clients)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    recreate_alias(clients, SETTINGS.async_max_retry_attempts, 3600)

    outcome = alias_outcome(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert outcome.action == ALREADY and "recreated" in outcome.notes
    assert alias_config(clients) == (SETTINGS.async_max_retry_attempts, 3600, None)
    assert ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).get(ALIAS) is None
    # the old alias's record is gone from f's tags too: no later walk takes it for the new alias's
    tags = clients("lambda").list_tags(Resource=make_arn("f"))["Tags"]
    assert not [k for k in tags if k.startswith(ORIGINAL_KEY)], tags
    walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS)
    assert alias_config(clients) == (SETTINGS.async_max_retry_attempts, 3600, None)


def test_an_alias_repointed_while_engaged_keeps_its_record(clients, ledger_table):
    """A new RevisionId alone (the alias moved to another version, as a deployment does) is
    not a recreation: the config is still the one Holdfast wrote."""
    lam = clients("lambda")
    aliased(clients)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    before = lam.get_alias(FunctionName="f", Name="live")["RevisionId"]
    lam.update_function_configuration(FunctionName="f", Description="v2")
    version = lam.publish_version(FunctionName="f")["Version"]
    lam.update_alias(FunctionName="f", Name="live", FunctionVersion=version)
    assert lam.get_alias(FunctionName="f", Name="live")["RevisionId"] != before

    outcome = alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert outcome.action == ALREADY and "recreated" not in outcome.notes
    outcome = alias_outcome(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert outcome.action == RESTORED and alias_config(clients) == (2, 7200, None)


def test_an_alias_whose_owner_changed_its_config_while_engaged_keeps_its_record_and_the_owners_change(
        clients, ledger_table):
    """The same RevisionId: the same alias, whatever its config's LastModified says."""
    lam = clients("lambda")
    aliased(clients)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    lam.update_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumEventAgeInSeconds=600)

    outcome = alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert "recreated" not in outcome.notes and "max_age" in outcome.drift
    outcome = alias_outcome(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert outcome.action == DRIFT_KEPT and "recreated" not in outcome.notes
    assert alias_config(clients)[:2] == (2, 600)


def make_arn(name) -> str:
    return f"arn:aws:lambda:us-east-1:123456789012:function:{name}"


def test_an_alias_whose_getalias_is_denied_is_engaged_and_keeps_its_record(clients, ledger_table):
    """GetAlias denied, as AWS answers a role without lambda:GetAlias (403
    AccessDeniedException): the engage stands without the alias's RevisionId, and the record
    is trusted as before the check: the owner's change is kept, the rest restored exactly."""
    from botocore.exceptions import ClientError

    calls = []

    def denied(**_):
        calls.append("GetAlias")
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized: lambda:GetAlias"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetAlias")

    lam = clients("lambda")
    aliased(clients)
    lam.meta.events.register("before-call.lambda.GetAlias", denied)
    assert alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)).action == ENGAGED
    assert calls   # the check was asked, and answered with a denial
    lam.update_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumEventAgeInSeconds=600)
    outcome = alias_outcome(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert "recreated" not in outcome.notes
    outcome = alias_outcome(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert outcome.action == DRIFT_KEPT and alias_config(clients)[:2] == (2, 600)
