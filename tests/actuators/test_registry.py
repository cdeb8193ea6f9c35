"""The kind registry: each kind declared once (core.kinds), each served by one actuator,
and everything that lists kinds derived from it: the rate budgets and the engine's lanes,
the audit's rule (pure, beside the declaration) and reader (the actuator's `audit`), doctor's simulated writes, the evidence the gates read, and
which kind the drain's controller drives."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path

import botocore.session
import pytest

from holdfast import budget, engine, iam, readiness
from holdfast.actuators import ACTUATORS, REGISTRY, _registry
from holdfast.actuators.tagged import TaggedActuator
from holdfast.cli import account_audit
from holdfast.core import evidence, kinds, policy
from holdfast.settings import Settings
from holdfast.stages import drain as drain_stage

POLICIES = Path(__file__).resolve().parents[2] / "policies"
# The client each budgeted service is reached with (botocore's service name).
CLIENT_OF = {"lambda": "lambda", "autoscaling": "autoscaling", "elasticloadbalancing": "elbv2",
             "application-autoscaling": "application-autoscaling", "tagging": "resourcegroupstaggingapi"}


def test_every_kind_has_one_actuator_and_every_actuator_a_kind():
    assert list(REGISTRY) == list(kinds.KINDS)
    assert {cls.spec for cls in ACTUATORS} == set(kinds.ALL)
    for name, cls in REGISTRY.items():
        assert cls.kind == name and not inspect.isabstract(cls)


READS = ("Describe", "List", "Get")


def _audit_reads(actuator) -> set[str]:
    return iam.SITES.get(f"{actuator.__module__}.{actuator.__qualname__}.audit", set())


# Kind property -> what makes it usable by what derives from it: a message, or None.
CHECKS = {
    "name": lambda k, act: None if re.fullmatch(r"[a-z][a-z-]*", k.name) and act.kind == k.name
    and list(kinds.KINDS).count(k.name) == 1 else f"name {k.name!r}: not a unique lowercase word served by {act.__name__}",
    "label": lambda k, act: None if isinstance(k.label, str) and k.label.strip() else f"{k.name}: no label",
    "arn_pattern": lambda k, act: None if isinstance(k.arn_pattern, str) and k.names(_sample(k))
    and not k.names("arn:aws:s3:::bucket") else f"{k.name}: arn_pattern does not name its sample ARN",
    "relaxed_in": lambda k, act: None if k.relaxed_in in policy.STAGES[2:] else f"{k.name}: relaxed_in {k.relaxed_in!r}",
    # The rule is pure (in the core) and its actuator's reader is the kind's own, declaring
    # the reads it makes on the kind's service for the CLI.
    "audit_rule": lambda k, act: None if inspect.isfunction(k.audit_rule)
    and k.audit_rule.__module__.startswith("holdfast.core.") and "audit" in act.__dict__
    and not getattr(act.audit, "__isabstractmethod__", False)
    and any(a.startswith(k.service.name + ":") for a in _audit_reads(act))
    and all(a.split(":")[1].startswith(READS) for a in _audit_reads(act))
    else f"{k.name}: audit rule {k.audit_rule!r} not a core function, or {act.__name__}.audit not its reader",
    "service": lambda k, act: None if k.service in kinds.SERVICES and k.service.name in budget.DEFAULT_SPECS
    and engine.SERVICE_OF.get(k.name) == k.service.name else f"{k.name}: service {k.service!r} has no budget or lane",
    "sample_arn": lambda k, act: None if kinds.kind_of(_sample(k)) == k.name else f"{k.name}: sample ARN is another kind's",
    "tag_condition_prefixes": lambda k, act: None if isinstance(k.tag_condition_prefixes, tuple)
    and set(k.tag_condition_prefixes) <= {"aws", k.service.name}
    else f"{k.name}: tag_condition_prefixes {k.tag_condition_prefixes!r}",
    "write_context": lambda k, act: None if isinstance(k.write_context, tuple)
    and all(len(pair) == 2 and pair[0].startswith(k.service.name + ":") for pair in k.write_context)
    else f"{k.name}: write_context {k.write_context!r}",
    "controlled": lambda k, act: None if isinstance(k.controlled, bool)
    and k.controlled == (k.name == drain_stage.KIND) and (not k.controlled or k.relaxed_in == kinds.DRAIN)
    else f"{k.name}: controlled={k.controlled!r}, but the drain stage drives {drain_stage.KIND}",
    "evidence": lambda k, act: None if k.evidence in (None, evidence.DRAIN, evidence.ROUTING)
    else f"{k.name}: evidence {k.evidence!r}",
    # Every key the actuator records is said in words and named as a setting (the keys an
    # engaged resource records are checked against `keys` in tests/cli/test_status_words.py).
    "words": lambda k, act: None if isinstance(k.words, kinds.Words) and k.words.keys
    and all(_says(k.words, key) for key in k.words.keys)
    else f"{k.name}: words leave keys unsaid: {[key for key in getattr(k.words, 'keys', ()) if not _says(k.words, key)]}",
}


def _says(words, key: str) -> bool:
    """A phrase for a change of `key` either way, and a setting name that is not the key itself."""
    return all(isinstance(words.change(key, old, new), str) and words.change(key, old, new).strip()
               for old, new in ((None, 1), (1, None), (True, False))) \
        and (words.setting(key) or key) != key


def _sample(kind) -> str:
    try:
        return kind.sample_arn.format(partition="aws", region="us-east-1", account="123456789012")
    except (AttributeError, KeyError, IndexError):
        return ""


def undeclared(kind, actuator) -> list[str]:
    problems = []
    for check in CHECKS.values():
        try:
            problem = check(kind, actuator)
        except (TypeError, ValueError, AttributeError) as err:
            problem = f"{kind.name}: {err}"
        if problem:
            problems.append(problem)
    return problems


def test_every_kind_property_has_a_check_and_every_kind_passes_them():
    assert set(CHECKS) == {f.name for f in dataclasses.fields(kinds.Kind)}
    for kind in kinds.ALL:
        assert undeclared(kind, REGISTRY[kind.name]) == [], kind.name
        assert kind.names(readiness.sample_arn(kind.name, "aws", "us-east-1", "123456789012")), kind.name
    assert (kinds.DRAIN_EVIDENCE, kinds.ROUTING_EVIDENCE) == (evidence.DRAIN, evidence.ROUTING)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(kinds.Kind)])
def test_a_kind_that_leaves_a_property_out_fails_at_import(field):
    """Every property is a required keyword: a declaration without one is a TypeError."""
    values = {f.name: getattr(kinds.ASG, f.name) for f in dataclasses.fields(kinds.Kind)}
    del values[field]
    with pytest.raises(TypeError, match=field):
        kinds.Kind(**values)


def _no_audit_rule(group, settings, region):
    return None


class _Inherited(REGISTRY["asg"]):
    """An actuator whose kind has no reader of its own (it would read another kind's resources)."""


# A value of each property that the rest could not use, and the actuator it is tried with.
BROKEN = {
    "name": ({"name": "nlb"}, REGISTRY["asg"]),
    "label": ({"label": " "}, REGISTRY["asg"]),
    "arn_pattern": ({"arn_pattern": r"arn:aws:s3:.*"}, REGISTRY["asg"]),
    "relaxed_in": ({"relaxed_in": "hold"}, REGISTRY["asg"]),
    "audit_rule": ({"audit_rule": _no_audit_rule}, REGISTRY["asg"]),
    "service": ({"service": kinds.Service("ec2", "ec2", 10.0)}, REGISTRY["asg"]),
    "sample_arn": ({"sample_arn": kinds.ESM.sample_arn}, REGISTRY["asg"]),
    "tag_condition_prefixes": ({"tag_condition_prefixes": ("lambda",)}, REGISTRY["asg"]),
    "write_context": ({"write_context": (("ecs:cluster", "x"),)}, REGISTRY["asg"]),
    "controlled": ({"controlled": True}, REGISTRY["asg"]),
    "evidence": ({"evidence": "launches"}, REGISTRY["asg"]),
    "words": ({"words": dataclasses.replace(kinds.ESM.words, keys=(*kinds.ESM.words.keys, "BatchSize"))},
              REGISTRY["asg"]),
}


@pytest.mark.parametrize("field", sorted(BROKEN))
def test_each_check_fails_on_a_property_the_rest_cannot_use(field):
    change, actuator = BROKEN[field]
    assert undeclared(dataclasses.replace(kinds.ASG, **change), actuator) != []
    assert undeclared(kinds.ASG, actuator) == []


def test_a_kind_whose_actuator_has_no_reader_of_its_own_fails():
    assert undeclared(kinds.ASG, _Inherited) != []
    assert set(BROKEN) == set(CHECKS)


def test_the_audit_runs_each_kinds_reader_and_only_those(monkeypatch):
    """`holdfast audit` derives its checks from the registry: one reader per kind, each
    the actuator's own `audit`."""
    called = []

    class Recorder:
        def __init__(self, kind):
            self.kind = kind

        def __call__(self, clients, settings, ledger):
            called.append(self.kind)
            return self

        def audit(self, found, say):
            found.unreadable.append(f"{self.kind}: read")

    for kind in kinds.KINDS:
        monkeypatch.setitem(REGISTRY, kind, Recorder(kind))
    result = account_audit.run(None, Settings())
    assert called == list(kinds.KINDS)
    assert result.unreadable == [f"{kind}: read" for kind in kinds.KINDS]


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
        ("autoscaling:SetInstanceHealth", tagged),
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


KIND_OF = [
    ("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:uuid:autoScalingGroupName/web", "asg"),
    ("arn:aws-us-gov:lambda:us-gov-west-1:123456789012:event-source-mapping:abc", "esm"),
    ("arn:aws-cn:lambda:cn-north-1:123456789012:function:f", "async"),
    ("arn:aws:lambda:us-east-1:123456789012:function:f:live", "async"),
    ("arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/tg/0123", "nlb"),
    ("arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/0abc", "scalable-target"),
]


@pytest.mark.parametrize("arn, kind", KIND_OF)
def test_kind_of_reads_every_partition(arn, kind):
    assert kinds.kind_of(arn) == kind


def overlaps(declared, arns) -> list[str]:
    """The ARNs that more than one of the `declared` kinds names."""
    return [f"{arn}: {names}" for arn in arns
            if len(names := [k.name for k in declared if k.names(arn)]) > 1]


def _arns() -> list[str]:
    """Each kind's sample ARN in every partition, the ARNs kind_of is tested with, and
    ARNs made to look like another kind's (a function named like a mapping, a group named
    like a target group)."""
    arns = [k.sample_arn.format(partition=p, region=r, account="123456789012") for k in kinds.ALL
            for p, r in (("aws", "us-east-1"), ("aws-us-gov", "us-gov-west-1"), ("aws-cn", "cn-north-1"))]
    arns += [arn for arn, _ in KIND_OF]
    arns += [
        "arn:aws:lambda:us-east-1:123456789012:function:event-source-mapping",
        "arn:aws:lambda:us-east-1:123456789012:function:event-source-mapping:live",
        "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:function:f",
        "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:u:autoScalingGroupName/targetgroup/x",
        "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/scalable-target/0abc",
        "arn:aws:application-autoscaling:us-east-1:123456789012:scalable-target/targetgroup/x",
    ]
    return arns


def test_the_kinds_arn_patterns_are_disjoint():
    """kind_of takes the first kind that names an ARN: two kinds naming one ARN would hand
    one kind's resources to another's actuator. Every ARN here is named by one kind at most."""
    assert overlaps(kinds.ALL, _arns()) == []
    for kind in kinds.ALL:
        assert all(not other.names(_sample(kind)) for other in kinds.ALL if other is not kind), kind.name


def test_a_kind_that_widens_another_is_found():
    """A Kinesis stream's mapping is an event-source-mapping ARN: declared as a kind of its
    own, it overlaps the mapping kind (it widens that kind instead)."""
    kinesis = dataclasses.replace(kinds.ESM, name="kinesis-esm")
    assert overlaps((*kinds.ALL, kinesis), _arns()) != []


def test_kind_of_names_what_it_does_not_manage():
    with pytest.raises(ValueError, match="not an ARN"):
        kinds.kind_of("web")
    with pytest.raises(ValueError, match="not a resource kind Holdfast manages"):
        kinds.kind_of("arn:aws:s3:::bucket/key")
