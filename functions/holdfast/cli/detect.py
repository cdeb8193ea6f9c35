"""CLI commands: detect — replay recorded EventBridge events through the detector.

    holdfast detect EVENTS_FILE [--settings FILE] [--json]

EVENTS_FILE holds EventBridge events, one JSON object a line, in any mix. `--settings`
and `--json` are the global options, accepted before or after the command.
The region whose Health issues count is --region, else the region most launch events
came from, else the default region. Exit 0 on success (malformed lines are reported,
not fatal), 2 for a missing or unreadable file or bad settings.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from holdfast.cli.context import UsageError, table
from holdfast.observation.replay import infer_region, load, replay


def register(sub) -> None:
    p = sub.add_parser("detect", help="replay EventBridge events (JSON lines) through the detector")
    p.add_argument("events_file", metavar="EVENTS_FILE", help="EventBridge events, one JSON object a line")
    p.set_defaults(func=run)


def run(ctx, args) -> int:
    settings = ctx.settings
    try:
        with Path(args.events_file).open(encoding="utf-8") as f:
            events = load(f)
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read events file {args.events_file}: {getattr(err, 'strerror', None) or err}") from err
    region = args.region or infer_region(events) or ctx.clients.region
    document = replay(events, settings, region)
    ctx.emit(document, _text(document, region))
    return 0


def _text(document: dict, region: str) -> str:
    counts = Counter(e["class"] for e in document["events"])
    lines = [f"{len(document['events'])} events for {region}: "
             + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))]
    lines += [f"  {e['reason']}" for e in document["events"] if e["class"] == "malformed"]
    unknown = [e for e in document["events"] if e["class"] == "unknown"]
    if unknown:
        lines.append(f"{len(unknown)} launch failures Holdfast cannot classify (never counted toward impairment):")
        lines += [f"  {e['reason']}" for e in unknown]
    if document["verdicts"]:
        rows = [(v["time"], v["verdict"], "; ".join(v["reasons"])) for v in document["verdicts"]]
        lines += ["", table(("time", "verdict", "reasons"), rows)]
    else:
        lines.append("verdict normal throughout")
    return "\n".join(lines)
