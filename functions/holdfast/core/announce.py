"""A stage change as an operator reads it in a chat channel or an e-mail: the stage, why,
what is held and what is back, and the gate to the next stage.

`chat(plan, settings, engaged)` is an AWS Chatbot (Amazon Q Developer in chat
applications) custom notification: `{"version": "1.0", "source": "custom", "content":
{"textType": "client-markdown", "title", "description", "nextSteps", "keywords"},
"metadata": {"threadId", "summary", "eventType"}}`, the schema Chatbot renders in Slack
and Microsoft Teams (it drops messages of any other shape). One thread per account and
region, so an event's stages read as one conversation. `text(...)` is the same for e-mail.

Pure: no boto3, no clock.
"""

from __future__ import annotations

from typing import Any, Mapping

from holdfast.core import policy
from holdfast.core.kinds import LABELS
from holdfast.core.model import recommends_only

# Chatbot truncates a long description; keep a message short enough to read in the channel.
MAX_DESCRIPTION = 3000
MAX_REASONS = 4


def next_gate(plan: policy.Plan, settings) -> str:
    """What moves this plan to its next stage, as the stage policy judges it."""
    hold = settings.hold_minutes
    gates = {
        policy.NORMAL: "none: nothing is engaged",
        policy.HOLD: f"drain, after {hold} min with no capacity-class launch failure, probes healthy and at "
                     "least one successful launch (a new impairment keeps the hold)",
        policy.DRAIN: "replay, once every SQS mapping is back at its owner's concurrency with its backlog "
                      f"draining, gating alarms OK (a regression steps back), then a hold of {hold} min",
        policy.REPLAY: f"fresh-work, once every replay source has finished, and a hold of {hold} min",
        policy.FRESH_WORK: "routing, once the selected target groups' health is stable (no flaps, no "
                           f"health-check terminations) for {hold} min",
        policy.ROUTING: f"capacity, after a clean hold of {hold} min",
        policy.CAPACITY: f"normal, once launches are normal for {settings.capacity_hold_minutes} min "
                         "(no capacity-class failures, successes above the recovery share)",
    }
    return gates[plan.stage]


def held(plan: policy.Plan, settings) -> tuple[list[str], list[str]]:
    """(kinds held in the safe posture, kinds back at their owners' values) in this stage."""
    posture = policy.posture(plan, settings)
    kept = [k for k, p in posture.items() if p in (policy.ENGAGE, policy.CONTROL)]
    back = [k for k, p in posture.items() if p == policy.RESTORE]
    return kept, back


def _kinds(kinds: list[str], engaged: Mapping[str, int] | None) -> str:
    if not kinds:
        return "none"
    counts = engaged or {}
    return ", ".join(f"{LABELS.get(k, k)} ({counts[k]})" if k in counts else LABELS.get(k, k) for k in kinds)


def _lines(plan: policy.Plan, settings, engaged: Mapping[str, int] | None) -> tuple[str, list[str]]:
    kept, back = held(plan, settings)
    reasons = list(plan.reasons)[:MAX_REASONS] or ["-"]
    mode = "recommend: decided and reported, nothing written" if recommends_only(plan.mode) else plan.mode
    lines = [
        f"Stage: {plan.label} (generation {plan.generation}, mode {mode})",
        "Why: " + "; ".join(reasons),
        "Held: " + _kinds(kept, engaged),
        "Back to their owners' values: " + _kinds(back, None),
        "Next gate: " + next_gate(plan, settings),
    ]
    title = f"Holdfast: {plan.label}" + (" (recommend only)" if recommends_only(plan.mode) else "")
    return title, lines


def chat(plan: policy.Plan, settings, *, account: str, region: str,
         engaged: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The Chatbot custom notification for a new plan. `engaged`: records held per kind
    (from the ledger), shown next to each kind when known."""
    title, lines = _lines(plan, settings, engaged)
    description = "\n".join(f"*{line.split(':', 1)[0]}:*{line.split(':', 1)[1]}" for line in lines)
    return {
        "version": "1.0",
        "source": "custom",
        "content": {
            "textType": "client-markdown",
            "title": f"{title} in {account} {region}",
            "description": description[:MAX_DESCRIPTION],
            "nextSteps": [
                "`holdfast stage` shows what gates the next stage; `holdfast advance` skips the hold",
                "`holdfast pause` stops every write from the next tick",
            ],
            "keywords": [plan.label, region, account],
        },
        "metadata": {
            "threadId": f"holdfast-{account}-{region}",
            "summary": f"{title} (generation {plan.generation})",
            "eventType": "HoldfastStageChange",
        },
    }


def text(plan: policy.Plan, settings, *, account: str, region: str,
         engaged: Mapping[str, int] | None = None) -> str:
    """The same message for e-mail."""
    title, lines = _lines(plan, settings, engaged)
    return "\n".join([f"{title} in {account} {region}", ""] + lines + [
        "", "holdfast stage: what gates the next stage. holdfast pause: stop every write from the next tick."])
