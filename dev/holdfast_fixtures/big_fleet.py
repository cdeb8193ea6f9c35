"""The benchmark fleet (500 groups, 750 mappings, 1,250 async configs, 250 target
groups), at any scale, built through the AWS APIs (on a moto server).

At scale 1: 500 Auto Scaling groups, 750 SQS consumers each with its event source
mapping, 1,250 functions with async configs, 250 NLB target groups, every one carrying
the opt-in tag (selected), plus a few untagged twins of each kind that must never change.

It is the project's own fleet builder (`holdfast_demo.fleet.build_fleet`), not a copy:
the same owner states (processes already suspended, uncapped mappings, owner
destinations, stricter async limits, custom NLB thresholds) recur across the fleet by
index, and selection works as it does there: a mapping by its own tag or by its
function's. A consumer selected by its function's tag (every fourth) makes that
function an async resource too, so the builder is asked for fewer standalone functions
and the fleet has exactly `1250 * scale` async resources. (The issue's "2,000 selected
resources" does not add up with its own counts, 500 + 750 + 1,250 + 250 = 2,750; the
counts per kind are what is built.)

Build it directly against moto, not through the throttling proxy: the builder is not
what is measured, and thousands of creates at AWS's rates would take minutes.
"""

from __future__ import annotations

from holdfast_demo.fleet import DEFAULT_SELECTOR, Fleet, build_fleet

ISSUE_FLEET = {"asg": 500, "esm": 750, "async": 1250, "nlb": 250}


def scaled(scale: float) -> dict[str, int]:
    """Selected resources per kind at `scale` (1 = the issue's fleet); at least one of each."""
    if not scale > 0:
        raise ValueError(f"scale must be above 0, got {scale!r}")
    return {kind: max(1, round(n * scale)) for kind, n in ISSUE_FLEET.items()}


def consumers_selected_by_function(esms: int) -> int:
    """How many of `esms` selected mappings build_fleet selects through their function's tag
    (index i % 4 == 3): each of those functions is an async resource too."""
    return sum(1 for i in range(esms) if i % 4 == 3)


def build_big_fleet(clients, scale: float = 1.0, *, unselected: int = 5, workers: int = 16,
                    selector: str = DEFAULT_SELECTOR, prefix: str = "fleet") -> Fleet:
    counts = scaled(scale)
    asyncs = max(0, counts["async"] - consumers_selected_by_function(counts["esm"]))
    fleet = build_fleet(
        clients, asgs=counts["asg"], esms=counts["esm"], asyncs=asyncs, nlbs=counts["nlb"], services=0,
        unselected=unselected, selector=selector, prefix=prefix, workers=workers,
    )
    built = {kind: len(fleet.selected[kind]) for kind in ISSUE_FLEET}
    if built != counts:  # the arithmetic above must match what the builder did
        raise AssertionError(f"built {built}, meant {counts}")
    return fleet
