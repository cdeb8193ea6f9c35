"""Detection: signals -> verdict. The reconciler calls `collect` once a tick.

signals.py parses events into Signals, classify.py classifies launch failures,
detector.py is the pure verdict, probes.py and polling.py are the tick's own
observations, ledger/signals.py stores them all.

`collect` is the shell around the pure detector. It keeps working when the ledger is
unreachable (in October the ledger's own region could be the impaired one): the
tick's probes and polled activities are then all the detector sees, which is enough
to stay or become impaired; what it cannot do without the ledger is see events the
detector Lambda recorded.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError

from . import polling, probes
from .detector import Verdict, evaluate, lookback

logger = logging.getLogger(__name__)


def collect(
    clients,
    settings,
    ledger_table: str,
    now: datetime,
    previous: Verdict | None,
    *,
    resolver: probes.Resolver = probes.system_resolver,
) -> Verdict:
    """Probe, poll, record what was seen, read the recent signals, evaluate."""
    # Imported here: ledger.signals imports detection.signals, which imports this package.
    from ..ledger.signals import LedgerUnavailable, recent, record_all

    quick = clients.with_config(probes.probe_config(settings))
    fresh = probes.run(quick, settings, clients.region, now, resolver=resolver)
    logger.info("probes: success ratio %s", probes.success_ratio(fresh))
    try:
        # Through the probes' quick clients: a fallback must not spend the tick retrying.
        fresh += polling.poll(quick("autoscaling"), settings, now - timedelta(minutes=settings.detect_window_minutes))
    except (ClientError, BotoCoreError) as err:
        logger.warning("polling fallback failed this tick: %s", err)

    dynamodb = clients("dynamodb")
    stored = []
    try:
        record_all(dynamodb, ledger_table, fresh, ttl_hours=settings.signal_ttl_hours)
    except LedgerUnavailable as err:
        logger.warning("%s; evaluating without recording", err)
    try:
        stored = recent(dynamodb, ledger_table, now - lookback(settings), now)
    except LedgerUnavailable as err:
        logger.warning("%s; evaluating this tick's own observations only", err)
    return evaluate(stored + fresh, previous, settings, now)
