"""Boto3 clients for Holdfast: standard retries, short timeouts, created lazily.

Nothing here runs at import time, and every component takes a `Clients` so tests and
the CLI can point it at moto or a local endpoint. Retries are botocore's `standard`
mode (3 attempts, a shared retry quota); Holdfast never stacks its own retry loop on
top of the SDK's. AWS_ENDPOINT_URL and AWS_REGION are honoured as boto3 honours them.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter, defaultdict
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

# What the calls made in this context are for (a kind's walk); see Clients.tagged.
CALL_TAG: contextvars.ContextVar[str | None] = contextvars.ContextVar("holdfast_call_tag", default=None)
# Called before every call made in this context, after it is counted: a long engage walk
# renews its claim from it (holdfast.reconciler), so a walk that is making calls keeps the
# claim even through a listing that checks no deadline.
CALL_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("holdfast_call_hook",
                                                                                        default=None)

DEFAULT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=32,
)


class Clients:
    """A lazily filled, thread-safe cache of boto3 clients from one session."""

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        config: Config | None = None,
    ):
        self._session = session or boto3.session.Session(profile_name=profile, region_name=region)
        self._endpoint_url = endpoint_url
        self._config = config or DEFAULT_CONFIG
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        # API calls made through these clients, by "service:Operation"; the CLI reports them.
        self.calls: Counter[str] = Counter()
        # The same calls by the tag in force when they were made (CALL_TAG: the engine tags
        # each kind's walk), so walks running at once are still counted apart.
        self.tagged: defaultdict[str, Counter[str]] = defaultdict(Counter)
        # Called with (service, client) for every client made (holdfast.budget.Governor.govern).
        self._on_client: list[Callable[[str, Any], None]] = []

    @property
    def config(self) -> Config:
        return self._config

    @property
    def region(self) -> str:
        return self._session.region_name or "us-east-1"

    @property
    def partition(self) -> str:
        """The ARN partition of the region (aws, aws-us-gov, aws-cn, ...), from botocore's
        partition data: for ARNs built before any ARN is at hand."""
        return self._session.get_partition_for_region(self.region)

    def __call__(self, service: str) -> Any:
        with self._lock:
            client = self._clients.get(service)
            if client is None:
                kwargs: dict[str, Any] = {"config": self._config}
                if self._endpoint_url:
                    kwargs["endpoint_url"] = self._endpoint_url
                client = self._session.client(service, **kwargs)
                client.meta.events.register("before-call", self._count)
                for hook in self._on_client:
                    hook(service, client)
                self._clients[service] = client
            return client

    def on_client(self, hook: Callable[[str, Any], None]) -> None:
        """Run `hook(service, client)` on every client made so far and every one made later."""
        with self._lock:
            self._on_client.append(hook)
            made = list(self._clients.items())
        for service, client in made:
            hook(service, client)

    def _count(self, model, **_: Any) -> None:
        op = f"{model.service_model.service_name}:{model.name}"
        tag = CALL_TAG.get()
        with self._lock:
            self.calls[op] += 1
            if tag is not None:
                self.tagged[tag][op] += 1
        hook = CALL_HOOK.get()
        if hook is not None:
            hook()

    def account_id(self) -> str:
        return self("sts").get_caller_identity()["Account"]

    def with_config(self, config: Config) -> "Clients":
        """Clients from the same session and endpoint with another config (the probes'
        short timeouts and single attempt)."""
        other = Clients(self._session, endpoint_url=self._endpoint_url, config=config)
        other._on_client = list(self._on_client)
        return other


# ---- AWS errors, translated here and nowhere else -------------------------------------
# Holdfast's own errors (holdfast.core.errors) say whether retrying helps; the botocore
# codes behind them are read only by the functions below.

# ResponseParserError: an answer botocore cannot parse (an HTML error page from a proxy or
# an endpoint that does not implement the call). It is not a BotoCoreError, and it is as
# much an AWS failure as a 500.
AWS_ERRORS = (ClientError, BotoCoreError, ResponseParserError)
# Codes that mean "the item was not what the condition expected" (a lost race, not an outage).
CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELLED = "TransactionCanceledException"
# DynamoDB answers TransactionConflict when a single write meets another request's open
# transaction on the same item (botocore does not retry it): contention, not an outage.
TRANSACTION_CONFLICT = ("TransactionConflictException", "TransactionConflict")


def error_code(err: Exception) -> str | None:
    """The AWS error code of a service answer; None when no answer came."""
    return err.response.get("Error", {}).get("Code") if isinstance(err, ClientError) else None


def error_message(err: Exception) -> str:
    """The message of a service answer ("" when it has none, or no answer came)."""
    return err.response.get("Error", {}).get("Message", "") if isinstance(err, ClientError) else ""


def http_status(err: Exception) -> int:
    """The HTTP status of a service answer; 0 when no answer came."""
    return err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) if isinstance(err, ClientError) else 0


def error_text(err: Exception) -> str:
    """`Code: message` of a service answer, or the kind of failure when no answer came."""
    if isinstance(err, ClientError):
        e = err.response.get("Error", {})
        return f"{e.get('Code')}: {e.get('Message')}"
    return f"{type(err).__name__}: {err}"


def error_summary(err: Exception) -> str:
    """`Code: message` of a service answer (without an empty message), else `error_text`
    cut to 300 characters: an answer that could not be parsed carries the whole page it got."""
    if isinstance(err, ClientError):
        return f"{err.response['Error']['Code']}: {err.response['Error'].get('Message', '')}".rstrip(": ")
    return error_text(err)[:300]


def failure_kind(err: Exception) -> str:
    """The AWS error code, or the kind of failure when no answer came (no connection,
    timeout), for messages that say why the ledger could not be reached."""
    return error_code(err) or type(err).__name__


def condition_failed(err: Exception) -> bool:
    """A conditional write (or a transaction's condition) found another item than it expected."""
    code = error_code(err)
    if code == CONDITION_FAILED:
        return True
    reasons = err.response.get("CancellationReasons") or [] if isinstance(err, ClientError) else []
    return code == TRANSACTION_CANCELLED and any(r.get("Code") == "ConditionalCheckFailed" for r in reasons)


def condition_failed_at(err: Exception, index: int) -> bool:
    """Whether the transaction item at `index` is the one whose condition failed."""
    reasons = err.response.get("CancellationReasons") or [] if isinstance(err, ClientError) else []
    return (error_code(err) == TRANSACTION_CANCELLED and len(reasons) > index
            and reasons[index].get("Code") == "ConditionalCheckFailed")


def contended(err: Exception) -> bool:
    """Another writer's transaction held the item (retry soon; the ledger is fine)."""
    code = error_code(err)
    if code in TRANSACTION_CONFLICT:
        return True
    reasons = err.response.get("CancellationReasons") or [] if isinstance(err, ClientError) else []
    return code == TRANSACTION_CANCELLED and any(r.get("Code") == "TransactionConflict" for r in reasons)


def destination_refused(err: Exception) -> bool:
    """Lambda would not write an async destination because the function's execution role
    may not send to it (InvalidParameterValueException, "The provided execution role
    does not have permissions to call SendMessage on SQS")."""
    return (error_code(err) == "InvalidParameterValueException"
            and "execution role does not have permission" in (error_text(err) or "").lower())


# A tag write refused because the resource would pass its tag limit (50 per resource):
# Application Auto Scaling TooManyTagsException, ELB TooManyTags, Auto Scaling
# CreateOrUpdateTags LimitExceeded (its only limit is the tags'), and Lambda TagResource's
# InvalidParameterValueException (the one 400 its API reference lists) about tags.
# Read only for the answer to a tag write.
TOO_MANY_TAGS = ("TooManyTagsException", "TooManyTags", "LimitExceeded")


def too_many_tags(err: Exception) -> bool:
    code = error_code(err)
    if code in TOO_MANY_TAGS:
        return True
    message = (err.response.get("Error", {}).get("Message") or "").lower() if isinstance(err, ClientError) else ""
    return code == "InvalidParameterValueException" and "tag" in message
