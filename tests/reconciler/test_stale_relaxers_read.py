"""A tick reads the controllers' leases once per plan generation while none is older than
it (reconciler/steps.stale_relaxers): an empty answer stays empty for the tick, as no lease
older than a generation can be written once it is current; a lease found is read again."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from holdfast.reconciler import steps

STARTED = datetime(2025, 10, 20, 7, 0, tzinfo=timezone.utc)


def test_an_empty_answer_is_kept_for_its_generation_and_a_lease_found_is_read_again(monkeypatch):
    answers = {5: [], 6: ["old-controller"]}
    reads = []

    def stale_relaxers(ledger, generation, now):
        reads.append((generation, now))
        return list(answers[generation])

    monkeypatch.setattr(steps.ledger_leases, "stale_relaxers", stale_relaxers)
    tick = SimpleNamespace(ledger=object(), started=STARTED, no_stale_relaxers=set())

    # GIVEN no older lease at generation 5 WHEN the tick asks at each kind THEN one read
    assert steps.stale_relaxers(tick, SimpleNamespace(generation=5)) == []
    assert steps.stale_relaxers(tick, SimpleNamespace(generation=5)) == []
    assert reads == [(5, STARTED)]

    # a lease older than generation 6 is read again at every kind: it may go meanwhile
    assert steps.stale_relaxers(tick, SimpleNamespace(generation=6)) == ["old-controller"]
    answers[6] = []
    assert steps.stale_relaxers(tick, SimpleNamespace(generation=6)) == []
    assert steps.stale_relaxers(tick, SimpleNamespace(generation=6)) == []
    assert reads == [(5, STARTED), (6, STARTED), (6, STARTED)]

    # a new tick reads again
    fresh = SimpleNamespace(ledger=object(), started=STARTED, no_stale_relaxers=set())
    assert steps.stale_relaxers(fresh, SimpleNamespace(generation=5)) == []
    assert len(reads) == 4
