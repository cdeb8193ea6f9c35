"""The drill's evidence: the fleet before and after, what changed, and the report.

A snapshot is taken through the actuators' own read paths (`discover`): for every
selected resource, the values Holdfast manages as they are now, and whether a
write-ahead record is on the resource's tags. "Came back exactly" is, per resource:
the same values as before the drill, no record on its tags, and none in the ledger
(holdfast.engine's status terms: nothing engaged, current == original).

The report is one JSON document (`drill-report.json`) and the same facts as Markdown
(`drill-report.md`); `render_text` is the short summary the command prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_text
from holdfast.core.kinds import KINDS

JSON_NAME, MARKDOWN_NAME = "drill-report.json", "drill-report.md"


@dataclass
class Snapshot:
    """ARN -> {"kind", "name", "current", "tagged"} for every selected resource; `errors`
    names each kind that could not be read (its resources are then unknown)."""

    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def count(self) -> dict[str, int]:
        out = {k: 0 for k in KINDS}
        for r in self.resources.values():
            out[r["kind"]] += 1
        return out


def take(engine) -> Snapshot:
    """Every selected resource as the actuators read it. A kind whose listing or reads
    fail is recorded in `errors`, never raised: the caller decides what that means."""
    snap = Snapshot()
    for kind, act in engine.actuators.items():
        try:
            for r in act.discover():
                snap.resources[r.arn] = {"kind": kind, "name": r.name, "current": dict(r.current),
                                         "tagged": r.record is not None}
        except (ClientError, BotoCoreError) as err:
            snap.errors[kind] = error_text(err)
    return snap


def _fmt(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def compare(before: Snapshot, after: Snapshot, ledger_left: Iterable[str], *,
            drift_reported: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The restore verdict: every resource selected before the drill, against after.

    `ledger_left`: ARNs the ledger still holds a record for. `drift_reported`: ARN ->
    the owner's change Holdfast reported when it restored (kept, never overwritten)."""
    drift_reported = drift_reported or {}
    left = set(ledger_left)
    not_back: list[dict[str, Any]] = []
    restored = 0
    for arn, was in sorted(before.resources.items()):
        kind = was["kind"]
        if kind in after.errors:
            not_back.append({"arn": arn, "kind": kind, "problem": f"could not be read after the drill: {after.errors[kind]}"})
            continue
        now = after.resources.get(arn)
        problems = []
        if now is None:
            problems.append("no longer selected or no longer exists")
        else:
            changed = sorted(k for k in set(was["current"]) | set(now["current"])
                             if was["current"].get(k) != now["current"].get(k))
            if changed:
                problems.append("; ".join(f"{k}: {_fmt(was['current'].get(k))} before, {_fmt(now['current'].get(k))} now"
                                          for k in changed))
            if now["tagged"]:
                problems.append("Holdfast's write-ahead record is still on its tags")
        if arn in left:
            problems.append("the ledger still holds its original record")
        if problems:
            row = {"arn": arn, "kind": kind, "problem": "; ".join(problems)}
            if arn in drift_reported:
                row["owner_change_reported"] = drift_reported[arn]
            not_back.append(row)
        else:
            restored += 1
    unknown = {arn for arn in left if arn not in before.resources}
    for arn in sorted(unknown):
        not_back.append({"arn": arn, "kind": _kind_of(arn), "problem": "the ledger holds a record of a resource the drill did not select"})
    return {
        "exact": not not_back and not before.errors,
        "resources": len(before.resources),
        "restored": restored,
        "not_restored": not_back,
        "unread_before": dict(before.errors),
        "appeared": sorted(set(after.resources) - set(before.resources)),
    }


def _kind_of(arn: str) -> str:
    from holdfast.core.kinds import kind_of

    try:
        return kind_of(arn)
    except ValueError:
        return "?"


# ---- the report -----------------------------------------------------------------------

def minutes(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() / 60, 1)


def write(report: Mapping[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / JSON_NAME, out_dir / MARKDOWN_NAME
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path


def _figure(value: float | None, clock: str, extra: str = "") -> str:
    if value is None:
        return "not reached"
    return f"{value:g} min ({clock}{'; ' + extra if extra else ''})"


def figures_text(report: Mapping[str, Any]) -> tuple[str, str]:
    f = report["figures"]
    clock = report["clock"]["name"]
    posture = _figure(f["minutes_to_full_posture"], clock, _ticks(f.get("ticks_to_full_posture")))
    normal = _figure(f["minutes_end_to_normal"], clock, _ticks(f.get("ticks_end_to_normal")))
    return posture, normal


def _ticks(n: int | None) -> str:
    return "" if n is None else f"{n} tick{'' if n == 1 else 's'}"


def restore_text(restore: Mapping[str, Any]) -> str:
    if restore is None:
        return "not verified"
    if restore["exact"]:
        return (f"exact: {restore['restored']} of {restore['resources']} selected resources as before the drill, "
                "no write-ahead record left on a tag or in the ledger")
    return (f"NOT exact: {len(restore['not_restored'])} of {restore['resources']} resources did not come back"
            + (f"; kinds unread before the drill: {', '.join(restore['unread_before'])}" if restore["unread_before"] else ""))


def render_text(report: Mapping[str, Any], paths: tuple[Path, Path] | None) -> str:
    posture, normal = figures_text(report)
    t = report["target"]
    lines = [
        f"drill {report['result'].upper()} on {t['where']} ({t['region']}, account {t['account']}, mode {report['mode']})",
        f"  fleet:                         {report['fleet_summary']}",
        f"  first failure -> full posture: {posture}",
        f"  experiment end -> normal:      {normal}",
        f"  restore:                       {restore_text(report['restore'])}",
    ]
    for row in (report["restore"] or {}).get("not_restored", []):
        lines.append(f"    not back: {row['kind']} {row['arn']}: {row['problem']}")
    for gate in report.get("unproven_gates") or []:
        lines.append(f"  gate without evidence: {gate['stage']} (generation {gate['generation']}) passed with NO EVIDENCE: {gate['evidence'].removeprefix('no evidence: ')}")
    if _drill_clock(report):
        lines.append("  times are on the drill clock (simulated ticks), not wall-clock timestamps")
    for problem in report["problems"]:
        lines.append(f"  problem: {problem}")
    if paths:
        lines.append(f"  report: {paths[1]} and {paths[0]}")
    return "\n".join(lines)


def _drill_clock(report: Mapping[str, Any]) -> bool:
    return report["clock"]["name"] == "drill clock"


def markdown(report: Mapping[str, Any]) -> str:
    posture, normal = figures_text(report)
    t, f, exp = report["target"], report["figures"], report["experiment"]
    restore = report["restore"]
    # Drill-clock times are simulated: a timestamp that reads as wall time says so.
    mark = " (drill clock)" if _drill_clock(report) else ""
    at = lambda value, missing="-": f"{value}{mark}" if value else missing
    lines = [
        f"# Holdfast drill: {report['result']}",
        "",
        f"- where: {t['where']} (region {t['region']}, account {t['account']})",
        f"- mode: {report['mode']} (settings from {report['settings_source']})",
        f"- started {report['started_at']}, finished {report['finished_at']} (wall time {report['wall_seconds']} s)",
        f"- clock: {report['clock']['name']} — {report['clock']['note']}",
        f"- fleet: {report['fleet_summary']}",
        f"- experiment: {exp['kind']}" + (f" `{exp['id']}`" if exp.get("id") else "")
        + (f" from template `{exp['template_id']}`" if exp.get("template_id") else "")
        + f", state {exp.get('state') or '-'}" + (f" ({exp['reason']})" if exp.get("reason") else ""),
        "",
        "## Figures",
        "",
        "| measure | value |",
        "|---|---|",
        f"| first injected failure | {at(f['first_failure_at'])} |",
        f"| full posture (every engaging kind walked for hold generation {f['hold_generation'] or '-'}) | {at(f['full_posture_at'], 'not reached')} |",
        f"| **first failure → full posture** | **{posture}** |",
        f"| experiment ended | {at(f['experiment_end_at'])} |",
        f"| plan back to normal | {at(f['normal_at'], 'not reached')} |",
        f"| **experiment end → normal** | **{normal}** |",
        "",
        "## Restore",
        "",
        restore_text(restore),
        "",
    ]
    if restore and restore["not_restored"]:
        lines += ["| kind | resource | what is different |", "|---|---|---|"]
        lines += [f"| {r['kind']} | `{r['arn']}` | {r['problem']} |" for r in restore["not_restored"]]
        lines.append("")
    unproven = report.get("unproven_gates") or []
    if unproven:
        lines += ["## Gates passed without evidence", "",
                  "Nothing was there to judge: these stages advanced on their other checks only.", "",
                  "| stage | generation | evidence |", "|---|---|---|"]
        lines += [f"| {g['stage']} | {g['generation']} | **NO EVIDENCE**: {g['evidence'].removeprefix('no evidence: ')} |" for g in unproven]
        lines.append("")
    lines += ["## Timeline", "", f"| time{mark} | stage | generation | note |", "|---|---|---|---|"]
    lines += [f"| {e['at']} | {e['stage']} | {e['generation']} | {e['note']} |" for e in report["timeline"]]
    lines.append("")
    if report["problems"]:
        lines += ["## Problems", ""] + [f"- {p}" for p in report["problems"]] + [""]
    return "\n".join(lines)
