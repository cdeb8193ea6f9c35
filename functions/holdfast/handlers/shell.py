"""The Lambda side of the Runtime: built once per container from the function's
environment, never at import. The only place a controller reads its environment.

Environment (set by stacks/holdfast_cdk/constructs/controllers.py): HOLDFAST_SETTINGS,
HOLDFAST_LEDGER_TABLE, HOLDFAST_TOPIC_ARN, HOLDFAST_EXPIRED_QUEUE_ARN, HOLDFAST_TICK_FUNCTION_ARN
(the detector's only: the reconciler it starts a tick with), HOLDFAST_STACK_ID and
HOLDFAST_OWN_LOGICAL_IDS (Holdfast's own resources, holdfast.core.own), the readiness
function's own (handlers/readiness.py), and Lambda's own AWS_LAMBDA_FUNCTION_NAME (and
AWS_REGION, which boto3 reads). Tests inject their own Runtime through each handler's `use(runtime)`.
"""

from __future__ import annotations

import os
from typing import Mapping

from holdfast.aws import Clients
from holdfast.core.own import own
from holdfast.ledger import DEFAULT_TABLE
from holdfast.runtime import Runtime, govern
from holdfast.settings import ENV_VAR, Settings

LEDGER_TABLE_ENV = "HOLDFAST_LEDGER_TABLE"
TOPIC_ENV = "HOLDFAST_TOPIC_ARN"
EXPIRED_QUEUE_ENV = "HOLDFAST_EXPIRED_QUEUE_ARN"
TICK_FUNCTION_ENV = "HOLDFAST_TICK_FUNCTION_ARN"
STACK_ID_ENV, OWN_LOGICAL_IDS_ENV = "HOLDFAST_STACK_ID", "HOLDFAST_OWN_LOGICAL_IDS"


def runtime_from_env(controller_id: str, env: Mapping[str, str] | None = None, *, governed: bool = True) -> Runtime:
    """`governed=False` (the readiness function): paced within the account's rate budgets in
    this process only, writing no lease to the ledger (its role may not)."""
    env = os.environ if env is None else env
    runtime = Runtime(
        clients=Clients(),
        settings=Settings.from_json(env.get(ENV_VAR)),
        table=env.get(LEDGER_TABLE_ENV, DEFAULT_TABLE),
        controller_id=controller_id,
        topic_arn=env.get(TOPIC_ENV) or None,
        expired_queue_arn=env.get(EXPIRED_QUEUE_ENV) or None,
        tick_function=env.get(TICK_FUNCTION_ENV) or None,
        own=own(env.get(STACK_ID_ENV) or None, (env.get(OWN_LOGICAL_IDS_ENV) or "").split(","),
                [env.get("AWS_LAMBDA_FUNCTION_NAME", "")]),
    )
    # Every call within the account's rate budgets, shared with the other controllers.
    govern(runtime.clients, runtime.settings, table=runtime.table if governed else None, member=controller_id)
    return runtime
