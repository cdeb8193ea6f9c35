"""The organization's app with settings per OU and per account: one StackSet per distinct
settings set, targets that never overlap, each member template running with its own
settings; and the HoldfastOperator role every member template carries, limited by
condition to Holdfast's operator control items."""

from __future__ import annotations

import json

import pytest
from aws_cdk import Aspects
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from app import build_app
from holdfast.ledger.conditions import PLAN_PK
from holdfast.ledger.control import CONTROL_PK
from holdfast.settings import ENV_VAR, Settings, SettingsError
from holdfast_cdk.org import OPERATOR_ROLE_NAME, READ_ONLY_ROLE_NAME
from tests.stack.checks import cfn_lint_errors, synth

ADMIN, ORG_ID, OU, REGIONS = "111111111111", "o-a1b2c3d4e5", "ou-ab12-cd345678", ["us-east-1", "eu-west-1"]
PROD_OU, PAYMENTS = "ou-ab12-prod0001", "222222222222"
BASE = {"mode": "auto", "org_organizational_unit_ids": [OU], "org_regions": REGIONS, "org_admin_account": ADMIN, "org_id": ORG_ID}
OVERRIDES = [
    {"name": "prod", "organizational_unit_ids": [PROD_OU], "settings": {"mode": "recommend"}},
    {"name": "payments", "accounts": [PAYMENTS], "settings": {"selector": "team:holdfast=on", "hold_minutes": 30}},
]


@pytest.fixture(scope="module")
def org(tmp_path_factory):
    app = build_app({"holdfast": {**BASE, "org_overrides": OVERRIDES}}, outdir=str(tmp_path_factory.mktemp("cdk.out.overrides")))
    Aspects.of(app).add(AwsSolutionsChecks())
    stack = next(c for c in app.node.children if c.node.id == "HoldfastOrg")
    done = synth(app)
    return app, stack, done.template(stack), done


def _stack_sets(template: Template) -> dict[str, dict]:
    return {r["Properties"]["StackSetName"]: r["Properties"] for r in template.find_resources("AWS::CloudFormation::StackSet").values()}


def _settings_of(member: dict) -> Settings:
    """The settings the member template's controllers run with (their HOLDFAST_SETTINGS)."""
    found = {json.dumps(json.loads(r["Properties"]["Environment"]["Variables"][ENV_VAR]), sort_keys=True)
             for r in member["Resources"].values()
             if r["Type"] == "AWS::Lambda::Function" and ENV_VAR in r["Properties"].get("Environment", {}).get("Variables", {})}
    (only,) = found
    return Settings.from_json(only)


def test_each_distinct_settings_set_is_a_stackset_whose_targets_do_not_overlap(org):
    _, _, template, _ = org
    sets = _stack_sets(template)
    assert set(sets) == {"Holdfast", "Holdfast-prod", "Holdfast-payments"}
    targets = {name: props["StackInstancesGroup"] for name, props in sets.items()}
    # The base leaves the account with its own settings out; the OU override takes its OU
    # (and leaves that account out too, wherever it is); the account override takes only
    # the account, from every OU named.
    assert targets["Holdfast"] == [{"DeploymentTargets": {"OrganizationalUnitIds": [OU], "Accounts": [PAYMENTS],
                                                          "AccountFilterType": "DIFFERENCE"}, "Regions": REGIONS}]
    assert targets["Holdfast-prod"] == [{"DeploymentTargets": {"OrganizationalUnitIds": [PROD_OU], "Accounts": [PAYMENTS],
                                                               "AccountFilterType": "DIFFERENCE"}, "Regions": REGIONS}]
    assert targets["Holdfast-payments"] == [{"DeploymentTargets": {"OrganizationalUnitIds": [OU, PROD_OU], "Accounts": [PAYMENTS],
                                                                   "AccountFilterType": "INTERSECTION"}, "Regions": REGIONS}]
    for props in sets.values():
        assert props["PermissionModel"] == "SERVICE_MANAGED"
    # Accounts joining an OU later get the base's or an OU override's stack, never an account
    # override's as well: AWS does not document that INTERSECTION constrains automatic deployments.
    assert sets["Holdfast"]["AutoDeployment"]["Enabled"] is True and sets["Holdfast-prod"]["AutoDeployment"]["Enabled"] is True
    assert sets["Holdfast-payments"]["AutoDeployment"] == {"Enabled": False}


def test_each_member_template_runs_with_the_base_settings_and_its_changes(org):
    _, stack, _, _ = org
    base, prod, payments = (_settings_of(stack.member_templates[n]) for n in (None, "prod", "payments"))
    assert (base.mode, base.selector, base.hold_minutes) == ("auto", "holdfast:protect=true", Settings().hold_minutes)
    assert (prod.mode, prod.selector, prod.hold_minutes) == ("recommend", "holdfast:protect=true", base.hold_minutes)
    assert (payments.mode, payments.selector, payments.hold_minutes) == ("auto", "team:holdfast=on", 30)
    # The selector reaches the reconciler's IAM policy too: that is why settings are a template each.
    def policies(member):
        return json.dumps([r for r in member["Resources"].values() if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::Role")])
    assert "team:holdfast" in policies(stack.member_templates["payments"])
    assert "team:holdfast" not in json.dumps(stack.member_templates[None])   # no override leaks into the base


def test_each_stackset_reads_its_own_member_template(org):
    app, stack, template, _ = org
    for name, key in (("Holdfast", None), ("Holdfast-prod", "prod"), ("Holdfast-payments", "payments")):
        url = _stack_sets(template)[name]["TemplateURL"]["Fn::Sub"]
        with open(app.outdir + "/asset." + url.rsplit("/", 1)[1]) as f:
            assert json.load(f) == stack.member_templates[key], name


def test_the_base_stackset_keeps_its_logical_ids_when_overrides_are_added(org, org_synthesized):
    _, _, template, _ = org
    without = org_synthesized.templates["HoldfastOrg"].find_resources("AWS::CloudFormation::StackSet")
    with_overrides = template.find_resources("AWS::CloudFormation::StackSet")
    assert set(without) <= set(with_overrides) and len(with_overrides) == len(without) + 2
    (logical_id,) = without
    assert with_overrides[logical_id]["Properties"]["StackSetName"] == "Holdfast"


def _operator_role(member: dict) -> dict:
    (role,) = [r for r in member["Resources"].values()
               if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == OPERATOR_ROLE_NAME]
    return role


def test_the_operator_role_may_write_only_the_control_items_by_leading_key(org):
    _, stack, _, _ = org
    for member in stack.member_templates.values():
        role = _operator_role(member)
        assert role["Condition"] == "IsReadOnlyRoleRegion"   # IAM is global: one per account
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Action"] == "sts:AssumeRole" and json.dumps(trust["Principal"]).count(f":iam::{ADMIN}:role/HoldfastAdmin") == 1
        (policy,) = role["Properties"]["Policies"]
        statements = policy["PolicyDocument"]["Statement"]
        by_action = {}
        for s in statements:
            assert s["Effect"] == "Allow"
            if s["Action"] in ("ssm:GetParametersByPath", ["ssm:GetParametersByPath"]):
                assert ":ssm:*:" in json.dumps(s["Resource"])   # the ledger's name, from its stack's parameter
                continue
            assert s["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
            keys = s["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
            resource = json.dumps(s["Resource"])
            # CloudFormation names each ledger: tables tagged as Holdfast's, not a name.
            assert ":dynamodb:*:" in resource and "table/*" in resource
            assert s["Condition"]["StringEquals"] == {"aws:ResourceTag/holdfast:component": "ledger"}
            for action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]):
                by_action[action] = keys
        assert by_action == {"dynamodb:PutItem": [CONTROL_PK], "dynamodb:ConditionCheckItem": [PLAN_PK],
                             "dynamodb:GetItem": [CONTROL_PK, PLAN_PK]}


def test_the_read_only_role_reads_what_plan_needs_and_writes_nothing(org):
    _, stack, _, _ = org
    (role,) = [r for r in stack.member_templates[None]["Resources"].values()
               if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == READ_ONLY_ROLE_NAME]
    actions = {a for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {"autoscaling:DescribeAutoScalingGroups", "lambda:ListEventSourceMappings", "tag:GetResources"} <= actions
    assert all(a.split(":", 1)[1].startswith(("Describe", "List", "Get", "Query")) for a in actions), actions


def test_the_org_stack_with_overrides_passes_cdk_nag_and_cfn_lint(org):
    _, stack, template, done = org
    assert done.nag_errors(stack) == []
    for name, body in [("HoldfastOrg", template.to_json())] + [(f"member {k}", t) for k, t in stack.member_templates.items()]:
        assert cfn_lint_errors(body, regions=REGIONS) == [], name


def test_a_wrong_override_stops_the_app_naming_the_override_and_key(tmp_path):
    bad = [{"name": "prod", "organizational_unit_ids": [PROD_OU], "settings": {"hold_minutes": 0}}]
    with pytest.raises(SettingsError, match=r"holdfast\.org_overrides\[0\]\.settings\.hold_minutes = 0: must be an integer from 1"):
        build_app({"holdfast": {**BASE, "org_overrides": bad}}, outdir=str(tmp_path))


def test_an_ou_override_while_the_base_targets_the_root_is_refused_at_synth(tmp_path):
    """The root's StackSet reaches every account, the override's OU included: two stacks."""
    base = {**BASE, "org_organizational_unit_ids": ["r-ab12"]}
    ou = [{"name": "prod", "organizational_unit_ids": [PROD_OU], "settings": {"mode": "recommend"}}]
    with pytest.raises(SettingsError, match=r"holdfast\.org_overrides\[0\]\.organizational_unit_ids = .*ou-ab12-prod0001.*"
                                            r"is under the organization's root \(r-ab12\).*two stacks"):
        build_app({"holdfast": {**base, "org_overrides": ou}}, outdir=str(tmp_path / "ou"))
    # An account override under the root is fine: the base leaves the account out.
    accounts = [{"name": "payments", "accounts": [PAYMENTS], "settings": {"mode": "recommend"}}]
    app = build_app({"holdfast": {**base, "org_overrides": accounts}}, outdir=str(tmp_path / "accounts"))
    stack = next(c for c in app.node.children if c.node.id == "HoldfastOrg")
    sets = _stack_sets(Template.from_stack(stack))
    assert sets["Holdfast"]["StackInstancesGroup"][0]["DeploymentTargets"]["AccountFilterType"] == "DIFFERENCE"
    assert sets["Holdfast-payments"]["AutoDeployment"] == {"Enabled": False}
