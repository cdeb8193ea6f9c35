"""The `holdfast` command line, with the conventions of the AWS CLI.

Global options come before the command (or after it, as with the AWS CLI):
  holdfast [--region R] [--profile P] [--endpoint-url URL] [--ledger-table NAME]
           [--selector KEY=VALUE] [--settings FILE] [--output table|json|text] [--query EXPR]
           [--wide] [--json] COMMAND ...

Every command prints one document (holdfast.cli.output): `--query` (JMESPath) selects
from it and `--output` prints it as readable tables (the default, 120 columns at most;
`--wide` for full ARNs), JSON (`--json` is `--output json`; errors too) or the AWS CLI's
tab-separated text. Progress goes to stderr.

Options are never abbreviated (`--dry` is not `--dry-run`): a mistyped command, option
or choice is a usage error that names the nearest one.

Exit codes, one per cause (EXIT_CODES, in `holdfast --help` too): 0 success; 1 the
command ran and something did not succeed (each resource named); 2 usage or settings
(bad arguments or settings, a write not confirmed, a deployed mode that forbids it);
3 AWS did not answer (the endpoint is down, no network); 4 credentials (none found, or
AWS refused them or their permissions); 130 interrupted.

Each command lives in its own module here and exposes `register(subparsers)`; the
parser sets `func(ctx, args) -> int` for the chosen command. What a command's
`--help` page says besides its options is in holdfast.cli.pages.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import re
import sys
from typing import Sequence

from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

from holdfast.aws import AWS_ERRORS
from holdfast.settings import SettingsError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILED: "the command ran and something did not succeed (each resource or check named)",
    EXIT_USAGE: "usage or settings: bad arguments or settings, a write not confirmed, a deployed mode that forbids it",
    EXIT_UNREACHABLE: "AWS did not answer: the endpoint is down or unreachable",
    EXIT_DENIED: "credentials: none found, or AWS refused them or their permissions",
    EXIT_INTERRUPTED: "interrupted",
}

from holdfast.cli import pages  # noqa: E402
from holdfast.cli.context import Context, Unreachable, UsageError, connection_failure, credential_failure  # noqa: E402
from holdfast.cli.output import FORMATS, QueryError, compile_query, reset_wide, set_wide  # noqa: E402

# Command modules, in the order `holdfast --help` lists them.
COMMAND_MODULES = ("resources", "detect", "control", "audit", "doctor", "drain", "drill", "accounts")


def version() -> str:
    """holdfast.__version__: the one place the version is written (pyproject.toml reads it)."""
    from holdfast import __version__

    return __version__


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors, like the AWS CLI; each command's own parser shows
    its own usage, and with --json the error is a JSON document on stdout too. Options are
    never abbreviated, and an unknown command, option or choice is told the nearest one."""

    json_errors = False

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        message += self._did_you_mean(message)
        self.print_usage(sys.stderr)
        if _Parser.json_errors:
            _print_error_document(self.prog.removeprefix("holdfast").strip() or None, EXIT_USAGE, message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def _did_you_mean(self, message: str) -> str:
        """"; did you mean 'status'?" for the word argparse refused, when one is near it."""
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice:
            known = [str(c) for a in self._actions if a.choices for c in a.choices]
            wrong = [choice.group(1)]
        elif message.startswith("unrecognized arguments: "):
            known = [o for a in self._actions for o in a.option_strings]
            wrong = [w.split("=", 1)[0] for w in message.removeprefix("unrecognized arguments: ").split()
                     if w.startswith("-")]
        else:
            return ""
        known = list(dict.fromkeys(known))
        near = [f"{w!r}: did you mean {m[0]!r}?" for w in wrong if (m := _nearest(w, known))]
        return ("; " + "; ".join(near)) if near else ""


def _nearest(word: str, known: list[str]) -> list[str]:
    """What `word` was meant to be: the one it begins (an abbreviation), else the closest."""
    begun = [k for k in known if k.startswith(word) and len(word) > 2]
    return begun[:1] if len(begun) == 1 else difflib.get_close_matches(word, known, n=1, cutoff=0.6)


class _CommandParser(_Parser):
    """A command's parser: an argument it does not know is its usage error, shown with its
    own usage (argparse would leave it to the top-level parser's)."""

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


# The global options. As with the AWS CLI, they may come before or after the command.
GLOBAL_OPTIONS = (
    (("--region",), {"help": "AWS region (default: AWS_REGION, then the profile's region)"}),
    (("--profile",), {"help": "named profile from the AWS config"}),
    (("--endpoint-url",), {"help": "send every request to this URL (default: AWS_ENDPOINT_URL)"}),
    (("--ledger-table",), {"help": "ledger DynamoDB table (default: the one the region's Holdfast stack publishes "
                                 "at /holdfast/<stack>/ledger-table, else holdfast-ledger)"}),
    (("--selector",), {"help": "opt-in tag KEY=VALUE (default: the settings' selector)"}),
    (("--settings",), {"help": "JSON file whose `holdfast` object (or the whole document) holds the settings"}),
    (("--expired-queue-arn",), {"help": "Holdfast's expired-events queue, the on-failure destination of async configs "
                                          "(default: the deployed stack's, from SSM /holdfast/<stack>/expired-queue-arn; "
                                          "`none`: no destination, event ages kept)"}),
    (("--output",), {"choices": FORMATS, "default": None,
                     "help": "table (default: readable, 120 columns at most), json (one document, errors too) or "
                             "text (tab-separated, as the AWS CLI's)"}),
    (("--query",), {"metavar": "JMESPATH", "help": "select from the command's JSON document (JMESPath, as the AWS "
                                                  "CLI's --query), then print it as --output says"}),
    (("--wide",), {"action": "store_true", "help": "tables with every column (full ARNs) and no width limit"}),
    (("--json",), {"action": "store_true", "help": "--output json: print one JSON document on stdout (errors too)"}),
    (("--rate-budget",), {"choices": ("auto", "on", "off"), "default": "auto",
                          "help": "pace every call within the account's API rate budgets, retrying throttles "
                                  "(auto: on, except against a loopback endpoint such as a local moto)"}),
    (("--progress-seconds",), {"type": float, "default": 30.0, "metavar": "N",
                               "help": "when stderr is not a terminal, a progress line with an estimate of the time "
                                       "left at most every N seconds (0: every step; default 30)"}),
)


def _exit_codes_text() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="holdfast",
        description="Holdfast: protect and restore an account's automation during a regional EC2 impairment.",
        epilog=_exit_codes_text() + "\n\n`holdfast COMMAND --help` describes a command, with an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"holdfast {version()}")
    for flags, options in GLOBAL_OPTIONS:
        parser.add_argument(*flags, **options)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    for name, command in sub.choices.items():
        pages.describe(name, command)
        for flags, options in GLOBAL_OPTIONS:
            # Accepted after the command too, but listed once, on `holdfast --help`.
            # SUPPRESS: a global given before the command is kept unless repeated after it.
            command.add_argument(*flags, **{**options, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS})
    return parser


def _print_error_document(command: str | None, code: int, message: str) -> None:
    json.dump({"command": command, "error": {"exit_code": code, "cause": _cause(code), "message": message}},
              sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _cause(code: int) -> str:
    return {EXIT_USAGE: "usage", EXIT_UNREACHABLE: "unreachable", EXIT_DENIED: "denied",
            EXIT_FAILED: "failed", EXIT_INTERRUPTED: "interrupted"}.get(code, "error")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = _wants_json(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    width = set_wide(args.wide)
    try:
        return _run(args)
    finally:
        reset_wide(width)   # a test calling main in this thread gets the default back


def _run(args) -> int:
    ctx = None
    try:
        args.compiled_query = compile_query(args.query)
        ctx = Context.from_args(args)
        code = int(args.func(ctx, args) or EXIT_OK)
        if code != EXIT_OK and ctx.unanswered():
            raise Unreachable(ctx.where())
        if code != EXIT_OK and not ctx.emitted and ctx.output == "json":
            # Failed before its document (e.g. `advance` with no hold): the error is the document.
            _print_error_document(args.command, code, ctx.last_warning or "the command did not succeed")
        return code
    except Unreachable as err:
        return _fail(args, EXIT_UNREACHABLE, str(err))
    except (SettingsError, UsageError, QueryError) as err:
        if ctx is not None and ctx.unanswered():  # e.g. the ledger "missing" because nothing answered
            return _fail(args, EXIT_UNREACHABLE, f"{ctx.where()} ({err})")
        return _fail(args, EXIT_USAGE, str(err))
    except AWS_ERRORS as err:  # credentials, profile, region, endpoint: one line, no traceback
        if connection_failure(err):
            where = ctx.where() if ctx is not None else "AWS"
            return _fail(args, EXIT_UNREACHABLE, f"{where}: {err}")
        if credential_failure(err) or isinstance(err, (NoCredentialsError, PartialCredentialsError)):
            return _fail(args, EXIT_DENIED, f"credentials: {err}")
        if isinstance(err, ClientError):  # AWS answered with an error that is neither of the above
            return _fail(args, EXIT_FAILED, f"AWS: {err}")
        return _fail(args, EXIT_USAGE, f"AWS: {err}")   # no region, an unknown profile, a bad parameter
    except KeyboardInterrupt:
        print("holdfast: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if ctx is not None:
            ctx.leave()


def _wants_json(argv: list[str]) -> bool:
    """--json or --output json anywhere: usage errors are a JSON document too."""
    return "--json" in argv or "--output=json" in argv or any(
        a == "--output" and b == "json" for a, b in zip(argv, argv[1:]))


def _fail(args, code: int, message: str) -> int:
    print(f"holdfast: error: {message}", file=sys.stderr)
    if getattr(args, "json", False) or getattr(args, "output", None) == "json":
        _print_error_document(getattr(args, "command", None), code, message)
    return code


def entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`holdfast status | head`): stop quietly, as other CLIs do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_FAILED
    sys.exit(code)
