"""The kind registry: each kind declared once (core.kinds), each served by one actuator,
and everything that lists kinds derived from it."""

from __future__ import annotations

import inspect

import pytest

from holdfast.cli import account_audit, audit_rules
from holdfast.actuators import ACTUATORS, REGISTRY, _registry
from holdfast.actuators.tagged import TaggedActuator
from holdfast.core import kinds, policy


def test_every_kind_has_one_actuator_and_every_actuator_a_kind():
    assert list(REGISTRY) == list(kinds.KINDS)
    assert {cls.spec for cls in ACTUATORS} == set(kinds.ALL)
    for name, cls in REGISTRY.items():
        assert cls.kind == name and not inspect.isabstract(cls)


def test_each_kind_declares_everything_the_rest_derives_from():
    for kind in kinds.ALL:
        assert kind.label and kind.name
        assert kind.relaxed_in in policy.STAGES
        assert callable(getattr(audit_rules, kind.audit_rule)), f"{kind.name}: audit rule {kind.audit_rule} missing"
    assert set(account_audit.READERS) == set(kinds.KINDS)


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
