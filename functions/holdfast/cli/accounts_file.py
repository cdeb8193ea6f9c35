"""`--accounts-file FILE`: the accounts of an `--all-accounts` command from c7n-org's accounts
file, for teams whose tooling account may not call Organizations.

    accounts:
    - account_id: '111122223333'
      name: payments-prod
      role: arn:aws:iam::111122223333:role/HoldfastReadOnly
      regions: [us-east-1, eu-west-1]
      tags:
      - env:prod
      - team:payments

The format is c7n-org's (its CONFIG_SCHEMA's `accounts`): `account_id` (12 digits) and
`role` (the role to assume there) are required; `name`, `display_name`, `org_id`, `email`,
`regions`, `tags` (`key:value` strings), `external_id` (passed to AssumeRole) and `vars`
are read or allowed. Stricter than c7n-org in two ways, each a clear error naming the
account and the key: an unknown key (a mistyped `regoins` would otherwise run in the
default regions) is refused with the nearest known key, and an account with a `profile`
instead of a `role`, or a role chain (a list), is refused, since the fan-out assumes one
role per account from the CLI's credentials.

The file is JSON, or YAML in the subset c7n-org files are written in: block mappings and
sequences, plain and quoted scalars, `[a, b]` lists of scalars and comments. Anchors,
aliases, tags, block scalars and several documents are refused with the line they are on.
Every scalar is a string (an unquoted 012345678901 keeps its leading zero), except
`null`/`~`, `true` and `false`. No YAML library is needed: the wheel depends on boto3 and
Powertools only, and the file reads the same wherever the CLI runs.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP_KEYS = ("accounts", "vars")
ACCOUNT_KEYS = ("account_id", "name", "display_name", "org_id", "email", "role", "profile", "tags", "regions",
                "external_id", "vars")
ACCOUNT_ID = re.compile(r"^\d{12}$")
ROLE_ARN = re.compile(r"^arn:aws[\w-]*:iam::(\d{12}):role/[\w+=,.@/-]{1,512}$")


class AccountsFileError(ValueError):
    """The accounts file cannot be read as one: the message names the file, and the line or account."""


@dataclass(frozen=True)
class Account:
    account_id: str
    name: str
    role: str
    regions: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    external_id: str | None = None


def load(path: str) -> list[Account]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise AccountsFileError(f"--accounts-file {path}: cannot read it ({getattr(err, 'strerror', None) or err})") from err
    return accounts(parse(text, path), path)


def parse(text: str, path: str = "accounts file") -> Any:
    """The document: JSON when it starts with `{`, else the YAML subset above."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise AccountsFileError(f"--accounts-file {path}: not valid JSON: {err}") from err
    return _Yaml(text, path).document()


def accounts(doc: Any, path: str) -> list[Account]:
    where = f"--accounts-file {path}"
    if not isinstance(doc, dict):
        raise AccountsFileError(f"{where}: expected a mapping with `accounts:` (c7n-org's accounts file)")
    _known(doc, TOP_KEYS, where)
    listed = doc.get("accounts")
    if not isinstance(listed, list) or not listed:
        raise AccountsFileError(f"{where}: `accounts` must be a list of accounts, each with account_id and role")
    out, seen = [], set()
    for i, entry in enumerate(listed, 1):
        out.append(_account(entry, f"{where}: account {i}"))
        if out[-1].account_id in seen:
            raise AccountsFileError(f"{where}: account {out[-1].account_id} is listed twice")
        seen.add(out[-1].account_id)
    return out


def _account(entry: Any, where: str) -> Account:
    if not isinstance(entry, dict):
        raise AccountsFileError(f"{where}: expected a mapping (account_id, name, role, regions, tags)")
    account_id = str(entry.get("account_id") or "")
    if not ACCOUNT_ID.match(account_id):
        raise AccountsFileError(f"{where}: account_id {account_id!r} is not an AWS account id (12 digits)"
                                if account_id else f"{where}: no account_id")
    where = f"{where} ({entry.get('name') or account_id})"
    _known(entry, ACCOUNT_KEYS, where)
    role = entry.get("role")
    if role is None:
        raise AccountsFileError(f"{where}: no role: give the ARN of the role to assume in {account_id}"
                                + (" (a profile is not assumed by Holdfast's fan-out)" if "profile" in entry else ""))
    if isinstance(role, list):
        raise AccountsFileError(f"{where}: role is a chain of {len(role)} roles; Holdfast assumes one role per account")
    match = ROLE_ARN.match(str(role))
    if not match or match.group(1) != account_id:
        raise AccountsFileError(f"{where}: role {role!r} is not the ARN of a role in account {account_id} "
                                f"(arn:aws:iam::{account_id}:role/NAME)")
    regions = _strings(entry.get("regions"), f"{where}: regions")
    tags = {}
    for tag in _strings(entry.get("tags"), f"{where}: tags"):
        key, _, value = tag.partition(":")
        tags[key.strip()] = value.strip()
    external = entry.get("external_id")
    return Account(account_id, str(entry.get("name") or account_id), str(role), tuple(regions), tags,
                   None if external is None else str(external))


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise AccountsFileError(f"{where}: expected a list of strings")
    return value


def _known(mapping: dict, keys: tuple[str, ...], where: str) -> None:
    for key in mapping:
        if key not in keys:
            near = difflib.get_close_matches(str(key), keys, n=1)
            raise AccountsFileError(f"{where}: unknown key {key!r}" + (f"; did you mean {near[0]!r}?" if near else
                                                                        f" (known: {', '.join(keys)})"))


# ---- the YAML subset --------------------------------------------------------------------

_REFUSED = (("&", "anchors"), ("*", "aliases"), ("!", "tags"), ("|", "block scalars"), (">", "block scalars"))


class _Yaml:
    def __init__(self, text: str, path: str):
        self.path = path
        self.lines: list[tuple[int, str, int]] = []   # (indent, content, line number)
        for number, raw in enumerate(text.splitlines(), 1):
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                self.fail(number, "a tab in the indentation (YAML indents with spaces)")
            content = _uncomment(raw).rstrip()
            if not content.strip():
                continue
            if content.strip() in ("---", "..."):
                if self.lines:
                    self.fail(number, "several documents")
                continue
            self.lines.append((len(content) - len(content.lstrip()), content.strip(), number))

    def fail(self, number: int, what: str) -> None:
        raise AccountsFileError(f"--accounts-file {self.path}: line {number}: {what} "
                                "(not in the YAML subset Holdfast reads: write it plainly, or as JSON)")

    def document(self) -> Any:
        if not self.lines:
            return None
        value, i = self.block(0, self.lines[0][0])
        if i < len(self.lines):
            self.fail(self.lines[i][2], "indentation that does not match the lines above it")
        return value

    def block(self, i: int, indent: int) -> tuple[Any, int]:
        if self.lines[i][1] == "-" or self.lines[i][1].startswith("- "):
            return self.sequence(i, indent)
        return self.mapping(i, indent)

    def sequence(self, i: int, indent: int) -> tuple[list, int]:
        out = []
        while i < len(self.lines) and self.lines[i][0] == indent and (self.lines[i][1] == "-" or self.lines[i][1].startswith("- ")):
            _, content, number = self.lines[i]
            rest = content[1:].strip()
            if not rest:
                if i + 1 < len(self.lines) and self.lines[i + 1][0] > indent:
                    value, i = self.block(i + 1, self.lines[i + 1][0])
                else:
                    value, i = None, i + 1
            elif _key(rest) is not None:
                # `- key: value` opens a mapping whose keys line up with `key`.
                inner = indent + len(content) - len(rest)
                self.lines[i] = (inner, rest, number)
                value, i = self.mapping(i, inner)
            else:
                value, i = self.scalar(rest, number), i + 1
            out.append(value)
        return out, i

    def mapping(self, i: int, indent: int) -> tuple[dict, int]:
        out: dict[str, Any] = {}
        while i < len(self.lines) and self.lines[i][0] == indent:
            _, content, number = self.lines[i]
            split = _key(content)
            if split is None:
                self.fail(number, f"{content!r} where a `key: value` was expected")
            key, rest = split
            if key in out:
                self.fail(number, f"the key {key!r} a second time")
            i += 1
            if rest:
                out[key] = self.scalar(rest, number)
            elif i < len(self.lines) and (self.lines[i][0] > indent or (
                    self.lines[i][0] == indent and (self.lines[i][1] == "-" or self.lines[i][1].startswith("- ")))):
                out[key], i = self.block(i, self.lines[i][0])
            else:
                out[key] = None
        if i < len(self.lines) and self.lines[i][0] > indent:
            self.fail(self.lines[i][2], "indentation that does not match the lines above it")
        return out, i

    def scalar(self, text: str, number: int) -> Any:
        if text.startswith("[") and text.endswith("]"):
            inner = text[1:-1].strip()
            return [self.scalar(part.strip(), number) for part in _split_flow(inner)] if inner else []
        if text.startswith("{"):
            self.fail(number, "a {flow: mapping}")
        for mark, what in _REFUSED:
            if text.startswith(mark):
                self.fail(number, what)
        if text.startswith("'"):
            if not (len(text) > 1 and text.endswith("'")):
                self.fail(number, "an unterminated quote")
            return text[1:-1].replace("''", "'")
        if text.startswith('"'):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                self.fail(number, "a double-quoted string JSON cannot read")
        if text in ("null", "~", "Null", "NULL"):
            return None
        if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
            return text.lower() == "true"
        return text


def _uncomment(line: str) -> str:
    """The line without its comment: a `#` at its start or after a space, outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"" and (i == 0 or line[i - 1] in " [,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _key(content: str) -> tuple[str, str] | None:
    """(key, the rest) of a `key: value` or `key:` line; None when it is not one."""
    match = re.match(r"^('(?:[^']|'')*'|\"(?:[^\"\\\\]|\\\\.)*\"|[^\s'\"\[\]{}#,][^:#]*?)\s*:(?:\s+(.*))?$", content)
    if not match:
        return None
    key = match.group(1)
    if key[0] in "'\"":
        key = key[1:-1].replace("''", "'") if key[0] == "'" else json.loads(key)
    return key, (match.group(2) or "").strip()


def _split_flow(inner: str) -> list[str]:
    parts, quote, current = [], None, ""
    for ch in inner:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            parts.append(current)
            current = ""
            continue
        elif ch in "[]{}":
            raise AccountsFileError("a nested [flow] list (not in the YAML subset Holdfast reads)")
        current += ch
    return parts + [current]
