"""The ledger's wire format (DynamoDB's typed attribute values) is read in holdfast.ledger
only: the observation and the CLI get plain values from it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "functions" / "holdfast"
WIRE = re.compile(r"""\[["'](S|N|BOOL|M|L)["']\]|\.get\(["'](S|N|BOOL|M|L)["']""")


def test_no_typed_attribute_value_is_read_outside_the_ledger():
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in (ROOT / "observation" / "__init__.py", ROOT / "cli" / "accounts.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if WIRE.search(line)]
    assert not found, "\n".join(found)
