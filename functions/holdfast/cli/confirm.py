"""A second look before a write: what every writing command does before it writes.

Outside a loopback endpoint (a local moto, `make serve`: nothing there is real) a writing
command shows what it will change and asks `[y/N]` on the terminal, or goes ahead with
`--yes`. With no terminal to ask on (CI, SSM Run Command, a pipe) and no `--yes` it
refuses with exit 2 before it writes anything. `--dry-run` shows the same and writes
nothing, wherever it runs. The question and the preview go to stderr, so stdout keeps
one JSON document with `--json`.

The commands that write to resources (engage, resume --now, release) also honour the
deployed mode: `recommend` (decide and report, change nothing) and `off` refuse them with
exit 2 unless `--force-mode`. The deployed mode is the `<prefix>/settings` SSM parameter
each Holdfast stack publishes (`/holdfast/<stack name>/settings`); `--settings FILE`
counts too, so a file that says `recommend` is never ignored. When SSM cannot be read
(AccessDenied, the region impaired), the file's mode decides and the command says so.
"""

from __future__ import annotations

from typing import Callable

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import error_text
from holdfast.cli.context import PARAMETER_ROOT, Context, UsageError, deployed_settings
from holdfast.core.model import changes_nothing
from holdfast.iam import uses
from holdfast.settings import Settings, SettingsError


def add_write_options(parser, *, mode: bool = False) -> None:
    parser.add_argument("--yes", action="store_true",
                        help="go ahead without asking (required without a terminal, outside a loopback endpoint)")
    parser.add_argument("--dry-run", action="store_true", help="show what would change and write nothing")
    if mode:
        parser.add_argument("--force-mode", action="store_true",
                            help="write even where the deployed mode is recommend or off")


@uses("ssm:GetParametersByPath", by=("cli",))
def deployed_modes(ctx: Context) -> tuple[dict[str, str], str | None]:
    """({parameter name: mode} of every Holdfast stack here, why it could not be read or None)."""
    try:
        found = deployed_settings(ctx.clients)
    except (ClientError, BotoCoreError) as err:
        return {}, f"SSM parameters under {PARAMETER_ROOT} unreadable ({error_text(err)})"
    modes = {}
    for name, text in found.items():
        try:
            modes[name] = Settings.from_json(text).mode
        except SettingsError:
            modes[name] = "unreadable"
    return modes, None


def honour_mode(ctx: Context, args, command: str) -> None:
    """Refuse a resource write where the deployed mode (or --settings) is recommend or off,
    unless --force-mode. A mode forced is said on stderr."""
    deployed, unreadable = deployed_modes(ctx)
    quiet = [(f"SSM parameter {name}", mode) for name, mode in sorted(deployed.items()) if changes_nothing(mode)]
    if getattr(args, "settings", None) and changes_nothing(ctx.settings.mode):
        quiet.append((f"--settings {args.settings}", ctx.settings.mode))
    if unreadable and not ctx.json:
        ctx.warn(f"{unreadable}: the deployed mode is unknown; "
                 + (f"--settings says mode={ctx.settings.mode}" if getattr(args, "settings", None)
                    else "no --settings either"))
    if not quiet:
        return
    said = "; ".join(f"mode={mode} ({source})" for source, mode in quiet)
    if getattr(args, "force_mode", False):
        ctx.warn(f"--force-mode: writing although {said}")
        return
    raise UsageError(f"Holdfast here runs in {said}: `{command}` would write to resources, which that mode does not. "
                     f"`holdfast plan` shows what it would change; pass --force-mode to write anyway")


@uses("sts:GetCallerIdentity", by=("cli",))
def caller(ctx: Context) -> str:
    """The caller's account and identity, for the question and for the record of who acted."""
    try:
        who = ctx.clients("sts").get_caller_identity()
        return f"{who['Arn']} (account {who['Account']})"
    except (ClientError, BotoCoreError):
        return ctx.runtime.controller_id


def ask(ctx: Context, args, command: str, what: str, preview: Callable[[], tuple[str, int]]) -> bool:
    """Confirm a write. True: go ahead; raises UsageError (exit 2) when it may not.

    `what` says what the command writes ("engage every selected resource"); `preview()`
    gives the text that shows what will change and how many things change (0: nothing to
    ask about). Against a loopback endpoint, and with --yes, nothing is asked."""
    if getattr(args, "yes", False) or ctx.local():
        return True
    where = f"{ctx.endpoint_url() or 'AWS'} ({ctx.clients.region})"
    if not ctx.inp.isatty():
        raise UsageError(f"`holdfast {command}` would {what} in {where}, and there is no terminal to ask on: "
                         f"pass --yes to go ahead, or --dry-run to see what it would change")
    text, count = preview()
    ctx.err.write(text.rstrip("\n") + "\n")
    if count == 0:
        ctx.warn("nothing would change")
        return True
    ctx.err.write(f"{command}: {what} ({count}) in {where} as {caller(ctx)}? [y/N] ")
    ctx.err.flush()
    answer = ctx.inp.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError(f"not confirmed (answer {answer!r}): nothing written")
    return True
