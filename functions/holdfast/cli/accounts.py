"""`holdfast status --all-accounts`: every account's and region's plan, at a glance.

    holdfast status --all-accounts [--accounts 111122223333,444455556666] [--regions us-east-1,eu-west-1]
                    [--role-name HoldfastReadOnly] [--workers 8] [--json]

For each account (`--accounts`, or every account Organizations lists when run from the
management account or a delegated administrator) the command assumes the read-only role
the organization's StackSet creates in each account (`--role-name`, default
`HoldfastReadOnly`), and in each region (`--regions`, else the settings' `targets`,
else the CLI's region) reads that region's ledger: the plan (stage, generation, since
when), the last verdict, the kill switch and the engaged records (pk `RES`), counted
per kind. The role's reads are dynamodb:GetItem and dynamodb:Query on the ledger table.

Concurrently, within budgets: one bounded thread pool (`--workers`) does every AssumeRole
and every read; AssumeRole calls pass one client-side token bucket (STS counts them
against the caller's account), and the ledger reads another (they are spread over the
accounts, but one command should never be what throttles an account's ledger during an
event). Credentials are assumed once per account and shared by its regions.

An account whose role cannot be assumed, a region without a ledger, or any read that
fails is a row with its error, never a crash; the exit code is then 1 (each row says
why). Bad input (an account id that is not 12 digits, an unknown region) is exit 2.

--json: {"command": "status", "all_accounts": true, "role_name", "regions", "accounts",
         "rows": [{"account", "region", "stage", "generation", "entered_at", "verdict",
                   "paused", "engaged", "engaged_by_kind", "error"}], "errors"}
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from holdfast.aws import Clients, error_code, error_text
from holdfast.iam import uses
from holdfast.ledger import PK, SK
from holdfast.ledger.conditions import CURRENT, PLAN_PK, key
from holdfast.ledger.control import CONTROL_PK, PAUSE
from holdfast.ledger.plan import from_item
from holdfast.ledger.resources import PARTITION as RES_PK
from holdfast.ledger.verdict import VERDICT
from holdfast.ratelimit import TokenBucket
from holdfast.cli import EXIT_FAILED, EXIT_OK
from holdfast.cli.context import LEDGER_TABLE_PARAMETER, Context, UsageError, published, operator_name, table
from holdfast.ledger import DEFAULT_TABLE

DEFAULT_ROLE = "HoldfastReadOnly"
DEFAULT_WORKERS = 8
# Client-side budgets. STS throttles AssumeRole per calling account; a fleet view of a few
# hundred accounts at 5 a second takes about a minute and leaves the account's other
# automation room. Ledger reads: four per region, spread over the accounts.
ASSUME_PER_SECOND = 5.0
READS_PER_SECOND = 25.0
SESSION_SECONDS = 900     # the shortest session AssumeRole allows
ACCOUNT_ID = re.compile(r"^\d{12}$")
ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")


def add_arguments(p) -> None:
    g = p.add_argument_group("every account (--all-accounts)")
    g.add_argument("--all-accounts", action="store_true",
                   help="stage, generation and engaged counts of every account and region, through a read-only role")
    g.add_argument("--accounts", default=None,
                   help="comma-separated account ids (default: every active account Organizations lists)")
    g.add_argument("--regions", default=None,
                   help="comma-separated regions (default: the settings' targets, else the CLI's region)")
    g.add_argument("--role-name", default=DEFAULT_ROLE, help=f"the read-only role in each account (default: {DEFAULT_ROLE})")
    g.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help=f"concurrent reads (default: {DEFAULT_WORKERS})")


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
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Budgets:
    def __init__(self, assume: TokenBucket | None = None, reads: TokenBucket | None = None):
        self.assume = assume or TokenBucket(ASSUME_PER_SECOND, burst=ASSUME_PER_SECOND)
        self.reads = reads or TokenBucket(READS_PER_SECOND, burst=5.0)


# ---- input ------------------------------------------------------------------------------

def parse_accounts(text: str) -> list[str]:
    ids = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in ids if not ACCOUNT_ID.match(a)]
    if bad or not ids:
        raise UsageError(f"--accounts: {', '.join(repr(a) for a in bad) or 'no account'} is not an AWS account id "
                         "(12 digits); give a comma-separated list such as 111122223333,444455556666")
    return list(dict.fromkeys(ids))


def known_regions() -> set[str]:
    session = boto3.session.Session()
    return {r for partition in session.get_available_partitions()
            for r in session.get_available_regions("dynamodb", partition_name=partition)}


def parse_regions(text: str) -> list[str]:
    regions = [r.strip() for r in text.split(",") if r.strip()]
    known = known_regions()
    unknown = [r for r in regions if r not in known]
    if unknown or not regions:
        raise UsageError(f"--regions: {', '.join(repr(r) for r in unknown) or 'no region'} is not an AWS region "
                         "DynamoDB serves; give a comma-separated list such as us-east-1,eu-west-1")
    return list(dict.fromkeys(regions))


@uses("organizations:ListAccounts", by=("cli",))
def organization_accounts(ctx: Context) -> tuple[list[str], list[Row]]:
    """Active accounts, and a row for each account that is not (suspended, closing)."""
    try:
        pages = ctx.clients("organizations").get_paginator("list_accounts").paginate()
        accounts = [a for page in pages for a in page["Accounts"]]
    except (ClientError, BotoCoreError) as err:
        raise UsageError(
            f"cannot list the organization's accounts ({error_text(err)}): run this from the management account "
            "or a delegated administrator, or name the accounts with --accounts"
        ) from err
    active, inactive = [], []
    for a in sorted(accounts, key=lambda a: a["Id"]):
        state = a.get("State") or a.get("Status") or "ACTIVE"
        if state == "ACTIVE":
            active.append(a["Id"])
        else:
            inactive.append(Row(a["Id"], "-", error=f"account is {state} in the organization: not read"))
    return active, inactive


@uses("sts:GetCallerIdentity", by=("cli",))
def _partition(ctx: Context) -> str:
    return ctx.clients("sts").get_caller_identity()["Arn"].split(":")[1]


# ---- the reads, each one budgeted -------------------------------------------------------

@uses("sts:AssumeRole", by=("cli",))
def assume(ctx: Context, budgets: _Budgets, role_arn: str, session_name: str) -> dict[str, str]:
    budgets.assume.take()
    creds = ctx.clients("sts").assume_role(RoleArn=role_arn, RoleSessionName=session_name,
                                           DurationSeconds=SESSION_SECONDS)["Credentials"]
    return {"aws_access_key_id": creds["AccessKeyId"], "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds["SessionToken"]}


@uses("ssm:GetParametersByPath", by=("cli", "readonly"))
def member_ledger(clients: Clients, budgets: _Budgets) -> str:
    """The ledger table a member account's stack publishes in this region
    (/holdfast/<stack>/ledger-table; CloudFormation names the table), else holdfast-ledger."""
    budgets.reads.take()
    found = published(clients, LEDGER_TABLE_PARAMETER)
    if len(found) > 1:
        raise UsageError(f"several Holdfast stacks publish a ledger here ({', '.join(sorted(found))}): "
                         "pass --ledger-table")
    return next(iter(found.values()), DEFAULT_TABLE)


@uses("dynamodb:GetItem", "dynamodb:Query", by=("cli", "readonly"))
def read_ledger(dynamodb, ledger_table: str, budgets: _Budgets, row: Row) -> None:
    """The plan, the verdict, the kill switch and the engaged records of one region's ledger."""
    budgets.reads.take()
    item = dynamodb.get_item(TableName=ledger_table, Key=key(PLAN_PK, CURRENT)).get("Item")
    if item:
        plan = from_item(item)
        row.stage, row.generation = plan.label, plan.generation
        row.entered_at = plan.entered_at.isoformat() if plan.entered_at else None
    else:
        row.stage, row.generation = "normal", 0
    budgets.reads.take()
    verdict = dynamodb.get_item(TableName=ledger_table, Key=key(PLAN_PK, VERDICT)).get("Item")
    row.verdict = json.loads(verdict["verdict"]["S"]).get("state") if verdict and "verdict" in verdict else None
    budgets.reads.take()
    control = dynamodb.get_item(TableName=ledger_table, Key=key(CONTROL_PK, PAUSE)).get("Item")
    row.paused = bool(control and control.get("paused", {}).get("BOOL"))
    kinds: Counter[str] = Counter()
    request = dict(TableName=ledger_table, KeyConditionExpression="#pk = :pk", ProjectionExpression="#kind",
                   ExpressionAttributeNames={"#pk": PK, "#kind": "kind"}, ExpressionAttributeValues={":pk": {"S": RES_PK}})
    while True:
        budgets.reads.take()
        page = dynamodb.query(**request)
        kinds.update(i.get("kind", {}).get("S", "?") for i in page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    row.engaged, row.engaged_by_kind = sum(kinds.values()), dict(sorted(kinds.items()))


# ---- the command ------------------------------------------------------------------------

def status_all(ctx: Context, args, *, budgets: _Budgets | None = None) -> int:
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if not ROLE_NAME.match(args.role_name):
        raise UsageError(f"--role-name {args.role_name!r} is not an IAM role name (1-64 of letters, digits and +=,.@_-)")
    regions = parse_regions(args.regions) if args.regions else (
        list(dict.fromkeys(t.region for t in ctx.settings.targets)) or [ctx.clients.region])
    rows: list[Row] = []
    if args.accounts:
        accounts = parse_accounts(args.accounts)
    else:
        accounts, rows = organization_accounts(ctx)
    budgets = budgets or _Budgets()
    partition = _partition(ctx)
    session_name = re.sub(r"[^\w+=,.@-]", "-", f"holdfast-status-{operator_name()}")[:64]
    creds: dict[str, dict[str, str] | str] = {}
    lock = threading.Lock()

    def credentials(account: str) -> dict[str, str] | str:
        role_arn = f"arn:{partition}:iam::{account}:role/{args.role_name}"
        try:
            return assume(ctx, budgets, role_arn, session_name)
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
        ledger = ctx.ledger_table
        try:
            if ctx.ledger_found_by != "--ledger-table":
                ledger = member_ledger(clients, budgets)
            read_ledger(clients("dynamodb"), ledger, budgets, row)
        except UsageError as err:
            row.error = str(err)
        except ClientError as err:
            row.error = (f"no ledger table {ledger} in {region}" if error_code(err) == "ResourceNotFoundException"
                         else f"ledger read failed: {error_text(err)}")
        except BotoCoreError as err:
            row.error = f"ledger unreachable: {error_text(err)}"
        with lock:
            for op, n in clients.calls.items():
                ctx.clients.calls[op] += n
        return row

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for account, found in zip(accounts, pool.map(credentials, accounts)):
            creds[account] = found
        pairs = [(a, r) for a in accounts for r in regions]
        rows += list(pool.map(lambda pair: one(*pair), pairs))
    rows.sort(key=lambda r: (r.account, r.region))
    errors = [r for r in rows if r.error]
    ctx.emit(
        {"command": "status", "all_accounts": True, "role_name": args.role_name, "regions": regions,
         "accounts": len({r.account for r in rows}), "rows": [r.to_dict() for r in rows], "errors": len(errors),
         "api_calls_by_operation": dict(ctx.clients.calls)},
        _text(rows, regions),
    )
    for r in errors:
        ctx.warn(f"{r.account} {r.region}: {r.error}")
    return EXIT_FAILED if errors else EXIT_OK


def _text(rows: list[Row], regions: list[str]) -> str:
    body = [(r.account, r.region, r.stage or "-", "" if r.generation is None else r.generation,
             "" if r.engaged is None else r.engaged,
             ", ".join(f"{k} {n}" for k, n in r.engaged_by_kind.items()),
             r.entered_at or "", r.verdict or "", "" if r.paused is None else ("yes" if r.paused else "no"),
             r.error or "") for r in rows]
    lines = [table(("ACCOUNT", "REGION", "STAGE", "GEN", "ENGAGED", "BY KIND", "SINCE", "VERDICT", "PAUSED", "ERROR"), body)]
    active = sum(1 for r in rows if r.stage not in (None, "normal"))
    lines.append(f"{len({r.account for r in rows})} accounts x {len(regions)} regions: {active} not normal, "
                 f"{sum(r.engaged or 0 for r in rows)} resources engaged, {sum(1 for r in rows if r.error)} unreadable")
    return "\n".join(lines)
