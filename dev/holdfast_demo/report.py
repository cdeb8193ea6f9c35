"""The demo's outputs: the timeline chart (PNG) and the report (Markdown).

The chart has three panels over event time (PDT) so someone who was not there can read
the night at a glance: the recovery stage, the queue consumers' concurrency caps, and
how many resources Holdfast held in its safe posture, by kind, with the October
milestones marked across all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Sequence

from holdfast.core.kinds import LABELS
from holdfast.core.policy import STAGES
from holdfast_demo.scenario import PDT, Milestone

KIND_LABELS = LABELS  # declared with each kind (holdfast.core.kinds)
# Milestones labelled on the chart, in a few words; the report lists them all in full.
CHART_MILESTONES = {
    "23:48": "DynamoDB DNS emptied",
    "02:25": "DNS restored",
    "04:14": "lease manager throttled",
    "05:28": "launches resume",
    "07:04": "NLB failovers remove capacity",
    "09:36": "NLB failover disabled",
    "10:36": "network state normal",
    "13:50": "EC2 normal",
}


@dataclass
class Sample:
    time: datetime
    stage: str
    caps: Sequence[int | None]  # per selected mapping: MaximumConcurrency (None = uncapped)
    engaged: dict[str, int] = field(default_factory=dict)  # kind -> engaged count


def chart(
    samples: Sequence[Sample],
    milestones: Sequence[Milestone],
    path: Path,
    *,
    spans: Sequence[tuple[datetime, datetime, str, str]] = (),
    cap_notes: Sequence[tuple[datetime, int, str]] = (),
    subtitle: str = "",
    footnote: str = "",
    uncapped_as: int = 1000,
) -> None:
    """`spans` are (start, end, colour, label) shaded behind every panel; `cap_notes`
    are (time, cap, text) marked on the caps panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    times = [s.time.astimezone(PDT) for s in samples]
    fig, (ax_stage, ax_caps, ax_engaged) = plt.subplots(
        3, 1, figsize=(14, 9.5), sharex=True, gridspec_kw={"height_ratios": [1.1, 1.2, 1.2]}
    )
    fig.suptitle("Holdfast replaying us-east-1, 19–20 October 2025", fontsize=14, weight="bold", x=0.42, y=0.985)
    if subtitle:
        fig.text(0.42, 0.948, subtitle, ha="center", fontsize=9.5, color="#404040")
    legend = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)

    ax_stage.step(times, [STAGES.index(s.stage) for s in samples], where="post", color="#1f4e79", lw=2.4, zorder=3)
    ax_stage.set_yticks(range(len(STAGES)), STAGES)
    ax_stage.set_ylim(-0.5, len(STAGES) - 0.5)
    ax_stage.set_ylabel("Holdfast's\nrecovery stage")
    ax_stage.grid(axis="y", alpha=0.3)
    ax_stage.legend(handles=[Patch(color=colour, alpha=0.25, label=label) for _, _, colour, label in spans], **legend)

    caps = [[uncapped_as if c is None else c for c in s.caps] for s in samples]
    if caps and caps[0]:
        ax_caps.step(times, [max(c) for c in caps], where="post", color="#c55a11", lw=1.6, label="highest cap", zorder=3)
        ax_caps.step(times, [sorted(c)[len(c) // 2] for c in caps], where="post", color="#7f6000", lw=2.4,
                     label="median cap", zorder=3)
        ax_caps.step(times, [min(c) for c in caps], where="post", color="#548235", lw=1.6, label="lowest cap", zorder=3)
    for when, cap, text in cap_notes:
        ax_caps.annotate(text, xy=(when.astimezone(PDT), cap), xytext=(8, 24), textcoords="offset points",
                         fontsize=8, color="#c55a11", arrowprops=dict(arrowstyle="-", color="#c55a11", lw=0.8))
    ax_caps.set_yscale("log")
    ax_caps.set_ylabel(f"SQS consumers'\nMaximumConcurrency\n(no cap drawn as {uncapped_as})")
    ax_caps.legend(**legend)
    ax_caps.grid(axis="y", alpha=0.3)

    kinds = [k for k in KIND_LABELS if any(s.engaged.get(k) for s in samples)]
    if kinds:
        ax_engaged.stackplot(
            times,
            [[s.engaged.get(k, 0) for s in samples] for k in kinds],
            labels=[KIND_LABELS[k] for k in kinds],
            step="post",
            zorder=3,
        )
        handles, labels = ax_engaged.get_legend_handles_labels()
        ax_engaged.legend(handles[::-1], labels[::-1], **legend)  # top of the stack first
    ax_engaged.set_ylabel("resources Holdfast\nholds in safe posture")
    ax_engaged.grid(axis="y", alpha=0.3)

    start, end = times[0], times[-1]
    shown = [m for m in milestones if start <= m.time <= end and m.time.strftime("%H:%M") in CHART_MILESTONES]
    for ax in (ax_stage, ax_caps, ax_engaged):
        for m in shown:
            ax.axvline(m.time, color="grey", lw=0.8, ls="--", alpha=0.7, zorder=2)
        for span_start, span_end, colour, _ in spans:
            ax.axvspan(max(span_start, start), min(span_end, end), color=colour, alpha=0.12, lw=0, zorder=1)
    top = ax_stage.secondary_xaxis("top")
    top.set_xticks(
        [m.time for m in shown],
        [f"{m.time:%H:%M} {CHART_MILESTONES[m.time.strftime('%H:%M')]}" for m in shown],
        rotation=25,
        ha="left",
        fontsize=8.5,
    )
    ax_engaged.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=PDT))
    ax_engaged.set_xlabel("event time (PDT)")
    if footnote:
        fig.text(0.01, 0.01, footnote, fontsize=8.5, color="#404040", va="bottom")
    fig.subplots_adjust(left=0.1, right=0.79, top=0.83, bottom=0.1, hspace=0.12)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(
    *,
    stage_changes: Sequence[tuple[datetime, str, str]],
    milestones: Sequence[Milestone],
    final_check: Sequence[dict],
    drift: Sequence[dict],
    figures: dict[str, str],
    chart_name: str,
) -> str:
    lines = ["# Holdfast demo: us-east-1, 19–20 October 2025", ""]
    lines += ["## Figures", ""] + [f"- {k}: {v}" for k, v in figures.items()] + [""]
    lines += [f"![timeline]({chart_name})", ""]
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
