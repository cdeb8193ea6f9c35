"""The stack's deletion, while Holdfast holds resources: refuse it, or restore them first.

A Lambda-backed AWS::CloudFormation::CustomResource (holdfast_cdk.constructs.teardown)
whose only work is on Delete. The stack going while resources are engaged (an account
leaving an OU deletes its StackSet instance, a move between OUs, `cdk destroy` during an
event) would leave them engaged with no controller. `settings.on_delete_while_engaged`:

- `refuse` (the default): while the plan is not `normal`, or the ledger holds a resource
  record, or resources are held by hand, answer FAILED with what is held and how to
  resume first; CloudFormation then keeps the stack (DELETE_FAILED) with every function,
  role and the table the custom resource depends on, and the controller keeps running.
- `restore`: set the kill switch (so no tick engages again meanwhile), then restore every
  engaged resource as `holdfast resume --now` does, within the function's time less a
  margin; SUCCESS when everything came back, else FAILED naming what was not restored
  (the next delete tries again).

Create and Update succeed at once. The answer goes to the pre-signed ResponseURL
CloudFormation gives (a PUT of the JSON document; CloudFormation User Guide, "Custom
resource response objects"); a Delete whose handler crashes still answers FAILED, so a
deletion never hangs for the hour CloudFormation waits.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core.errors import LedgerUnavailable
from holdfast.core.policy import NORMAL
from holdfast.handlers.shell import runtime_from_env
from holdfast.runtime import Runtime

logger = Logger(service="holdfast-teardown")

REFUSE, RESTORE = "refuse", "restore"
MARGIN_SECONDS = 60            # left to answer CloudFormation after a restore walk
REASON_LIMIT = 3500            # CloudFormation shows a reason of a few KB at most
PHYSICAL_ID = "holdfast-teardown"

_runtime: Runtime | None = None


def use(runtime: Runtime | None) -> None:
    """Inject the runtime (tests); None goes back to building it from the environment."""
    global _runtime
    _runtime = runtime


def handler(event: Mapping[str, Any], context) -> None:
    global _runtime
    try:
        if event.get("RequestType") != "Delete":
            respond(event, "SUCCESS", "nothing to do on create or update")
            return
        if _runtime is None:
            _runtime = runtime_from_env(getattr(context, "log_stream_name", None) or f"pid-{os.getpid()}")
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        seconds = (remaining() / 1000 - MARGIN_SECONDS) if callable(remaining) else 600.0
        status, reason = on_delete(_runtime, seconds)
    except Exception as err:   # noqa: BLE001  (CloudFormation must hear an answer, not wait an hour)
        logger.exception("teardown failed")
        status, reason = "FAILED", f"Holdfast's teardown failed: {err}"
    logger.info("teardown", extra={"status": status, "reason": reason})
    respond(event, status, reason)


def on_delete(runtime: Runtime, seconds: float) -> tuple[str, str]:
    """(SUCCESS or FAILED, why) for the stack's deletion."""
    held = holding(runtime)
    if not held:
        return "SUCCESS", "Holdfast holds nothing: the stack may go"
    if runtime.settings.on_delete_while_engaged == REFUSE:
        return "FAILED", _cut(
            f"Holdfast holds resources ({held}); deleting its stack now would leave them engaged with no "
            "controller. Resume first: `holdfast resume --now` restores every engaged resource (or let the "
            "event's recovery finish until `holdfast status` shows nothing held), then delete again. Or set "
            "on_delete_while_engaged to restore and deploy, and the deletion restores them itself.")
    return restore_all(runtime, seconds)


def holding(runtime: Runtime) -> str:
    """What Holdfast holds, in words ('' when nothing): the plan not normal, resource
    records in the ledger, resources held by hand. An unreadable ledger counts as holding:
    refusing is safe, a deletion that strands resources is not."""
    from holdfast.ledger import control as ledger_control
    from holdfast.ledger import plan as ledger_plan
    from holdfast.ledger.resources import ResourceLedger

    ledger = runtime.ledger()
    try:
        plan = ledger_plan.read(ledger)
        records = ResourceLedger(ledger).records()
        held_by_hand = ledger_control.read_control(ledger).held_by
    except (LedgerUnavailable, *AWS_ERRORS) as err:
        return f"the ledger {runtime.table} cannot be read ({error_text(err) if isinstance(err, AWS_ERRORS) else err})"
    what = []
    if plan is not None and plan.stage != NORMAL:
        what.append(f"plan {plan.stage}, generation {plan.generation}")
    if records:
        kinds: dict[str, int] = {}
        for r in records:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        what.append("records of " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    if held_by_hand:
        what.append(f"held by hand by {held_by_hand}")
    return "; ".join(what)


def restore_all(runtime: Runtime, seconds: float) -> tuple[str, str]:
    """Pause the controller, then restore every engaged resource within `seconds`."""
    from holdfast.engine import Engine
    from holdfast.ledger import control as ledger_control

    clock = runtime.clock
    try:
        ledger_control.set_paused(runtime.ledger(), True, by="holdfast-teardown",
                                  reason="the stack is being deleted: every resource is restored", now=clock.now())
    except LedgerUnavailable as err:
        logger.warning("kill switch not set", extra={"reason": str(err)})
    started = clock.monotonic()
    report = Engine(runtime, deadline=lambda: clock.monotonic() - started >= seconds).relax()
    left = [o for o in report.outcomes if o.action in ("failed", "refused-stale")]
    if report.complete and not left:
        return "SUCCESS", f"restored {len(report.outcomes)} resource(s) before the stack goes"
    named = "; ".join(f"{o.arn}: {o.error or o.action}" for o in left[:20])
    cut = "" if report.complete else f"the restore ran out of time ({seconds:.0f} s); "
    return "FAILED", _cut(f"Holdfast could not restore everything before the stack goes: {cut}"
                          f"{len(left)} not restored{': ' + named if named else ''}. Run `holdfast resume --now` "
                          "(it says what stops each), then delete again; the controller is paused meanwhile "
                          "(`holdfast unpause` to let it act).")


def _cut(text: str) -> str:
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT - 1] + "…"


def respond(event: Mapping[str, Any], status: str, reason: str,
            send: Callable[[str, bytes], None] | None = None) -> None:
    """PUT the custom resource's answer to its ResponseURL."""
    body = json.dumps({
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_ID,
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
        "NoEcho": False,
        "Data": {},
    }).encode()
    (send or _put)(event["ResponseURL"], body)


def _put(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as answer:   # noqa: S310  (CloudFormation's pre-signed https URL)
        answer.read()
