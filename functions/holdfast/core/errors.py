"""Holdfast's errors, each saying whether retrying helps (as Kopf's Permanent and
Temporary errors do). Pure: AWS error codes become these in the shell that makes the
call (holdfast.ledger, the actuators), through the helpers of holdfast/aws.py
(`failure_kind`, `condition_failed`, `contended`), so nothing above the shell ever looks
at a botocore code.

| error              | retry helps?                | raised when                                       |
|--------------------|-----------------------------|---------------------------------------------------|
| StalePlan          | no: re-read the plan        | a relaxing write's guard found a newer generation |
| Superseded         | no: re-read, next tick      | a cap write's record moved on since it was read   |
| PlanConflict       | no: re-read and decide      | another controller wrote the next plan first      |
| Conflict           | no: the record is another's | a conditional put found a different record        |
| Contention         | yes, soon                   | a write met an open transaction on the same item  |
| LedgerUnavailable  | yes, next tick              | the ledger could not be read or written           |
| Vanished           | no: the resource is gone    | the service answered not-found                    |
| ReleasedByHand     | no: until the next hold     | an engage met a release mark of its engagement    |
| Throttled          | yes, slower                 | the service answered a throttling code            |
"""

from __future__ import annotations


class HoldfastError(Exception):
    """Base of Holdfast's own errors. `retryable` says whether trying again can help."""

    retryable = False


class PermanentError(HoldfastError):
    """Trying again with the same inputs gives the same answer."""


class TemporaryError(HoldfastError):
    """Trying again later may succeed."""

    retryable = True


class StalePlan(PermanentError):
    """A relaxing write was refused because the plan generation moved on."""


class Superseded(StalePlan):
    """A write decided on a resource record that another controller has written since, or
    one that waits for an earlier write to the resource that may still land: this tick
    leaves the resource, the next reads it again (holdfast.ledger.conditions.RECORD_VERSION_IS)."""


class PlanConflict(PermanentError):
    """Another controller wrote the plan first; re-read and decide again."""


class Conflict(PermanentError):
    """A conditional write found a different item than the one it expected."""


class Vanished(PermanentError):
    """The resource no longer exists."""


class ReleasedByHand(PermanentError):
    """An engage's write-ahead was refused: an operator released the resource during the
    engagement in force (holdfast.ledger.control's release mark), after the walk had read
    the marks. The resource is left as released until the next hold."""


class LedgerUnavailable(TemporaryError):
    """The ledger could not be read or written (not a conflict)."""


class Contention(TemporaryError):
    """A write met another writer's open transaction (DynamoDB TransactionConflict)."""


class Throttled(TemporaryError):
    """The service is rate-limiting us: slow down and try again."""
