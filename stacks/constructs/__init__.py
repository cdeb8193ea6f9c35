"""Constructs Holdfast's stack is made of, one per module. Each takes keyword-only
typed arguments and exposes its resources as attributes; grants between them are
wired by the stack."""

from .controllers import Controllers
from .ledger import Ledger
from .monitoring import Monitoring
from .notifications import Notifications
from .queues import Queues
from .signals import Signals

__all__ = ["Controllers", "Ledger", "Monitoring", "Notifications", "Queues", "Signals"]
