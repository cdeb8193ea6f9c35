"""Least privilege on the synthesized templates: who may assume the organization's roles,
what `ecs:UpdateService` is granted on, and Holdfast's own key for expired events."""

from __future__ import annotations

import json

from holdfast.settings import Settings


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _reconciler_statements(synthesized) -> list[dict]:
    roles = synthesized.resources("AWS::IAM::Role")
    (role,) = [r for r in roles.values() if r["Properties"].get("Description", "").startswith("Holdfast reconciler:")]
    return [s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]


def test_update_service_is_granted_only_on_services_that_carry_the_selector(synthesized):
    """RegisterScalableTarget needs ecs:UpdateService on the target's service; the Service
    Authorization Reference lists aws:ResourceTag/${TagKey} (and ecs:ResourceTag) for it on
    the service resource, so it is conditioned like every other write of Holdfast's."""
    key, value = synthesized.settings.selector_key, synthesized.settings.selector_value
    granting = [s for s in _reconciler_statements(synthesized) if "ecs:UpdateService" in _as_list(s["Action"])]
    assert granting, "ecs:UpdateService is needed by RegisterScalableTarget"
    for statement in granting:
        assert _as_list(statement["Action"]) == ["ecs:UpdateService"], statement
        assert statement["Condition"] == {"StringEquals": {f"aws:ResourceTag/{key}": value}}, statement
    # DescribeServices stays a read of every service of this account and region.
    (reads,) = [s for s in _reconciler_statements(synthesized) if "ecs:DescribeServices" in _as_list(s["Action"])]
    assert "Condition" not in reads


def test_the_expired_events_key_is_tagged_as_holdfasts_and_the_replay_may_decrypt_through_sqs_only(foreign):
    """The replay moves expired events out of Holdfast's queue with the reconciler's role: a
    move task reads its source with the caller's permissions, which needs kms:Decrypt on the
    source queue's key (SQS Developer Guide, dead-letter queue redrive). The statement for
    tagged keys (`holdfast:replay=true`) does not cover this key, which no one tags."""
    from tests.stack.test_construct import _logical_id, _role_statements

    t = foreign.key_template
    key_id = _logical_id(t, "AWS::KMS::Key", "TeamKey")
    key = t.find_resources("AWS::KMS::Key")[key_id]
    assert {"Key": "holdfast:component", "Value": "expired-events"} in key["Properties"].get("Tags", []), key
    statements = _role_statements(t, "HoldfastControllersReconcilerRole")
    on_key = [s for s in statements if s.get("Resource") == {"Fn::GetAtt": [key_id, "Arn"]}]
    assert on_key == [{
        "Sid": "ReplayExpiredEventsKeyDecrypt",
        "Action": "kms:Decrypt",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [key_id, "Arn"]},
        "Condition": {"StringEquals": {"kms:ViaService": "sqs.us-east-1.amazonaws.com"}},
    }], on_key
    # Without a key (SSE-SQS) nothing is granted.
    plain = _role_statements(foreign.template, "HoldfastControllersReconcilerRole")
    assert not [s for s in plain if s.get("Sid") == "ReplayExpiredEventsKeyDecrypt"]
