"""What each command's `--help` page says besides its options: what it does, whether it
writes, and an example. One table, so that every page has both and a test can hold them to it.

Writing commands say so first: outside a loopback endpoint they show what they will change
and ask, or take `--yes` (holdfast.cli.confirm).
"""

from __future__ import annotations

import argparse
import textwrap

WRITES = ("WRITES: outside a loopback endpoint it shows what it will change and asks (or takes --yes; "
          "without a terminal and without --yes it refuses, exit 2). --dry-run shows it and writes nothing.")

PAGES: dict[str, tuple[str, str]] = {
    "ledger-init": (
        f"Create the ledger table (holdfast-ledger, or --ledger-table) if it is missing. {WRITES}",
        "holdfast ledger-init",
    ),
    "plan": (
        "Read-only. For each selected resource, what `engage` would change, in plain words. "
        "Nothing is written.",
        "holdfast plan\n  holdfast --json plan > plan.json",
    ),
    "engage": (
        "Put every selected resource into the protected posture now: suspend the Auto Scaling processes, "
        "cap the SQS mappings, bound async retries and event age, turn NLB DNS failover off, suspend ECS "
        "scale-in. Each original is recorded first (a tag on the resource and the ledger). " + WRITES +
        " A deployed mode of recommend or off refuses it unless --force-mode.",
        "holdfast engage            # shows the plan, asks\n  holdfast engage --yes      # CI, a runbook",
    ),
    "resume": (
        "Restore every engaged resource now to its recorded original, skipping the staged holds "
        "(--now is required: the staged resume is the reconciler's). " + WRITES +
        " A deployed mode of recommend or off refuses it unless --force-mode.",
        "holdfast resume --now --dry-run\n  holdfast resume --now --yes",
    ),
    "release": (
        "Restore one resource now to its recorded original and forget its record, whatever the plan. " + WRITES +
        " With --all-accounts (one or more ARNs), a release request in the account and region each ARN names, "
        "through the HoldfastOperator role: that reconciler's next tick restores the resource once and records "
        "the outcome, which `status` shows.",
        "holdfast release arn:aws:autoscaling:us-east-1:111122223333:autoScalingGroup:"
        "8e1f...:autoScalingGroupName/orders --yes\n"
        "  holdfast release arn:aws:lambda:eu-west-1:444455556666:function:orders --all-accounts --yes",
    ),
    "status": (
        "Read-only. Every engaged resource by name and ARN, each recorded setting with its original, applied "
        "and current values in words, drift, where its record is; who holds resources by hand when no plan is "
        "in force; stuck resources with the command that fixes each; release requests and their outcomes. "
        "With --all-accounts, every account's and region's plan.",
        "holdfast status\n  holdfast status --all-accounts --regions us-east-1,eu-west-1",
    ),
    "detect": (
        "Read-only, offline. Replay recorded EventBridge events (JSON lines) through the real detector "
        "and print its verdicts.",
        "holdfast detect events.jsonl",
    ),
    "pause": (
        "Set the kill switch: the reconciler takes no action from its next tick; with --all-accounts, in "
        "every selected account and region (through the HoldfastOperator role). " + WRITES,
        "holdfast pause --reason 'manual failover in progress' --yes\n  holdfast pause --all-accounts -o ou-ab12-cdef3456 --yes",
    ),
    "unpause": (
        "Clear the kill switch: the reconciler acts again from its next tick; with --all-accounts, in every "
        "selected account and region. " + WRITES,
        "holdfast unpause --yes",
    ),
    "advance": (
        "Skip the hold of the current stage (the walk, the verdict and the gating alarms still gate). " + WRITES,
        "holdfast advance --generation 7 --yes",
    ),
    "stage": (
        "Read-only. The plan, its generation, time in stage, what gates the next stage, resources held by "
        "hand, and each mapping's drain and each replay.",
        "holdfast stage",
    ),
    "audit": (
        "Read-only. The account's settings that make a regional event worse, each with the AWS CLI "
        "commands that pause and resume it.",
        "holdfast audit",
    ),
    "doctor": (
        "Read-only. What a deploy and an event need, checked in the account (layer, roles, Health rule, "
        "expired-events queue, resources), each failure with its fix.",
        "holdfast doctor",
    ),
    "drain-estimate": (
        "Offline unless --queue-url. Backlog and drain time after an outage, at fixed caps and under "
        "the drain controller.",
        "holdfast drain-estimate --outage-minutes 172 --arrival-per-minute 1200 --consumer-per-minute 1800",
    ),
    "report": (
        "Read-only, offline. One CSV (or JSON) summary of the folder an --all-accounts command wrote "
        "with --output-dir: a row per account and region.",
        "holdfast plan --all-accounts -o ou-ab12-cdef3456 --output-dir out/\n  holdfast report --output-dir out/ > summary.csv",
    ),
    "drill": (
        "Rehearse a regional launch impairment end to end and write a drill report. In an account it "
        "starts the game day's AWS FIS experiment (real launch failures: --yes required); on a loopback "
        "endpoint it feeds the same events to the detector and runs the reconciler in-process. "
        "--dry-run runs every refusal check and writes nothing.",
        "holdfast drill --yes --out out/\n  holdfast --endpoint-url http://127.0.0.1:5000 drill",
    ),
}

GLOBAL_NOTE = "The global options (region, profile, endpoint, ledger table, --json, ...) are listed by `holdfast --help`."


def describe(name: str, parser: argparse.ArgumentParser) -> None:
    description, example = PAGES[name]
    parser.description = textwrap.fill(description, width=88)
    parser.epilog = f"example:\n  {example}\n\n{GLOBAL_NOTE}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
