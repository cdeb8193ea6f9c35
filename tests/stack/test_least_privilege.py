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


# ---- who may assume the organization's roles ----------------------------------------

ADMIN = "111111111111"   # as conftest
MEMBER_ROLES = ("HoldfastReadOnly", "HoldfastOperator")


def _trusts(template: dict, *, one: bool = True) -> dict[str, dict | list[dict]]:
    """Each member role's trust statement (or statements, `one` False), by role name."""
    out = {}
    for resource in template["Resources"].values():
        name = resource["Properties"].get("RoleName") if resource["Type"] == "AWS::IAM::Role" else None
        if name in MEMBER_ROLES:
            statements = resource["Properties"]["AssumeRolePolicyDocument"]["Statement"]
            assert all(s["Action"] == "sts:AssumeRole" and s["Effect"] == "Allow" for s in statements)
            if one:
                (out[name],) = statements
            else:
                out[name] = statements
    assert set(out) == set(MEMBER_ROLES)
    return out


def _member_template(**changes) -> dict:
    from holdfast_cdk.org import synthesize_member_template
    from tests.stack.conftest import ORG_CONTEXT

    return synthesize_member_template(Settings.from_mapping({**ORG_CONTEXT["holdfast"], **changes}))


def test_by_default_the_member_roles_trust_holdfasts_own_admin_role_not_the_admin_account(org_synthesized):
    for name, trust in _trusts(org_synthesized.member_template).items():
        principal = json.dumps(trust["Principal"])
        assert ":root" not in principal and "Condition" not in trust, (name, trust)
        assert principal.count(f":iam::{ADMIN}:role/HoldfastAdmin") == 1, (name, trust)
    # HoldfastAdmin is the org stack's, made before any StackSet (IAM refuses a trust policy
    # naming a role that does not exist), and may assume only the two member roles.
    org = org_synthesized.org()
    (admin_id,) = [k for k, r in org["Resources"].items()
                   if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == "HoldfastAdmin"]
    admin = org["Resources"][admin_id]["Properties"]
    (statement,) = [s for p in admin["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert statement["Action"] == "sts:AssumeRole"
    assert [r["Fn::Join"][1][-1] for r in statement["Resource"]] == [":iam::*:role/HoldfastReadOnly",
                                                                      ":iam::*:role/HoldfastOperator"]
    assert statement["Condition"] == {"StringEquals": {"aws:ResourceOrgID": "o-a1b2c3d4e5"}}
    for resource in org["Resources"].values():
        if resource["Type"] == "AWS::CloudFormation::StackSet":
            assert admin_id in resource.get("DependsOn", []), resource.get("DependsOn")


def test_the_settings_name_the_roles_that_may_assume_the_member_roles():
    roles = [f"arn:aws:iam::{ADMIN}:role/oncall", f"arn:aws:iam::{ADMIN}:role/platform/sre"]
    for statements in _trusts(_member_template(org_admin_principals=roles), one=False).values():
        named = [a for s in statements for a in _as_list(s["Principal"]["AWS"])]
        assert sorted(named) == sorted(roles) and not any("Condition" in s for s in statements), statements


def test_or_a_principal_tag_of_the_admin_accounts_principals():
    for trust in _trusts(_member_template(org_admin_principal_tag="holdfast-operator=true")).values():
        assert trust["Condition"] == {"StringEquals": {"aws:PrincipalTag/holdfast-operator": "true"}}, trust
        assert f":iam::{ADMIN}:root" in json.dumps(trust["Principal"])
