"""Holdfast in every account of an OU and every region named: a service-managed StackSet.

Why StackSets with SERVICE_MANAGED permissions, not CDK Pipelines stages: the fan-out
is AWS's own engine. CloudFormation deploys to every account of the OUs, and to each
account that joins them later (automatic deployment), with its own concurrency and
failure tolerance, and removes the stacks of an account that leaves; Organizations
creates the execution roles. A pipeline would need a stage per account and region,
re-synthesized and re-run whenever an account joins, a bootstrap (and a trust) in every
account, and CodePipeline itself: exactly the home-made fan-out this should not be.

What the admin deploys (`app.py` builds them when `org_organizational_unit_ids` is set):

- `HoldfastOrgCode-<region>`, one per region, in the admin account: a bucket
  `holdfast-code-<admin account>-<region>` holding the controllers' code, readable by
  the organization's accounts only (`aws:PrincipalOrgID`). Lambda reads a function's
  code from a bucket in the function's own region (any account), with the permissions
  of whoever creates the function: in a member account, the StackSet's execution role.
  A `BucketDeployment` (aws-cdk-lib) copies the zip from the admin account's CDK
  bootstrap bucket of that region, unchanged (`extract=False`); old zips are kept
  (`prune=False`), so a rollback finds the code it needs.
- `HoldfastOrg`: the StackSet. Its template is `HoldfastMemberStack` synthesized once,
  environment-agnostic (every `${AWS::AccountId}`/`${AWS::Region}` resolved in each
  stack instance): the Holdfast stack, with its code in the bucket of its own region,
  no CDK bootstrap check (member accounts are not bootstrapped), and the
  `HoldfastReadOnly` role the admin account's `HoldfastAdmin` role (or the principals
  `org_admin_principals` / `org_admin_principal_tag` name) may assume for
  `holdfast status --all-accounts`. IAM is global, so the role is created in the first
  region of `org_regions` only (a template condition). The template goes to the admin
  account's bootstrap bucket as a file asset and the StackSet reads it from there
  (TemplateURL, up to 1 MB; TemplateBody would stop at 51,200 bytes).

Each region's stack has its own ledger, as a single-account deploy does.

Limits: the management account itself is never a target of a service-managed StackSet
(deploy it with `HoldfastStack`); StackSets' operation preferences do not apply to
automatic deployments to new accounts; changing the first region moves the read-only
role, which a parallel operation may try to create before it is deleted elsewhere
(run that update with one region at a time).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from aws_cdk import App, Aws, CfnCondition, CfnOutput, DefaultStackSynthesizer, Fn, RemovalPolicy, Stack
from aws_cdk import aws_cloudformation as cloudformation
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from holdfast.settings import Settings, override_settings
from holdfast_cdk import code, role_policies, suppressions
from holdfast_cdk.game_day import member_game_day
from holdfast_cdk.stack import HoldfastStack

STACK_SET_NAME = "Holdfast"
MEMBER_STACK_NAME = "Holdfast"
READ_ONLY_ROLE_NAME = "HoldfastReadOnly"
OPERATOR_ROLE_NAME = "HoldfastOperator"
# Holdfast's own role in the admin account: the one principal the member roles trust when
# the settings name none (org_admin_principals, org_admin_principal_tag).
ADMIN_ROLE_NAME = "HoldfastAdmin"
CODE_BUCKET_PREFIX = "holdfast-code"
ORG_STACK = "HoldfastOrg"
CODE_STACK = "HoldfastOrgCode"


def code_bucket_name(admin_account: str, region: str) -> str:
    """The bucket holding the controllers' code in `region` ("${AWS::Region}" in the member template)."""
    return f"{CODE_BUCKET_PREFIX}-{admin_account}-{region}"


def _require_org(settings: Settings) -> None:
    if not settings.org_organizational_unit_ids:
        raise ValueError(
            "Holdfast org: holdfast.org_organizational_unit_ids is empty: name the OUs (or the root) to deploy to"
        )


def admin_principal(settings: Settings, partition: str) -> iam.IPrincipal:
    """Who may assume the member accounts' `HoldfastReadOnly` and `HoldfastOperator`: the
    roles `org_admin_principals` names; or the admin account's principals carrying the tag
    `org_admin_principal_tag` (`aws:PrincipalTag/KEY`); or else Holdfast's own
    `HoldfastAdmin` role in the admin account (HoldfastOrgStack creates it, before the
    StackSet: IAM refuses a trust policy naming a role that does not exist). Never the whole
    admin account, whose every principal with sts:AssumeRole on `*` could otherwise assume them."""
    if settings.org_admin_principals:
        return iam.CompositePrincipal(*(iam.ArnPrincipal(arn) for arn in settings.org_admin_principals))
    if settings.org_admin_principal_tag is not None:
        key, value = settings.org_admin_principal_tag.split("=", 1)
        return iam.AccountPrincipal(settings.org_admin_account).with_conditions(
            {"StringEquals": {f"aws:PrincipalTag/{key}": value}})
    return iam.ArnPrincipal(admin_role_arn(settings.org_admin_account, partition))


def admin_role_arn(admin_account: str, partition: str) -> str:
    return f"arn:{partition}:iam::{admin_account}:role/{ADMIN_ROLE_NAME}"


class ReadOnlyAccess(Construct):
    """`HoldfastReadOnly`: reads the ledger in every region and the configuration of the
    resources `holdfast plan` looks at, assumable by `admin_principal` only (policies/readonly.json).
    Its name is fixed because the admin account assumes it by name in every account; IAM
    deletes it with its stack (it is not retained), and only the member stack of the first
    region creates it. The ledger tables are named by CloudFormation: it reads tables tagged
    as Holdfast's ledger, and learns their names from /holdfast/<stack>/ledger-table."""

    def __init__(self, scope: Construct, construct_id: str, *, principal: iam.IPrincipal,
                 condition: CfnCondition | None = None) -> None:
        super().__init__(scope, construct_id)
        # The ledger tables are named by CloudFormation: the role reads tables tagged as
        # Holdfast's ledger, and learns their names from /holdfast/<stack>/ledger-table.
        self.role = _admin_role(
            self, role="readonly", name=READ_ONLY_ROLE_NAME, principal=principal, condition=condition,
            description="Holdfast: read-only view of this account's ledgers for the organization's admin account",
            wildcards=[{"regex": "/^Resource::arn:<AWS::Partition>:(dynamodb|ssm):\\*:.*$/"}, "Resource::*"],
            reason="Read-only: the ledger table and Holdfast's parameters in every region the StackSet deploys "
            "to (one role per account, IAM is global), and the configuration reads `holdfast plan "
            "--all-accounts` makes (Describe/List/Get of Auto Scaling, Lambda, ELB, Application Auto Scaling, "
            "ECS, SQS, tagging), most of which take no resource ARN; no data-plane read, no write.",
        )


class OperatorAccess(Construct):
    """`HoldfastOperator`: writes Holdfast's operator control items only, assumable by
    `admin_principal` only (policies/operator.json). Every statement carries a
    `dynamodb:LeadingKeys` condition: the kill switch and the engage and advance requests
    (partition `CONTROL`), a look at the plan (`PLAN`) to name the generation a request is
    for; never the resources, the plan itself, nor any record of the ledger. What the
    requests do, the reconciler does on its next tick, with its own role."""

    def __init__(self, scope: Construct, construct_id: str, *, principal: iam.IPrincipal,
                 condition: CfnCondition | None = None) -> None:
        super().__init__(scope, construct_id)
        # As the read-only role: tables tagged as Holdfast's ledger, names from SSM.
        self.role = _admin_role(
            self, role="operator", name=OPERATOR_ROLE_NAME, principal=principal, condition=condition,
            description="Holdfast: the organization's admin account may pause, unpause, engage or advance Holdfast "
            "here through its control items; never a resource directly",
            wildcards=[{"regex": "/^Resource::arn:<AWS::Partition>:(dynamodb|ssm):\\*:.*$/"}],
            reason="The ledger tables (named by CloudFormation, tagged holdfast:component=ledger) in every region "
            "the StackSet deploys to (one role per account, IAM is global), each statement limited to the control "
            "and plan partitions by dynamodb:LeadingKeys; and the /holdfast parameters, to read each ledger's name.",
        )


def _admin_role(scope: Construct, *, role: str, name: str, principal: iam.IPrincipal, condition: CfnCondition | None,
                description: str, wildcards: list, reason: str) -> iam.Role:
    """A role of the organization's admin account in a member account, assumable by
    `principal` only (admin_principal): its policy from policies/<role>.json, created only
    where `condition` holds, its wildcards acknowledged."""
    stack = Stack.of(scope)
    document = role_policies.document(role, {"Partition": stack.partition, "Account": stack.account})
    made = iam.Role(scope, "Role", role_name=name, description=description,
                    assumed_by=principal, inline_policies={role: document})
    if condition is not None:
        made.node.default_child.cfn_options.condition = condition
    suppressions.add(made, suppressions.NagPackSuppression(id="AwsSolutions-IAM5", applies_to=wildcards, reason=reason))
    return made


class HoldfastMemberStack(HoldfastStack):
    """The stack each account and region of the organization gets (the StackSet's template).
    `member_settings` are the settings Holdfast runs with there (an override's), `settings`
    the organization's."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 member_settings: Settings | None = None, **kwargs: Any) -> None:
        _require_org(settings)
        synthesizer = DefaultStackSynthesizer(
            file_assets_bucket_name=code_bucket_name(settings.org_admin_account, "${AWS::Region}"),
            bucket_prefix="",
            # Member accounts are not CDK-bootstrapped: no /cdk-bootstrap/... parameter to check.
            generate_bootstrap_version_rule=False,
        )
        kwargs.setdefault("description", "Holdfast (organization StackSet instance): keeps automation safe during a regional EC2 impairment")
        super().__init__(scope, construct_id, settings=member_settings or settings, synthesizer=synthesizer,
                         analytics_reporting=False, game_day=False, **kwargs)
        # No member stack inherits the admin's game day (its alarm exists in one account):
        # only the accounts org_game_day_stop_alarms names get one, with their own alarm.
        if settings.org_game_day_stop_alarms:
            self.game_day = member_game_day(self, settings, selector_from=member_settings,
                                            parameter_prefix=self.holdfast.parameter_prefix)
        self.role_region = settings.org_regions[0]
        condition = CfnCondition(self, "IsReadOnlyRoleRegion", expression=Fn.condition_equals(Aws.REGION, self.role_region))
        principal = admin_principal(settings, self.partition)
        self.read_only = ReadOnlyAccess(self, "ReadOnly", principal=principal, condition=condition)
        self.operator = OperatorAccess(self, "Operator", principal=principal, condition=condition)


def synthesize_member_template(settings: Settings, member_settings: Settings | None = None) -> dict:
    """The member stack's template, synthesized in an app of its own (it is never a
    deployable artifact of the org app; `cdk deploy --all` must not deploy it to the admin account)."""
    app = App(outdir=tempfile.mkdtemp(prefix="holdfast-member-"), analytics_reporting=False)
    # The overrides are the admin account's business: a member runs with its own settings only.
    member_settings = member_settings or dataclasses.replace(settings, org_overrides=())
    HoldfastMemberStack(app, MEMBER_STACK_NAME, settings=settings, member_settings=member_settings)
    return app.synth().get_stack_by_name(MEMBER_STACK_NAME).template


class HoldfastOrgCodeStack(Stack):
    """The controllers' code in one region, readable by the organization's accounts."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        _require_org(settings)
        kwargs.setdefault("description", "Holdfast: the controllers' code for the organization's accounts in this region")
        super().__init__(scope, construct_id, **kwargs)
        self.bucket = s3.Bucket(
            self,
            "Code",
            bucket_name=code_bucket_name(settings.org_admin_account, self.region),
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Lambda fetches the code with the creator's credentials: the StackSet execution
        # role of each member account. A policy that names the organization is not
        # "public" to S3's Block Public Access.
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OrganizationAccountsReadCode",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects("*")],
                conditions={"StringEquals": {"aws:PrincipalOrgID": settings.org_id}},
            )
        )
        self.deployment = s3_deployment.BucketDeployment(
            self,
            "Deploy",
            sources=[s3_deployment.Source.asset(str(code.asset_dir()), exclude=code.ASSET_EXCLUDE)],
            destination_bucket=self.bucket,
            extract=False,
            prune=False,
            retain_on_delete=True,
        )
        suppressions.add(
            self.bucket,
            suppressions.NagPackSuppression(
                id="AwsSolutions-S1",
                reason="Holds one code zip per Holdfast release, written only by this stack's deployment; "
                "CloudTrail records reads and writes, server access logs would add a bucket per region for nothing.",
            ),
        )
        suppressions.add(
            self,
            suppressions.NagPackSuppression(
                id="AwsSolutions-IAM4",
                reason="CDK's BucketDeployment handler uses AWSLambdaBasicExecutionRole for its logs.",
            ),
            suppressions.NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="CDK's BucketDeployment handler reads its source asset and writes the code bucket's objects "
                "(object-level wildcards on those two buckets only).",
            ),
            suppressions.NagPackSuppression(
                id="AwsSolutions-L1",
                reason="CDK's BucketDeployment handler runtime is chosen by aws-cdk-lib, pinned in requirements.txt.",
            ),
            apply_to_children=True,
        )
        CfnOutput(self, "CodeBucketName", value=self.bucket.bucket_name)


def stack_set_name(override: str | None = None) -> str:
    """`Holdfast` for the base settings, `Holdfast-<name>` for an override's."""
    return STACK_SET_NAME if override is None else f"{STACK_SET_NAME}-{override}"


class HoldfastOrgStack(Stack):
    """The StackSets: Holdfast in every account of the OUs and every region named.

    One StackSet per distinct set of settings: `Holdfast` with the base settings, and
    `Holdfast-<name>` for each of `org_overrides`, whose template is synthesized from the
    base settings with the override's changes (settings are baked into the template:
    rules, alarms, schedules and the policies' selector, so parameters could not carry
    them). Targets never overlap: an OU override's StackSet deploys to its OUs; an account
    override's deploys to its accounts only (INTERSECTION over every OU named), with no
    automatic deployment, so no account joining an OU later can get its stack beside the
    base's; the others leave those accounts out (DIFFERENCE). Settings validation
    (`override_settings`) has already refused an OU or account named twice, and an OU
    override while the base targets the organization's root."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        _require_org(settings)
        kwargs.setdefault("description", "Holdfast: the organization's StackSet (every account of the OUs, every region named)")
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        member_settings = override_settings(settings)
        excluded = sorted(a for o in settings.org_overrides for a in o.accounts)
        every_ou = list(settings.org_organizational_unit_ids) + [
            ou for o in settings.org_overrides for ou in o.organizational_unit_ids]

        self.admin_role = self._admin_role(settings)
        self.member_template = synthesize_member_template(settings)
        self.template_asset = self._template(self, "MemberTemplate", self.member_template)
        self.stack_set = self._stack_set("StackSet", STACK_SET_NAME, self.template_asset,
                                         "Holdfast in every account of the organization's OUs, one stack per region",
                                         self._targets(settings.org_organizational_unit_ids, excluded, "DIFFERENCE"))
        # Every StackSet by override name (None: the base), with its member template.
        self.stack_sets: dict[str | None, cloudformation.CfnStackSet] = {None: self.stack_set}
        self.member_templates: dict[str | None, dict] = {None: self.member_template}
        for override in settings.org_overrides:
            template = synthesize_member_template(settings, member_settings[override.name])
            asset = self._template(self, f"MemberTemplate-{override.name}", template)
            if override.accounts:
                targets = self._targets(every_ou, list(override.accounts), "INTERSECTION")
                where = f"accounts {', '.join(override.accounts)}"
            else:
                targets = self._targets(override.organizational_unit_ids, excluded, "DIFFERENCE")
                where = f"OUs {', '.join(override.organizational_unit_ids)}"
            self.stack_sets[override.name] = self._stack_set(
                f"StackSet-{override.name}", stack_set_name(override.name), asset,
                f"Holdfast with the {override.name} settings in the {where}", targets,
                automatic=not override.accounts)
            self.member_templates[override.name] = template
        if self.admin_role is not None:
            # The member roles' trust names it: IAM refuses a trust policy naming a role not yet created.
            for stack_set in self.stack_sets.values():
                stack_set.add_dependency(self.admin_role.node.default_child)
            CfnOutput(self, "AdminRoleArn", value=self.admin_role.role_arn,
                      description="The one principal that may assume HoldfastReadOnly and HoldfastOperator in every "
                                  "account: assume it before `holdfast ... --all-accounts`")
        CfnOutput(self, "StackSetName", value=STACK_SET_NAME)
        CfnOutput(self, "ReadOnlyRoleName", value=READ_ONLY_ROLE_NAME,
                  description=f"Assumable by {self._who(settings)} in every account (created in {settings.org_regions[0]})")
        CfnOutput(self, "OperatorRoleName", value=OPERATOR_ROLE_NAME,
                  description=f"Control items only; assumable by {self._who(settings)} in every account")

    @staticmethod
    def _who(settings: Settings) -> str:
        if settings.org_admin_principals:
            return ", ".join(settings.org_admin_principals)
        if settings.org_admin_principal_tag is not None:
            return f"principals of {settings.org_admin_account} tagged {settings.org_admin_principal_tag}"
        return f"{ADMIN_ROLE_NAME} of {settings.org_admin_account}"

    def _admin_role(self, settings: Settings) -> iam.Role | None:
        """`HoldfastAdmin`, when the settings name no principal (admin_principal): assumable
        by the admin account's principals its own IAM policies allow, and allowed to assume
        only `HoldfastReadOnly` and `HoldfastOperator` in the organization's accounts."""
        if settings.org_admin_principals or settings.org_admin_principal_tag is not None:
            return None
        role = iam.Role(
            self, "AdminRole", role_name=ADMIN_ROLE_NAME,
            description="Holdfast: the admin account's way into every member account's HoldfastReadOnly and "
                        "HoldfastOperator (holdfast ... --all-accounts); grant sts:AssumeRole on it to who may",
            assumed_by=iam.AccountPrincipal(settings.org_admin_account),
            inline_policies={"assume-member-roles": iam.PolicyDocument(statements=[iam.PolicyStatement(
                sid="MemberRolesOfTheOrganizationOnly",
                actions=["sts:AssumeRole"],
                resources=[f"arn:{self.partition}:iam::*:role/{name}" for name in (READ_ONLY_ROLE_NAME, OPERATOR_ROLE_NAME)],
                conditions={"StringEquals": {"aws:ResourceOrgID": settings.org_id}},
            )])},
        )
        suppressions.add(role, suppressions.NagPackSuppression(
            id="AwsSolutions-IAM5", applies_to=[{"regex": "/^Resource::arn:<AWS::Partition>:iam::\\*:role/Holdfast(ReadOnly|Operator)$/"}],
            reason="Holdfast's two member roles by name in every account of the organization (aws:ResourceOrgID): "
                   "the accounts are not known at synth and join later."))
        return role

    @staticmethod
    def _template(scope: Construct, construct_id: str, template: dict) -> s3_assets.Asset:
        template_dir = Path(tempfile.mkdtemp(prefix="holdfast-stackset-"))
        template_file = template_dir / "holdfast-member.template.json"
        template_file.write_text(json.dumps(template, indent=1, sort_keys=True))
        return s3_assets.Asset(scope, construct_id, path=str(template_file))

    @staticmethod
    def _targets(ous, accounts: list[str], filter_type: str) -> cloudformation.CfnStackSet.DeploymentTargetsProperty:
        if not accounts:
            return cloudformation.CfnStackSet.DeploymentTargetsProperty(organizational_unit_ids=list(ous))
        return cloudformation.CfnStackSet.DeploymentTargetsProperty(
            organizational_unit_ids=list(ous), accounts=list(accounts), account_filter_type=filter_type)

    def _stack_set(self, construct_id: str, name: str, asset: s3_assets.Asset, description: str,
                   targets: cloudformation.CfnStackSet.DeploymentTargetsProperty, *,
                   automatic: bool = True) -> cloudformation.CfnStackSet:
        """`automatic` False: no automatic deployment (an account override's StackSet). AWS
        does not document whether an INTERSECTION account filter constrains later automatic
        deployments; if it did not, every account joining any OU named would get this
        StackSet's stack beside the base's. Without automatic deployment it deploys to the
        accounts named, once, and to nothing that joins later."""
        settings = self.settings
        auto = (cloudformation.CfnStackSet.AutoDeploymentProperty(
                    enabled=True, retain_stacks_on_account_removal=settings.org_retain_stacks_on_account_removal)
                if automatic else cloudformation.CfnStackSet.AutoDeploymentProperty(enabled=False))
        return cloudformation.CfnStackSet(
            self,
            construct_id,
            stack_set_name=name,
            description=description,
            permission_model="SERVICE_MANAGED",
            call_as=settings.org_call_as,
            auto_deployment=auto,
            # Non-conflicting operations run at once, conflicting ones queue, instead of failing.
            managed_execution={"Active": True},
            capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
            operation_preferences=cloudformation.CfnStackSet.OperationPreferencesProperty(
                # SOFT: the concurrency is MaxConcurrentPercentage, not lowered to the
                # failure tolerance + 1 as the default (STRICT) does.
                concurrency_mode="SOFT_FAILURE_TOLERANCE",
                max_concurrent_percentage=settings.org_max_concurrent_percentage,
                failure_tolerance_percentage=settings.org_failure_tolerance_percentage,
                region_concurrency_type="PARALLEL",
            ),
            stack_instances_group=[
                cloudformation.CfnStackSet.StackInstancesProperty(deployment_targets=targets, regions=list(settings.org_regions))
            ],
            template_url=asset.http_url,
        )


def org_stacks(app: Construct, settings: Settings) -> tuple[HoldfastOrgStack, list[HoldfastOrgCodeStack]]:
    """The admin account's stacks: the code bucket of each region, then the StackSet."""
    from aws_cdk import Environment

    admin, regions = settings.org_admin_account, settings.org_regions
    code_stacks = [
        HoldfastOrgCodeStack(app, f"{CODE_STACK}-{region}", settings=settings, env=Environment(account=admin, region=region))
        for region in regions
    ]
    org = HoldfastOrgStack(app, ORG_STACK, settings=settings, env=Environment(account=admin, region=regions[0]))
    for stack in code_stacks:
        org.add_stack_dependency(stack, "the StackSet's functions read their code from these buckets")
    return org, code_stacks
