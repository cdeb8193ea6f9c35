"""How soon an engage caps the consumers' harm: the benchmarks' harm curve.

A consumer's harm is the concurrent batches its mapping can reach: without a cap, the
1,000 Lambda scales an SQS mapping to (Lambda Developer Guide, "Configuring scaling
behavior for SQS event source mappings"), or less where its function's reserved
concurrency or the owner's MaximumConcurrency is lower; capped, its cap. The harm an
engage removes from a mapping is its harm before less the cap it writes; the curve says
when each share of the whole removal had landed: at time t the share is the removal of
every UpdateEventSourceMapping answered by t over the removal of all of them.

    weights = harm_before(mappings, reserved)          # uuid -> concurrent batches
    caps = caps_written(proxy.journal, started)         # [(seconds after start, uuid, cap)]
    curve(weights, caps)                                # {10: s, 50: s, 90: s, 100: s}
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

LAMBDA_SCALES_TO = 1000     # concurrent batches an uncapped SQS mapping can reach
SHARES = (10, 50, 90, 100)  # the points of the curve the benchmarks print, in per cent


def harm(cap: int | None, reserved: int | None) -> int:
    """The concurrent batches a mapping with `cap` (None: none) can reach, its function
    reserving `reserved` (None: nothing reserved)."""
    return min([LAMBDA_SCALES_TO] + [v for v in (cap, reserved) if v is not None])


def harm_before(mappings: Iterable[Mapping], reserved: Mapping[str, int | None]) -> dict[str, int]:
    """Each mapping's harm (by UUID) from its GetEventSourceMapping / ListEventSourceMappings
    shape, `reserved` by unqualified function ARN."""
    return {m["UUID"]: harm((m.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                            reserved.get(":".join(m["FunctionArn"].split(":")[:7])))
            for m in mappings}


def caps_written(journal: Iterable, started: float) -> list[tuple[float, str, int | None]]:
    """(seconds after `started`, mapping UUID, cap written) of each UpdateEventSourceMapping
    the proxy answered with success, in the order answered (throttle_proxy.Answered)."""
    out = []
    for a in journal:
        if a.operation != "UpdateEventSourceMapping" or not 200 <= a.status < 300:
            continue
        body = json.loads(a.body or b"{}")
        if "ScalingConfig" not in body:
            continue
        cap = (body["ScalingConfig"] or {}).get("MaximumConcurrency")
        out.append((a.at - started, a.path.rstrip("/").rsplit("/", 1)[-1], cap))
    return sorted(out)


def curve(weights: Mapping[str, int], caps: Iterable[tuple[float, str, int | None]],
          shares: Iterable[int] = SHARES) -> dict[int, float | None]:
    """The seconds by which each share (per cent) of the harm the caps remove had been
    removed; None for a share never reached (no harm removed at all). A mapping's removal
    counts once, at its first cap that lowers it."""
    removal: list[tuple[float, int]] = []
    done: set[str] = set()
    for at, uuid, cap in sorted(caps):
        if uuid in done or uuid not in weights or cap is None:
            continue
        cut = weights[uuid] - min(weights[uuid], cap)
        if cut > 0:
            done.add(uuid)
            removal.append((at, cut))
    total = sum(cut for _, cut in removal)
    out: dict[int, float | None] = {}
    for share in shares:
        out[share] = None
        if total == 0:
            continue
        reached = 0
        for at, cut in removal:
            reached += cut
            if reached * 100 >= share * total:
                out[share] = at
                break
    return out
