"""The Runtime: everything a controller or a command needs from the outside world, in one
value — clients, settings, the ledger table, the clock, where to announce stages and where
expired events go, and who is acting. It builds the ledger of each tick (`ledger()`).

It is built in exactly three places, from what each has (handlers/shell.py from the
Lambda environment, cli/context.py from the command line, the demo from its embedded
AWS), and passed down. Nothing below those three reads the environment
(tests/architecture/test_layers.py checks it), so a test or the demo never patches
`os.environ` to steer the controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from holdfast.aws import Clients
from holdfast.clock import Clock, SystemClock
from holdfast.core.own import NOT_OWN, Own
from holdfast.settings import Settings

if TYPE_CHECKING:
    from holdfast.ledger import Ledger


@dataclass(frozen=True)
class Telemetry:
    """What a controller reports besides its result: the reconciler's JSON line per
    decision (Powertools Logger, INFO) and its EMF metrics (printed on stdout, which
    CloudWatch reads in Lambda). In Lambda both are on; a command whose stdout is its own
    report (`holdfast drill`, the demo) turns them off here instead of in the environment.
    Warnings and errors are always logged."""

    decisions: bool = True
    metrics: bool = True


QUIET = Telemetry(decisions=False, metrics=False)


@dataclass(frozen=True)
class Runtime:
    clients: Clients
    settings: Settings
    table: str
    clock: Clock = field(default_factory=SystemClock)
    # Who is acting: the Lambda log stream (one per execution environment), or the
    # operator (`cli:<user>`), in leases, plans and logs.
    controller_id: str = "local"
    # Where stage changes are announced (SNS); None: not announced.
    topic_arn: str | None = None
    # Holdfast's expired-events queue, the on-failure destination of async configs whose
    # owner has none; None: not known (see the async actuator for what that changes).
    expired_queue_arn: str | None = None
    # The reconciler function the detector invokes to start a tick at once when the verdict
    # turns impaired (holdfast.observation.trigger); None: the schedule starts every tick.
    tick_function: str | None = None
    # Holdfast's own resources (holdfast.core.own): never engaged, whatever their tags.
    own: Own = NOT_OWN
    # The decision log lines and metrics (holdfast.reconciler); QUIET: neither.
    telemetry: Telemetry = field(default_factory=Telemetry)

    def ledger(self) -> "Ledger":
        """A new ledger for one tick or one command (holdfast.ledger.store): its readers
        share one Query of the resource records, so build one per tick, not one per reader,
        and never keep one across ticks (its reads would be a tick old)."""
        from holdfast.ledger import Ledger

        return Ledger(self.clients("dynamodb"), self.table, clock=self.clock)

    def but(self, **changes) -> "Runtime":
        """The same runtime with some fields replaced (another controller id, settings...)."""
        return replace(self, **changes)


def govern(clients: Clients, settings: Settings, *, table: str | None, member: str):
    """Put every call these clients make through the account's rate budgets (holdfast.budget):
    Lambda's control plane at `settings.lambda_writes_per_second` (AWS allows about 15/s for
    all of it, reads included), GetFunction apart, and Auto Scaling, ELB, Application Auto
    Scaling and the tagging API each on its own; a throttle slows the budget and is retried,
    never surfaced before the walk's deadline. With a ledger table, the shares of the
    account's budget are leases in it (ledger/budget_board.py), so two controllers, or a
    tick and an operator's command, stay under the quota together. The leases go through
    clients of their own, so the calls a command reports are its own. Returns the Governor."""
    from holdfast.budget import DEFAULT_SPECS, Budgets, BudgetSpec, Governor
    from holdfast.ledger import Ledger
    from holdfast.ledger.budget_board import LedgerShareBoard

    specs = {**DEFAULT_SPECS, "lambda": BudgetSpec(float(settings.lambda_writes_per_second))}
    options = {}
    if table:
        board_clients = clients.with_config(clients.config)
        options = {"board": LedgerShareBoard(Ledger(board_clients("dynamodb"), table)), "member": member}
    return Governor(Budgets(specs, **options)).govern(clients)
