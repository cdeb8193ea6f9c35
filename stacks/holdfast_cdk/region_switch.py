"""Holdfast's steps in an ARC Region switch plan: hold the Region a plan leaves, lift it after.

Two halves, because a plan is one resource (in one account, for two Regions) and Holdfast
is deployed per account and Region:

- In each Region's Holdfast, `Holdfast(..., region_switch=RegionSwitchAccess())` adds the
  step function (holdfast.handlers.region_switch) under a fixed name, so a plan can name
  it in every Region, its role (policies/regionswitch.json), and, when the plan lives in
  another account, a role that account's plan execution role may assume (with the
  external ID) to invoke it.
- In the plan's stack, `RegionSwitchSteps` gives the steps to put in the plan's workflows:
  `deactivating` (engage, then posture: in the workflow that leaves a Region, run there)
  and `post_recovery` (lift: in the post-recovery workflow, run in the inactive Region),
  and `grant_invoke(execution_role)`.

    Workflow = arcregionswitch.CfnPlan.WorkflowProperty
    steps = RegionSwitchSteps(self, "Holdfast", regions=["us-east-1", "us-west-2"], account="111111111111")
    plan = arcregionswitch.CfnPlan(self, "Plan", name="orders", execution_role=role.role_arn, regions=steps.regions,
        recovery_approach="activePassive", primary_region="us-east-1", workflows=[
            Workflow(workflow_target_action="activate", workflow_target_region="us-west-2",
                     steps=[*steps.deactivating, ...]),      # your steps beside Holdfast's
            Workflow(workflow_target_action="activate", workflow_target_region="us-east-1",
                     steps=[*steps.deactivating, ...]),
            Workflow(workflow_target_action="postRecovery", steps=[*steps.post_recovery])])
    steps.bind(plan)            # each step's payload (see below)
    steps.grant_invoke(role)

How Region switch runs them (ARC Developer Guide, "Custom action Lambda execution block"
and "Plan execution role trust policy"): the plan's execution role, which trusts
`arc-region-switch.amazonaws.com`, invokes the function with `lambda:InvokeFunction`
(plan evaluation also calls `lambda:GetFunction` and makes a dry-run invoke): an
identity-based grant, so the function needs no resource-based policy. Across accounts
Region switch assumes the step's `CrossAccountRole` with its `ExternalId` first. A
function that fails (a function error) is run again every `RetryIntervalMinutes` until
`TimeoutMinutes`; a refused step fails every time, a pending one until Holdfast is in
posture. In an ungraceful execution the steps are skipped (`Ungraceful: skip`, the
default here): an unplanned failover does not wait on the Region it leaves, and
Holdfast's own detector holds that Region when it sees the impairment.

CDK's L1 (aws-cdk-lib 2.275) has no `Payload` on the plan's `Lambdas`, which
CloudFormation's AWS::ARCRegionSwitch::Plan has (and the API's `Lambdas.payload`):
`steps.bind(plan)` writes each step's payload as a property override, found by step name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from aws_cdk import Acknowledgment, Duration, Stack, Token, Validations
from aws_cdk import aws_arcregionswitch as arcregionswitch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from holdfast.core.model import AUTO, RECOMMEND
from holdfast.settings import ENV_VAR, Settings
from holdfast_cdk import code
from holdfast_cdk import role_policies as policies

FUNCTION_NAME = "holdfast-region-switch"
# aws-cdk-lib's bundled validation: "value is not valid under any of the oneOf schemas".
SCHEMA_LAG_RULE = "CloudFormation-Validate::F3018"
HANDLER = "holdfast.handlers.region_switch.handler"
# A step makes a few ledger calls and one asynchronous invoke.
STEP_TIMEOUT = Duration.seconds(60)
ENGAGE, POSTURE, LIFT = "engage", "posture", "lift"
INVOKE_ACTIONS = ("lambda:InvokeFunction", "lambda:GetFunction")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,45}$")     # room for "-<region>" in a 64-character role name
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_ROLE_ARN = re.compile(r"^arn:aws[a-zA-Z0-9-]*:iam::([0-9]{12}):role/.+$")
_REGION = re.compile(r"^[a-z]{2}-[a-z-]+-\d+$")
Plan = arcregionswitch.CfnPlan


def _partition_of(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def _items(value) -> list:
    """A list property as the plan was given it (a token, unreadable here, is no list)."""
    return list(value) if isinstance(value, (list, tuple)) else []


@dataclass(frozen=True)
class RegionSwitchAccess:
    """Who may run Holdfast's Region switch steps in this account and Region.

    - ``function_name`` (default ``holdfast-region-switch``): the step function's name,
      the same in every Region (a plan names one ARN per Region). One per account and
      Region: name another for a second Holdfast there.
    - ``plan_execution_roles`` (default ``()``): the execution role ARNs of plans in
      *other* accounts. Each gets a role here, ``<function_name>-<region>``, that it may
      assume with ``external_id`` (required then) to invoke the function. A plan in this
      account needs none: `RegionSwitchSteps.grant_invoke` grants its execution role.
    """

    function_name: str = FUNCTION_NAME
    plan_execution_roles: Sequence[str] = field(default_factory=tuple)
    external_id: str | None = None

    def __post_init__(self):
        if not _NAME.match(self.function_name):
            raise ValueError(f"RegionSwitchAccess: function_name {self.function_name!r} must be 1-45 letters, digits, "
                             "- or _ (the cross-account role is named <function_name>-<region>)")
        for arn in self.plan_execution_roles:
            if not _ROLE_ARN.match(arn):
                raise ValueError(f"RegionSwitchAccess: plan_execution_roles: {arn!r} is not an IAM role ARN")
        if self.plan_execution_roles and not self.external_id:
            raise ValueError("RegionSwitchAccess: plan_execution_roles needs external_id (the step's ExternalId, "
                             "which the cross-account role's trust requires)")


def role_name(function_name: str, region: str) -> str:
    return f"{function_name}-{region}"


class RegionSwitchFunction(Construct):
    """The step function of one Region's Holdfast, its role, and the cross-account role.
    Made by `Holdfast` when it is given `region_switch`; attributes `function`, `role`,
    `cross_account_role` (None without plan_execution_roles)."""

    def __init__(self, scope: Construct, construct_id: str, *, access: RegionSwitchAccess, settings: Settings,
                 ledger_table_name: str, ledger_table_arn: str, reconciler: lambda_.IFunction,
                 powertools: lambda_.ILayerVersion, log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        document = policies.document("regionswitch", {"LedgerTableArn": ledger_table_arn,
                                                      "ReconcilerFunctionArn": reconciler.function_arn})
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="Holdfast regionswitch: policies/regionswitch.json",
                             inline_policies={"regionswitch": document})
        log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.function = lambda_.Function(
            self, "Function",
            function_name=access.function_name,
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            code=lambda_.Code.from_asset(str(code.asset_dir()), exclude=code.ASSET_EXCLUDE),
            handler=HANDLER,
            description="Holdfast: ARC Region switch steps (engage, posture, lift) in this Region",
            role=self.role,
            layers=[powertools],
            memory_size=256,
            timeout=STEP_TIMEOUT,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            environment={ENV_VAR: settings.to_json(), "HOLDFAST_LEDGER_TABLE": ledger_table_name,
                         "HOLDFAST_TICK_FUNCTION_ARN": reconciler.function_arn,
                         "POWERTOOLS_SERVICE_NAME": "holdfast-region-switch",
                         "POWERTOOLS_METRICS_NAMESPACE": "Holdfast"},
        )
        log_group.grant_write(self.role)
        self.cross_account_role = None
        if access.plan_execution_roles:
            accounts = sorted({_ROLE_ARN.match(a).group(1) for a in access.plan_execution_roles})
            # The accounts as principals, the roles by aws:PrincipalArn: IAM refuses a trust
            # policy that names a role that does not exist yet, and the plan's stack may
            # deploy after this one.
            principal = iam.CompositePrincipal(*(iam.AccountPrincipal(a) for a in accounts)).with_conditions({
                "StringEquals": {"sts:ExternalId": access.external_id},
                "ArnEquals": {"aws:PrincipalArn": list(access.plan_execution_roles)},
            })
            self.cross_account_role = iam.Role(
                self, "CrossAccountRole", role_name=role_name(access.function_name, stack.region),
                assumed_by=principal,
                description="Holdfast: Region switch plans of other accounts invoke the step function through this role",
                inline_policies={"invoke": iam.PolicyDocument(statements=[iam.PolicyStatement(
                    actions=list(INVOKE_ACTIONS), resources=[self.function.function_arn])])},
            )


class RegionSwitchSteps(Construct):
    """Holdfast's steps for a Region switch plan of yours.

    Props (keyword-only, each with its default):

    - ``regions`` (two Region names, required): the plan's Regions; Holdfast must be
      deployed with ``region_switch`` in both (`holdfast doctor` checks).
    - ``account`` (``str | None``, default the stack's account): the account Holdfast runs in.
    - ``function_name`` (default ``holdfast-region-switch``): as ``RegionSwitchAccess``.
    - ``cross_account`` (``bool``, default ``False``): the plan is in another account than
      Holdfast: each step assumes ``<function_name>-<region>`` with ``external_id``.
    - ``external_id`` (``str | None``): required with ``cross_account``.
    - ``mode`` (``"auto"`` or ``"recommend"``, default ``"auto"``): ``auto`` acts (refused
      when Holdfast there is deployed in another mode), ``recommend`` reports only.
    - ``wait_for_posture`` (default ``True``): the engage step succeeds only once every
      kind is in posture, and is retried until then.
    - ``timeout_minutes`` (default 20), ``retry_interval_minutes`` (default 1): the engage
      and lift blocks' own (the posture block has 5 and 1).
    - ``skip_when_ungraceful`` (default ``True``): an ungraceful execution skips the steps.
    - ``name_prefix`` (default ``holdfast``): steps ``<prefix>-engage``, ``-posture``, ``-lift``.

    Attributes: ``deactivating`` (the engage and posture steps, run in the Region being left:
    ``deactivatingRegion``), ``post_recovery`` (the lift, run in the ``inactiveRegion``),
    ``regions``, and ``function_arn(region)``, ``cross_account_role_arn(region)``;
    ``bind(plan)`` (the steps' payloads) and ``grant_invoke(execution_role)``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, regions: Sequence[str], account: str | None = None,
                 function_name: str = FUNCTION_NAME, cross_account: bool = False, external_id: str | None = None,
                 mode: str = "auto", wait_for_posture: bool = True, timeout_minutes: int = 20,
                 retry_interval_minutes: float = 1, skip_when_ungraceful: bool = True,
                 name_prefix: str = "holdfast") -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        regions = list(regions)
        if len(regions) != 2 or len(set(regions)) != 2 or not all(_REGION.match(r) for r in regions):
            raise ValueError(f"RegionSwitchSteps: regions must be the plan's two Regions, got {regions!r}")
        account = account if account is not None else stack.account
        if not Token.is_unresolved(account) and not _ACCOUNT.match(account):
            raise ValueError(f"RegionSwitchSteps: account {account!r} is not a 12-digit account id")
        if mode not in (AUTO, RECOMMEND):
            raise ValueError(f"RegionSwitchSteps: mode {mode!r} must be auto or recommend")
        if cross_account and not external_id:
            raise ValueError("RegionSwitchSteps: cross_account needs external_id")
        if not isinstance(timeout_minutes, int) or timeout_minutes < 1:
            raise ValueError(f"RegionSwitchSteps: timeout_minutes {timeout_minutes!r} must be a whole number of at least 1")
        if not 0 < retry_interval_minutes <= timeout_minutes:
            raise ValueError(f"RegionSwitchSteps: retry_interval_minutes {retry_interval_minutes!r} must be above 0 "
                             f"and at most timeout_minutes ({timeout_minutes})")
        RegionSwitchAccess(function_name=function_name)   # the same name rules
        self.regions, self.account, self.function_name = regions, account, function_name
        partitions = {_partition_of(r) for r in regions}
        if len(partitions) != 1:
            raise ValueError(f"RegionSwitchSteps: regions {regions!r} are in different partitions")
        # A literal partition, from the Regions named (not the stack's AWS::Partition): the
        # plan's ARNs are plain strings, which CloudFormation's schema checks at lint time.
        self._partition, self._cross_account, self._external_id = partitions.pop(), cross_account, external_id
        self._stack, self._mode, self._wait = stack, mode, wait_for_posture
        self._skip = skip_when_ungraceful
        self._payloads: dict[str, list[str]] = {}
        self.deactivating = [
            self._step(f"{name_prefix}-engage", ENGAGE, "deactivatingRegion", timeout_minutes, retry_interval_minutes,
                       "Holdfast: hold the Region being left (Auto Scaling processes, consumer caps, async retries, "
                       "NLB failover) until the post-recovery workflow lifts it"),
            self._step(f"{name_prefix}-posture", POSTURE, "deactivatingRegion", 5, 1,
                       "Holdfast: what it holds in the Region being left"),
        ]
        self.post_recovery = [
            self._step(f"{name_prefix}-lift", LIFT, "inactiveRegion", timeout_minutes, retry_interval_minutes,
                       "Holdfast: start the staged lift in the Region that was left (its own holds and evidence)"),
        ]

    def function_arn(self, region: str) -> str:
        return f"arn:{self._partition}:lambda:{region}:{self.account}:function:{self.function_name}"

    def cross_account_role_arn(self, region: str) -> str:
        return f"arn:{self._partition}:iam::{self.account}:role/{role_name(self.function_name, region)}"

    def _payload(self, step: str, region: str) -> str:
        body: dict[str, Any] = {"step": step, "region": region, "account": self.account, "mode": self._mode}
        if step == ENGAGE:
            body["wait"] = self._wait
        return self._stack.to_json_string({"holdfast": body})

    def _step(self, name: str, step: str, run_in: str, timeout: int, retry: float, description: str):
        lambdas = []
        for region in self.regions:
            cross = ({"cross_account_role": self.cross_account_role_arn(region), "external_id": self._external_id}
                     if self._cross_account else {})
            lambdas.append(Plan.LambdasProperty(arn=self.function_arn(region), **cross))
        self._payloads[name] = [self._payload(step, region) for region in self.regions]
        return Plan.StepProperty(
            name=name, description=description, execution_block_type="CustomActionLambda",
            execution_block_configuration=Plan.ExecutionBlockConfigurationProperty(
                custom_action_lambda_config=Plan.CustomActionLambdaConfigurationProperty(
                    lambdas=lambdas, region_to_run=run_in, retry_interval_minutes=retry, timeout_minutes=timeout,
                    ungraceful=Plan.LambdaUngracefulProperty(behavior="skip") if self._skip else None)))

    def bind(self, plan: Plan) -> int:
        """Give each of Holdfast's steps in `plan` (in any workflow, inside parallel blocks
        too, by step name) its payload: CDK's L1 has no `Payload` on `Lambdas`,
        CloudFormation's resource has it, so it is written as a property override. Call it
        once the workflows are set. Returns how many steps it found; none is an error (the
        plan would run nothing of Holdfast's)."""
        found = 0

        def walk(steps, path: str) -> None:
            nonlocal found
            for s, step in enumerate(_items(steps)):
                here = f"{path}.{s}"
                payloads = self._payloads.get(getattr(step, "name", None))
                config = getattr(step, "execution_block_configuration", None)
                parallel = getattr(config, "parallel_config", None)
                if parallel is not None:
                    walk(getattr(parallel, "steps", None), f"{here}.ExecutionBlockConfiguration.ParallelConfig.Steps")
                if payloads is None:
                    continue
                found += 1
                for k, payload in enumerate(payloads):
                    plan.add_property_override(
                        f"{here}.ExecutionBlockConfiguration.CustomActionLambdaConfig.Lambdas.{k}.Payload", payload)

        for w, workflow in enumerate(_items(plan.workflows)):
            walk(getattr(workflow, "steps", None), f"Workflows.{w}.Steps")
        if not found:
            raise ValueError(f"RegionSwitchSteps: plan {plan.node.path} names none of Holdfast's steps "
                             f"({', '.join(self._payloads)}): put `deactivating` and `post_recovery` in its workflows, "
                             "then bind")
        # The synth-time validation bundled with aws-cdk-lib checks the plan against a schema
        # without `Payload` (CloudFormation's own has it: cfn-lint's, which tests/stack runs),
        # and fails the synth of an app with @aws-cdk/core:validateAgainstDefaultRules.
        Validations.of(plan).acknowledge(Acknowledgment(
            id=SCHEMA_LAG_RULE, reason="Lambdas.Payload of AWS::ARCRegionSwitch::Plan is in CloudFormation's resource "
            "schema but not in the one aws-cdk-lib's validation bundles (holdfast_cdk.region_switch)"))
        return found

    def grant_invoke(self, execution_role: iam.IRole) -> iam.Grant:
        """Let the plan's execution role run the steps: invoke (and get, for plan
        evaluation) the step function in each Region, or, across accounts, assume each
        Region's cross-account role with the external ID."""
        if self._cross_account:
            statement = iam.PolicyStatement(actions=["sts:AssumeRole"],
                                            resources=[self.cross_account_role_arn(r) for r in self.regions],
                                            conditions={"StringEquals": {"sts:ExternalId": self._external_id}})
        else:
            statement = iam.PolicyStatement(actions=list(INVOKE_ACTIONS),
                                            resources=[self.function_arn(r) for r in self.regions])
        grant = iam.Grant.add_to_principal(grantee=execution_role, actions=statement.actions,
                                           resource_arns=statement.resources, conditions=statement.conditions or None)
        if not grant.success:
            raise ValueError(f"RegionSwitchSteps: could not grant {execution_role}: add {statement.to_json()} to it yourself")
        return grant
