"""What every command gets: the Runtime (clients, settings, ledger, clock, ...), built here
from the command line and the AWS CLI's environment variables, and output helpers."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import getpass
from urllib.parse import urlparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import Clients, error_code, error_text
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE
from holdfast.clock import SystemClock
from holdfast.runtime import Runtime, govern
from holdfast.settings import CONTEXT_KEY, Settings, SettingsError

# Where a deployed Holdfast publishes its expired-events queue: the stack writes the ARN
# to SSM at <parameter prefix>/expired-queue-arn, the prefix being /holdfast/<stack name>
# by default (holdfast_cdk.construct). A queue named this is found too.
PARAMETER_ROOT = "/holdfast"
EXPIRED_QUEUE_PARAMETER = "expired-queue-arn"
# The ledger's table, named by CloudFormation, is published at <prefix>/ledger-table.
LEDGER_TABLE_PARAMETER = "ledger-table"
SETTINGS_PARAMETER = "settings"
EXPIRED_QUEUE_NAME = "holdfast-expired-events"
NO_QUEUE = "none"


class UsageError(Exception):
    """Bad arguments or input the user can fix; exits 2."""


def load_settings_file(path: str | None) -> Settings:
    """Settings from a JSON file: its `holdfast` object, or the whole document."""
    if path is None:
        return Settings()
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as err:
        raise UsageError(f"cannot read settings file {path}: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise UsageError(f"settings file {path} is not valid JSON: {err}") from err
    if isinstance(raw, dict) and CONTEXT_KEY in raw:
        raw = raw[CONTEXT_KEY]
    if isinstance(raw, dict) and "context" in raw and isinstance(raw["context"], dict):  # a cdk.json
        raw = raw["context"].get(CONTEXT_KEY, {})
    return Settings.from_mapping(raw)


@dataclass
class Context:
    runtime: Runtime
    json: bool
    # --expired-queue-arn as given (None: find the deployed stack's; "none": use no queue).
    expired_queue_option: str | None = None
    # How the ledger table was chosen (--ledger-table, the SSM parameter, or the old default).
    ledger_found_by: str = "--ledger-table"
    # Looked up when a Context is made, not at import, so redirected streams (tests) are honoured.
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Context":
        # botocore reads only AWS_DEFAULT_REGION; AWS_REGION wins over it, as in the AWS CLI.
        region = args.region or os.environ.get("AWS_REGION")
        clients = Clients(region=region, profile=args.profile, endpoint_url=args.endpoint_url)
        ledger, found_by, deployed = find_ledger_table(clients, chosen=args.ledger_table)
        if args.settings is None and deployed is not None:
            # The deployed stack's settings (its mode among them), not the defaults: what
            # `holdfast stage` decides with must be what the controller decides with.
            name, text = deployed
            try:
                settings = Settings.from_json(text)
            except SettingsError as err:
                raise UsageError(f"SSM parameter {name} does not hold valid settings: {err}") from err
        else:
            settings = load_settings_file(args.settings)
        if args.selector is not None:
            settings = Settings.from_mapping({**settings.to_mapping(), "selector": args.selector})
        runtime = Runtime(
            clients=clients,
            settings=settings,
            table=ledger,
            clock=SystemClock(),
            controller_id=f"cli:{operator_name()}",
        )
        if _budgeted(getattr(args, "rate_budget", "auto"), args.endpoint_url):
            govern(clients, settings, table=runtime.table, member=runtime.controller_id)
        return cls(runtime=runtime, json=args.json, expired_queue_option=getattr(args, "expired_queue_arn", None),
                   ledger_found_by=found_by)

    def use_expired_queue(self) -> tuple[str | None, str]:
        """Find the expired-events queue (for the commands that engage), put it in the
        runtime and say where it came from. See `find_expired_queue`."""
        arn, found_by = find_expired_queue(self.clients, self.expired_queue_option)
        self.runtime = self.runtime.but(expired_queue_arn=arn)
        if arn is None and not self.json:
            self.warn(f"{found_by}: async configs get bounded retries only, and keep their event age "
                      "(tag a function holdfast:expired-events=discard to shorten it without a destination)")
        return arn, found_by

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def clients(self) -> Clients:
        return self.runtime.clients

    @property
    def ledger_table(self) -> str:
        return self.runtime.table

    def but(self, *, ledger_table: str) -> "Context":
        """This context on another ledger table (a member account's, for --all-accounts)."""
        return dataclasses.replace(self, runtime=self.runtime.but(table=ledger_table))

    # ---- output --------------------------------------------------------------------

    def emit(self, document: Any, text: str | None = None) -> None:
        """Print the JSON document with --json, else the readable text."""
        if self.json:
            json.dump(document, self.out, indent=2, sort_keys=False, default=str)
            self.out.write("\n")
        elif text is not None:
            self.out.write(text if text.endswith("\n") else text + "\n")

    def progress(self, message: str) -> None:
        """Progress for humans, on stderr, never mixed into the JSON document."""
        if not self.json and self.err.isatty():
            self.err.write(f"\r{message}\033[K")
            self.err.flush()

    def warn(self, message: str) -> None:
        self.err.write(f"holdfast: {message}\n")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain aligned text table."""
    rows = [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def operator_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a container
        return "unknown"


@uses("ssm:GetParametersByPath", by=("cli", "readonly", "operator"))
def published(clients: Clients, leaf: str) -> dict[str, str]:
    """Every parameter under /holdfast whose name ends in /<leaf> (every one for ""): {name: value}."""
    found = {}
    pages = clients("ssm").get_paginator("get_parameters_by_path").paginate(Path=PARAMETER_ROOT, Recursive=True)
    for page in pages:
        for parameter in page.get("Parameters", []):
            if not leaf or parameter["Name"].endswith("/" + leaf):
                found[parameter["Name"]] = parameter["Value"]
    return found


@uses("ssm:GetParametersByPath", by=("cli",))
def find_ledger_table(clients: Clients, chosen: str | None = None) -> tuple[str, str, tuple[str, str] | None]:
    """(the ledger table's name, how it was found, (name, value) of the deployed settings
    parameter of the same stack or None).

    A deployed stack publishes the name CloudFormation gave its table at
    /holdfast/<stack>/ledger-table, and its settings at /holdfast/<stack>/settings.
    `chosen` (--ledger-table) wins; several stacks in the region without it is a usage
    error naming them. None published (a stack from before the name was generated, or a
    local ledger from `holdfast ledger-init`), or SSM unreadable: the table
    `holdfast-ledger`, and the result says why."""
    try:
        everything = published(clients, "")
    except (ClientError, BotoCoreError) as err:
        return chosen or DEFAULT_TABLE, chosen and "--ledger-table" or \
            f"{DEFAULT_TABLE} (SSM parameters unreadable: {error_text(err)})", None
    tables = {n: v for n, v in everything.items() if n.endswith("/" + LEDGER_TABLE_PARAMETER)}
    if chosen:
        tables = {n: v for n, v in tables.items() if v == chosen}
        how = "--ledger-table"
    elif len(tables) > 1:
        listed = ", ".join(f"{name} = {value}" for name, value in sorted(tables.items()))
        raise UsageError(f"several Holdfast stacks publish a ledger table here ({listed}); choose one with --ledger-table")
    if len(tables) != 1:
        return chosen or DEFAULT_TABLE, chosen and "--ledger-table" or \
            f"{DEFAULT_TABLE} (no SSM parameter {PARAMETER_ROOT}/*/{LEDGER_TABLE_PARAMETER})", None
    (name, value), = tables.items()
    settings_name = name.rsplit("/", 1)[0] + "/" + SETTINGS_PARAMETER
    deployed = (settings_name, everything[settings_name]) if settings_name in everything else None
    return value, how if chosen else f"SSM parameter {name}", deployed


@uses("ssm:GetParametersByPath", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", by=("cli",))
def find_expired_queue(clients: Clients, option: str | None) -> tuple[str | None, str]:
    """(the expired-events queue's ARN or None, how it was found or why not).

    In order: `--expired-queue-arn ARN` (`none`: no queue); the SSM parameter a deployed
    stack writes (`/holdfast/<stack>/expired-queue-arn`; several stacks in one region is
    a usage error naming them, to choose with the option); a queue named
    `holdfast-expired-events`. An answer of AccessDenied, or no answer, moves on to the
    next way and is said in the result."""
    if option is not None:
        if option.lower() == NO_QUEUE:
            return None, "--expired-queue-arn none"
        if not option.startswith("arn:") or option.split(":")[2:3] != ["sqs"] or option.count(":") != 5:
            raise UsageError(f"--expired-queue-arn {option!r} is not an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)")
        return option, "--expired-queue-arn"
    notes = []
    try:
        found = published(clients, EXPIRED_QUEUE_PARAMETER)
        if len(found) > 1:
            listed = ", ".join(f"{name} = {value}" for name, value in sorted(found.items()))
            raise UsageError(f"several Holdfast stacks publish an expired-events queue here ({listed}); "
                             "choose one with --expired-queue-arn")
        if found:
            (name, value), = found.items()
            return value, f"SSM parameter {name}"
        notes.append(f"no SSM parameter {PARAMETER_ROOT}/*/{EXPIRED_QUEUE_PARAMETER}")
    except (ClientError, BotoCoreError) as err:
        notes.append(f"SSM parameters unreadable ({error_text(err)})")
    try:
        sqs = clients("sqs")
        url = sqs.get_queue_url(QueueName=EXPIRED_QUEUE_NAME)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return arn, f"queue {EXPIRED_QUEUE_NAME}"
    except (ClientError, BotoCoreError) as err:
        notes.append(f"no queue {EXPIRED_QUEUE_NAME} ({error_code(err) or type(err).__name__})")
    return None, "no expired-events queue found: " + "; ".join(notes)


def _budgeted(choice: str, endpoint_url: str | None) -> bool:
    """AWS's quotas are AWS's: against a loopback endpoint (a local moto) there are none to keep."""
    if choice != "auto":
        return choice == "on"
    host = (urlparse(endpoint_url).hostname or "").lower() if endpoint_url else ""
    return not (host in ("localhost", "::1") or host.startswith("127."))
