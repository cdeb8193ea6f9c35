"""Constructs Holdfast's stack is made of, one per module. Each takes keyword-only
typed arguments and exposes its resources as attributes; grants between them are
wired by the stack."""

from stacks.constructs.controllers import Controllers
from stacks.constructs.ledger import Ledger
from stacks.constructs.monitoring import Monitoring
from stacks.constructs.notifications import Notifications
from stacks.constructs.queues import Queues
from stacks.constructs.signals import Signals

__all__ = ["Controllers", "Ledger", "Monitoring", "Notifications", "Queues", "Signals"]
