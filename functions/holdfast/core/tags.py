"""The write-ahead tag: a resource's original and applied values, on the resource itself.

Lambda, ELB, ECS and Application Auto Scaling allow tag values of at most 256
characters from letters, digits, spaces and `_ . : / = + - @`, so JSON does not fit.
The codec encodes a flat mapping of short keys to scalars (None, bool, int, str) or
lists of scalars:

    key=token key=token ...        items separated by a space
    n | t | f                      None, True, False
    i<int>                         an integer, e.g. i2, i-1
    s<text>                        a string; bytes outside [A-Za-z0-9_.:/-] as @XX (hex)
    l<token>+<token>...            a list of scalars (`l` alone is the empty list)

ARNs and AWS attribute values pass through unescaped, which keeps records compact.
Pure: no boto3.
"""

from __future__ import annotations

import re
import string
from typing import Any, Mapping

ORIGINAL_KEY = "holdfast:original"
APPLIED_KEY = "holdfast:applied"
RECORD_KEYS = (ORIGINAL_KEY, APPLIED_KEY)
MAX_VALUE = 256
# User tags per resource (Lambda, Auto Scaling, ELB, ECS, Application Auto Scaling); tags
# whose key starts with `aws:` do not count toward it.
MAX_TAGS = 50
ALLOWED = frozenset(string.ascii_letters + string.digits + " _.:/=+-@")

_SAFE = frozenset((string.ascii_letters + string.digits + "_.:/-").encode())
_KEY = re.compile(r"^[A-Za-z0-9_]+$")


class TagError(ValueError):
    """A record does not fit in a tag, or a tag is not a record Holdfast wrote."""


def _escape(text: str) -> str:
    return "".join(chr(b) if b in _SAFE else f"@{b:02X}" for b in text.encode())


def _unescape(text: str) -> str:
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "@":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return out.decode()


def _scalar(value: Any) -> str:
    if value is None:
        return "n"
    if value is True:
        return "t"
    if value is False:
        return "f"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, str):
        return "s" + _escape(value)
    raise TagError(f"cannot encode {value!r} ({type(value).__name__})")


def _token(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "l" + "+".join(_scalar(v) for v in value)
    return _scalar(value)


def _parse_scalar(token: str) -> Any:
    kind, body = token[:1], token[1:]
    if token in ("n", "t", "f"):
        return {"n": None, "t": True, "f": False}[token]
    if kind == "i":
        return int(body)
    if kind == "s":
        return _unescape(body)
    raise TagError(f"bad token {token!r}")


def encode(values: Mapping[str, Any]) -> str:
    """Encode a flat mapping; raises TagError if a key is not [A-Za-z0-9_] or it is too long."""
    items = []
    for key, value in values.items():
        if not _KEY.match(key):
            raise TagError(f"tag record key {key!r} must be letters, digits or _")
        items.append(f"{key}={_token(value)}")
    text = " ".join(items)
    if len(text) > MAX_VALUE:
        raise TagError(f"write-ahead record is {len(text)} characters; a tag value allows {MAX_VALUE}")
    return text


def decode(text: str) -> dict[str, Any]:
    """The inverse of `encode`; raises TagError on anything `encode` cannot produce."""
    out: dict[str, Any] = {}
    try:
        for item in text.split(" ") if text else ():
            key, token = item.split("=", 1)
            if token[:1] == "l":
                out[key] = [_parse_scalar(t) for t in token[1:].split("+")] if len(token) > 1 else []
            else:
                out[key] = _parse_scalar(token)
    except (ValueError, IndexError, UnicodeDecodeError) as err:
        raise TagError(f"not a Holdfast record: {text[:60]!r} ({err})") from err
    return out


def owner_tags(tags: Mapping[str, str]) -> int:
    """How many of `tags` count toward the per-resource limit, Holdfast's record tags left
    out: the owner's share of the MAX_TAGS."""
    return sum(1 for key in tags if not key.lower().startswith("aws:") and key not in RECORD_KEYS)


def room_for_record(owner_tag_count: int) -> bool:
    """Whether a resource carrying `owner_tag_count` tags of its owner's (owner_tags) has
    room for Holdfast's two record tags."""
    return owner_tag_count + len(RECORD_KEYS) <= MAX_TAGS


def record_tags(original: Mapping[str, Any], applied: Mapping[str, Any]) -> dict[str, str]:
    """The two tags that carry a write-ahead record."""
    return {ORIGINAL_KEY: encode(original), APPLIED_KEY: encode(applied)}


def read_record(tags: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(original, applied) from a resource's tags, or None when it carries no record."""
    if ORIGINAL_KEY not in tags:
        return None
    return decode(tags[ORIGINAL_KEY]), decode(tags.get(APPLIED_KEY, ""))
