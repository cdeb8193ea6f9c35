"""The Region switch steps, run by the step function in the Region they act on
(holdfast.handlers.region_switch; what they may do is decided in holdfast.core.evacuation).

- engage: the plan's evacuation hold (CONTROL/EVACUATION#<plan ARN>, which keeps a hold
  from advancing until the lift), the reconciler's engage request (the one
  `holdfast engage --all-accounts` writes: its next tick starts a hold and walks the
  engage with its own role), and a tick started now (the detector's trigger, once per plan
  generation and schedule period). Idempotent: a rerun writes nothing new, and with
  `wait` it succeeds once the hold is in posture (every kind's engage walk done),
  raising StepPending until then, so Region switch's retries poll it within the block's
  timeout. With the ledger unreachable it writes nothing and is pending (the detector's
  own verdict still engages from tags).
- posture: the plan, the engage walks done and waiting, the evacuation holds, the kill
  switch. Reads only.
- lift: ends this plan's evacuation hold and starts a tick: the reconciler's staged lift
  then runs on its own holds and evidence (the hold's quiet window and launches, then
  each stage's hold). The step returns at once; `holdfast stage` follows the lift.

Mode `recommend` (the step's, or a deployed Holdfast that forbids acting: refused in
core.evacuation) reports what the step would write and writes nothing. A ledger that
does not exist means Holdfast is not deployed in this Region: refused, nothing written.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from holdfast.aws import AWS_ERRORS, error_code, error_text
from holdfast.core import evacuation as ev
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.policy import HOLD, Plan
from holdfast.ledger import claims as ledger_claims
from holdfast.ledger import control as ledger_control
from holdfast.ledger import plan as ledger_plan
from holdfast.observation.trigger import start_tick

NOT_FOUND = "ResourceNotFoundException"


def run(runtime, event: Any, function_arn: str) -> dict[str, Any]:
    """The step `event` asks for; its result, or StepRefused / StepPending."""
    req = ev.request(event, function_arn, runtime.settings.mode)
    return {ev.ENGAGE_STEP: engage, ev.POSTURE_STEP: posture, ev.LIFT_STEP: lift}[req.step](runtime, req)


def _result(runtime, req: ev.Request, status: str, detail: str, plan: Plan | None, **extra) -> dict[str, Any]:
    return {"holdfast": req.step, "status": status, "detail": detail, "region": req.region, "account": req.account,
            "mode": req.mode, "deployed_mode": runtime.settings.mode, "plan_arn": req.plan_arn,
            "execution_id": req.execution_id, "posture": ev.posture(plan, runtime.settings).to_dict(), **extra}


def _read(ledger, req: ev.Request) -> tuple[Plan | None, ledger_control.Control]:
    """The plan and the control items; a missing ledger is a Region without Holdfast."""
    try:
        return ledger_plan.read(ledger), ledger_control.read_control(ledger)
    except LedgerUnavailable as err:
        if error_code(err.__cause__) == NOT_FOUND:
            raise ev.StepRefused(f"Holdfast is not deployed in {req.region} (account {req.account}): its ledger "
                                 f"table {ledger.table} does not exist; deploy Holdfast there, or take this Region's "
                                 "entry out of the step") from err
        raise ev.StepPending(f"the ledger in {req.region} did not answer ({err}); nothing written: Region switch "
                             "runs the step again, and Holdfast's own detector engages from tags meanwhile") from err


def engage(runtime, req: ev.Request) -> dict[str, Any]:
    ledger, now = runtime.ledger(), runtime.clock.now()
    plan, control = _read(ledger, req)
    current = ev.posture(plan, runtime.settings)
    holds = plan is not None and plan.stage == HOLD
    if not req.acts:
        would = "keep the hold in force" if holds else "ask the reconciler for a hold"
        return _result(runtime, req, "reported", f"mode recommend: would hold {req.region} for plan {req.plan_arn} "
                       f"(an evacuation hold, lifted by its post-recovery step) and {would}; nothing written", plan)
    wrote, asked, tick = False, None, "not needed: the plan holds"
    try:
        wrote = ledger_control.hold_for_evacuation(ledger, req.plan_arn, execution_id=req.execution_id, by=req.by,
                                                   now=now)
        if not holds:
            asked = ledger_control.request_engage(ledger, by=req.by, reason=f"Region switch evacuation of "
                                                  f"{req.region} ({req.step_name or 'engage step'})", now=now)
            tick = _tick(runtime, ledger, asked, now)
    except LedgerUnavailable as err:
        raise ev.StepPending(f"the ledger in {req.region} did not answer ({err}); Region switch runs the step "
                             "again") from err
    said = ("evacuation hold written" if wrote else "evacuation hold already in force for this execution")
    said += f"; engage requested from plan generation {asked}" if asked is not None else "; the plan already holds"
    said += f"; tick: {tick}"
    if current.engaged:
        return _result(runtime, req, "engaged", f"{said}; every kind is in posture", plan)
    if not req.wait:
        return _result(runtime, req, "engaging", f"{said}; not waiting for posture (wait false)", plan)
    waiting = ", ".join(current.waiting) or "the hold to begin"
    paused = (f"; the kill switch is set (by {control.paused_by}: {control.reason}), so the reconciler acts only "
              "once `holdfast unpause` clears it" if control.paused else "")
    raise ev.StepPending(f"{said}; waiting for {waiting} in {req.region} (stage {current.stage}, generation "
                         f"{current.generation}){paused}: Region switch runs the step again")


def posture(runtime, req: ev.Request) -> dict[str, Any]:
    plan, control = _read(runtime.ledger(), req)
    current = ev.posture(plan, runtime.settings)
    held = "in posture" if current.engaged else (
        f"{current.stage}, waiting for {', '.join(current.waiting)}" if current.waiting else current.stage)
    return _result(runtime, req, "posture", f"Holdfast in {req.region}: {held}", plan,
                   paused=control.paused, evacuations=[e.plan_arn for e in control.evacuations])


def lift(runtime, req: ev.Request) -> dict[str, Any]:
    ledger, now = runtime.ledger(), runtime.clock.now()
    plan, control = _read(ledger, req)
    mine = any(e.plan_arn == req.plan_arn for e in control.evacuations)
    others = [e.plan_arn for e in control.evacuations if e.plan_arn != req.plan_arn]
    still = f"; still held for {', '.join(others)}" if others else ""
    if not req.acts:
        would = "lift its evacuation hold and start the staged lift" if mine else "find no evacuation hold to lift"
        return _result(runtime, req, "reported", f"mode recommend: would {would} in {req.region}{still}; nothing "
                       "written", plan, evacuations=others)
    try:
        lifted = ledger_control.lift_evacuation(ledger, req.plan_arn)
        tick = _tick(runtime, ledger, plan.generation, now) if plan is not None and plan.stage == HOLD else "not needed"
    except LedgerUnavailable as err:
        raise ev.StepPending(f"the ledger in {req.region} did not answer ({err}); Region switch runs the step "
                             "again") from err
    status = "lift-started" if lifted else "not-held"
    detail = (f"evacuation hold of {req.plan_arn} lifted; the reconciler lifts {req.region} in stages on its own "
              "holds and evidence (`holdfast stage` shows each gate)" if lifted
              else f"no evacuation hold of {req.plan_arn} in {req.region}: nothing to lift")
    return _result(runtime, req, status, f"{detail}; tick: {tick}{still}", plan, evacuations=others)


def _tick(runtime, ledger, generation: int, now) -> str:
    """Start a reconciler tick now, once per plan generation and schedule period (the
    detector's trigger claim); the schedule's next tick does the same work otherwise."""
    if not runtime.tick_function:
        return "no reconciler function named: the schedule's next tick acts"
    period = timedelta(minutes=runtime.settings.schedule_minutes)
    if not ledger_claims.claim_tick_trigger(ledger, generation=generation, controller_id=runtime.controller_id,
                                            now=now, period=period):
        return f"one was started for generation {generation} within the period"
    try:
        start_tick(runtime, {"source": "holdfast.region-switch", "reason": "Region switch step",
                             "generation": generation})
    except AWS_ERRORS as err:
        return f"not started ({error_text(err)}): the schedule's next tick acts"
    return "started"
