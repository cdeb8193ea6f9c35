"""`holdfast audit`: the account's risky defaults, and how to pause each mechanism.

Read-only. Lists, per resource, the settings that make recovery from a regional
impairment worse (each kind's rule is in holdfast.core.kinds) and, for each mechanism Holdfast
engages, the AWS CLI commands that pause it and resume it. With --json:
{"findings": [{"kind", "resource", "problem", "pause_command", "resume_command"[, "fix_command"]}]}.
With the expired-events queue known (found as `engage` finds it), it also lists the
selected functions whose execution role may not send to that queue
(iam:SimulatePrincipalPolicy, one call per role), with the command that grants it.
Exit 0 when the audit ran (findings are not failures), 1 when some resources could
not be read (each is named on stderr), 2 on usage errors.
"""

from __future__ import annotations

from collections import Counter

from holdfast.cli import account_audit
from holdfast.cli.context import table


def register(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="list the account's settings that make recovery worse, with pause and resume commands",
        description=__doc__.split("\n\n")[0],
    )
    p.set_defaults(func=run)


def run(ctx, args) -> int:
    queue, _ = ctx.use_expired_queue()
    result = account_audit.run(ctx.clients, ctx.settings, progress=ctx.progress, expired_queue_arn=queue)
    ctx.progress("")
    ctx.emit(result.to_dict(), render(result))
    for what in result.unreadable:
        ctx.warn(f"could not read {what}")
    return 1 if result.unreadable else 0


def render(result: account_audit.AuditResult) -> str:
    if not result.findings:
        return "no findings"
    lines = [table(["kind", "resource", "problem"], [[f.kind, f.name, f.problem] for f in result.findings])]
    fixes = [f for f in result.findings if f.fix_command]
    if fixes:
        lines += ["", "to fix:"]
        for f in fixes:
            lines += ["", f"{f.kind} {f.name}", f"  {f.fix_command}"]
    commands = [f for f in result.findings if f.pause_command]
    if commands:
        lines += ["", "pause during an event, resume afterwards:"]
        for f in commands:
            lines += ["", f"{f.kind} {f.name}", f"  pause:  {f.pause_command}", f"  resume: {f.resume_command}"]
    counts = Counter(f.kind for f in result.findings)
    lines += ["", f"{len(result.findings)} findings: " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))]
    return "\n".join(lines)
