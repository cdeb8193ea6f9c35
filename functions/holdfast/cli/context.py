"""What every command gets: the Runtime (clients, settings, ledger, clock, ...), built here
from the command line and the AWS CLI's environment variables, and output helpers."""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

from holdfast.aws import Clients, error_code, error_text
from holdfast.cli.output import render, table  # noqa: F401  (table: the commands' tables)
from holdfast.cli.progress import Progress
from holdfast.clock import SystemClock
from holdfast.core.own import NOT_OWN, Own, from_document
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.runtime import Runtime, govern
from holdfast.settings import CONTEXT_KEY, Settings, SettingsError

# Where a deployed Holdfast publishes its expired-events queue: the stack writes the ARN
# to SSM at <parameter prefix>/expired-queue-arn, the prefix being /holdfast/<stack name>
# by default (holdfast_cdk.construct). A queue named this is found too.
PARAMETER_ROOT = "/holdfast"
EXPIRED_QUEUE_PARAMETER = "expired-queue-arn"
OWN_RESOURCES_PARAMETER = "own-resources"
# The ledger's table, named by CloudFormation, is published at <prefix>/ledger-table.
LEDGER_TABLE_PARAMETER = "ledger-table"
# The deployed settings' JSON, <prefix>/settings (holdfast_cdk.construct publishes it).
SETTINGS_PARAMETER = "settings"
EXPIRED_QUEUE_NAME = "holdfast-expired-events"
NO_QUEUE = "none"


class UsageError(Exception):
    """Bad arguments or input the user can fix; exits 2."""


class Unreachable(Exception):
    """AWS did not answer at all (the endpoint is down, no network); exits 3."""


# botocore's exceptions for "no answer came": the same cause whichever command meets it.
CONNECTION_FAILURES = (ConnectionError, HTTPClientError)
# Codes with which AWS refuses the caller rather than the request.
CREDENTIAL_CODES = frozenset({
    "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException", "SignatureDoesNotMatch",
    "ExpiredTokenException", "ExpiredToken", "AccessDeniedException", "AccessDenied",
    "MissingAuthenticationTokenException", "AuthFailure", "UnauthorizedOperation",
})


def connection_failure(err: BaseException) -> bool:
    return isinstance(err, CONNECTION_FAILURES)


def credential_failure(err: BaseException) -> bool:
    return isinstance(err, ClientError) and error_code(err) in CREDENTIAL_CODES


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
    # --output: table, json or text (holdfast.cli.output); --json is json.
    output: str = "table"
    # --query, compiled (a JMESPath expression), or None.
    query: Any = None
    # --expired-queue-arn as given (None: find the deployed stack's; "none": use no queue).
    expired_queue_option: str | None = None
    # How the ledger table was chosen (--ledger-table, the SSM parameter, or the old default).
    ledger_found_by: str = "--ledger-table"
    # Looked up when a Context is made, not at import, so redirected streams (tests) are honoured.
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    inp: TextIO = field(default_factory=lambda: sys.stdin)
    # When stderr is not a terminal: a progress line at most this often (seconds).
    progress_seconds: float = 30.0
    _progress: "Progress | None" = None
    # API calls that got an answer (any HTTP response, errors included), and calls that
    # failed for want of a connection: none of the first and some of the second is "AWS
    # did not answer", whatever the command made of it (exit 3).
    answered: int = 0
    unreached: int = 0
    _account: str | None = field(default=None, repr=False)
    # The command's rate budgets (holdfast.runtime.govern; None: not budgeted): `leave`
    # gives up its shares when it ends.
    governor: Any = field(default=None, repr=False)
    # Whether the command printed its document, and the last thing it warned of: a command
    # that fails without a document gets an error document with --output json (main).
    emitted: bool = False
    last_warning: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Context":
        # botocore reads only AWS_DEFAULT_REGION; AWS_REGION wins over it, as in the AWS CLI.
        region = args.region or os.environ.get("AWS_REGION")
        clients = Clients(region=region, profile=args.profile, endpoint_url=args.endpoint_url)
        try:
            ledger, found_by, deployed = find_ledger_table(clients, chosen=args.ledger_table)
        except UsageError as err:
            if not getattr(args, "all_accounts", False):
                raise
            # --all-accounts acts on each member's own ledger, found there: this account
            # and region's is not used, so several stacks here are no reason to stop.
            ledger, found_by, deployed = DEFAULT_TABLE, f"{UNRESOLVED} ({err})", None
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
        endpoint_url = args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
        governor = None
        if _budgeted(getattr(args, "rate_budget", "auto"), endpoint_url) and not found_by.startswith(UNRESOLVED):
            governor = govern(clients, settings, table=runtime.table, member=runtime.controller_id)
        ctx = cls(runtime=runtime, output=output_format(args), query=getattr(args, "compiled_query", None),
                  expired_queue_option=getattr(args, "expired_queue_arn", None),
                  progress_seconds=getattr(args, "progress_seconds", 30.0), ledger_found_by=found_by,
                  governor=governor)
        clients.on_client(ctx._count_answers)
        return ctx

    @property
    def json(self) -> bool:
        """stdout is for a program (--output json or text): progress and advice stay off the terminal."""
        return self.output != "table"

    @json.setter
    def json(self, on: bool) -> None:
        self.output = "json" if on else "table"

    def _count_answers(self, service: str, client) -> None:
        # Counts, not exact under threads: only "none at all" is read from them.
        def answered(**_):
            self.answered += 1

        def failed(exception=None, **_):
            if exception is not None and connection_failure(exception):
                self.unreached += 1

        client.meta.events.register("after-call", answered)
        client.meta.events.register("after-call-error", failed)

    def unanswered(self) -> bool:
        """Calls failed for want of a connection, and not one got an answer."""
        return self.unreached > 0 and self.answered == 0

    def where(self) -> str:
        """Where the requests went, for "did not answer" messages."""
        url = self.endpoint_url()
        return f"AWS did not answer at {url or 'its endpoints'} ({self.clients.region})"

    def endpoint_url(self) -> str | None:
        """The endpoint the requests go to (--endpoint-url, AWS_ENDPOINT_URL or the
        profile's), None for AWS's own."""
        url = self.clients("dynamodb").meta.endpoint_url
        host = urlparse(url).hostname or ""
        return None if host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws")) else url

    def local(self) -> bool:
        """Requests go to a loopback endpoint (a local moto, `make serve`): nothing there is real."""
        url = self.endpoint_url()
        return url is not None and is_loopback(url)

    def use_expired_queue(self) -> tuple[str | None, str]:
        """Find the expired-events queue (for the commands that engage), put it in the
        runtime and say where it came from. See `find_expired_queue`."""
        arn, found_by = find_expired_queue(self.clients, self.expired_queue_option)
        if arn is not None and found_by == "--expired-queue-arn":
            # Lambda would be told to send this region's expired events there.
            self.require_here(arn, "--expired-queue-arn")
        self.runtime = self.runtime.but(expired_queue_arn=arn)
        if arn is None and not self.json:
            self.warn(f"{found_by}: async configs get bounded retries only, and keep their event age "
                      "(tag a function holdfast:expired-events=discard to shorten it without a destination)")
        return arn, found_by

    def use_own_resources(self) -> Own:
        """Holdfast's own resources (holdfast.core.own), from every Holdfast stack's SSM
        parameter here, into the runtime: the commands that engage leave them alone."""
        found, problems = find_own_resources(self.clients)
        for problem in problems:
            self.warn(problem)
        self.runtime = self.runtime.but(own=self.runtime.own | found)
        return found

    def leave(self) -> None:
        """Give up the command's shares of the account's rate budgets as it ends: the
        controllers it shared them with take them at once, not when its leases lapse. A
        board that cannot be written is counted, not raised (`RateBudget.leave`)."""
        if self.governor is not None:
            self.governor.budgets.leave()

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @uses("sts:GetCallerIdentity", by=("cli",))
    def account(self) -> str:
        """The account the credentials act in (one GetCallerIdentity, then remembered)."""
        if self._account is None:
            self._account = self.clients("sts").get_caller_identity()["Account"]
        return self._account

    def require_here(self, arn: str, what: str = "RESOURCE_ARN", shown: str | None = None) -> None:
        """Refuse (UsageError, exit 2) an ARN outside the partition, region and account this
        command acts in: every call goes to the region's endpoints with the account's
        credentials, so a foreign ARN would name, at best, another resource of the same
        name or id here. `shown`: what the operator gave, when that was not the ARN (a
        queue URL)."""
        parts = arn.split(":")
        partition, region, account = parts[1], parts[3], parts[4]
        here = self.clients.region
        wrong = []
        if partition != self.clients.partition:
            wrong.append(f"partition {partition} (this command acts in {self.clients.partition})")
        if region != here:
            wrong.append(f"region {region} (this command acts in {here}: run it with --region {region})")
        if account != self.account():
            wrong.append(f"account {account} (these credentials act in account {self.account()}: "
                         f"run it with credentials of {account})")
        if wrong:
            raise UsageError(f"{what} {shown or arn} is in " + " and ".join(wrong) + "; nothing was done")

    @property
    def clients(self) -> Clients:
        return self.runtime.clients

    @property
    def ledger_table(self) -> str:
        return self.runtime.table

    def ledger(self) -> Ledger:
        """The ledger a command reads and writes, built as the Runtime builds a tick's
        (Runtime.ledger: the runtime's DynamoDB client and table); a new one each call."""
        return self.runtime.ledger()

    def but(self, *, ledger_table: str) -> "Context":
        """This context on another ledger table (a member account's, for --all-accounts)."""
        return dataclasses.replace(self, runtime=self.runtime.but(table=ledger_table))

    # ---- output --------------------------------------------------------------------

    def emit(self, document: Any, text: str | None = None) -> None:
        """Print the command's one document as --output and --query say (holdfast.cli.output):
        `text` is its readable form, the default table output. When AWS answered none of
        the command's calls, that is the outcome: Unreachable (exit 3, its own JSON error
        document), not a document of failures."""
        if self.unanswered():
            raise Unreachable(self.where())
        self.emitted = True
        shown = render(document, text, output=self.output, query=self.query)
        if shown is None:
            if self.query is not None:
                self.warn("--query selected nothing")
            return
        self.out.write(shown if shown.endswith("\n") else shown + "\n")

    def progress(self, message: str) -> None:
        """Progress for humans, on stderr, never mixed into the JSON document: on a
        terminal one line rewritten in place; otherwise (CI, SSM Run Command) a line at
        most every `progress_seconds`, with an estimate of the time left."""
        if self.err.isatty():
            if not self.json:
                self.err.write(f"\r{message}\033[K")
                self.err.flush()
            return
        if self._progress is None:
            self._progress = Progress(self.err, self.progress_seconds, SystemClock())
        self._progress.step(message)

    def warn(self, message: str) -> None:
        self.last_warning = message
        self.err.write(f"holdfast: {message}\n")


def output_format(args: argparse.Namespace) -> str:
    """--output, or json for --json (its alias); table by default. Both, disagreeing, is a usage error."""
    chosen = getattr(args, "output", None)
    if getattr(args, "json", False):
        if chosen not in (None, "json"):
            raise UsageError(f"--json is --output json; it cannot go with --output {chosen}")
        return "json"
    return chosen or "table"


def operator_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a container
        return "unknown"


# How `ledger_found_by` begins when SSM could not name the ledger and no tag could either.
LEDGER_UNKNOWN = "ledger not known"
# How it begins when SSM failed and the ledger was found by its tag.
TAGGED_LEDGER = "the table tagged"
# The tag a deployed stack puts on its ledger table (stacks/holdfast_cdk).
LEDGER_TAG = ("holdfast:component", "ledger")


@uses("dynamodb:ListTables", "dynamodb:ListTagsOfResource", "sts:GetCallerIdentity", by=("cli",))
def tagged_ledgers(clients: Clients) -> list[str]:
    """The tables of this account and region tagged holdfast:component=ledger, by name: how
    a command finds a deployed stack's ledger when SSM cannot be read. (The Resource
    Groups Tagging API would answer in one call; DynamoDB's own ListTables and
    ListTagsOfResource need no other service.)"""
    db = clients("dynamodb")
    names = [n for page in db.get_paginator("list_tables").paginate() for n in page.get("TableNames", [])]
    if not names:
        return []
    prefix = f"arn:{clients.partition}:dynamodb:{clients.region}:{clients.account_id()}:table/"
    key, value = LEDGER_TAG
    found = []
    for name in names:
        tags = db.list_tags_of_resource(ResourceArn=prefix + name).get("Tags", [])
        if any(t.get("Key") == key and t.get("Value") == value for t in tags):
            found.append(name)
    return found


# How `ledger_found_by` begins when the caller's ledger was not resolved (an --all-accounts
# command here, where several stacks publish one): only the members' own are used.
UNRESOLVED = "not resolved here"


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


def deployed_settings(clients: Clients, everything: dict[str, str] | None = None) -> dict[str, str]:
    """{parameter name: settings JSON} of every Holdfast stack here (/holdfast/<stack>/settings),
    from `everything` when the caller has already read every parameter under /holdfast."""
    if everything is None:
        return published(clients, SETTINGS_PARAMETER)
    return {name: value for name, value in everything.items() if name.endswith("/" + SETTINGS_PARAMETER)}


@uses("ssm:GetParametersByPath", by=("cli",))
def find_ledger_table(clients: Clients, chosen: str | None = None) -> tuple[str, str, tuple[str, str] | None]:
    """(the ledger table's name, how it was found, (name, value) of the deployed settings
    parameter of the same stack or None).

    A deployed stack publishes the name CloudFormation gave its table at
    /holdfast/<stack>/ledger-table, and its settings at /holdfast/<stack>/settings.
    `chosen` (--ledger-table) wins; several stacks in the region without it is a usage
    error naming them. None published (a stack from before the name was generated, or a
    local ledger from `holdfast ledger-init`): the table `holdfast-ledger`, and the
    result says why. SSM unreadable: the one table here tagged `holdfast:component=ledger`
    (a deployed stack tags its ledger so); with none or several, or the tags unreadable
    too, the ledger is not known (`how` begins with LEDGER_UNKNOWN: the commands run from
    the resources' tags, as with an unreachable ledger, and never advise `ledger-init`,
    which would make a second, empty ledger)."""
    try:
        everything = published(clients, "")
    except (ClientError, BotoCoreError) as err:
        if chosen:
            return chosen, "--ledger-table", None
        why = f"SSM parameters under {PARAMETER_ROOT} unreadable: {error_text(err)}"
        try:
            found = tagged_ledgers(clients)
        except (ClientError, BotoCoreError) as again:
            return DEFAULT_TABLE, f"{LEDGER_UNKNOWN} ({why}; the tables tagged {LEDGER_TAG[0]}={LEDGER_TAG[1]} " \
                                  f"unreadable too: {error_text(again)})", None
        if len(found) == 1:
            return found[0], f"{TAGGED_LEDGER} {LEDGER_TAG[0]}={LEDGER_TAG[1]}, {found[0]} ({why})", None
        tagged = (f"several tables tagged {LEDGER_TAG[0]}={LEDGER_TAG[1]} ({', '.join(found)})" if found
                  else f"no table tagged {LEDGER_TAG[0]}={LEDGER_TAG[1]}")
        return DEFAULT_TABLE, f"{LEDGER_UNKNOWN} ({why}; {tagged})", None
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
    settings = deployed_settings(clients, everything)
    deployed = (settings_name, settings[settings_name]) if settings_name in settings else None
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


@uses("ssm:GetParametersByPath", by=("cli",))
def find_own_resources(clients: Clients) -> tuple[Own, list[str]]:
    """(Holdfast's own resources as every stack here publishes them under
    /holdfast/<stack>/own-resources, what could not be read). Unreadable parameters are
    said, not fatal: the command still runs (the controllers know their own resources
    from their environment)."""
    found, problems = NOT_OWN, []
    try:
        for name, value in published(clients, OWN_RESOURCES_PARAMETER).items():
            try:
                found = found | from_document(value)
            except ValueError as err:
                problems.append(f"SSM parameter {name}: {err}")
    except (ClientError, BotoCoreError) as err:
        problems.append(f"Holdfast's own resources unknown: SSM parameters unreadable ({error_text(err)}); "
                        "a stack-wide selector tag may select them")
    return found, problems


def is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def _budgeted(choice: str, endpoint_url: str | None) -> bool:
    """AWS's quotas are AWS's: against a loopback endpoint (a local moto) there are none to keep."""
    if choice != "auto":
        return choice == "on"
    return not (endpoint_url and is_loopback(endpoint_url))
