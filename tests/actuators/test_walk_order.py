"""The engine walks kinds of different services at once (each service has its own rate
budget) and the kinds of one service one after another, most dangerous first; calls are
still counted per kind."""

from __future__ import annotations

import threading

from holdfast.core.kinds import KINDS
from holdfast.engine.fleet import SERVICE_OF, _Run


class _Ledger:
    available, error = True, None


def test_kinds_of_different_services_walk_at_once_and_one_services_kinds_in_order():
    run = _Run(clients=None, ledger=_Ledger(), progress=None, deadline=None)
    lanes = len(set(SERVICE_OF.values()))
    # Every lane's first kind waits here for all the others: it passes only if they run at once.
    together = threading.Barrier(lanes, timeout=30)
    order: list[str] = []
    lock = threading.Lock()

    def walk(kind: str) -> None:
        if kind != "async":            # the Lambda lane's second kind comes after esm
            together.wait()
        with lock:
            order.append(kind)

    run.services(KINDS, walk)
    assert sorted(order) == sorted(KINDS)
    assert order.index("esm") < order.index("async"), "mappings (flood a dependency) before async configs"


def test_the_kinds_are_declared_most_dangerous_first():
    # Capacity removal (groups) and backlog amplification (consumers) before the rest.
    assert KINDS[:2] == ("asg", "esm")
    assert set(SERVICE_OF) == set(KINDS)
