"""SQS event source mappings in provisioned mode: a cap in concurrent batches, as event pollers.

A mapping in provisioned mode (`ProvisionedPollerConfig`) takes no
`ScalingConfig.MaximumConcurrency` — "these are mutually exclusive options" — and its
scaling is set by its pollers instead (Lambda Developer Guide, "Configuring scaling
behavior for SQS event source mappings"). The facts this module is built on:

- "each event poller can handle up to 1 MB/sec of throughput, up to 10 concurrent
  invokes, or up to 10 Amazon SQS polling API calls per second" (the same guide; and "How
  Lambda processes records from stream and queue-based event sources", provisioned mode:
  "For Amazon SQS: ... up to 10 concurrent invokes"). So N pollers carry at most 10·N
  concurrent batches: INVOKES_PER_POLLER.
- For SQS, MinimumPollers is 2–200 (default 2: "minimum 2 required") and MaximumPollers
  from 2 (default 200; the API reference's ProvisionedPollerConfig gives 2–10,000, the
  developer guide 2–2,000). An absent field is its default: `config` reads it as that
  number, so an original is recorded (and restored) as the number the mapping ran with,
  which means the same whether an update replaces the whole ProvisionedPollerConfig or
  only the fields it names.
- A minimum above the maximum names no range of pollers to scale between: every write
  keeps MinimumPollers ≤ MaximumPollers (`to_write`).

The drain decides caps in concurrent batches (holdfast.core.drain); at the write
boundary a cap becomes the most pollers whose invocations stay within it, floor(cap / 10),
and never fewer than the 2 the API allows (`pollers_for`): rounding down never lets more
batches run than the cap, except below 20, where the API's minimum of 2 pollers may carry
up to 20. Read back, pollers are shown to the drain as the cap it wrote when they are that
cap's pollers, or as the batches they carry otherwise (`shown_cap`), so the controller
judges its own caps, and one rounded down is not taken for a cap someone else set.

Pure: no boto3, no clock.
"""

from __future__ import annotations

from typing import Any, Mapping

MIN_KEY = "MinimumPollers"
MAX_KEY = "MaximumPollers"
KEYS = (MIN_KEY, MAX_KEY)

INVOKES_PER_POLLER = 10     # concurrent invokes one SQS event poller carries at most (see above)
LEAST_POLLERS = 2           # the least either field takes for SQS
DEFAULTS = {MIN_KEY: 2, MAX_KEY: 200}   # what an absent field means for SQS
MOST_MINIMUM = 200          # MinimumPollers' largest value
MOST_MAXIMUM = 10_000       # MaximumPollers' largest value (the API reference)


def provisioned(config: Mapping[str, Any] | None) -> bool:
    """Whether a mapping's ProvisionedPollerConfig (as listed) puts it in provisioned mode."""
    return bool(config) and any(config.get(k) is not None for k in KEYS)


def config(raw: Mapping[str, Any]) -> dict[str, int]:
    """The pollers a provisioned mapping runs with: each field as listed, or its default."""
    return {k: int(raw[k]) if raw.get(k) is not None else DEFAULTS[k] for k in KEYS}


def pollers_for(cap: int) -> int:
    """The MaximumPollers for a cap of `cap` concurrent batches: the most pollers whose
    invokes stay within it (rounded down), but never below the API's least."""
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ValueError(f"a cap is a whole number of concurrent batches, at least 1; got {cap!r}")
    return max(LEAST_POLLERS, cap // INVOKES_PER_POLLER)


def cap_of(pollers: int) -> int:
    """The most concurrent batches `pollers` event pollers carry."""
    return int(pollers) * INVOKES_PER_POLLER


def shown_cap(pollers: int, decided: int | None) -> int:
    """The cap a mapping with MaximumPollers `pollers` shows the drain: `decided` (the cap
    the drain last wrote) when these are its pollers, else the batches the pollers carry."""
    if isinstance(decided, int) and not isinstance(decided, bool) and decided >= 1 and pollers_for(decided) == pollers:
        return decided
    return cap_of(pollers)


def owner_cap(original: Mapping[str, Any], ceiling: int) -> int | None:
    """The owner's own cap, in concurrent batches, from a provisioned mapping's recorded
    original MaximumPollers; None where it is no lower than `ceiling` (Lambda's most for a
    cap), as for a mapping with no cap."""
    pollers = original.get(MAX_KEY)
    if pollers is None:
        return None
    cap = cap_of(pollers)
    return None if cap >= ceiling else cap


def floor_pollers(floor_cap: int) -> int:
    """The pollers an engagement holds a provisioned mapping at, for Holdfast's floor cap."""
    return pollers_for(floor_cap)


def posture(current: Mapping[str, Any], floor: int) -> dict[str, int]:
    """What an engagement lowers: MaximumPollers to `floor` pollers, and MinimumPollers with
    it where it is above (a minimum cannot pass the maximum). Never raises either."""
    return {k: floor for k in (MAX_KEY, MIN_KEY) if current.get(k) is not None and current[k] > floor}


def to_write(current: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, int]:
    """The whole ProvisionedPollerConfig to send: the pollers in force (`current`, as
    `config` reads them) with `values` applied. Both fields are always sent, so the update
    means the same whether Lambda replaces the config or merges it; a MinimumPollers above
    the MaximumPollers (an owner's lower maximum kept while the minimum is restored) is
    brought down to it."""
    out = {**config(current), **{k: int(v) for k, v in values.items() if k in KEYS and v is not None}}
    if out[MIN_KEY] > out[MAX_KEY]:
        out[MIN_KEY] = out[MAX_KEY]
    return {MIN_KEY: out[MIN_KEY], MAX_KEY: out[MAX_KEY]}
