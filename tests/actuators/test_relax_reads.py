"""What a relax walk reads before it writes.

6. A failed ledger Query of the records makes the relax walk incomplete, never "complete,
   no failures" with records it could not see.
7. Every relaxing write is built from a read taken just before it and keeps whatever the
   owner changed since the walk began (scalable-target flags, an async OnSuccess
   destination, a mapping's cap).
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from holdfast.core.model import DRIFT_KEPT, RESTORED, no_guard
from holdfast.core.tags import RECORD_KEYS
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings
from tests.support import walks
from tests.support.fleet import describe_target, make_function, make_mapping, make_service_target

pytestmark = pytest.mark.usefixtures("aws_semantics")
SETTINGS = Settings()
QUEUE = "arn:aws:sqs:us-east-1:123456789012:holdfast-expired"
DONE = "arn:aws:sqs:us-east-1:123456789012:owner-done"


class FailingRecordsQuery:
    """The ledger answers every call but the Query of the records (throughput exceeded)."""

    def __init__(self, client):
        self.client = client

    def __enter__(self):
        self.client.meta.events.register("before-call.dynamodb.Query", self.fail)
        return self

    def __exit__(self, *exc):
        self.client.meta.events.unregister("before-call.dynamodb.Query", self.fail)

    @staticmethod
    def fail(model, **_):
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}, model.name)


def test_a_failed_query_of_the_records_makes_the_relax_walk_incomplete(clients, ledger_table):
    # GIVEN a mapping engaged, whose record only the ledger still holds (an IaC apply stripped the tag)
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q")
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    clients("lambda").untag_resource(Resource=mapping["EventSourceMappingArn"], TagKeys=list(RECORD_KEYS))

    # WHEN the relax walk's Query of the records fails
    with FailingRecordsQuery(clients("dynamodb")):
        report = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))

    # THEN the walk is not complete: the capped mapping it could not see is not "done"
    assert report.complete is False and not report.ledger_available
    assert clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 2}
    # AND with the ledger answering again, the walk restores it
    again = walks.relax_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    assert again.complete and [o.action for o in again.outcomes] == [RESTORED]


def test_a_scalable_target_restore_keeps_the_flag_its_owner_set_after_the_walk_read_it(clients, ledger_table):
    arn = make_service_target(clients, "s")
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    act = walks.actuators(clients, SETTINGS, ledger, ("scalable-target",))["scalable-target"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("scalable-target",))
    resource = act.get(arn)
    # the owner suspends scheduled scaling while engaged, after the walk read the target
    aas = clients("application-autoscaling")
    aas.register_scalable_target(ServiceNamespace="ecs", ResourceId="service/c/s", ScalableDimension="ecs:service:DesiredCount",
                                 SuspendedState={"DynamicScalingInSuspended": True, "DynamicScalingOutSuspended": False,
                                                 "ScheduledScalingSuspended": True})
    assert act.relax(resource, None, no_guard).action == RESTORED
    assert describe_target(clients, "s")["SuspendedState"] == {
        "DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": True}


def test_an_async_restore_keeps_the_on_success_destination_its_owner_added_after_the_walk_read_it(clients, ledger_table):
    make_function(clients, "f")
    lam = clients("lambda")
    lam.put_function_event_invoke_config(FunctionName="f", MaximumEventAgeInSeconds=7200)
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    act = walks.actuators(clients, SETTINGS, ledger, ("async",), expired_queue_arn=QUEUE)["async"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("async",), expired_queue_arn=QUEUE)
    [resource] = act.discover()
    # the owner adds an OnSuccess destination while engaged, after the walk read the config
    lam.update_function_event_invoke_config(FunctionName="f", DestinationConfig={
        "OnSuccess": {"Destination": DONE}, "OnFailure": {"Destination": QUEUE}})
    assert act.relax(resource, None, no_guard).action == RESTORED
    config = lam.get_function_event_invoke_config(FunctionName="f")
    assert config["MaximumEventAgeInSeconds"] == 7200
    assert config["DestinationConfig"]["OnSuccess"] == {"Destination": DONE}
    assert not (config["DestinationConfig"].get("OnFailure") or {}).get("Destination")


def test_a_mapping_restore_keeps_the_cap_its_owner_set_after_the_walk_listed_it(clients, ledger_table):
    fn = make_function(clients, "f")
    mapping = make_mapping(clients, fn, "q")
    ledger = ResourceLedger(Ledger(clients("dynamodb"), ledger_table))
    act = walks.actuators(clients, SETTINGS, ledger, ("esm",))["esm"]
    walks.engage_all(clients, SETTINGS, ledger_table, kinds=("esm",))
    [resource] = act.discover()
    clients("lambda").update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": 50})
    outcome = act.relax(resource, None, no_guard)
    assert outcome.action == DRIFT_KEPT and outcome.drift["MaximumConcurrency"]["current"] == 50
    assert clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])["ScalingConfig"] == {"MaximumConcurrency": 50}
