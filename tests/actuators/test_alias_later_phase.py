"""Aliases with no async config are found in the later phase of the engage walk
(holdfast.engine.bookkeeping, "Later phase"): its ListAliases calls, one per function,
come only after every config the listing named is capped, and a walk the deadline stops
in that phase resumes there on the next walk, listing no function's aliases twice and
writing no config twice. Against moto with the per-qualifier async config emulation
(holdfast_fixtures.moto_patches). Each test fails if the aliases were listed with the
configs (the version taken back before this one) or if the phase restarted every walk.
"""

from __future__ import annotations

from collections import Counter

import pytest

from holdfast.core import order
from holdfast.core.model import ALREADY, ENGAGED, SKIPPED
from holdfast.engine import bookkeeping
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import make_function

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired-events"
OPTIONS = {"kinds": ("async",), "expired_queue_arn": QUEUE}
NAMES = [f"f{i}" for i in range(6)]


def fleet(clients, names=NAMES) -> tuple[list[str], list[str]]:
    """Functions with an alias `live` each and no alias config; every other one has an
    unqualified config of its owner's (3 retries are not possible: 2, the default, kept)."""
    lam = clients("lambda")
    functions, aliases = [], []
    for i, name in enumerate(names):
        arn = make_function(clients, name)
        if i % 2:
            lam.put_function_event_invoke_config(FunctionName=name, MaximumRetryAttempts=2)
        lam.create_alias(FunctionName=name, Name="live", FunctionVersion=lam.publish_version(FunctionName=name)["Version"])
        functions.append(arn)
        aliases.append(f"{arn}:live")
    return functions, aliases


class Calls:
    """The Lambda calls in the order made: (operation, qualifier or None)."""

    def __init__(self, clients):
        self.made: list[tuple[str, str | None]] = []
        clients("lambda").meta.events.register("before-parameter-build.lambda", self)

    def __call__(self, model, params, **_):
        self.made.append((model.name, params.get("Qualifier")))

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.made if op == operation)

    def config_writes(self, *, qualified: bool) -> list[int]:
        return [i for i, (op, q) in enumerate(self.made)
                if op in ("PutFunctionEventInvokeConfig", "UpdateFunctionEventInvokeConfig") and (q is not None) == qualified]


class AfterAliasListings:
    """A deadline that comes once `n` ListAliases calls were made."""

    def __init__(self, calls: Calls, n: int):
        self.calls, self.n = calls, n

    def __call__(self) -> bool:
        return self.calls.count("ListAliases") >= self.n


def by_arn(report) -> dict:
    return {o.arn: o for o in report.outcomes}


def test_every_listed_config_is_capped_before_the_first_alias_listing(clients, ledger_table):
    functions, aliases = fleet(clients)
    calls = Calls(clients)

    out = by_arn(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))

    assert all(out[a].action == ENGAGED for a in functions + aliases)
    first_listing = next(i for i, (op, _) in enumerate(calls.made) if op == "ListAliases")
    assert max(calls.config_writes(qualified=False)) < first_listing
    assert min(calls.config_writes(qualified=True)) > first_listing
    assert calls.count("ListAliases") == len(functions)


def test_a_tight_budget_caps_the_listed_configs_first_and_the_alias_listing_resumes_on_the_next_walk(
        clients, ledger_table):
    """The deadline comes after two functions' aliases were listed: every listed config is
    capped by then, the cursor names the last function whose aliases were engaged, and
    the next walk lists only the aliases of the functions after it."""
    functions, aliases = fleet(clients)
    calls = Calls(clients)

    first = walks.engine(clients, SETTINGS, ledger_table, deadline=AfterAliasListings(calls, 2), writers=1,
                         **OPTIONS).engage()

    out = by_arn(first)
    assert all(out[f].action == ENGAGED for f in functions)          # every listed config capped
    assert [a for a in aliases if a in out] == aliases[:2]              # then two functions' aliases
    assert all(out[a].action == ENGAGED for a in aliases[:2])
    assert not first.complete and first.cursor["async"] == order.late_position(functions[1])
    assert max(calls.config_writes(qualified=False)) < calls.made.index(("ListAliases", None))

    calls.made.clear()
    second = walks.engine(clients, SETTINGS, ledger_table, **OPTIONS).engage(after=first.cursor)

    out = by_arn(second)
    assert calls.count("ListAliases") == len(functions) - 2            # none listed twice
    assert sorted(o.arn for o in second.outcomes if o.action == ENGAGED) == aliases[2:]
    assert not calls.config_writes(qualified=False)                     # nothing written twice
    assert second.complete and second.cursor["async"] is None


def test_a_walk_stopped_before_the_later_phase_starts_it_on_the_next_walk(clients, ledger_table):
    """Stopped after the first listed config's write: the cursor is a listed position
    (not the later phase's), and the next walk engages the rest, then lists the aliases."""
    functions, aliases = fleet(clients, NAMES[:2])
    calls = Calls(clients)
    writes = lambda: len(calls.config_writes(qualified=False))   # noqa: E731

    first = walks.engine(clients, SETTINGS, ledger_table, deadline=lambda: writes() >= 1, writers=1,
                         **OPTIONS).engage()

    assert calls.count("ListAliases") == 0 and not first.complete
    assert order.late_key(first.cursor["async"]) is None
    second = walks.engine(clients, SETTINGS, ledger_table, **OPTIONS).engage(after=first.cursor)
    out = by_arn(second)
    assert all(out[a].action == ENGAGED for a in aliases)
    assert calls.count("ListAliases") == len(functions) and second.cursor["async"] is None


def test_a_rewalk_lists_the_aliases_only_of_functions_no_walk_of_the_generation_listed(clients, ledger_table):
    functions, aliases = fleet(clients, NAMES[:3])
    first = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    assert {bookkeeping.late_walk_key(f) for f in functions} <= first.seen["async"]
    new_arn = fleet(clients, ["g"])[1][0]                      # a function selected during the hold
    calls = Calls(clients)

    again = walks.engine(clients, SETTINGS, ledger_table, **OPTIONS).engage(seen=first.seen)

    assert calls.made.count(("ListAliases", None)) == 1       # g's only
    out = by_arn(again)
    assert out[new_arn].action == ENGAGED
    assert not [o for o in again.outcomes if o.arn in aliases and o.action not in (ALREADY,)]


def test_aliases_past_max_resources_are_left_unchanged_and_said_so(clients, ledger_table):
    functions, aliases = fleet(clients, NAMES[:2])
    settings = Settings.from_mapping({**SETTINGS.to_mapping(), "max_resources": 3})

    report = walks.engage_all(clients, settings, ledger_table, **OPTIONS)

    out = by_arn(report)
    assert all(out[f].action == ENGAGED for f in functions)
    # One alias fits under the limit, the other is left and said so; which is which is the
    # walk's threads' order (two writers), not a rule.
    engaged, [left] = ([a for a in aliases if out[a].action == ENGAGED],
                       [a for a in aliases if out[a].action == SKIPPED])
    assert len(engaged) == 1 and "max_resources (3)" in out[left].notes["limit"]["why"]
    assert Counter(o.action for o in report.outcomes)[ENGAGED] == 3
