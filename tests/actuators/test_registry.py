"""The kind registry: each kind declared once (core.kinds), each served by one actuator,
and everything that lists kinds derived from it: the rate budgets and the engine's lanes,
the audit's rule and reader, doctor's simulated writes, the evidence the gates read, and
which kind the drain's controller drives."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import botocore.session
import pytest

from holdfast import budget, engine, iam
from holdfast.cli import account_audit, audit_rules, readiness
from holdfast.actuators import ACTUATORS, REGISTRY, _registry
from holdfast.actuators.tagged import TaggedActuator
from holdfast.core import evidence, kinds, policy
from holdfast.stages import drain as drain_stage
from holdfast.settings import Settings

POLICIES = Path(__file__).resolve().parents[2] / "policies"
# The client each budgeted service is reached with (botocore's service name).
CLIENT_OF = {"lambda": "lambda", "autoscaling": "autoscaling", "elasticloadbalancing": "elbv2",
             "application-autoscaling": "application-autoscaling", "tagging": "resourcegroupstaggingapi"}


def test_every_kind_has_one_actuator_and_every_actuator_a_kind():
    assert list(REGISTRY) == list(kinds.KINDS)
    assert {cls.spec for cls in ACTUATORS} == set(kinds.ALL)
    for name, cls in REGISTRY.items():
        assert cls.kind == name and not inspect.isabstract(cls)


def test_each_kind_declares_everything_the_rest_derives_from():
    for kind in kinds.ALL:
        assert kind.label and kind.name
        assert kind.relaxed_in in policy.STAGES
        assert callable(getattr(audit_rules, kind.audit_rule, None)), f"{kind.name}: audit rule {kind.audit_rule} missing"
        reader = getattr(account_audit, kind.audit_reader, None)
        assert inspect.isfunction(reader), f"{kind.name}: audit reader {kind.audit_reader} missing"
        assert account_audit.READERS[kind.name] is reader
        assert kind.service in kinds.SERVICES
        assert kind.evidence in (None, evidence.DRAIN, evidence.ROUTING), f"{kind.name}: evidence {kind.evidence!r}"
        assert kind.names(readiness.sample_arn(kind.name, "aws", "us-east-1", "123456789012")), kind.name
    assert set(account_audit.READERS) == set(kinds.KINDS)
    assert (kinds.DRAIN_EVIDENCE, kinds.ROUTING_EVIDENCE) == (evidence.DRAIN, evidence.ROUTING)


def test_every_kinds_service_has_its_rate_budget_and_its_calls_spend_it():
    """A kind's calls are budgeted because it declares its service: the budget exists, the
    Governor routes the service's botocore id to it, and the engine walks it in its lane."""
    session = botocore.session.get_session()
    for service in kinds.SERVICES:
        assert service.name in budget.DEFAULT_SPECS
        spec = budget.DEFAULT_SPECS[service.name]
        assert (spec.ceiling, spec.start) == (service.ceiling, service.start)
        assert session.get_service_model(CLIENT_OF[service.name]).service_id.hyphenize() == service.botocore_id
        assert budget.route(service.botocore_id, "AnyWrite") == service.name
    for kind in kinds.ALL:
        assert engine.SERVICE_OF[kind.name] == kind.service.name
        actions = {a for site, declared in iam.SITES.items() for a in declared
                   if any(site.startswith(f"{c.__module__}.{c.__qualname__}.") for c in REGISTRY[kind.name].__mro__)}
        assert any(a.startswith(kind.service.name + ":") for a in actions), f"{kind.name} calls no {kind.service.name}"


def test_doctor_simulates_every_write_each_actuator_declares_and_the_policy_grants_it():
    settings = Settings()
    granted = set()
    for statement in json.loads((POLICIES / "reconciler.json").read_text())["Statement"]:
        if statement["Effect"] == "Allow":
            granted.update([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    for kind in kinds.ALL:
        requests = readiness.kind_requests(kind.name, readiness.sample_arn(kind.name, "aws", "us-east-1", "1"), settings)
        assert requests, f"{kind.name}: no writes declared"
        for action, context in requests:
            assert action in granted, f"{kind.name}: {action} not granted"
            assert not action.split(":")[1].startswith(readiness.READ_VERBS)
    key, value = settings.selector_key, settings.selector_value
    tagged = {f"aws:ResourceTag/{key}": value, f"autoscaling:ResourceTag/{key}": value}
    # The contexts the kinds declare: Auto Scaling's own ResourceTag key beside aws:'s, and
    # RegisterScalableTarget's service namespace (not the target's tags).
    def requests(kind):
        return sorted((a, sorted(c.items())) for a, c in readiness.kind_requests(kind, "arn", settings))

    assert requests("asg") == sorted((a, sorted(c.items())) for a, c in [
        ("autoscaling:SuspendProcesses", tagged), ("autoscaling:ResumeProcesses", tagged),
        ("autoscaling:CreateOrUpdateTags", {**tagged, "aws:TagKeys": readiness.TAG_KEYS}),
        ("autoscaling:DeleteTags", {**tagged, "aws:TagKeys": readiness.TAG_KEYS})])
    assert requests("scalable-target") == sorted((a, sorted(c.items())) for a, c in [
        ("application-autoscaling:RegisterScalableTarget", {"application-autoscaling:service-namespace": "ecs"}),
        ("application-autoscaling:TagResource", {"aws:TagKeys": readiness.TAG_KEYS}),
        ("application-autoscaling:UntagResource", {"aws:TagKeys": readiness.TAG_KEYS})])
    assert requests("esm") == sorted((a, sorted(c.items())) for a, c in [
        ("lambda:UpdateEventSourceMapping", {}), ("lambda:TagResource", {"aws:TagKeys": readiness.TAG_KEYS}),
        ("lambda:UntagResource", {"aws:TagKeys": readiness.TAG_KEYS})])


def test_the_drain_controller_drives_exactly_the_kinds_declared_controlled():
    """Being relaxed in `drain` does not make a kind controlled: only its declaration does,
    and the one kind the drain stage drives is that one."""
    assert kinds.CONTROLLED == {k.name for k in kinds.ALL if k.controlled} == {drain_stage.KIND}
    assert policy.CONTROLLED == kinds.CONTROLLED
    for name in kinds.CONTROLLED:
        assert kinds.BY_NAME[name].relaxed_in == kinds.DRAIN
    plain = dataclasses.replace(kinds.ESM, name="plain", controlled=False)
    assert plain.relaxed_in == kinds.DRAIN and plain.name not in kinds.CONTROLLED


def test_the_evidence_reads_the_held_resources_of_the_kinds_that_declare_it():
    held = {"esm": {"m"}, "nlb": {"t"}, "asg": {"g"}}
    assert kinds.held_by_evidence(held, evidence.DRAIN) == {"m"}
    assert kinds.held_by_evidence(held, evidence.ROUTING) == {"t"}
    assert kinds.held_by_evidence({}, evidence.ROUTING) == set()


def test_a_kind_without_an_actuator_or_an_actuator_without_a_kind_fails_at_import():
    with pytest.raises(TypeError, match="no actuator for kind"):
        _registry(ACTUATORS[1:])

    class Undeclared(TaggedActuator):
        pass

    with pytest.raises(TypeError, match="declares no Kind"):
        _registry((*ACTUATORS, Undeclared))

    class Twin(ACTUATORS[0]):
        spec = ACTUATORS[0].spec

    with pytest.raises(TypeError, match="both serve"):
        _registry((*ACTUATORS, Twin))


@pytest.mark.parametrize("arn, kind", [
    ("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:uuid:autoScalingGroupName/web", "asg"),
    ("arn:aws-us-gov:lambda:us-gov-west-1:123456789012:event-source-mapping:abc", "esm"),
    ("arn:aws-cn:lambda:cn-north-1:123456789012:function:f", "async"),
    ("arn:aws:lambda:us-east-1:123456789012:function:f:live", "async"),
    ("arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/tg/0123", "nlb"),
    ("arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/0abc", "scalable-target"),
])
def test_kind_of_reads_every_partition(arn, kind):
    assert kinds.kind_of(arn) == kind


def test_kind_of_names_what_it_does_not_manage():
    with pytest.raises(ValueError, match="not an ARN"):
        kinds.kind_of("web")
    with pytest.raises(ValueError, match="not a resource kind Holdfast manages"):
        kinds.kind_of("arn:aws:s3:::bucket/key")
