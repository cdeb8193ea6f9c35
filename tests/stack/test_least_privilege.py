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
