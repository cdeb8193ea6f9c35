"""The demo's end-state check: every resource against its pre-event snapshot.

Pure: it compares two `fleet.snapshot` results and what the owner and Holdfast said
during the replay. One row per resource, with one of these results:

- restored:      a selected resource equal to its snapshot again;
- drift-kept:    a selected resource the owner changed while engaged, now equal to the
                 snapshot with exactly the owner's change, and Holdfast reported it;
- untouched:     an unselected resource equal to its snapshot.

Anything else fails the demo: a selected resource left different (NOT restored), an
owner's change overwritten or kept without a report, an unselected resource changed.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

OK = ("restored", "drift-kept", "untouched")


def _diff(before: Any, after: Any) -> str:
    if before is None or after is None:
        return "resource vanished" if after is None else "resource appeared"
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return "; ".join(f"{k}: {json.dumps(before.get(k), default=str)} -> {json.dumps(after.get(k), default=str)}" for k in keys)


def end_state(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    kinds: Mapping[str, str],
    selected: set[str],
    owner_changes: Mapping[str, Mapping[str, Any]],
    reported_drift: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """`kinds`: ARN -> kind; `owner_changes`: ARN -> the snapshot fields the owner set
    mid-event; `reported_drift`: ARN -> the drift Holdfast reported on restore."""
    rows = []
    for arn in sorted(before):
        was, now = before[arn], after.get(arn)
        row = {"resource": arn, "kind": kinds[arn]}
        if arn not in selected:
            row["result"] = "untouched" if now == was else "CHANGED though unselected"
        elif arn in owner_changes:
            expected = {**was, **owner_changes[arn]}
            if now == expected and arn in reported_drift:
                row["result"] = "drift-kept"
                row["detail"] = f"owner's change kept: {_diff(was, now)}; Holdfast reported {json.dumps(reported_drift[arn])}"
            elif now == expected:
                row["result"] = "drift kept but NOT reported"
            else:
                row["result"] = "owner's change NOT kept"
                row["detail"] = f"expected the owner's {json.dumps(dict(owner_changes[arn]))}; differs: {_diff(expected, now)}"
        else:
            row["result"] = "restored" if now == was else "NOT restored"
        if row["result"] not in OK and "detail" not in row:
            row["detail"] = _diff(was, now)
        rows.append(row)
    return rows


def failed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["result"] not in OK]
