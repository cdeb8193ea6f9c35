"""Every account and region at once (`--all-accounts`), as c7n-org runs Custodian.

    holdfast status|plan|pause|unpause|engage|advance --all-accounts
             [-a ACCOUNT[,ACCOUNT]] [-o OU] [-t KEY=VALUE] [-r REGION[,REGION]]
             [--role-name NAME] [--workers 8] [--output-dir out] [--json]
    holdfast release RESOURCE_ARN [RESOURCE_ARN ...] --all-accounts [-a/-o/-t/-r to check against]
    holdfast report --output-dir out [--command status] [--format csv|json]

Which accounts: `-a/--accounts` names them; otherwise every active account Organizations
lists (run from the management account or a delegated administrator), or, with
`--accounts-file FILE` (c7n-org's accounts file, holdfast.cli.accounts_file), every account
the file lists, each through the role it names (`--role-name` instead, when given), in the
regions it names (`-r` instead, when given); there `-a` takes ids or names and `-t` the
file's `key:value` tags (KEY=VALUE or KEY:VALUE), and `-o` has no OUs to go by. `-o/--ou` keeps
the accounts under an OU (its child OUs included, as a StackSet deploys) and `-t/--tag`
those whose Organizations tags carry KEY=VALUE; each option may be repeated, and the
subsets intersect (`-a` with `-o` keeps the named accounts that are under the OU).
Regions: `-r/--regions`, else the settings' `targets`, else the CLI's region.

Through which role: the reads (`status`, `plan`) assume `HoldfastReadOnly`, which reads
the ledger and the resources' configuration and writes nothing; the writes assume
`HoldfastOperator`, which may write Holdfast's operator control items only
(policies/operator.json, by `dynamodb:LeadingKeys`): `pause` and `unpause` set the kill
switch, `engage` asks the reconciler for a hold from the plan in force, which its next
tick starts and walks with its own role, and `release` asks it to restore each resource
named (in the account and region its ARN names; -a/-o/-t/-r, when given, must include
them), which its next tick does once, as `holdfast release ARN` would there, recording
the outcome on the request (`status --all-accounts` shows it under `releases`). No
command here changes a resource itself.

Concurrently, within budgets: one bounded thread pool (`--workers`) does every AssumeRole
and every account-region; AssumeRole calls pass one client-side token bucket (STS counts
them against the caller's account), ledger reads and writes another, and a `plan` in an
account-region goes through that account's API rate budgets (holdfast.budget), as a
`holdfast plan` there would. Credentials are assumed once per account and shared by its
regions.

`--output-dir DIR` writes each account-region's document to
`DIR/<account>/<region>/<command>.json` (for `plan`, every resource it would change);
`holdfast report --output-dir DIR` reads them back into one CSV (or JSON) summary, a row
per account, region and command.

An account whose role cannot be assumed, a region without a ledger, or any call that
fails is a row with its error, never a crash; the exit code is then 1 (each row says
why). Bad input (an account id that is not 12 digits, an unknown region) is exit 2.

--json: {"command", "all_accounts": true, "role_name", "regions", "accounts",
         "rows": [{"account", "region", "stage", "generation", "entered_at", "verdict",
                   "paused", "engaged", "engaged_by_kind", "readiness", "result", "releases", "planned",
                   "error"}], "errors"}
  releases: [{"arn", "id", "by", "reason", "at", "expires", "state" (requested|acting|done),
              "controller", "claim_until", "outcome", "detail", "done_at", "problem"(, "written")}]
"""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import Clients, error_code, error_text
from holdfast.cli import EXIT_FAILED, EXIT_OK, accounts_file
from holdfast.cli.context import LEDGER_TABLE_PARAMETER, Context, UsageError, _budgeted, operator_name, published, table
from holdfast.core.errors import LedgerUnavailable
from holdfast.iam import uses
from holdfast.ledger import DEFAULT_TABLE, Ledger
from holdfast.ledger import control as ledger_control
from holdfast.ledger import readiness as ledger_readiness
from holdfast.ledger import summary as ledger_summary
from holdfast.ratelimit import TokenBucket

DEFAULT_ROLE = "HoldfastReadOnly"
OPERATOR_ROLE = "HoldfastOperator"
DEFAULT_WORKERS = 8
# Client-side budgets. STS throttles AssumeRole per calling account; a fleet view of a few
# hundred accounts at 5 a second takes about a minute and leaves the account's other
# automation room. Ledger reads: four per region, spread over the accounts.
ASSUME_PER_SECOND = 5.0
READS_PER_SECOND = 25.0
SESSION_SECONDS = 900     # the shortest session AssumeRole allows
ACCOUNT_ID = re.compile(r"^\d{12}$")
ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
OU_ID = re.compile(r"^(ou-[0-9a-z]{4,32}-[a-z0-9]{8,32}|r-[0-9a-z]{4,32})$")
# The commands that fan out, and the role each assumes by default.
ROLES = {"status": DEFAULT_ROLE, "plan": DEFAULT_ROLE, "pause": OPERATOR_ROLE, "unpause": OPERATOR_ROLE,
         "engage": OPERATOR_ROLE, "advance": OPERATOR_ROLE, "release": OPERATOR_ROLE}


def add_arguments(p, command: str = "status") -> None:
    g = p.add_argument_group("every account (--all-accounts)")
    g.add_argument("--all-accounts", action="store_true",
                   help=("a release request in the account and region each RESOURCE_ARN names (-a/-o/-t/-r, when "
                         "given, must include it), through the control-items-only operator role" if command == "release"
                         else f"{command} in every account and region selected below, through "
                              f"{'a read-only role' if ROLES[command] == DEFAULT_ROLE else 'the control-items-only operator role'}"))
    g.add_argument("-a", "--accounts", action="append", default=None,
                   help="account ids, comma-separated or repeated (default: every active account Organizations lists)")
    g.add_argument("-o", "--ou", action="append", default=None, dest="ous",
                   help="only accounts under this OU (ou-... or r-...), its child OUs included; repeatable")
    g.add_argument("-t", "--tag", action="append", default=None, dest="tags",
                   help="only accounts whose Organizations tags include KEY=VALUE; repeatable (all must match)")
    g.add_argument("-r", "--regions", action="append", default=None,
                   help="regions, comma-separated or repeated (default: the settings' targets, else the CLI's region)")
    g.add_argument("--accounts-file", default=None, metavar="FILE",
                   help="c7n-org's accounts file (YAML or JSON: account_id, name, role, regions, tags): its accounts, "
                        "each through its role, instead of Organizations'")
    g.add_argument("--role-name", default=None, help=f"the role assumed in each account (default: {ROLES[command]}; "
                                                      "with --accounts-file, each account's role)")
    g.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help=f"concurrent account-regions (default: {DEFAULT_WORKERS})")
    g.add_argument("--output-dir", default=None,
                   help="write each account-region's document to DIR/<account>/<region>/<command>.json (see `holdfast report`)")


def used_without_all_accounts(args) -> bool:
    return any(getattr(args, name, None) for name in ("accounts", "regions", "ous", "tags", "output_dir", "accounts_file"))


@dataclass
class Row:
    account: str
    region: str
    stage: str | None = None
    generation: int | None = None
    entered_at: str | None = None
    verdict: str | None = None
    paused: bool | None = None
    engaged: int | None = None
    engaged_by_kind: dict[str, int] = field(default_factory=dict)
    readiness: str | None = None                               # the last scheduled readiness check
    result: str | None = None                                  # what a write did
    releases: list[dict[str, Any]] | None = None               # release requests: written or pending, and outcomes
    planned: dict[str, int] | None = None                      # plan: resources by action
    error: str | None = None
    detail: dict[str, Any] | None = field(default=None, repr=False)   # plan: every resource (the output file)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.pop("detail")
        return out


class _Budgets:
    def __init__(self, assume: TokenBucket | None = None, reads: TokenBucket | None = None):
        self.assume = assume or TokenBucket(ASSUME_PER_SECOND, burst=ASSUME_PER_SECOND)
        self.reads = reads or TokenBucket(READS_PER_SECOND, burst=5.0)


# ---- input ------------------------------------------------------------------------------

def _items(values: list[str] | str | None) -> list[str]:
    values = [values] if isinstance(values, str) else (values or [])
    return [v.strip() for text in values for v in text.split(",") if v.strip()]


def parse_accounts(text) -> list[str]:
    ids = _items(text)
    bad = [a for a in ids if not ACCOUNT_ID.match(a)]
    if bad or not ids:
        raise UsageError(f"--accounts: {', '.join(repr(a) for a in bad) or 'no account'} is not an AWS account id "
                         "(12 digits); give a comma-separated list such as 111122223333,444455556666")
    return list(dict.fromkeys(ids))


def known_regions() -> set[str]:
    session = boto3.session.Session()
    return {r for partition in session.get_available_partitions()
            for r in session.get_available_regions("dynamodb", partition_name=partition)}


def parse_regions(text) -> list[str]:
    regions = _items(text)
    known = known_regions()
    unknown = [r for r in regions if r not in known]
    if unknown or not regions:
        raise UsageError(f"--regions: {', '.join(repr(r) for r in unknown) or 'no region'} is not an AWS region "
                         "DynamoDB serves; give a comma-separated list such as us-east-1,eu-west-1")
    return list(dict.fromkeys(regions))


def parse_tags(values: list[str], *, colon: bool = False) -> dict[str, str]:
    """-t KEY=VALUE, repeatable; `colon`: KEY:VALUE too (an accounts file's tags are c7n-org's `key:value`)."""
    out = {}
    for text in values:
        k, sep, v = text.partition("=")
        if not sep and colon:
            k, sep, v = text.partition(":")
        if not sep or not k.strip():
            raise UsageError(f"--tag {text!r} is not KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


@uses("organizations:ListAccounts", by=("cli",))
def organization_accounts(ctx: Context) -> tuple[list[str], list[Row]]:
    """Active accounts, and a row for each account that is not (suspended, closing)."""
    try:
        pages = ctx.clients("organizations").get_paginator("list_accounts").paginate()
        accounts = [a for page in pages for a in page["Accounts"]]
    except (ClientError, BotoCoreError) as err:
        raise UsageError(f"{_no_organization(ctx, err)}; name the accounts with -a/--accounts") from err
    active, inactive = [], []
    for a in sorted(accounts, key=lambda a: a["Id"]):
        state = a.get("State") or a.get("Status") or "ACTIVE"
        if state == "ACTIVE":
            active.append(a["Id"])
        else:
            inactive.append(Row(a["Id"], "-", error=f"account is {state} in the organization: not read"))
    return active, inactive


# organizations:ListAccounts: AWSOrganizationsNotInUseException when the caller's account is
# in no organization; AccessDeniedException from a member account that is not a delegated
# administrator (https://docs.aws.amazon.com/organizations/latest/APIReference/API_ListAccounts.html).
NOT_IN_ORGANIZATION = "AWSOrganizationsNotInUseException"


def _no_organization(ctx: Context, err: BaseException | None) -> str:
    """Why Organizations listed no account: said of the caller's account, not of -a/-o/-t."""
    account = ctx.account()
    code = error_code(err) if isinstance(err, ClientError) else None
    if code == NOT_IN_ORGANIZATION:
        return f"account {account} (these credentials') is not in an AWS Organization: --all-accounts has no accounts to list"
    if err is None:
        return (f"Organizations lists no active account to account {account}: it is not in an Organization, or "
                "not its management account or a delegated administrator")
    return (f"account {account} cannot list the organization's accounts ({error_text(err)}): it is not the "
            "organization's management account or a delegated administrator")


@uses("organizations:ListAccountsForParent", "organizations:ListOrganizationalUnitsForParent", by=("cli",))
def accounts_under(ctx: Context, ou: str) -> set[str]:
    """Every account under `ou` and its child OUs (a StackSet's OU target includes them)."""
    org = ctx.clients("organizations")
    found, todo = set(), [ou]
    try:
        while todo:
            parent = todo.pop()
            for page in org.get_paginator("list_accounts_for_parent").paginate(ParentId=parent):
                found.update(a["Id"] for a in page["Accounts"])
            for page in org.get_paginator("list_organizational_units_for_parent").paginate(ParentId=parent):
                todo.extend(u["Id"] for u in page["OrganizationalUnits"])
    except (ClientError, BotoCoreError) as err:
        raise UsageError(f"--ou {ou}: cannot list its accounts ({error_text(err)}): run this from the management "
                         "account or a delegated administrator") from err
    return found


@uses("organizations:ListTagsForResource", by=("cli",))
def account_tags(ctx: Context, account: str) -> dict[str, str]:
    org = ctx.clients("organizations")
    try:
        pages = org.get_paginator("list_tags_for_resource").paginate(ResourceId=account)
        return {t["Key"]: t["Value"] for page in pages for t in page["Tags"]}
    except (ClientError, BotoCoreError) as err:
        raise UsageError(f"--tag: cannot read the tags of account {account} ({error_text(err)})") from err


def file_accounts(args) -> list[accounts_file.Account]:
    """The accounts file's accounts (read once per command), kept by -a (ids or names) and -t."""
    if getattr(args, "_file_accounts", None) is None:
        try:
            listed = accounts_file.load(args.accounts_file)
        except accounts_file.AccountsFileError as err:
            raise UsageError(str(err)) from err
        if getattr(args, "ous", None):
            raise UsageError("--ou goes with Organizations' accounts; an --accounts-file has no OUs (use -t with its tags)")
        named = _items(args.accounts)
        unknown = [n for n in named if n not in {a.account_id for a in listed} | {a.name for a in listed}]
        if unknown:
            raise UsageError(f"--accounts: {', '.join(repr(n) for n in unknown)} is not an account id or name "
                             f"in {args.accounts_file}")
        tags = parse_tags(getattr(args, "tags", None) or [], colon=True)
        args._file_accounts = [a for a in listed if (not named or a.account_id in named or a.name in named)
                               and tags.items() <= a.tags.items()]
    return args._file_accounts


def select_accounts(ctx: Context, args) -> tuple[list[str], list[Row]]:
    """The accounts to act on: the accounts file's, named, or the organization's; then
    under the OUs and with the tags."""
    if getattr(args, "accounts_file", None):
        return [a.account_id for a in file_accounts(args)], []
    ous = _items(getattr(args, "ous", None))
    bad = [ou for ou in ous if not OU_ID.match(ou)]
    if bad:
        raise UsageError(f"--ou {bad[0]!r} is not an OU id (ou-ab12-cd345678) or a root id (r-ab12)")
    tags = parse_tags(getattr(args, "tags", None) or [])
    rows: list[Row] = []
    if args.accounts:
        accounts = parse_accounts(args.accounts)
    else:
        accounts, rows = organization_accounts(ctx)
    for ou in ous:
        under = accounts_under(ctx, ou)
        accounts = [a for a in accounts if a in under]
        rows = [r for r in rows if r.account in under]
    if tags:
        accounts = [a for a in accounts if tags.items() <= account_tags(ctx, a).items()]
        rows = []
    return accounts, rows


@uses("sts:GetCallerIdentity", by=("cli",))
def _partition(ctx: Context) -> str:
    return ctx.clients("sts").get_caller_identity()["Arn"].split(":")[1]


# ---- the work in one account-region, each call budgeted ---------------------------------

@uses("sts:AssumeRole", by=("cli",))
def assume(ctx: Context, budgets: _Budgets, role_arn: str, session_name: str,
           external_id: str | None = None) -> dict[str, str]:
    budgets.assume.take()
    creds = ctx.clients("sts").assume_role(RoleArn=role_arn, RoleSessionName=session_name,
                                           DurationSeconds=SESSION_SECONDS,
                                           **({"ExternalId": external_id} if external_id else {}))["Credentials"]
    return {"aws_access_key_id": creds["AccessKeyId"], "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds["SessionToken"]}


@uses("ssm:GetParametersByPath", by=("cli", "readonly", "operator"))
def member_ledger(clients: Clients, budgets: _Budgets, chosen: str | None = None) -> str:
    """The ledger table a member account's stack publishes in this region
    (/holdfast/<stack>/ledger-table; CloudFormation names the table), else holdfast-ledger.
    Always the member's own: `chosen` (--ledger-table) only picks among several stacks
    that publish one there, and names no table of its own in a member (a table name of
    the caller's account would be found in none of them)."""
    budgets.reads.take()
    found = published(clients, LEDGER_TABLE_PARAMETER)
    if chosen is not None and chosen in found.values():
        return chosen
    if len(found) > 1:
        listed = ", ".join(f"{name} = {value}" for name, value in sorted(found.items()))
        raise UsageError(f"several Holdfast stacks publish a ledger here ({listed}): pass --ledger-table with "
                         "the one to act on")
    return next(iter(found.values()), DEFAULT_TABLE)


@uses("dynamodb:GetItem", "dynamodb:Query", by=("cli", "readonly"))
def read_ledger(ledger: Ledger, budgets: _Budgets, row: Row) -> None:
    """The plan, the verdict, the kill switch, the engaged records and the last readiness result of one region's ledger."""
    seen = ledger_summary.read(ledger, before_read=budgets.reads.take)
    if seen.plan is not None:
        row.stage, row.generation = seen.plan.label, seen.plan.generation
        row.entered_at = seen.plan.entered_at.isoformat() if seen.plan.entered_at else None
    else:
        row.stage, row.generation = "normal", 0
    row.verdict, row.paused = seen.verdict, seen.paused
    row.engaged, row.engaged_by_kind = sum(seen.engaged_by_kind.values()), seen.engaged_by_kind
    budgets.reads.take()
    row.releases = [r.to_dict() for r in ledger_control.read_control(ledger).releases]
    budgets.reads.take()
    last = ledger_readiness.read_result(ledger)
    if last is not None:
        row.readiness = (f"ok at {last.get('at')}" if last.get("ok")
                         else f"failed at {last.get('at')}: {', '.join(last.get('failed') or [])}")


Work = Callable[[Context, Clients, "_Budgets", Any, Row], None]


def _status(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
    read_ledger(Ledger(clients("dynamodb"), ctx.ledger_table), budgets, row)


def _by(args) -> str:
    """The caller's IAM identity (run_all reads it once), or the OS user where it is unknown."""
    return getattr(args, "recorded_by", None) or operator_name()


def _set_pause(paused: bool) -> Work:
    def work(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
        budgets.reads.take()
        reason = getattr(args, "reason", "") or ""
        ledger_control.set_paused(Ledger(clients("dynamodb"), ctx.ledger_table), paused, by=_by(args), reason=reason,
                                  now=ctx.runtime.clock.now())
        row.paused = paused
        row.result = "paused: no action from the next tick" if paused else "unpaused: acts again from the next tick"
    return work


def _engage(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
    budgets.reads.take()
    row.generation = ledger_control.request_engage(Ledger(clients("dynamodb"), ctx.ledger_table), by=_by(args),
                                                   reason=getattr(args, "reason", "") or "", now=ctx.runtime.clock.now())
    row.result = f"engage requested from generation {row.generation}: the next tick starts a hold"


def release_targets(ctx: Context, args) -> dict[tuple[str, str], list[str]]:
    """(account, region) -> the ARNs of `release --all-accounts` there: each ARN is
    released where it names, and must be a kind Holdfast manages, in the caller's partition,
    and inside -a/-o/-t and -r when they are given (a usage error otherwise: nothing is
    written anywhere)."""
    from holdfast.core.kinds import kind_of

    partition = _partition(ctx)
    targets: dict[tuple[str, str], list[str]] = {}
    for arn in dict.fromkeys(args.resource_arn):
        try:
            kind_of(arn)
        except ValueError as err:
            raise UsageError(str(err)) from err
        parts = arn.split(":")
        if parts[1] != partition:
            raise UsageError(f"{arn} is in partition {parts[1]}; these credentials act in {partition}: nothing was requested")
        targets.setdefault((parts[4], parts[3]), []).append(arn)
    if args.regions:
        regions = set(parse_regions(args.regions))
        outside = [a for (_, region), arns in targets.items() if region not in regions for a in arns]
        if outside:
            raise UsageError(f"{outside[0]} is outside --regions {', '.join(sorted(regions))}: nothing was requested")
    if args.accounts or getattr(args, "ous", None) or getattr(args, "tags", None) or getattr(args, "accounts_file", None):
        selected = set(select_accounts(ctx, args)[0])
        outside = [a for (account, _), arns in targets.items() if account not in selected for a in arns]
        if outside:
            raise UsageError(f"{outside[0]} is in an account the selection (-a/-o/-t) leaves out"
                             + (f" or {args.accounts_file} does not list" if getattr(args, "accounts_file", None) else "")
                             + ": nothing was requested")
    return dict(sorted(targets.items()))


def _release(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
    """A release request for each ARN of this account-region: the reconciler acts on it at
    its next tick (holdfast.core.release). A request still pending for a resource makes
    this one a duplicate, which writes nothing and says so."""
    import uuid

    now = ctx.runtime.clock.now()
    request_id = uuid.uuid4().hex
    row.releases, written = [], 0
    for arn in args.release_targets[(row.account, row.region)]:
        budgets.reads.take()
        request, wrote = ledger_control.request_release(Ledger(clients("dynamodb"), ctx.ledger_table), arn, by=_by(args),
                                                        reason=getattr(args, "reason", "") or "", now=now,
                                                        request_id=request_id)
        written += wrote
        row.releases.append({**request.to_dict(), "written": wrote})
    pending = len(row.releases) - written
    row.result = (f"release requested for {written} resource(s): the next tick restores each and records its outcome"
                  + (f"; {pending} already requested and not yet acted on (nothing written for them)" if pending else ""))


def _advance(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
    """Skip the hold of the plan in force in this account-region, if it still is when the
    request lands (request_advance's transaction); a normal plan has no hold to skip."""
    from holdfast.core.errors import Contention, PlanConflict
    from holdfast.ledger import plan as ledger_plan

    budgets.reads.take()
    current = ledger_plan.read(Ledger(clients("dynamodb"), ctx.ledger_table))
    if current is None or current.stage == "normal":
        row.stage, row.generation, row.result = "normal", current.generation if current else 0, "no hold to skip"
        return
    row.stage, row.generation = current.label, current.generation
    budgets.reads.take()
    try:
        ledger_control.request_advance(Ledger(clients("dynamodb"), ctx.ledger_table), current.generation, by=_by(args),
                                       now=ctx.runtime.clock.now())
    except (PlanConflict, Contention) as err:
        row.error = f"not advanced: {err}"
        return
    row.result = f"hold of generation {current.generation} ({current.label}) skipped: the next tick advances if its gates allow"


def _plan(ctx: Context, clients: Clients, budgets: _Budgets, args, row: Row) -> None:
    from holdfast import engine
    from holdfast.runtime import Runtime, govern

    runtime = Runtime(clients=clients, settings=ctx.settings, table=ctx.ledger_table, clock=ctx.runtime.clock,
                      controller_id=ctx.runtime.controller_id)
    if _budgeted(getattr(args, "rate_budget", "auto"), args.endpoint_url):
        # The account's own API rate budgets, in this process: the read-only role writes no lease.
        govern(clients, ctx.settings, table=None, member=runtime.controller_id)
    report = engine.Engine(runtime).engage(dry_run=True)
    outcomes = [o.to_dict() for o in report.outcomes]
    row.planned = dict(sorted(Counter(o["action"] for o in outcomes).items()))
    row.detail = {"resources": outcomes, "complete": report.complete, "refused": report.refused}
    failed = [o for o in report.outcomes if o.action == "failed"]
    if failed:
        row.error = f"{len(failed)} resource(s) could not be planned: " + "; ".join(
            f"{o.arn}: {o.error}" for o in failed[:3])
    elif report.refused:
        row.error = report.refused


WORK: dict[str, Work] = {"status": _status, "pause": _set_pause(True), "unpause": _set_pause(False),
                         "engage": _engage, "advance": _advance, "plan": _plan, "release": _release}


# ---- the command ------------------------------------------------------------------------

def run_all(ctx: Context, args, command: str, *, budgets: _Budgets | None = None) -> int:
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    role_name = args.role_name or ROLES[command]
    if not ROLE_NAME.match(role_name):
        raise UsageError(f"--role-name {role_name!r} is not an IAM role name (1-64 of letters, digits and +=,.@_-)")
    if command == "release":
        # Each ARN names where it is released: its account and region, nowhere else.
        args.release_targets = release_targets(ctx, args)
        pairs = list(args.release_targets)
        accounts, rows = list(dict.fromkeys(a for a, _ in pairs)), []
        regions = sorted({r for _, r in pairs})
    else:
        regions = parse_regions(args.regions) if args.regions else (
            list(dict.fromkeys(t.region for t in ctx.settings.targets)) or [ctx.clients.region])
        accounts, rows = select_accounts(ctx, args)
        own = {} if args.regions or not getattr(args, "accounts_file", None) else {
            a.account_id: parse_regions(list(a.regions)) for a in file_accounts(args) if a.regions}
        pairs = [(a, r) for a in accounts for r in own.get(a, regions)]
        regions = list(dict.fromkeys(r for _, r in pairs)) or regions
    if not accounts and not rows:
        given = [o for o, name in (("--accounts", "accounts"), ("--ou", "ous"), ("--tag", "tags"), ("--accounts-file", "accounts_file"))
                 if getattr(args, name, None)]
        if not given:
            raise UsageError(f"{_no_organization(ctx, None)}; name the accounts with -a/--accounts")
        raise UsageError(f"no account selected: {', '.join(given)} together leave none")
    budgets = budgets or _Budgets()
    partition = _partition(ctx)
    session_name = re.sub(r"[^\w+=,.@-]", "-", f"holdfast-{command}-{operator_name()}")[:64]
    if command in ("pause", "unpause", "engage", "advance", "release"):
        from holdfast.cli.confirm import caller

        args.recorded_by = caller(ctx)   # who asked, as each ledger records it: the IAM identity
    creds: dict[str, dict[str, str] | str] = {}
    lock = threading.Lock()
    work = WORK[command]

    listed = {a.account_id: a for a in file_accounts(args)} if getattr(args, "accounts_file", None) else {}

    def credentials(account: str) -> dict[str, str] | str:
        entry = listed.get(account)
        role_arn = entry.role if entry and not args.role_name else f"arn:{partition}:iam::{account}:role/{role_name}"
        try:
            return assume(ctx, budgets, role_arn, session_name, entry.external_id if entry else None)
        except (ClientError, BotoCoreError) as err:
            return f"cannot assume {role_arn}: {error_text(err)}"

    def one(account: str, region: str) -> Row:
        row = Row(account, region)
        found = creds[account]
        if isinstance(found, str):
            row.error = found
            return row
        session = boto3.session.Session(region_name=region, **found)
        clients = Clients(session, endpoint_url=args.endpoint_url)
        ledger = args.ledger_table or DEFAULT_TABLE
        try:
            # Each member stack's ledger is named by CloudFormation: its own name, from SSM there.
            ledger = member_ledger(clients, budgets, chosen=args.ledger_table)
            work(ctx.but(ledger_table=ledger), clients, budgets, args, row)
        except UsageError as err:
            row.error = str(err)
        except ClientError as err:
            row.error = (f"no ledger table {ledger} in {region}" if error_code(err) == "ResourceNotFoundException"
                         else f"{command} failed: {error_text(err)}")
        except LedgerUnavailable as err:
            row.error = (f"no ledger table {ledger} in {region}" if "ResourceNotFound" in str(err)
                         else f"{command} failed: {err}")
        except BotoCoreError as err:
            row.error = f"unreachable: {error_text(err)}"
        with lock:
            for op, n in clients.calls.items():
                ctx.clients.calls[op] += n
        return row

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for account, found in zip(accounts, pool.map(credentials, accounts)):
            creds[account] = found
        rows += list(pool.map(lambda pair: one(*pair), pairs))
    rows.sort(key=lambda r: (r.account, r.region))
    if args.output_dir:
        write_outputs(Path(args.output_dir), command, rows, at=ctx.runtime.clock.now().isoformat())
    errors = [r for r in rows if r.error]
    ctx.emit(
        {"command": command, "all_accounts": True,
         "role_name": role_name if args.role_name or not listed else f"each account's role in {args.accounts_file}",
         "regions": regions,
         "accounts": len({r.account for r in rows}), "rows": [r.to_dict() for r in rows], "errors": len(errors),
         "api_calls_by_operation": dict(ctx.clients.calls)},
        _text(command, rows, regions),
    )
    for r in errors:
        ctx.warn(f"{r.account} {r.region}: {r.error}")
    return EXIT_FAILED if errors else EXIT_OK


def status_all(ctx: Context, args, *, budgets: _Budgets | None = None) -> int:
    return run_all(ctx, args, "status", budgets=budgets)


def _minute(at: str | None) -> str:
    """An ISO time to the minute, for a table (the JSON keeps it whole)."""
    return (at or "")[:16].replace("T", " ")


def _text(command: str, rows: list[Row], regions: list[str]) -> str:
    accounts = len({r.account for r in rows})
    failed = sum(1 for r in rows if r.error)
    if command == "status":
        body = [(r.account, r.region, r.stage or "-", "" if r.generation is None else r.generation,
                 "" if r.engaged is None else r.engaged,
                 ", ".join(f"{k} {n}" for k, n in r.engaged_by_kind.items()),
                 _minute(r.entered_at), r.verdict or "", "" if r.paused is None else ("yes" if r.paused else "no"),
                 r.error or "") for r in rows]
        lines = [table(("ACCOUNT", "REGION", "STAGE", "GEN", "ENGAGED", "BY KIND", "SINCE", "VERDICT", "PAUSED", "ERROR"), body)]
        active = sum(1 for r in rows if r.stage not in (None, "normal"))
        lines.append(f"{accounts} accounts x {len(regions)} regions: {active} not normal, "
                     f"{sum(r.engaged or 0 for r in rows)} resources engaged, {failed} unreadable")
        return "\n".join(lines)
    if command == "plan":
        body = [(r.account, r.region, ", ".join(f"{k} {n}" for k, n in (r.planned or {}).items()), r.error or "")
                for r in rows]
        # A plan's outcomes are "planned" (what engage would change): the table's count, and the summary's.
        changing = sum((r.planned or {}).get("planned", 0) for r in rows)
        return "\n".join([table(("ACCOUNT", "REGION", "PLANNED", "ERROR"), body),
                          f"{accounts} accounts x {len(regions)} regions: {changing} resources would be engaged, {failed} failed"])
    body = [(r.account, r.region, r.result or "-", r.error or "") for r in rows]
    return "\n".join([table(("ACCOUNT", "REGION", "RESULT", "ERROR"), body),
                      f"{accounts} accounts x {len(regions)} regions: {len(rows) - failed} done, {failed} failed"])


# ---- the output folder and `holdfast report` -------------------------------------------

REPORT_FIELDS = ("account", "region", "command", "at", "stage", "generation", "paused", "engaged", "readiness",
                 "result", "planned", "error")


def write_outputs(root: Path, command: str, rows: list[Row], *, at: str) -> None:
    """DIR/<account>/<region>/<command>.json for every account-region (the account-wide
    rows, such as a suspended account, under region `-`)."""
    for row in rows:
        folder = root / row.account / row.region
        folder.mkdir(parents=True, exist_ok=True)
        doc = {"command": command, "at": at, **row.to_dict(), **(row.detail or {})}
        (folder / f"{command}.json").write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")


def register_report(sub) -> None:
    p = sub.add_parser("report", help="one CSV (or JSON) summary of an --all-accounts --output-dir folder")
    p.add_argument("--output-dir", required=True, help="the folder an --all-accounts command wrote")
    p.add_argument("--command", default=None, choices=sorted(ROLES), help="only this command's files (default: every one)")
    p.add_argument("--format", default="csv", choices=("csv", "json"), help="csv (default) or json; --output json and --json are json too")
    p.set_defaults(func=report)


def report(ctx: Context, args) -> int:
    root = Path(args.output_dir)
    if not root.is_dir():
        raise UsageError(f"--output-dir {root} is not a folder an --all-accounts command wrote")
    pattern = f"*/*/{args.command}.json" if args.command else "*/*/*.json"
    rows, unreadable = [], []
    for path in sorted(root.glob(pattern)):
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            unreadable.append(f"{path}: {err}")
            continue
        if not isinstance(doc, dict):
            # Every file an --all-accounts command writes is one JSON object.
            raise UsageError(f"{path} holds JSON {type(doc).__name__ if doc is not None else 'null'}, not the object an "
                             f"--all-accounts command writes: move it out of {root}, or run the command again")
        rows.append({name: doc.get(name) for name in REPORT_FIELDS})
    for line in unreadable:
        ctx.warn(f"not read: {line}")
    if not rows and not unreadable:
        raise UsageError(f"no <account>/<region>/{args.command or '*'}.json under {root}")
    if args.format == "json" and ctx.output == "table":
        ctx.output = "json"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=REPORT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (json.dumps(v, sort_keys=True) if isinstance(v, dict) else ("" if v is None else v))
                         for k, v in r.items()})
    # The CSV is this command's readable form (--output table); the document is the rest's.
    ctx.emit({"command": "report", "output_dir": str(root), "rows": rows,
              "errors": sum(1 for r in rows if r["error"]), "unreadable": unreadable}, out.getvalue())
    # A row's error is what the command found there, reported in the summary; only a file
    # that cannot be read fails the report.
    return EXIT_FAILED if unreadable else EXIT_OK


register = register_report


def fan_out(ctx, args, command: str, *, writes: bool = False) -> int | None:
    """The --all-accounts form of `command`, or None for this account only. A writing
    command asks once for the whole fan-out (or takes --yes), as it does for one account."""
    if getattr(args, "all_accounts", False):
        if writes and getattr(args, "dry_run", False):
            raise UsageError(f"{command} --all-accounts has no --dry-run: `holdfast plan --all-accounts` and "
                             f"`holdfast status --all-accounts` show each account without writing")
        if writes:
            from holdfast.cli.confirm import ask

            ask(ctx, args, f"{command} --all-accounts", f"{command} in every selected account and region",
                lambda: (f"{command}: every selected account and region", 1))
        return run_all(ctx, args, command)
    if used_without_all_accounts(args):
        raise UsageError("--accounts, --ou, --tag, --regions, --accounts-file and --output-dir go with --all-accounts")
    return None
