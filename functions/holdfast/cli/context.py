"""What every command gets: the Runtime (clients, settings, ledger, clock, ...), built here
from the command line and the AWS CLI's environment variables, and output helpers."""

from __future__ import annotations

import argparse
import json
import os
import sys
import getpass
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

from holdfast.aws import Clients
from holdfast.ledger import DEFAULT_TABLE
from holdfast.clock import SystemClock
from holdfast.runtime import Runtime
from holdfast.settings import CONTEXT_KEY, Settings

# Honoured for compatibility with earlier releases; `--expired-queue-arn` is the option.
EXPIRED_QUEUE_ENV = "HOLDFAST_EXPIRED_QUEUE_ARN"


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
    # Looked up when a Context is made, not at import, so redirected streams (tests) are honoured.
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Context":
        settings = load_settings_file(args.settings)
        if args.selector is not None:
            settings = Settings.from_mapping({**settings.to_mapping(), "selector": args.selector})
        # botocore reads only AWS_DEFAULT_REGION; AWS_REGION wins over it, as in the AWS CLI.
        region = args.region or os.environ.get("AWS_REGION")
        clients = Clients(region=region, profile=args.profile, endpoint_url=args.endpoint_url)
        runtime = Runtime(
            clients=clients,
            settings=settings,
            table=args.ledger_table or DEFAULT_TABLE,
            clock=SystemClock(),
            controller_id=f"cli:{operator_name()}",
            expired_queue_arn=os.environ.get(EXPIRED_QUEUE_ENV) or None,
        )
        return cls(runtime=runtime, json=args.json)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def clients(self) -> Clients:
        return self.runtime.clients

    @property
    def ledger_table(self) -> str:
        return self.runtime.table

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
