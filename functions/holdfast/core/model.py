"""The contract every actuator keeps, and the plain data they exchange.

An actuator is the imperative shell for one resource kind. Decisions (what posture to
set, what to write back on restore) are pure functions the actuator calls; the
actuator reads and writes AWS, the write-ahead tag and the ledger.

Shape:
- `candidates()` -> every resource that may be selected, sorted by ARN, from bulk
  listings only (a page of many resources a call); `read(candidate)` -> the Resource
  (the per-resource reads), or None when it turns out not to be selected or is gone.
  A walk that runs out of time resumes after the last ARN it finished, so no tick
  spends its budget re-reading what an earlier tick already walked.
- `discover()` -> the selected resources (`read` over all `candidates`), each with the
  values Holdfast manages as they are now, and any write-ahead record found on the
  resource's own tag.
- `engage(resource)` -> records the original (tag AND ledger; the tag alone if the
  ledger is unreachable) before changing anything, then moves the resource into
  posture. Monotone and idempotent: no write when already in posture, never
  overwrites a recorded original. Needs no plan guard.
- `relax(resource, target, guard)` -> moves toward the original: `target=None` is a
  full restore (then Holdfast's tags and ledger record are removed); otherwise a
  partial relax (for an event source mapping, `{"MaximumConcurrency": n}`: raise the
  cap to n, never above the original). `guard()` is called immediately before each
  relaxing write, AWS or ledger, and raises `StalePlan` when the plan generation has
  moved on; the actuator then stops and returns `refused-stale` (a relaxing write
  needs the plan current at the moment of the write).

The record of what Holdfast applied holds, before each write, every value that can be
Holdfast's on the resource once the write is made (for a mapping: the floor, the cap on
it now and the cap about to be written), so no crash between record and write and no
late write can make one of Holdfast's own values look like the owner's
(holdfast.core.restore.grow and advance).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from holdfast.core.errors import StalePlan  # noqa: F401  (re-exported: guards raise it)
from holdfast.core.kinds import KINDS  # noqa: F401,E402  (re-exported)

# Outcome actions.
ENGAGED = "engaged"          # Holdfast changed the resource into posture
ALREADY = "already"          # nothing to do; no write made
RAISED = "raised"            # a partial relax (cap raised)
RESTORED = "restored"        # fully restored and forgotten
DRIFT_KEPT = "drift-kept"    # restored, but owner-changed values were kept (see drift)
VANISHED = "vanished"        # the resource no longer exists: reported and forgotten
FAILED = "failed"            # an API error; the next run retries
REFUSED_STALE = "refused-stale"  # a relaxing write refused: the plan (or the resource's record) moved on, or an
                                 # earlier write to it may still land; the next tick reads again
PLANNED = "planned"          # recommend mode / `plan`: would change, did not
SKIPPED = "skipped"          # left alone on purpose: a write AWS would reject, that would harm, or
                             # that no record could be written ahead of (see notes)

# The controller's modes (settings.mode; a plan keeps the one it was decided under, and a
# Region switch step says which it wants). Declared here, read only through the
# predicates below: no module compares a mode with a string of its own
# (tests/architecture/test_mode_predicates.py).
AUTO = "auto"                # decides and writes to resources
RECOMMEND = "recommend"      # decides, writes its plan and reports; writes to no resource
OFF = "off"                  # does nothing
MODES = (AUTO, RECOMMEND, OFF)


def acts(mode: str | None) -> bool:
    """Mode auto: Holdfast writes to resources."""
    return mode == AUTO


def recommends_only(mode: str | None) -> bool:
    """Mode recommend: Holdfast decides, writes its plan and reports what it would change,
    and writes to no resource."""
    return mode == RECOMMEND


def is_off(mode: str | None) -> bool:
    """Mode off: Holdfast does nothing at all."""
    return mode == OFF


def changes_nothing(mode: str | None) -> bool:
    """Mode recommend or off: no resource is written (an unknown mode is neither)."""
    return recommends_only(mode) or is_off(mode)


Guard = Callable[[], None]

# A relax target meaning "nothing for this resource this tick": the walk reports it
# ALREADY and makes no call for it (the drain's mappings still waiting for their dependency).
LEAVE = "leave"


def no_guard() -> None:
    """For operator-forced restores (`resume --now`, `release`), which hold no plan."""


@dataclass(frozen=True)
class Resource:
    kind: str
    arn: str
    name: str
    current: Mapping[str, Any]
    # The write-ahead record found on the resource's own tags, decoded; None if absent.
    record: "Record | None" = None
    # Identifiers the actuator needs to write (group name, mapping UUID, ...); not compared.
    ref: Mapping[str, Any] = field(default_factory=dict)
    # How many tags of its owner's the resource carries (core.tags.owner_tags: aws: tags
    # and Holdfast's record tags left out), for the headroom check before the write-ahead.
    tag_count: int = 0
    # False when the tags (and so `record`) came from the Resource Groups Tagging API,
    # whose index AWS updates asynchronously: a record seen there may be gone, and one
    # just written may not show yet. True when read from the service's own tag API.
    confirmed: bool = True
    # Whether it carries the selector tag, for kinds whose restore writes the reconciler's
    # IAM policy allows only on the selector or Holdfast's record tag; None: not read.
    selected: bool | None = None


@dataclass(frozen=True)
class Candidate:
    """A resource as a bulk listing shows it, before its per-resource reads."""

    arn: str
    # What the listing returned that `read` needs (the group, the mapping, the tags, ...).
    listed: Any = None
    # False when only `read` can tell (the selector may be on the resource's own tags).
    selected: bool = True


@dataclass(frozen=True)
class Record:
    """What Holdfast saved before changing a resource: original and applied values."""

    kind: str
    arn: str
    original: Mapping[str, Any]
    applied: Mapping[str, Any]
    # What tells the engaged resource from another one created later at the same ARN (a
    # function deleted and recreated under its name), as its actuator recorded it after
    # writing; the ledger's copy only (the tag goes with the resource). None: not recorded.
    identity: Mapping[str, Any] | None = None
    # The ledger's copy only: its version (every write of it adds one; 0: none read), and
    # the last relaxing write of a kind whose writes are serialised per resource (its
    # `values` and when it was sent, `at`, ISO 8601): holdfast.core.restore.in_flight.
    version: int = field(default=0, compare=False)
    writing: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass
class Outcome:
    kind: str
    arn: str
    action: str
    changes: dict[str, Any] = field(default_factory=dict)   # key -> {"from": ..., "to": ...}
    drift: dict[str, Any] = field(default_factory=dict)     # key -> {"original", "applied", "current"}
    error: str | None = None
    ledger_written: bool | None = None   # False: ran without the ledger (tag only)
    # What the operator should know about an outcome that is not a failure, by topic
    # (e.g. "destination": why an async config was engaged without one, and the grant;
    # "record": why its write-ahead record is in the ledger only, or nowhere), each
    # {"why": ..., "fix": ...}.
    notes: dict[str, Any] = field(default_factory=dict)
    # Where the write-ahead record of an engaged resource is: ["tag", "ledger"] normally,
    # ["ledger"] when the resource has no room for two more tags, ["tag"] without the ledger.
    recorded_in: list[str] | None = None
    # The resource's name (group, function, target group, ...), for tables; None when unread.
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, {}, [])}
