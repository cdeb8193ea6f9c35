"""What a tick tells the world: a new plan and a stalled drain on SNS, and its metrics.

As controller-runtime keeps the loop's metrics apart from the Reconcile it calls: the
steps (holdfast.reconciler.steps) decide what to announce, this module says it. A
failed publish is logged and never stops the tick."""

from __future__ import annotations

import json

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from holdfast.aws import AWS_ERRORS, error_text
from holdfast.core import announce, policy
from holdfast.core.model import ENGAGED, FAILED, REFUSED_STALE
from holdfast.core.policy import Plan
from holdfast.iam import uses
from holdfast.ledger import plan as ledger_plan
from holdfast.reconciler.state import WRITES, Tick, TickResult
from holdfast.runtime import Runtime, Telemetry

METRICS_NAMESPACE = "Holdfast"


def notify(t: Tick, plan: Plan) -> None:
    if t.runtime.topic_arn:
        try:
            publish_stage(t.runtime, plan)
        except AWS_ERRORS as err:  # the walk goes on; the next tick publishes
            t.log("stage notification failed: the next tick tries again", plan, reasons=[error_text(err)])
            return
    ledger_plan.mark_notified(t.ledger, plan.generation)


def announce_stalls(t: Tick, plan: Plan, decided) -> None:
    """Each stall reported once, when the drain's record first says it (the record keeps
    that it was announced): a failed publish is logged, and the DrainStalled alarm still
    says it."""
    for arn in decided.new_stalls:
        since, why = decided.stalled[arn]
        t.log("drain stalled", plan, arn=arn, since=since.isoformat() if since else None, reasons=[why])
        if not t.runtime.topic_arn:
            continue
        try:
            publish_stall(t.runtime, plan, arn, decided.consumers.get(arn), since, why,
                          decided.steps[arn].cap if arn in decided.steps else None)
        except AWS_ERRORS as err:
            t.log("stall notification failed: the DrainStalled alarm still reports it", plan, arn=arn,
                  reasons=[error_text(err)])


@uses("sns:Publish", by=("reconciler",))
def publish_stall(runtime: Runtime, plan: Plan, arn: str, consumer, since, why: str, cap) -> None:
    name = f"{consumer.function}<-{consumer.queue}" if consumer is not None else arn.rsplit(":", 1)[-1]
    message = {"event": "drain-stalled", "mapping": arn, "name": name, "generation": plan.generation,
               "stage": plan.stage, "stalled_since": since.isoformat() if since else None, "why": why,
               "cap_kept": cap,
               "what_to_do": ("the mapping keeps the cap last judged safe and no longer holds the later stages; fix "
                              f"its cause, or give it back to its owner with `holdfast release {arn}`")}
    runtime.clients("sns").publish(
        TopicArn=runtime.topic_arn, Subject=f"Holdfast: drain of {name} stalled"[:100],
        Message=json.dumps(message, indent=2))


@uses("sns:Publish", by=("reconciler",))
def publish_stage(runtime: Runtime, plan: Plan) -> None:
    """Announce a new plan, one message per kind of subscriber (SNS MessageStructure
    `json`): AWS Chatbot's HTTPS subscription gets a custom notification it renders in
    Slack or Teams, e-mail the same as text (holdfast.core.announce), and every other
    protocol (`default`: SQS, Lambda) the JSON document. A failed publish is logged; the
    plan stays un-notified and the next tick tries again."""
    message = {
        "generation": plan.generation,
        "stage": plan.stage,
        "entered_at": plan.entered_at.isoformat() if plan.entered_at else None,
        "verdict": plan.verdict,
        "reasons": list(plan.reasons),
        "mode": runtime.settings.mode,
        "controller": runtime.controller_id,
    }
    # arn:partition:sns:region:account:name
    region, account = (runtime.topic_arn.split(":") + ["", "", "", "", ""])[3:5]
    where = {"account": account, "region": region or runtime.clients.region}
    runtime.clients("sns").publish(
        TopicArn=runtime.topic_arn,
        Subject=f"Holdfast: {plan.label} (generation {plan.generation})"[:100],
        MessageStructure="json",
        Message=json.dumps({
            "default": json.dumps(message, indent=2),
            "email": announce.text(plan, runtime.settings, **where),
            "https": json.dumps(announce.chat(plan, runtime.settings, **where)),
        }),
    )


def emit_metrics(result: TickResult, telemetry: Telemetry) -> None:
    if not telemetry.metrics:
        return
    metrics = EphemeralMetrics(namespace=METRICS_NAMESPACE, service="holdfast-reconciler")
    if result.stage is not None:
        metrics.add_metric(name="StageIndex", unit=MetricUnit.Count, value=policy.STAGES.index(result.stage))
    metrics.add_metric(name="ResourcesEngaged", unit=MetricUnit.Count, value=result.count(ENGAGED))
    metrics.add_metric(name="WritesDone", unit=MetricUnit.Count, value=result.count(*WRITES))
    metrics.add_metric(name="WritesRefused", unit=MetricUnit.Count, value=result.count(REFUSED_STALE))
    metrics.add_metric(name="WritesFailed", unit=MetricUnit.Count, value=result.count(FAILED))
    # Resources that keep failing and no longer gate their stage; an alarm watches it.
    if result.stuck is not None:
        metrics.add_metric(name="ResourcesStuck", unit=MetricUnit.Count, value=len(result.stuck))
    # Drains that cannot finish and no longer gate the stages; an alarm watches it.
    if result.stalled is not None:
        metrics.add_metric(name="DrainStalled", unit=MetricUnit.Count, value=result.stalled)
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int("paused" in result.actions))
    metrics.flush_metrics()
