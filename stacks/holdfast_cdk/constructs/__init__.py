"""Constructs Holdfast's stack is made of, one per module. Each takes keyword-only
typed arguments and exposes its resources as attributes; grants between them are
wired by the stack."""

from holdfast_cdk.constructs.controllers import Controllers
from holdfast_cdk.constructs.ledger import Ledger
from holdfast_cdk.constructs.monitoring import Monitoring
from holdfast_cdk.constructs.notifications import Notifications
from holdfast_cdk.constructs.queues import Queues
from holdfast_cdk.constructs.readiness import Readiness
from holdfast_cdk.constructs.signals import Signals

__all__ = ["Controllers", "Ledger", "Monitoring", "Notifications", "Queues", "Readiness", "Signals"]
