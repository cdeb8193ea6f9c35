"""The `holdfast` command line, with the conventions of the AWS CLI.

Global options come before the command:
  holdfast [--region R] [--profile P] [--endpoint-url URL] [--ledger-table NAME]
           [--selector KEY=VALUE] [--settings FILE] [--json] COMMAND ...

`--json` prints one JSON document on stdout; otherwise readable tables on stdout and
progress on stderr. Exit codes: 0 success, 1 some resources failed (each one named),
2 usage or settings error.

Each command lives in its own module here and exposes `register(subparsers)`; the
parser sets `func(ctx, args) -> int` for the chosen command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.settings import SettingsError
from holdfast.cli.context import Context, UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Command modules, in the order `holdfast --help` lists them.
COMMAND_MODULES = ("resources", "detect", "control", "audit", "doctor", "drain", "drill", "accounts")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 on usage errors, like the AWS CLI
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"holdfast: error: {message}\n")


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
    (("--json",), {"action": "store_true", "help": "print one JSON document on stdout"}),
    (("--rate-budget",), {"choices": ("auto", "on", "off"), "default": "auto",
                          "help": "pace every call within the account's API rate budgets, retrying throttles "
                                  "(auto: on, except against a loopback --endpoint-url such as a local moto)"}),
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="holdfast", description="Holdfast: protect and restore an account's automation during a regional EC2 impairment.")
    for flags, options in GLOBAL_OPTIONS:
        parser.add_argument(*flags, **options)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    for command in sub.choices.values():
        group = command.add_argument_group("global options (also accepted before the command)")
        for flags, options in GLOBAL_OPTIONS:
            # SUPPRESS: a global given before the command is kept unless repeated after it.
            group.add_argument(*flags, **{**options, "default": argparse.SUPPRESS})
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        ctx = Context.from_args(args)
        return int(args.func(ctx, args) or EXIT_OK)
    except (SettingsError, UsageError) as err:
        print(f"holdfast: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (BotoCoreError, ClientError) as err:  # credentials, profile, region, endpoint: one line, no traceback
        print(f"holdfast: error: AWS: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("holdfast: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`holdfast status | head`): stop quietly, as other CLIs do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_FAILED
    sys.exit(code)
