"""One-shot walks for tests: an Engine built for a single engage, relax or status, from
the pieces a test has at hand (clients, settings, a table). The controller builds one
Engine per tick (holdfast.reconciler) and each CLI command one per command."""

from __future__ import annotations

from holdfast.core.kinds import KINDS
from holdfast.engine import Engine
from holdfast.runtime import Runtime


def engine(clients, settings, table, *, kinds=KINDS, expired_queue_arn=None,
           deadline=None, progress=None, writers=None) -> Engine:
    runtime = Runtime(clients=clients, settings=settings, table=table, expired_queue_arn=expired_queue_arn)
    return Engine(runtime, kinds=kinds, deadline=deadline, progress=progress,
                  **({"writers": writers} if writers else {}))


def engage_all(clients, settings, table, *, kinds=KINDS, dry_run=False, after=None, **options):
    return engine(clients, settings, table, kinds=kinds, **options).engage(dry_run=dry_run, after=after)


def relax_all(clients, settings, table, *, kinds=KINDS, target_for=None, guard=None, **options):
    walk = engine(clients, settings, table, kinds=kinds, **options)
    return walk.relax(target_for=target_for, **({"guard": guard} if guard else {}))


def status(clients, settings, table, *, kinds=KINDS, **options):
    return engine(clients, settings, table, kinds=kinds, **options).status()


def actuators(clients, settings, ledger, kinds=KINDS, **options):
    return engine(clients, settings, ledger.table, kinds=kinds, **options).actuators
