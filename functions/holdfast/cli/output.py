"""How every command prints: one document, selected by `--query`, printed as `--output` says.

Each command builds one JSON document and its readable form, and hands both to
`Context.emit`, which comes here. As with the AWS CLI:

- `--query EXPR` (JMESPath, the AWS CLI's query language; `jmespath` comes with boto3)
  selects from the document. A malformed expression is a usage error (exit 2) before the
  command runs; one that selects nothing prints nothing (`null` with `--output json`).
- `--output table` (the default): the command's own tables, which fit 120 columns (names,
  not ARNs; `--wide` adds the ARN column and lets a table be as wide as it needs); with
  `--query`, the selection as a table.
- `--output json`: the document (or the selection), indented. `--json` is this.
- `--output text`: the AWS CLI's text format, tab-separated, one line per object, for
  `cut`, `awk` and `while read`.

Errors are a JSON document on stdout with `--output json` only; in every format they are
a line on stderr.
"""

from __future__ import annotations

import contextvars
import json
import textwrap
from typing import Any, Iterable, Sequence

import jmespath
from jmespath.exceptions import JMESPathError

FORMATS = ("table", "json", "text")
TABLE_WIDTH = 120
# Columns shown only with --wide (the full identifiers a script takes from --output json).
WIDE_ONLY = frozenset({"ARN", "SOURCE ARN"})
# Where a table is rendered: its width limit (None: --wide, no limit). Set once per
# command by `holdfast.cli.main`; the default is what a test calling a renderer sees.
_width: contextvars.ContextVar[int | None] = contextvars.ContextVar("holdfast_table_width", default=TABLE_WIDTH)


class QueryError(ValueError):
    """--query is not a JMESPath expression."""


def compile_query(text: str | None):
    """The compiled JMESPath expression, None without one; QueryError names what is wrong."""
    if text is None:
        return None
    try:
        return jmespath.compile(text)
    except JMESPathError as err:
        said = " ".join(str(err).split())
        raise QueryError(f"--query {text!r} is not a JMESPath expression: {said}") from None


def set_wide(wide: bool) -> contextvars.Token:
    """The width for the tables of one command; `main` resets it with the token after."""
    return _width.set(None if wide else TABLE_WIDTH)


def reset_wide(token: contextvars.Token) -> None:
    _width.reset(token)


def wide() -> bool:
    return _width.get() is None


def render(document: Any, readable: str | None, *, output: str, query=None) -> str | None:
    """What goes on stdout (None: nothing). `readable` is the command's own table output."""
    if query is not None:
        document = query.search(document)
    if output == "json":
        return json.dumps(document, indent=2, default=str)
    if query is not None and document is None:
        return None
    if output == "text":
        return text(document)
    if query is None:
        return readable
    return selection_table(document)


# ---- text: the AWS CLI's format -------------------------------------------------------
# As `aws --output text` prints (awscli/text.py): a list of objects is a line per object,
# its scalar values tab-separated in the order of their sorted keys (the keys of every
# object in the list, so the columns line up); nested lists and objects follow on lines of
# their own, led by their key in capitals; a list of scalars is one tab-separated line.

def text(value: Any) -> str:
    lines: list[str] = []
    _text(value, lines, None, None)
    return "\n".join(lines)


def _scalar(value: Any) -> str:
    return "None" if value is None else str(value)


def _text(value: Any, lines: list[str], identifier: str | None, keys: list[str] | None) -> None:
    if isinstance(value, dict):
        _text_object(value, lines, identifier, keys)
    elif isinstance(value, list):
        _text_list(value, lines, identifier)
    else:
        lines.append(_scalar(value))


def _text_list(items: list, lines: list[str], identifier: str | None) -> None:
    if not items:
        return
    if any(isinstance(i, dict) for i in items):
        keys = sorted({k for i in items if isinstance(i, dict) for k, v in i.items() if not isinstance(v, (dict, list))})
        for item in items:
            _text(item, lines, identifier, keys)
        return
    scalars = [i for i in items if not isinstance(i, (dict, list))]
    if scalars:
        if identifier is not None:
            lines.extend(f"{identifier.upper()}\t{_scalar(i)}" for i in scalars)
        else:
            lines.append("\t".join(_scalar(i) for i in scalars))
    for nested in (i for i in items if isinstance(i, (dict, list))):
        _text(nested, lines, identifier, None)


def _text_object(item: dict, lines: list[str], identifier: str | None, keys: list[str] | None) -> None:
    if keys is None:
        scalars = [_scalar(v) for k, v in sorted(item.items()) if not isinstance(v, (dict, list))]
        nested = [(k, v) for k, v in sorted(item.items()) if isinstance(v, (dict, list))]
    else:
        scalars = [_scalar(item.get(k)) for k in keys]
        nested = [(k, item[k]) for k in sorted(set(item) - set(keys))]
    if scalars:
        lines.append("\t".join(([identifier.upper()] if identifier else []) + scalars))
    for key, value in nested:
        _text(value, lines, key, None)


# ---- tables ---------------------------------------------------------------------------

def selection_table(value: Any) -> str:
    """A --query selection as a table: a list of objects as columns of their keys, an
    object as KEY/VALUE rows, scalars one a line; nested values as compact JSON."""
    cell = lambda v: v if isinstance(v, str) else json.dumps(v, default=str, separators=(",", ":"))
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        return table([k.upper() for k in keys], [[cell(v.get(k)) for k in keys] for v in value], wide_only=())
    if isinstance(value, dict):
        return table(("KEY", "VALUE"), [(k, cell(v)) for k, v in value.items()], wide_only=())
    if isinstance(value, list):
        return "\n".join(cell(v) for v in value)
    return cell(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, wide_only: Iterable[str] = WIDE_ONLY,
          inset: int = 0) -> str:
    """A plain aligned text table that fits the width in force (120 columns; no limit with
    --wide), less `inset` (the indent its caller puts before each line). The columns in
    `wide_only` are shown with --wide only. Too wide, the widest columns are narrowed, and
    a cell longer than its column wraps onto lines of its own under itself (between its
    `; `-separated parts where it can)."""
    limit = _width.get()
    limit = None if limit is None else limit - inset
    rows = [["" if c is None else str(c) for c in row] for row in rows]
    keep = [i for i, h in enumerate(headers) if limit is None or h not in set(wide_only)]
    headers = [headers[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if limit is not None:
        widths = _fit(widths, [max(len(h), _MIN_COLUMN) for h in headers], limit)
    lines = [_line(headers, widths), _line(["-" * w for w in widths], widths)]
    for row in rows:
        lines.extend(_row_lines(row, widths))
    return "\n".join(lines)


# A column is never narrowed below this, nor below its header.
_MIN_COLUMN = 8
_GAP = 2


def _fit(widths: list[int], floors: list[int], limit: int) -> list[int]:
    """Narrow the widest column, one character at a time, until the table fits or every
    column is at its floor."""
    widths = list(widths)
    excess = sum(widths) + _GAP * (len(widths) - 1) - limit
    while excess > 0:
        narrowable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not narrowable:
            break
        widest = max(narrowable, key=lambda i: (widths[i], i))
        widths[widest] -= 1
        excess -= 1
    return widths


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


def _row_lines(row: list[str], widths: list[int]) -> list[str]:
    cells = [_wrap(c, w) if len(c) > w else [c] for c, w in zip(row, widths)]
    height = max((len(c) for c in cells), default=1)
    return [_line([c[k] if k < len(c) else "" for c in cells], widths) for k in range(height)]


def _wrap(cell: str, width: int) -> list[str]:
    """A long cell in lines of `width`: between its `; `-separated parts where it can."""
    out: list[str] = []
    for part in cell.split("; "):
        pieces = textwrap.wrap(part, max(width - 1, 1), break_on_hyphens=False) or [""]
        if out and len(out[-1]) + 2 + len(pieces[0]) <= width:
            out[-1] = f"{out[-1]}; {pieces.pop(0)}"
        elif out:
            out[-1] += ";"
        out.extend(pieces)
    return out
