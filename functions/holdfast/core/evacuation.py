"""A Region switch evacuation, as Holdfast sees it (pure).

An ARC Region switch plan runs execution blocks; a custom Lambda block invokes a function
in the activating or the deactivating Region (post-recovery workflows: the active or the
inactive Region) with the step's JSON payload, into which Region switch merges its
execution metadata (`InvokedBy`, `PlanArn`, `ExecutionId`, `StepName`; ARC Region switch
API Reference, `Lambdas.payload`). Holdfast's steps (holdfast_cdk.region_switch builds
them) carry:

    {"holdfast": {"step": "engage" | "posture" | "lift", "region": "us-east-1",
                  "account": "123456789012", "mode": "auto" | "recommend", "wait": true}}

- `engage` (the deactivate workflow, in the Region being left): hold that Region's
  automation until the post-recovery workflow lifts it: the evacuation hold
  (CONTROL/EVACUATION#<plan ARN>) and the reconciler's engage request, then a tick.
- `posture` (same workflow, after it): what Holdfast holds there, read-only.
- `lift` (the post-recovery workflow, in the inactive Region): end the evacuation hold;
  the reconciler's staged lift then runs on its own holds and evidence.

This module decides, from the payload, the function's own ARN and the deployed settings,
what a step may do (`request`), and, from the plan and the control items, whether
Holdfast is in posture (`posture`) and which evacuation holds the plan (`holding`). The
shell (holdfast.region_switch) reads and writes.

A step refused (`StepRefused`) wrote nothing; one not finished yet (`StepPending`) has
done its part and is waiting on the reconciler. Both are raised out of the handler: the
custom Lambda block reruns a function that does not succeed, every `retryIntervalMinutes`
until its `timeoutMinutes`, then fails the step and pauses the execution (ARC Developer
Guide, "Custom action Lambda execution block"); a function that returns completes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from holdfast.core.errors import PermanentError, TemporaryError
from holdfast.core.model import AUTO, RECOMMEND, acts, is_off
from holdfast.core.policy import CONTROL, ENGAGE, HOLD, NORMAL, Plan, starts_hold
from holdfast.core.policy import posture as stage_posture
from holdfast.core.progress import held_marker

ENGAGE_STEP, POSTURE_STEP, LIFT_STEP = "engage", "posture", "lift"
STEPS = (ENGAGE_STEP, POSTURE_STEP, LIFT_STEP)
PAYLOAD_KEY = "holdfast"
# Region switch's metadata keys (merged into an object payload).
PLAN_ARN, EXECUTION_ID, STEP_NAME, INVOKED_BY = "PlanArn", "ExecutionId", "StepName", "InvokedBy"
# The plan ARN's form (ARC Region switch API Reference, PlanArn).
PLAN_ARN_PATTERN = re.compile(r"^arn:aws[a-zA-Z-]*:arc-region-switch::[0-9]{12}:plan/"
                              r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?:[a-z0-9]{6}$")
_FUNCTION_ARN = re.compile(r"^arn:(aws[a-zA-Z-]*):lambda:([a-z0-9-]+):([0-9]{12}):function:[^:]+(:.+)?$")


class StepRefused(PermanentError):
    """The step's input or the deployed settings do not allow it: nothing was written.
    Region switch reruns it until the block's timeout; every run says the same."""


class StepPending(TemporaryError):
    """The step did its part and waits on the reconciler (or the ledger): Region switch
    reruns it every retry interval, and a rerun finds it done."""


@dataclass(frozen=True)
class Request:
    """A Holdfast step, checked."""

    step: str
    region: str
    account: str
    partition: str
    mode: str                  # what the step does: auto (acts) or recommend (reports)
    wait: bool                 # engage: succeed only once Holdfast is in posture
    plan_arn: str | None
    execution_id: str | None
    step_name: str | None

    @property
    def acts(self) -> bool:
        return acts(self.mode) and self.step != POSTURE_STEP

    @property
    def by(self) -> str:
        return f"region-switch {self.plan_arn or '-'} execution {self.execution_id or '-'}"


def where(function_arn: str) -> tuple[str, str, str]:
    """(partition, region, account) of the function running the step."""
    m = _FUNCTION_ARN.match(function_arn or "")
    if not m:
        raise StepRefused(f"cannot tell this function's Region and account from its ARN {function_arn!r}")
    return m.group(1), m.group(2), m.group(3)


def request(event: Any, function_arn: str, deployed_mode: str) -> Request:
    """The step `event` asks for, checked against where it runs and the deployed mode.
    Raises StepRefused, saying what is wrong and what to change, on anything else."""
    partition, region, account = where(function_arn)
    if not isinstance(event, Mapping):
        raise StepRefused(f"the payload is a {type(event).__name__}, not a JSON object: give the step Holdfast's "
                          f"payload ({{\"{PAYLOAD_KEY}\": {{\"step\": ..., \"region\": ..., \"account\": ...}}}})")
    body = event.get(PAYLOAD_KEY)
    if not isinstance(body, Mapping):
        raise StepRefused(f"not a Holdfast step: the payload has no \"{PAYLOAD_KEY}\" object "
                          "(holdfast_cdk.RegionSwitchSteps writes it)")
    unknown = sorted(set(body) - {"step", "region", "account", "mode", "wait"})
    if unknown:
        raise StepRefused(f"the payload's \"{PAYLOAD_KEY}\" has unknown keys {unknown}")
    step = body.get("step")
    if step not in STEPS:
        raise StepRefused(f"step {step!r} is not one of {', '.join(STEPS)}")
    if body.get("region") != region:
        raise StepRefused(f"the payload names Region {body.get('region')!r}, but this function runs in {region}: "
                          "each Region's entry in the step's Lambdas must name its own Region")
    if body.get("account") != account:
        raise StepRefused(f"the payload names account {body.get('account')!r}, but this function runs in account "
                          f"{account}: the step would act on another account's Holdfast")
    mode = body.get("mode", AUTO)
    if mode not in (AUTO, RECOMMEND):
        raise StepRefused(f"mode {mode!r} is not one of {AUTO}, {RECOMMEND}")
    wait = body.get("wait", True)
    if not isinstance(wait, bool):
        raise StepRefused(f"wait {wait!r} is not true or false")
    plan_arn, execution_id = event.get(PLAN_ARN), event.get(EXECUTION_ID)
    if step != POSTURE_STEP:
        if not isinstance(plan_arn, str) or not PLAN_ARN_PATTERN.match(plan_arn):
            raise StepRefused(f"PlanArn {plan_arn!r} is not a Region switch plan ARN: the evacuation hold is kept "
                              "per plan, so an engage or a lift needs the one Region switch adds to the payload")
        if plan_arn.split(":")[1] != partition:
            raise StepRefused(f"plan {plan_arn} is in partition {plan_arn.split(':')[1]}, this function in {partition}")
    if is_off(deployed_mode) and step != POSTURE_STEP:
        raise StepRefused(f"Holdfast in {region} is deployed with mode off: it engages and lifts nothing; "
                          "deploy it with mode auto for this step to act")
    if acts(mode) and not acts(deployed_mode) and step != POSTURE_STEP:
        raise StepRefused(f"the step asks to act (mode auto), but Holdfast in {region} is deployed with mode "
                          f"{deployed_mode}, which changes no resource: deploy it with mode auto, or give the step "
                          "mode recommend to report only")
    return Request(step=step, region=region, account=account, partition=partition, mode=mode, wait=wait,
                   plan_arn=plan_arn if isinstance(plan_arn, str) else None,
                   execution_id=execution_id if isinstance(execution_id, str) else None,
                   step_name=event.get(STEP_NAME) if isinstance(event.get(STEP_NAME), str) else None)


# ---- the evacuation hold ------------------------------------------------------------


@dataclass(frozen=True)
class Evacuation:
    """A Region switch plan's hold on this Region (holdfast.ledger.control reads it)."""

    plan_arn: str
    execution_id: str | None = None
    by: str | None = None
    at: str | None = None

    def gate(self) -> str:
        return (f"held for Region switch plan {self.plan_arn} (execution {self.execution_id or '-'}, since "
                f"{self.at or '-'}): its post-recovery step starts the lift; `holdfast advance` lifts it by hand")


def holding(evacuations: Iterable[Evacuation], plan: Plan | None) -> tuple[Evacuation, ...]:
    """The evacuations that keep `plan` in hold: every one in force, while the plan holds.
    An evacuation never moves a plan by itself (its engage request does that), so a
    plan in another stage is not held by one."""
    if plan is None or plan.stage != HOLD:
        return ()
    return tuple(sorted(evacuations, key=lambda e: e.plan_arn))


# ---- posture ------------------------------------------------------------------------


@dataclass(frozen=True)
class Posture:
    engaged: bool          # the plan holds and every kind's engage walk finished for it
    stage: str
    generation: int
    walked: tuple[str, ...]
    waiting: tuple[str, ...]   # the engage walks not finished yet

    def to_dict(self) -> dict[str, Any]:
        return {"engaged": self.engaged, "stage": self.stage, "generation": self.generation,
                "walked": list(self.walked), "waiting": list(self.waiting)}


def posture(plan: Plan | None, settings) -> Posture:
    """Whether Holdfast holds this Region: the plan in hold, every kind's engage walk
    (for controlled kinds, their engage when the hold began) marked done for the plan's
    generation, as the reconciler marks them."""
    if plan is None or plan.stage == NORMAL:
        return Posture(False, NORMAL, plan.generation if plan else 0, (), ())
    target = stage_posture(plan, settings)
    # A controlled kind is engaged when a hold begins (its `<kind>/engaged` walk); a hold
    # entered by a step back keeps the drains it had, and walks no such engage.
    markers = [held_marker(k, target[k] == ENGAGE) for k in target
               if target[k] == ENGAGE or (target[k] == CONTROL and starts_hold(plan))]
    walked = tuple(m for m in markers if m in plan.done)
    waiting = tuple(m for m in markers if m not in plan.done)
    return Posture(plan.stage == HOLD and not waiting, plan.stage, plan.generation, walked, waiting)

