"""The demo's outputs: the timeline chart (PNG), the report (Markdown) and the figures as
JSON (out/demo-report.json), for a script to check:

    {"stages": {"<stage>": {"lifted_at": "<ISO 8601, PDT>", "evidence": [...]}, ...},
     "time_to_posture_seconds": N,
     "counterfactual": {"instances_replaced": ..., "zones_rebalanced": ...,
                        "target_group_zone_failovers": ..., "target_groups_failed_out_of_dns": ...,
                        "peak_consumer_concurrency": ..., "peak_consumer_concurrency_at": ...,
                        "with_holdfast": {the same figures}}}

One entry per stage that lifted (`drain`, `replay`, …), with the evidence its built-in
gate reported when it let the plan in; a stage lifted twice (after a step back) keeps its
last lift.

The chart has five panels over event time (PDT) so someone who was not there can read
the event at a glance: the recovery stage with its lifts, the launch outcomes the
verdict reads, the selected target groups' health and the consumers' backlog age per
consumer group (by the owner's own cap), consumer concurrency with and without Holdfast
and each group's median cap as its mappings' drain controllers set them, beside the
evidence those controllers judge by with no downstream alarm named (the median mapping's
time per message against its pre-event value; the demo's consumers have no downstream
knee, so it stays at baseline and the caps rise), and the
resources Holdfast held, with the
October milestones marked across all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from holdfast.core.kinds import LABELS
from holdfast.core.policy import STAGES
from holdfast_demo.scenario import PDT, Milestone
from holdfast_demo.world import CONSUMER_GROUPS

KIND_LABELS = LABELS  # declared with each kind (holdfast.core.kinds)
# Milestones labelled on the chart, in a few words; the report lists them all in full.
CHART_MILESTONES = {
    "23:48": "DynamoDB DNS emptied",
    "02:25": "DNS restored",
    "04:40": "SQS polling restored",
    "05:28": "launches resume (throttled)",
    "06:21": "network state lags",
    "07:04": "health-check terminations",
    "09:36": "NLB failover disabled",
    "10:36": "network normal",
    "11:23": "throttles relax",
    "13:50": "EC2 normal",
    "14:20": "event ends",
}


@dataclass
class Sample:
    time: datetime
    stage: str
    caps: Sequence[int | None]  # per selected mapping: MaximumConcurrency (None = uncapped)
    engaged: dict[str, int] = field(default_factory=dict)  # kind -> engaged count
    verdict: str = "normal"
    failure_share: float | None = None
    groups: dict[str, list] = field(default_factory=dict)   # consumer group -> its mappings' caps


@dataclass
class Lift:
    stage: str              # the plan's label: "drain step 0", "routing", ...
    time: datetime
    evidence: list[str]
    why: str = ""


def _pdt(t: datetime) -> str:
    return t.astimezone(PDT).isoformat(timespec="seconds")


def json_document(*, lifts: Sequence[Lift], posture_seconds: float | None, counterfactual: Mapping[str, Any],
                  actual: Mapping[str, Any]) -> str:
    stages = {lift.stage: {"lifted_at": _pdt(lift.time), "evidence": list(lift.evidence)} for lift in lifts}
    return json.dumps({
        "stages": stages,
        "time_to_posture_seconds": None if posture_seconds is None else round(posture_seconds),
        "counterfactual": {**counterfactual, "with_holdfast": dict(actual)},
    }, indent=2) + "\n"


def chart(
    samples: Sequence[Sample],
    milestones: Sequence[Milestone],
    path: Path,
    world,
    *,
    lifts: Sequence[Lift] = (),
    engaged_at: Mapping[str, datetime] | None = None,
    spans: Sequence[tuple[datetime, datetime, str, str]] = (),
    cap_notes: Sequence[tuple[datetime, int, str]] = (),
    subtitle: str = "",
    footnote: str = "",
    warning_ratio: float = 1.08,
) -> None:
    """`spans` are (start, end, colour, label) shaded behind every panel; `cap_notes` are
    (time, cap, text) marked on the consumers' panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    times = [s.time.astimezone(PDT) for s in samples]
    fig, (ax_stage, ax_launch, ax_health, ax_consumers, ax_engaged) = plt.subplots(
        5, 1, figsize=(15, 15), sharex=True, gridspec_kw={"height_ratios": [1.3, 0.9, 1.0, 1.1, 0.9]}
    )
    fig.suptitle("Holdfast replaying us-east-1, 19–20 October 2025", fontsize=14, weight="bold", x=0.42, y=0.99)
    if subtitle:
        fig.text(0.42, 0.965, subtitle, ha="center", fontsize=9.5, color="#404040")
    legend = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)

    ax_stage.step(times, [STAGES.index(s.stage) for s in samples], where="post", color="#1f4e79", lw=2.4, zorder=3)
    for lift in lifts:
        if lift.stage.startswith("drain step") and not lift.stage.endswith(" 0"):
            continue
        y = STAGES.index(lift.stage.split(" ")[0])
        ax_stage.annotate(f"{lift.stage} {lift.time.astimezone(PDT):%H:%M}", xy=(lift.time.astimezone(PDT), y),
                          xytext=(-8, 6), textcoords="offset points", ha="right", fontsize=7.5, color="#1f4e79")
    if engaged_at:
        first = min(engaged_at.values()).astimezone(PDT)
        ax_stage.annotate(f"engaged {first:%H:%M}", xy=(first, 1), xytext=(6, 8), textcoords="offset points",
                          fontsize=7.5, color="#1f4e79")
    ax_stage.set_yticks(range(len(STAGES)), STAGES)
    ax_stage.set_ylim(-0.5, len(STAGES) - 0.3)
    ax_stage.set_ylabel("Holdfast's\nrecovery stage")
    ax_stage.grid(axis="y", alpha=0.3)
    ax_stage.legend(handles=[Patch(color=colour, alpha=0.25, label=label) for _, _, colour, label in spans], **legend)

    shares = [(t, s.failure_share) for t, s in zip(times, samples) if s.failure_share is not None]
    if shares:
        ax_launch.step([t for t, _ in shares], [v * 100 for _, v in shares], where="post", color="#c00000", lw=1.6,
                       label="capacity-class failures, % of launch outcomes\n(the verdict's window; routine ones count 0)")
    ax_launch.axhline(50, color="#c00000", lw=0.8, ls=":", label="impaired at 50 % (detect_failure_share)")
    ax_launch.axhline(10, color="#548235", lw=0.8, ls=":", label="recovery at most 10 % (recover_success_share)")
    ax_launch.set_ylim(-5, 105)
    ax_launch.set_ylabel("launch\noutcomes (%)")
    ax_launch.legend(**legend)
    ax_launch.grid(axis="y", alpha=0.3)

    if world.unhealthy:
        ax_health.plot([t.astimezone(PDT) for t, _ in world.unhealthy], [v for _, v in world.unhealthy], color="#7030a0",
                       lw=0.6, label="unhealthy targets, selected target groups\n(UnHealthyHostCount, a minute)")
    ax_health.set_ylabel("unhealthy\ntargets")
    ax_age = ax_health.twinx()
    group_colours = dict(zip(CONSUMER_GROUPS, ("#c55a11", "#7f6000", "#548235")))
    for group in CONSUMER_GROUPS:
        ages = [(t.astimezone(PDT), by.get(group)) for t, by in getattr(world, "group_age", ())]
        if any(a is not None for _, a in ages):
            ax_age.plot([t for t, _ in ages], [float("nan") if a is None else a / 3600 for _, a in ages],
                        color=group_colours[group], lw=1.4, label=f"oldest message, {group} (h)")
    ax_age.set_ylabel("backlog age (h)")
    handles = ax_health.get_legend_handles_labels()[0] + ax_age.get_legend_handles_labels()[0]
    ax_health.legend(handles=handles, **{**legend, "bbox_to_anchor": (1.05, 1.0)})
    ax_health.grid(axis="y", alpha=0.3)

    if world.concurrency:
        when = [t.astimezone(PDT) for t, _, _ in world.concurrency]
        ax_consumers.step(when, [max(w, 0.8) for _, _, w in world.concurrency], where="post", color="#c55a11", lw=1.4,
                          label="without Holdfast\n(owners' caps; no cap: ~1,000)")
        ax_consumers.step(when, [max(h, 0.8) for _, h, _ in world.concurrency], where="post", color="#1f4e79", lw=2.0,
                          label="with Holdfast")
    for group in CONSUMER_GROUPS:
        medians = []
        for s in samples:
            caps = sorted(1000 if c is None else c for c in s.groups.get(group, ()))
            medians.append(caps[len(caps) // 2] if caps else float("nan"))
        if any(m == m for m in medians):
            ax_consumers.step(times, medians, where="post", color=group_colours[group], lw=1.0, ls="--",
                              label=f"cap, {group} (median)")
    for when, cap, text in cap_notes:
        ax_consumers.annotate(text, xy=(when.astimezone(PDT), cap), xytext=(8, 18), textcoords="offset points",
                              fontsize=7.5, color="#548235", arrowprops=dict(arrowstyle="-", color="#548235", lw=0.8))
    ax_consumers.set_yscale("log")
    ax_consumers.set_ylabel("concurrent consumer\nbatches, all mappings")
    # The evidence each mapping's controller judges by, no alarm named: time per message
    # against its pre-event median (a warning at drain_duration_warning_ratio).
    ax_speed = ax_consumers.twinx()
    ratios = getattr(world, "duration_ratio", ())
    if ratios:
        ax_speed.plot([t.astimezone(PDT) for t, _ in ratios], [float("nan") if r is None else r for _, r in ratios],
                      color="#7030a0", lw=1.0, label="time per message ÷ baseline\n(median mapping, built-in evidence)")
        ax_speed.axhline(warning_ratio, color="#7030a0", lw=0.8, ls=":", label=f"warning: {warning_ratio:g}× baseline")
    ax_speed.set_ylim(0, max(2.0, warning_ratio + 0.5))
    ax_speed.set_ylabel("time per message\n÷ baseline")
    handles = ax_consumers.get_legend_handles_labels()[0] + ax_speed.get_legend_handles_labels()[0]
    ax_consumers.legend(handles=handles, **legend)
    ax_consumers.grid(axis="y", alpha=0.3)

    kinds = [k for k in KIND_LABELS if any(s.engaged.get(k) for s in samples)]
    if kinds:
        ax_engaged.stackplot(times, [[s.engaged.get(k, 0) for s in samples] for k in kinds],
                             labels=[KIND_LABELS[k] for k in kinds], step="post", zorder=3)
        handles, labels = ax_engaged.get_legend_handles_labels()
        ax_engaged.legend(handles[::-1], labels[::-1], **legend)  # top of the stack first
    ax_engaged.set_ylabel("resources Holdfast\nholds in safe posture")
    ax_engaged.grid(axis="y", alpha=0.3)

    start, end = times[0], times[-1]
    shown = [m for m in milestones if start <= m.time <= end and m.time.strftime("%H:%M") in CHART_MILESTONES]
    for ax in (ax_stage, ax_launch, ax_health, ax_consumers, ax_engaged):
        for m in shown:
            ax.axvline(m.time, color="grey", lw=0.8, ls="--", alpha=0.7, zorder=2)
        for span_start, span_end, colour, _ in spans:
            ax.axvspan(max(span_start, start), min(span_end, end), color=colour, alpha=0.10, lw=0, zorder=1)
    top = ax_stage.secondary_xaxis("top")
    top.set_xticks([m.time for m in shown],
                   [f"{m.time:%H:%M} {CHART_MILESTONES[m.time.strftime('%H:%M')]}" for m in shown],
                   rotation=28, ha="left", fontsize=8)
    ax_engaged.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=PDT))
    ax_engaged.set_xlabel("event time (PDT)")
    if footnote:
        fig.text(0.01, 0.008, footnote, fontsize=8.5, color="#404040", va="bottom", wrap=True)
    fig.subplots_adjust(left=0.1, right=0.75, top=0.87, bottom=0.06, hspace=0.12)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(
    *,
    stage_changes: Sequence[tuple[datetime, str, str]],
    milestones: Sequence[Milestone],
    final_check: Sequence[dict],
    drift: Sequence[dict],
    figures: dict[str, str],
    chart_name: str,
    lifts: Sequence[Lift] = (),
    engaged_at: Mapping[str, datetime] | None = None,
    first_signal: datetime | None = None,
    posture_seconds: float | None = None,
    counterfactual: Mapping[str, Any] | None = None,
    actual: Mapping[str, Any] | None = None,
    compressions: Sequence[tuple[datetime, str]] = (),
) -> str:
    lines = ["# Holdfast demo: us-east-1, 19–20 October 2025", ""]
    lines += ["## Figures", ""] + [f"- {k}: {v}" for k, v in figures.items()] + [""]
    lines += [f"![timeline]({chart_name})", ""]
    if engaged_at:
        lines += ["## Engaged", ""]
        if first_signal is not None:
            lines.append(f"First qualifying signal (a capacity-class launch failure): {first_signal.astimezone(PDT):%H:%M:%S} PDT; "
                         f"full posture {posture_seconds:.0f} s later." if posture_seconds is not None else "")
            lines.append("")
        lines += ["| kind | engaged at (PDT) |", "|---|---|"]
        lines += [f"| {KIND_LABELS.get(k, k)} | {t.astimezone(PDT):%H:%M} |" for k, t in sorted(engaged_at.items(), key=lambda x: x[1])]
        lines.append("")
    if lifts:
        lines += ["## Stages lifted, and the evidence that allowed each", "", "| lifted (PDT) | stage | evidence |",
                  "|---|---|---|"]
        lines += [f"| {lift.time.astimezone(PDT):%H:%M} | {lift.stage} | {'<br>'.join(lift.evidence) or lift.why} |"
                  for lift in lifts]
        lines.append("")
    if counterfactual is not None and actual is not None:
        rows = [("instances replaced after failing ELB health checks", "instances_replaced"),
                ("zone rebalances (AZRebalance)", "zones_rebalanced"),
                ("target-group zones failed out of DNS", "target_group_zone_failovers"),
                ("target groups failed out of DNS at least once", "target_groups_failed_out_of_dns"),
                ("peak concurrent consumer batches", "peak_consumer_concurrency")]
        lines += ["## Without Holdfast: the same inputs, the owners' own settings", "",
                  "What the account's automation would have done to the selected resources (demo/world.py's models), "
                  "and what it did with Holdfast.", "", "| | without Holdfast | with Holdfast |", "|---|---|---|"]
        lines += [f"| {label} | {counterfactual[key]:,} | {actual[key]:,} |" for label, key in rows]
        lines += ["", f"The peak without Holdfast comes at {counterfactual.get('peak_consumer_concurrency_at')}: every mapping "
                      "at its owner's cap (uncapped ones toward Lambda's ~1,000) against the backlog of the outage, "
                      "two hours after DynamoDB came back.", ""]
    if compressions:
        lines += ["## Compressions", ""] + [f"- from {t.astimezone(PDT):%H:%M}: {text}" for t, text in compressions] + [""]
    lines += ["## Stage changes (event time, PDT)", "", "| time | stage | why |", "|---|---|---|"]
    lines += [f"| {t.astimezone(PDT):%m-%d %H:%M} | {stage} | {why} |" for t, stage, why in stage_changes]
    lines += ["", "## October milestones", "", "| time | event |", "|---|---|"]
    lines += [f"| {m.time:%m-%d %H:%M} | {m.text} |" for m in milestones]
    ok = [r for r in final_check if r["result"] == "restored"]
    kept = [r for r in final_check if r["result"] == "drift-kept"]
    bad = [r for r in final_check if r["result"] not in ("restored", "drift-kept", "untouched")]
    lines += [
        "",
        "## End state against the pre-event snapshot",
        "",
        f"- restored exactly: {len(ok)}",
        f"- owner changes kept (drift): {len(kept)}",
        f"- unselected resources untouched: {sum(r['result'] == 'untouched' for r in final_check)}",
        f"- NOT restored: {len(bad)}",
        "",
    ]
    for r in kept + bad:
        lines.append(f"- `{r['resource']}`: {r['result']} — {r.get('detail', '')}")
    if drift:
        lines += ["", "## Drift reported by Holdfast", ""]
        lines += [f"- `{d.get('arn')}`: {d.get('drift')}" for d in drift]
    return "\n".join(lines) + "\n"
