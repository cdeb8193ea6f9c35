"""Every kind through engage -> restore, with owner states that make it hard, and an
unselected twin of each that must stay byte-for-byte unchanged."""

from __future__ import annotations

import pytest

from holdfast.actuators.nlb import ATTRIBUTES
from holdfast.core.model import ALREADY, DRIFT_KEPT, ENGAGED, RAISED, RESTORED, SKIPPED
from holdfast.core.tags import RECORD_KEYS
from tests.support import walks
from tests.support.fleet import (
    describe_target,
    make_function,
    make_mapping,
    make_service_target,
    make_target_group,
)

QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired"
pytestmark = pytest.mark.usefixtures("aws_semantics")


def bare(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def run(clients, settings, ledger_table, kind, verb="engage", **kw):
    fn = walks.engage_all if verb == "engage" else walks.relax_all
    report = fn(clients, settings, ledger_table, kinds=(kind,), expired_queue_arn=QUEUE, **kw)
    return {o.arn: o for o in report.outcomes}, report


# ---- event source mappings ---------------------------------------------------------------


def mapping(clients, uuid):
    m = clients("lambda").get_event_source_mapping(UUID=uuid)
    return m.get("ScalingConfig") or {}, clients("lambda").list_tags(Resource=m["EventSourceMappingArn"])["Tags"]


def test_mappings_capped_at_floor_low_caps_kept_and_no_cap_restored_as_none(clients, ledger_table, settings):
    fn = make_function(clients, "consumer")
    none = make_mapping(clients, fn, "q-none")
    low = make_mapping(clients, fn, "q-low", cap=2)  # at the floor already: never raised
    high = make_mapping(clients, fn, "q-high", cap=50, enabled=False)
    own = make_mapping(clients, make_function(clients, "other", selected=False), "q-own", tags={"holdfast:protect": "true"})
    twin = make_mapping(clients, make_function(clients, "twin", selected=False), "q-twin", cap=10)
    twin_before = bare(clients("lambda").get_event_source_mapping(UUID=twin["UUID"]))

    out, report = run(clients, settings, ledger_table, "esm")
    actions = {m["UUID"]: out[m["EventSourceMappingArn"]].action for m in (none, low, high, own)}
    assert actions == {none["UUID"]: ENGAGED, low["UUID"]: ALREADY, high["UUID"]: ENGAGED, own["UUID"]: ENGAGED}
    assert twin["EventSourceMappingArn"] not in out
    assert mapping(clients, none["UUID"])[0] == {"MaximumConcurrency": 2}
    assert mapping(clients, high["UUID"])[0] == {"MaximumConcurrency": 2}

    # a partial relax raises toward the target but never above the original
    out, _ = run(clients, settings, ledger_table, "esm", "relax", target_for=lambda r: {"MaximumConcurrency": 100})
    assert out[high["EventSourceMappingArn"]].action == RAISED
    assert mapping(clients, high["UUID"])[0] == {"MaximumConcurrency": 50}
    assert mapping(clients, none["UUID"])[0] == {"MaximumConcurrency": 100}

    out, _ = run(clients, settings, ledger_table, "esm", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    cfg, tags = mapping(clients, none["UUID"])
    assert cfg.get("MaximumConcurrency") is None and not set(RECORD_KEYS) & set(tags)
    assert mapping(clients, high["UUID"])[0] == {"MaximumConcurrency": 50}
    assert mapping(clients, own["UUID"])[1] == {"holdfast:protect": "true"}
    assert bare(clients("lambda").get_event_source_mapping(UUID=twin["UUID"])) == twin_before


# ---- async invoke configs ----------------------------------------------------------------


def config(clients, name):
    try:
        c = clients("lambda").get_function_event_invoke_config(FunctionName=name)
    except clients("lambda").exceptions.ResourceNotFoundException:
        return None
    return {k: v for k, v in c.items() if k not in ("ResponseMetadata", "LastModified", "FunctionArn")}


def test_async_no_config_gets_none_back_and_owner_destination_is_kept(clients, ledger_table, settings):
    lam = clients("lambda")
    make_function(clients, "bare")
    make_function(clients, "owned")
    owner = {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 0,
             "DestinationConfig": {"OnFailure": {"Destination": "arn:aws:sqs:us-east-1:123456789012:owner-dlq"}}}
    lam.put_function_event_invoke_config(FunctionName="owned", **owner)
    make_function(clients, "twin", selected=False)
    lam.put_function_event_invoke_config(FunctionName="twin", MaximumRetryAttempts=2)
    twin_before = config(clients, "twin")

    out, _ = run(clients, settings, ledger_table, "async")
    assert {arn.split(":")[-1]: o.action for arn, o in out.items()} == {"bare": ENGAGED, "owned": ENGAGED}
    assert config(clients, "bare") == {"MaximumEventAgeInSeconds": 900, "MaximumRetryAttempts": 1,
                                       "DestinationConfig": {"OnFailure": {"Destination": QUEUE}}}
    # Only the age was above the engaged value; the owner's retries (0) and destination stay.
    assert config(clients, "owned") == {**owner, "MaximumEventAgeInSeconds": 900}

    out, _ = run(clients, settings, ledger_table, "async", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    assert config(clients, "bare") is None
    assert config(clients, "owned") == owner
    assert lam.list_tags(Resource=lam.get_function(FunctionName="owned")["Configuration"]["FunctionArn"])["Tags"] == {
        "holdfast:protect": "true", "team": "owner"}
    assert config(clients, "twin") == twin_before


def test_async_drift_is_kept_and_reported(clients, ledger_table, settings):
    make_function(clients, "f")
    run(clients, settings, ledger_table, "async")
    clients("lambda").update_function_event_invoke_config(FunctionName="f", MaximumRetryAttempts=0)

    out, _ = run(clients, settings, ledger_table, "async", "relax")
    (outcome,) = out.values()
    assert outcome.action == DRIFT_KEPT
    assert outcome.drift == {"max_retries": {"original": None, "applied": 1, "current": 0}}
    # the config stays, because the owner's drifted value lives in it; Holdfast's parts are gone
    assert config(clients, "f") == {"MaximumRetryAttempts": 0}


# ---- NLB target groups -------------------------------------------------------------------


def attributes(clients, arn):
    return {a["Key"]: a["Value"] for a in clients("elbv2").describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]}


def test_nlb_custom_thresholds_restored_and_defaults_treated_as_aws_defaults(clients, ledger_table, settings):
    custom = {"target_group_health.dns_failover.minimum_healthy_targets.count": "3",
              "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count": "2"}
    tuned = make_target_group(clients, "tuned", attributes=custom)
    plain = make_target_group(clients, "plain")
    alb = make_target_group(clients, "http", protocol="HTTP")
    twin = make_target_group(clients, "twin", selected=False, attributes=custom)
    before = {arn: attributes(clients, arn) for arn in (tuned, plain, alb, twin)}

    out, _ = run(clients, settings, ledger_table, "nlb")
    assert set(out) == {tuned, plain, alb}
    assert out[alb].action == "skipped" and "not a Network Load Balancer" in out[alb].notes["protocol"]["why"]
    engaged = attributes(clients, tuned)
    assert engaged["target_group_health.dns_failover.minimum_healthy_targets.count"] == "off"
    assert engaged["target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage"] == "50"
    assert out[plain].changes["dns_count"] == {"from": "1", "to": "off"}

    out, _ = run(clients, settings, ledger_table, "nlb", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    # moto stores no defaults, AWS always returns them: an absent attribute was the AWS default.
    aws_view = {name: default for name, default in ATTRIBUTES.values()}
    assert {**aws_view, **attributes(clients, tuned)} == {**aws_view, **before[tuned]}
    assert attributes(clients, alb) == before[alb] and attributes(clients, twin) == before[twin]
    assert attributes(clients, plain)["target_group_health.dns_failover.minimum_healthy_targets.count"] == "1"


# ---- Application Auto Scaling targets ----------------------------------------------------


def test_scalable_target_keeps_owner_flags(clients, ledger_table, settings):
    owner = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": True}
    by_service = make_service_target(clients, "web", suspended=owner)
    by_tag = make_service_target(clients, "api", tag_service=False, tag_target=True)
    make_service_target(clients, "twin", tag_service=False)
    twin_before = describe_target(clients, "twin")

    out, _ = run(clients, settings, ledger_table, "scalable-target")
    assert set(out) == {by_service, by_tag}
    assert describe_target(clients, "web")["SuspendedState"] == {**owner, "DynamicScalingInSuspended": True}
    # Selected by its own tag, its service untagged: Holdfast's role may not UpdateService there
    # (the condition on ecs:UpdateService), so its register would be refused: skipped, saying why.
    assert out[by_tag].action == SKIPPED and "does not carry the selector" in out[by_tag].error, out[by_tag]
    assert "tag-resource" in out[by_tag].notes["selector"]["fix"]
    assert not (describe_target(clients, "api").get("SuspendedState") or {}).get("DynamicScalingInSuspended")

    out, _ = run(clients, settings, ledger_table, "scalable-target", "relax")
    assert {o.action for o in out.values()} == {RESTORED}
    assert describe_target(clients, "web")["SuspendedState"] == owner
    assert clients("application-autoscaling").list_tags_for_resource(ResourceARN=by_tag)["Tags"] == {"holdfast:protect": "true"}
    assert describe_target(clients, "twin") == twin_before


def test_re_engaging_keeps_a_value_the_owner_changed_while_engaged(clients, ledger_table, settings):
    """GIVEN an engaged target group whose owner then sets their own routing threshold,
    WHEN engage runs again (a new generation, a second controller), THEN it writes nothing
    over the owner's value, reports it, and the restore keeps it."""
    routing_pct = "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage"
    arn = make_target_group(clients, "owned")
    run(clients, settings, ledger_table, "nlb")
    assert attributes(clients, arn)[routing_pct] == "50"
    clients("elbv2").modify_target_group_attributes(TargetGroupArn=arn, Attributes=[{"Key": routing_pct, "Value": "60"}])

    out, _ = run(clients, settings, ledger_table, "nlb")
    assert out[arn].action == ALREADY
    assert out[arn].drift["routing_pct"]["current"] == "60"
    assert attributes(clients, arn)[routing_pct] == "60"

    out, _ = run(clients, settings, ledger_table, "nlb", "relax")
    assert out[arn].action == DRIFT_KEPT
    assert attributes(clients, arn)[routing_pct] == "60"
