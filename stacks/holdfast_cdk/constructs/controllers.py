"""The controller functions, each with its own role, log group and failure path.

- detector: invoked by the EventBridge signal rules; records signals in the ledger, and
  starts a tick at once (an asynchronous invoke of the reconciler) when they turn the
  verdict impaired.
- reconciler: invoked by the schedule (and by the detector); moves the account toward the
  desired posture. An engaging tick walks for as long as its invocation has time.
- readiness: invoked by its schedule (holdfast_cdk.constructs.readiness), every few
  hours; runs doctor's read-only checks and records the result (handlers/readiness.py).

Both run the installed `holdfast` package (`holdfast_cdk.code`: no Docker, no bundling:
the package has no dependency the runtime and the Powertools layer do not bring). Each
role's policy is policies/<role>.json with its placeholders filled
(`holdfast_cdk.role_policies`); the log, trace and dead-letter permissions that running
a function needs are added by CDK.

Choices:
- X-Ray active tracing: a tick's time splits between Lambda start-up and AWS calls,
  and during an event that split is what an operator needs to see. At one trace per
  invocation a stack records about 45,000 traces a month, inside X-Ray's free tier.
- Retries: the reconciler is level-triggered, so a failed tick is not retried: the
  next tick, a schedule period later, does the same work with fresher state. A signal
  is retried (twice, up to an hour) because a lost one is not sent again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from holdfast.settings import LOG_RETENTION_DAYS, Settings
from holdfast_cdk import code
from holdfast_cdk import role_policies as policies

# AWS's public Powertools layer, resolved at deploy time from the public SSM parameter
# Powertools publishes per release, so the layer is exactly the version requirements.txt
# pins (and the tests run), in whatever region the stack deploys to.
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"

MEMORY_MB = 256
DETECTOR_TIMEOUT = Duration.seconds(30)
# A plan walk of every selected resource plus one policy simulation per write of each kind.
READINESS_TIMEOUT = Duration.minutes(5)
# Time after the tick's budget to write progress and log before Lambda kills it.
RECONCILER_MARGIN_SECONDS = 30
# An engaging tick keeps walking while it has engage work and Lambda time left:
# the handler gives it its remaining time less RECONCILER_MARGIN_SECONDS, so the timeout
# is Lambda's maximum, 15 minutes. Relaxing ticks keep `tick_budget_seconds`; a tick with
# nothing to engage ends as soon as it is done, so the long timeout costs nothing then.
RECONCILER_TIMEOUT_SECONDS = 900
# The teardown's restore walk gets Lambda's maximum less a minute to answer CloudFormation.
TEARDOWN_TIMEOUT_SECONDS = 900
RETENTION = dict(zip(LOG_RETENTION_DAYS, [d for d in logs.RetentionDays if d is not logs.RetentionDays.INFINITE]))


class Controllers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        environment: Mapping[str, str],
        policy_values: Mapping[str, str],
        dead_letters: sqs.IQueue,
        policies_dir: Path | None = None,
        settings_parameter_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.powertools = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            ssm.StringParameter.value_for_string_parameter(self, POWERTOOLS_LAYER_PARAMETER),
        )
        self._code = lambda_.Code.from_asset(str(code.asset_dir()), exclude=code.ASSET_EXCLUDE)
        self._settings = settings
        self._environment = {**environment, "POWERTOOLS_METRICS_NAMESPACE": "Holdfast"}
        self._policy_values = policy_values
        self._dead_letters = dead_letters
        self._policies_dir = policies_dir

        self.reconciler = self._function(
            "Reconciler",
            role_name="reconciler",
            handler="holdfast.handlers.reconciler.handler",
            description="Holdfast: moves the account toward the desired posture, one tick a period",
            timeout=Duration.seconds(RECONCILER_TIMEOUT_SECONDS),
            retry_attempts=0,
            max_event_age=Duration.seconds(60),
        )
        self.detector = self._function(
            "Detector",
            role_name="detector",
            handler="holdfast.handlers.detector.handler",
            description="Holdfast: records impairment signals from EventBridge",
            timeout=DETECTOR_TIMEOUT,
            retry_attempts=2,
            max_event_age=Duration.hours(1),
            # The detector starts a tick at once when the verdict turns impaired
            # (holdfast.observation.trigger): the reconciler's ARN, and Invoke on it alone.
            environment={"HOLDFAST_TICK_FUNCTION_ARN": self.reconciler.function_arn},
            policy_values={"ReconcilerFunctionArn": self.reconciler.function_arn},
        )
        self.readiness = None
        if settings_parameter_name is not None:
            self.readiness = self._function(
                "Readiness",
                role_name="readiness",
                handler="holdfast.handlers.readiness.handler",
                description="Holdfast: doctor's read-only checks, on a schedule; the result in the ledger and a metric",
                timeout=READINESS_TIMEOUT,
                retry_attempts=0,
                max_event_age=Duration.minutes(10),
                environment={
                    "HOLDFAST_RECONCILER_ROLE_ARN": self.reconciler.role.role_arn,
                    "HOLDFAST_RECONCILER_FUNCTION_ARN": self.reconciler.function_arn,
                    "HOLDFAST_SETTINGS_PARAMETER": settings_parameter_name,
                },
                policy_values={
                    "ReconcilerRoleArn": self.reconciler.role.role_arn,
                    "ReconcilerFunctionArn": self.reconciler.function_arn,
                    "SettingsParameterName": settings_parameter_name,
                },
            )
        self.functions = tuple(f for f in (self.detector, self.reconciler, self.readiness) if f is not None)

    def teardown(self) -> lambda_.Function:
        """The function behind the stack's deletion-time custom resource
        (holdfast.handlers.teardown): the reconciler's role (a restore is the reconciler's
        writes), Lambda's longest timeout, no retries (CloudFormation waits for its answer)."""
        return self._function(
            "Teardown",
            role_name="reconciler",
            handler="holdfast.handlers.teardown.handler",
            description="Holdfast: on the stack's deletion, refuses it while resources are held, or restores them",
            timeout=Duration.seconds(TEARDOWN_TIMEOUT_SECONDS),
            retry_attempts=0,
            max_event_age=Duration.minutes(5),
            role=self.reconciler.role,
            reserved=False,
        )

    def _function(
        self,
        construct_id: str,
        *,
        role_name: str,
        handler: str,
        description: str,
        timeout: Duration,
        retry_attempts: int,
        max_event_age: Duration,
        environment: Mapping[str, str] | None = None,
        policy_values: Mapping[str, str] | None = None,
        role: iam.IRole | None = None,
        reserved: bool = True,
    ) -> lambda_.Function:
        if role is None:
            document = policies.document(role_name, {**self._policy_values, **(policy_values or {})}, self._policies_dir)
            role = iam.Role(
                self,
                f"{construct_id}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"Holdfast {role_name}: policies/{role_name}.json",
                inline_policies={role_name: document} if document else None,
            )
        log_group = logs.LogGroup(self, f"{construct_id}Logs", retention=RETENTION[self._settings.log_retention_days])
        function = lambda_.Function(
            self,
            construct_id,
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            code=self._code,
            handler=handler,
            description=description,
            role=role,
            layers=[self.powertools],
            memory_size=MEMORY_MB,
            timeout=timeout,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            environment={**self._environment, **(environment or {}), "POWERTOOLS_SERVICE_NAME": f"holdfast-{construct_id.lower()}"},
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
            on_failure=destinations.SqsDestination(self._dead_letters),
            # An account out of concurrency must not throttle the controllers in the event.
            reserved_concurrent_executions=(self._settings.controller_reserved_concurrency or None) if reserved else None,
        )
        log_group.grant_write(role)
        return function
