"""The organization's app: a service-managed StackSet for an OU and two regions, the code
buckets it reads from, the member template and its read-only role; bad org settings."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Aspects
from cdk_nag import AwsSolutionsChecks

from app import build_app
from holdfast.settings import SettingsError
from holdfast_cdk.org import READ_ONLY_ROLE_NAME, HoldfastMemberStack
from tests.stack.checks import cfn_lint_errors, synth

ADMIN, ORG_ID, OU, REGIONS = "111111111111", "o-a1b2c3d4e5", "ou-ab12-cd345678", ["us-east-1", "eu-west-1"]  # as conftest


def _stack_set(org_synthesized) -> dict:
    (stack_set,) = org_synthesized.templates["HoldfastOrg"].find_resources("AWS::CloudFormation::StackSet").values()
    return stack_set["Properties"]


def test_the_app_builds_one_code_stack_per_region_and_the_stackset_in_the_admin_account(org_synthesized):
    stacks = org_synthesized.stacks
    assert {name: (s.account, s.region) for name, s in stacks.items()} == {
        "HoldfastOrgCode-us-east-1": (ADMIN, "us-east-1"),
        "HoldfastOrgCode-eu-west-1": (ADMIN, "eu-west-1"),
        "HoldfastOrg": (ADMIN, "us-east-1"),
    }
    assert {d.node.id for d in stacks["HoldfastOrg"].dependencies} == {"HoldfastOrgCode-us-east-1", "HoldfastOrgCode-eu-west-1"}


def test_the_stackset_targets_the_ou_in_both_regions_with_service_managed_permissions(org_synthesized):
    props = _stack_set(org_synthesized)
    assert props["PermissionModel"] == "SERVICE_MANAGED"
    assert props["StackSetName"] == "Holdfast"
    assert props["CallAs"] == "DELEGATED_ADMIN"
    assert props["StackInstancesGroup"] == [
        {"DeploymentTargets": {"OrganizationalUnitIds": [OU]}, "Regions": REGIONS}
    ]
    assert props["AutoDeployment"] == {"Enabled": True, "RetainStacksOnAccountRemoval": False}
    assert props["OperationPreferences"] == {
        "ConcurrencyMode": "SOFT_FAILURE_TOLERANCE",
        "MaxConcurrentPercentage": 25,
        "FailureTolerancePercentage": 10,
        "RegionConcurrencyType": "PARALLEL",
    }
    assert set(props["Capabilities"]) == {"CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"}
    assert "TemplateBody" not in props


def test_the_stackset_template_is_the_member_template_as_an_asset_of_the_admin_account(org_synthesized):
    url = _stack_set(org_synthesized)["TemplateURL"]["Fn::Sub"]
    assert url.startswith(f"https://s3.us-east-1.${{AWS::URLSuffix}}/cdk-hnb659fds-assets-{ADMIN}-us-east-1/")
    staged = org_synthesized.app.outdir + "/asset." + url.rsplit("/", 1)[1]
    with open(staged) as f:
        assert json.load(f) == org_synthesized.member_template


def test_every_member_function_reads_its_code_from_the_bucket_of_its_own_region(org_synthesized):
    member = org_synthesized.member_template
    functions = [r for r in member["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 4   # detector, reconciler, readiness, and the deletion-time teardown
    codes = {json.dumps(f["Properties"]["Code"], sort_keys=True) for f in functions}
    (code,) = [json.loads(c) for c in codes]
    assert code["S3Bucket"] == {"Fn::Sub": f"holdfast-code-{ADMIN}-${{AWS::Region}}"}
    for region in REGIONS:
        template = org_synthesized.templates[f"HoldfastOrgCode-{region}"]
        (bucket,) = template.find_resources("AWS::S3::Bucket").values()
        assert bucket["Properties"]["BucketName"] == f"holdfast-code-{ADMIN}-{region}"
        (deployment,) = template.find_resources("Custom::CDKBucketDeployment").values()
        props = deployment["Properties"]
        # extract=False copies the zip unchanged, under the basename of its source key:
        # the key the member template names.
        assert props["Extract"] is False and props["Prune"] is False and props["RetainOnDelete"] is True
        assert props["SourceObjectKeys"] == [code["S3Key"]]
        assert "DestinationBucketKeyPrefix" not in props


def test_only_the_organizations_accounts_may_read_the_code(org_synthesized):
    for region in REGIONS:
        template = org_synthesized.templates[f"HoldfastOrgCode-{region}"]
        (policy,) = template.find_resources("AWS::S3::BucketPolicy").values()
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        (read,) = [s for s in statements if s.get("Sid") == "OrganizationAccountsReadCode"]
        assert read["Action"] == "s3:GetObject" and read["Principal"] == {"AWS": "*"}
        assert read["Condition"] == {"StringEquals": {"aws:PrincipalOrgID": ORG_ID}}
        (bucket,) = template.find_resources("AWS::S3::Bucket").values()
        assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True
        }


def test_the_member_template_needs_no_cdk_bootstrap_in_member_accounts(org_synthesized):
    member = org_synthesized.member_template
    assert "Rules" not in member, "no CheckBootstrapVersion rule"
    assert not [p for p in member.get("Parameters", {}).values() if "cdk-bootstrap" in str(p.get("Default"))]
    assert "cdk-hnb659fds" not in json.dumps(member)
    assert not [r for r in member["Resources"].values() if r["Type"] == "AWS::CDK::Metadata"]
    # Each region's stack has its own ledger.
    tables = [r for r in member["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert len(tables) == 1 and tables[0]["DeletionPolicy"] == "Retain"


def test_the_read_only_role_is_made_once_per_account_and_trusts_holdfasts_admin_role(org_synthesized):
    member = org_synthesized.member_template
    assert member["Conditions"] == {"IsReadOnlyRoleRegion": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}}
    (role,) = [r for r in member["Resources"].values() if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == READ_ONLY_ROLE_NAME]
    assert role["Condition"] == "IsReadOnlyRoleRegion"
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert ":root" not in json.dumps(trust["Principal"])   # not the whole admin account
    assert json.dumps(trust["Principal"]).count(f":iam::{ADMIN}:role/HoldfastAdmin") == 1
    (policy,) = role["Properties"]["Policies"]
    actions = {a for s in policy["PolicyDocument"]["Statement"]
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {"dynamodb:GetItem", "dynamodb:Query"} <= actions   # the ledger, and the reads `plan` makes
    assert all(a.split(":", 1)[1].startswith(("Describe", "List", "Get", "Query")) for a in actions), actions


def test_org_stacks_and_the_member_template_pass_cdk_nag_and_cfn_lint(org_synthesized, tmp_path):
    for name, stack in org_synthesized.stacks.items():
        assert org_synthesized.synth.nag_errors(stack) == [], name
    member_app = App(outdir=str(tmp_path))
    Aspects.of(member_app).add(AwsSolutionsChecks())
    member = HoldfastMemberStack(member_app, "Holdfast", settings=org_synthesized.settings)
    assert synth(member_app).nag_errors(member) == []

    templates = {name: t.to_json() for name, t in org_synthesized.templates.items()}
    templates["member"] = org_synthesized.member_template
    for name, template in templates.items():
        assert cfn_lint_errors(template, regions=REGIONS) == [], name


BAD_ORG = {
    "unknown region": (
        {"org_regions": ["us-east-1", "eu-west-9"]},
        r'holdfast\.org_regions = "eu-west-9": unknown region; the eu-west regions are eu-west-1, eu-west-2, eu-west-3',
    ),
    "admin account of the wrong shape": (
        {"org_admin_account": "11111111111a"},
        r'holdfast\.org_admin_account = "11111111111a": must be an AWS account id of 12 digits, or null',
    ),
    "a principal of another account": (
        {"org_admin_principals": ["arn:aws:iam::222222222222:role/oncall"]},
        r'holdfast\.org_admin_principals = \["arn:aws:iam::222222222222:role/oncall"\]: each must be a role of '
        r'org_admin_account \(111111111111\)',
    ),
    "a principal that is not a role ARN": (
        {"org_admin_principals": ["oncall"]},
        r'holdfast\.org_admin_principals = "oncall": each must be an IAM role ARN',
    ),
    "a principal tag without a value": (
        {"org_admin_principal_tag": "team"},
        r'holdfast\.org_admin_principal_tag = "team": must be a tag `KEY=VALUE`',
    ),
    "both principals and a principal tag": (
        {"org_admin_principals": ["arn:aws:iam::111111111111:role/oncall"], "org_admin_principal_tag": "team=sre"},
        r'holdfast\.org_admin_principal_tag = "team=sre": must be null when org_admin_principals names roles',
    ),
    "OU id of the wrong shape": (
        {"org_organizational_unit_ids": ["ou-abcd"]},
        r'holdfast\.org_organizational_unit_ids = "ou-abcd": each must be an OU id such as ou-ab12-cd345678',
    ),
}


@pytest.mark.parametrize("change, message", BAD_ORG.values(), ids=BAD_ORG.keys())
def test_bad_org_settings_stop_the_app_before_any_stack_is_made(change, message, tmp_path):
    context = {"holdfast": {"org_organizational_unit_ids": [OU], "org_regions": REGIONS, "org_admin_account": ADMIN, "org_id": ORG_ID, **change}}
    with pytest.raises(SettingsError, match=message):
        build_app(context, outdir=str(tmp_path))
