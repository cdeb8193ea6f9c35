"""An alias invoked asynchronously that has no async invoke config of its own.

AWS's documentation gives each function, version and alias its own config and Lambda's
defaults (2 retries, 6 hours), and does not say whether an alias without one follows
the function's unqualified config or the defaults (actuators/async_config.py's module
doc). Either way the alias is bounded only if it gets a config of its own: engaged with
the same bounds as the function's, recorded ahead as "no config", restored by deleting
it (DeleteFunctionEventInvokeConfig with the Qualifier). Against moto with the
per-qualifier async config emulation (holdfast_fixtures.moto_patches); moto's own
ListAliases answers the listing. Each test fails on the code that did not list aliases.
"""

from __future__ import annotations

from collections import Counter

import pytest
from botocore.exceptions import ClientError

from holdfast.core import order
from holdfast.core.model import DRIFT_KEPT, ENGAGED, FAILED, RESTORED, SKIPPED, VANISHED
from holdfast.engine import bookkeeping
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import make_function

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired-events"
OPTIONS = {"kinds": ("async",), "expired_queue_arn": QUEUE}
BOUNDED = {"MaximumEventAgeInSeconds": SETTINGS.async_max_event_age_seconds,
           "MaximumRetryAttempts": SETTINGS.async_max_retry_attempts,
           "DestinationConfig": {"OnFailure": {"Destination": QUEUE}}}


def aliased(clients, name="f", alias="live") -> str:
    """Function `name` with alias `alias` on a published version; no async config anywhere."""
    lam = clients("lambda")
    arn = make_function(clients, name)
    version = lam.publish_version(FunctionName=name)["Version"]
    lam.create_alias(FunctionName=name, Name=alias, FunctionVersion=version)
    return f"{arn}:{alias}"


def config(clients, qualifier="live", name="f"):
    lam = clients("lambda")
    try:
        c = lam.get_function_event_invoke_config(FunctionName=name, Qualifier=qualifier)
    except lam.exceptions.ResourceNotFoundException:
        return None
    return {k: v for k, v in c.items() if k not in ("ResponseMetadata", "LastModified", "FunctionArn")}


def record_tags(clients, name="f") -> set[str]:
    tags = clients("lambda").list_tags(Resource=clients("lambda").get_function(FunctionName=name)
                                       ["Configuration"]["FunctionArn"])["Tags"]
    return {k for k in tags if k.startswith(("holdfast:original", "holdfast:applied"))}


def ledger(clients, table) -> ResourceLedger:
    return ResourceLedger(Ledger(clients("dynamodb"), table))


def by_arn(report) -> dict:
    return {o.arn: o for o in report.outcomes}


def test_an_alias_without_a_config_is_engaged_with_bounded_values_and_restored_to_no_config(clients, ledger_table):
    alias = aliased(clients)
    before = Counter(clients.calls)

    out = by_arn(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))

    # Engaged with the bounds the function's config gets, recorded ahead as "no config".
    assert out[alias].action == ENGAGED, out[alias]
    assert config(clients) == BOUNDED
    assert {"holdfast:original:live", "holdfast:applied:live"} <= record_tags(clients)
    record = ledger(clients, ledger_table).get(alias)
    assert record.original["config"] is False and record.original["max_retries"] is None
    # One ListAliases for the one selected function.
    assert (clients.calls - before)["lambda:ListAliases"] == 1

    before = Counter(clients.calls)
    out = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))

    # Restored by deleting the alias's config, not by putting one.
    assert out[alias].action == RESTORED and out[alias].drift == {}, out[alias]
    assert config(clients) is None
    made = clients.calls - before
    assert made["lambda:DeleteFunctionEventInvokeConfig"] == 2        # the function's and the alias's
    assert made["lambda:PutFunctionEventInvokeConfig"] == 0
    assert made["lambda:ListAliases"] == 0                            # a restore needs none
    assert record_tags(clients) == set()
    assert ledger(clients, ledger_table).records() == []


def test_an_alias_whose_owner_added_a_config_while_engaged_keeps_it(clients, ledger_table):
    alias = aliased(clients)
    assert by_arn(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))[alias].action == ENGAGED

    # The owner puts a config of their own on the alias while Holdfast holds it.
    clients("lambda").put_function_event_invoke_config(FunctionName="f", Qualifier="live", MaximumRetryAttempts=0,
                                                       MaximumEventAgeInSeconds=3600)
    # A re-walk leaves the owner's values alone (it may attach the expired-events queue
    # again: the owner's config names no destination, as the alias's original had none).
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    kept = config(clients)
    assert (kept["MaximumRetryAttempts"], kept["MaximumEventAgeInSeconds"]) == (0, 3600)

    outcome = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))[alias]

    assert outcome.action == DRIFT_KEPT, outcome
    assert set(outcome.drift) == {"max_retries", "max_age"}
    assert config(clients) == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 3600}
    assert record_tags(clients) == set() and ledger(clients, ledger_table).records() == []


class FailPut:
    """PutFunctionEventInvokeConfig on one qualifier fails, as a controller killed after its
    write-ahead and before its write leaves it (nothing of the Put reaches Lambda)."""

    def __init__(self, clients, qualifier):
        self.qualifier, self.client = qualifier, clients("lambda")

    def __enter__(self):
        self.client.meta.events.register("provide-client-params.lambda.PutFunctionEventInvokeConfig", self)
        return self

    def __exit__(self, *exc):
        self.client.meta.events.unregister("provide-client-params.lambda.PutFunctionEventInvokeConfig", self)

    def __call__(self, params, **_):
        if params.get("Qualifier") == self.qualifier:
            raise ClientError({"Error": {"Code": "InjectedFault", "Message": "killed before the Put"}},
                              "PutFunctionEventInvokeConfig")


def _crash_between_record_and_put(clients, ledger_table, cursor: list | None = None) -> str:
    alias = aliased(clients)
    with FailPut(clients, "live"):
        report = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    out = by_arn(report)
    assert out[alias].action == FAILED, out[alias]
    # The function's config is engaged; the cursor stops before its aliases' step, in the later phase.
    assert report.cursor["async"] == order.late_position(None)
    if cursor is not None:
        cursor.append(report.cursor)
    # The record was written ahead (tag and ledger); the alias still has no config.
    assert {"holdfast:original:live", "holdfast:applied:live"} <= record_tags(clients)
    assert ledger(clients, ledger_table).get(alias) is not None
    assert config(clients) is None
    return alias


def test_a_crash_between_the_record_and_the_put_is_finished_by_the_next_walk(clients, ledger_table):
    cursor: list = []
    alias = _crash_between_record_and_put(clients, ledger_table, cursor)
    made: list[str] = []
    clients("lambda").meta.events.register("before-parameter-build.lambda",
                                           lambda model, **_: made.append(model.name))

    out = by_arn(walks.engage_all(clients, SETTINGS, ledger_table, after=cursor[0], **OPTIONS))

    assert out[alias].action == ENGAGED, out[alias]
    # Its record on the function's tags names it in the listing: engaged before any ListAliases.
    assert made.index("PutFunctionEventInvokeConfig") < made.index("ListAliases")
    assert config(clients) == BOUNDED
    assert ledger(clients, ledger_table).get(alias).original["config"] is False
    # and its restore still deletes the config: the original stayed "no config"
    walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS)
    assert config(clients) is None and record_tags(clients) == set()


def test_a_crash_between_the_record_and_the_put_is_restored_to_no_config(clients, ledger_table):
    alias = _crash_between_record_and_put(clients, ledger_table)

    out = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))

    assert out[alias].action == RESTORED, out[alias]
    assert config(clients) is None
    assert record_tags(clients) == set() and ledger(clients, ledger_table).records() == []


@pytest.mark.parametrize("config_kept", [True, False])
def test_an_alias_deleted_while_engaged_is_vanished_and_its_record_leaves_its_function(clients, ledger_table,
                                                                                      config_kept):
    """DeleteAlias's reference does not say whether the alias's async config goes with it:
    both answers (the emulation keeps it; False deletes it first)."""
    alias = aliased(clients)
    lam = clients("lambda")
    assert by_arn(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))[alias].action == ENGAGED
    if not config_kept:
        lam.delete_function_event_invoke_config(FunctionName="f", Qualifier="live")
    lam.delete_alias(FunctionName="f", Name="live")

    out = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))

    assert out[alias].action == VANISHED, out[alias]
    fn = alias.rsplit(":", 1)[0]
    assert out[fn].action == RESTORED
    # Its record's tags (on the function, which lives on) and the ledger's copy are gone,
    # so no later walk reads them as another alias's.
    assert record_tags(clients) == set()
    assert ledger(clients, ledger_table).records() == []
    again = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert alias not in again


def test_an_alias_deleted_while_engaged_through_its_tags_only_is_cleaned_up(clients, ledger_table):
    """Engaged while the ledger was unreachable: the record is on the function's tags only."""
    alias = aliased(clients)
    lam = clients("lambda")
    assert by_arn(walks.engage_all(clients, SETTINGS, "no-such-table", **OPTIONS))[alias].action == ENGAGED
    lam.delete_function_event_invoke_config(FunctionName="f", Qualifier="live")
    lam.delete_alias(FunctionName="f", Name="live")

    out = by_arn(walks.relax_all(clients, SETTINGS, ledger_table, **OPTIONS))

    assert out[alias.rsplit(":", 1)[0]].action == RESTORED
    assert record_tags(clients) == set()


def test_aliases_that_cannot_be_listed_leave_everything_else_engaged_and_say_so(clients, ledger_table):
    """ListAliases refused for one function: its configs are engaged, the other function's
    alias is engaged in the same walk, the kind finishes (nothing waits on the refusal),
    and an outcome of its own says what was left out and what lists it again."""
    alias = aliased(clients)
    other = aliased(clients, "g")
    fn = alias.rsplit(":", 1)[0]

    def refuse(params, **_):
        if params["FunctionName"].endswith(":f"):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "ListAliases")

    lam = clients("lambda")
    lam.meta.events.register("provide-client-params.lambda.ListAliases", refuse)
    try:
        report = walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    finally:
        lam.meta.events.unregister("provide-client-params.lambda.ListAliases", refuse)
    out = by_arn(report)

    assert out[fn].action == ENGAGED
    note = out[f"aliases:{fn}"]
    assert note.action == SKIPPED and "not authorized" in note.notes["aliases"]["why"]
    assert "lambda:ListAliases" in note.notes["aliases"]["fix"]
    assert alias not in out and config(clients) is None
    assert out[other].action == ENGAGED and config(clients, name="g") == BOUNDED
    assert report.complete and report.cursor["async"] is None and not report.failed
    # Only the other function's step is in the walk's keys: a re-walk lists f's aliases again.
    assert bookkeeping.late_walk_key(fn) not in report.seen["async"]
    assert bookkeeping.late_walk_key(other.rsplit(":", 1)[0]) in report.seen["async"]
    # The next walk lists them again and engages the alias.
    out = by_arn(walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS))
    assert out[alias].action == ENGAGED and config(clients) == BOUNDED


def test_aliases_are_listed_once_per_selected_function_only(clients, ledger_table):
    aliased(clients, "a")
    aliased(clients, "b")
    make_function(clients, "other", selected=False)
    before = Counter(clients.calls)
    walks.engage_all(clients, SETTINGS, ledger_table, **OPTIONS)
    assert (clients.calls - before)["lambda:ListAliases"] == 2
