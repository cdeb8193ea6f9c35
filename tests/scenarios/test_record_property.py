"""A ledger write lost and a floor recorded first, together, as a property: under any interleaving of engages,
cap raises, re-engages, lost tags, stale controllers whose tag writes land late, and owner
changes, the recorded original is never one of Holdfast's own values, and a full restore
returns every mapping to its original or to its owner's latest change.

The code under test is the shipped one — holdfast.actuators.esm.EsmActuator on
holdfast.actuators.tagged.TaggedActuator, and holdfast.ledger.resources.ResourceLedger —
against an in-memory Lambda and DynamoDB (below) that keep the semantics those modules
rely on: tags by ARN, ScalingConfig {} removes a cap, conditional puts and updates. Moto
would do too, at about a hundredth of the speed, which would not allow 1,000 examples.

The ledger stays reachable throughout: with the ledger down and the tag lost at once, no
copy of an original is left anywhere, and no code can recover it (write-ahead needs one).

`make test` runs a bounded number of examples; `make bench` runs at least 1,000 and prints
the count and the time.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from holdfast.actuators.esm import EsmActuator
from holdfast.core.model import Record, StalePlan, no_guard
from holdfast.core.tags import RECORD_KEYS, TagError, read_record
from holdfast.ledger import Ledger
from holdfast.ledger.conditions import FIRST_RECORD_VERSION, RECORD_UNCHANGED, RECORD_VERSION_IS
from holdfast.ledger.resources import ResourceLedger
from holdfast.settings import Settings

KEY = "MaximumConcurrency"
SETTINGS = Settings.from_mapping({"esm_floor": 2})
# The drain's controller decides its caps as it goes: none of them is in the first record
# (only the floor is), each grows it before it is written; a stale one decides 30.
REDEPLOYED = SETTINGS
HOLDFAST_VALUES = {2, 5, 20, 30}
OWNER_VALUES = [None, 7, 50, 1000]     # disjoint from Holdfast's, so each recorded value says whose it is
MAPPINGS = 2
ACCOUNT, REGION = "123456789012", "us-east-1"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:consumer"


def _error(code: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, op)


class _NotFound(ClientError):
    pass


class FakeLambda:
    """Event source mappings and their tags; TagResource calls can be held back (`hold`)
    and land later (`land`), as a request the SDK retried."""

    class exceptions:
        ResourceNotFoundException = _NotFound

    def __init__(self, caps: dict[str, int | None]):
        self.caps = dict(caps)                                   # uuid -> cap
        self.tags: dict[str, dict[str, str]] = {self.arn(u): {} for u in caps}
        self.holding = False
        self.held: list[tuple[str, dict]] = []

    @staticmethod
    def arn(uuid: str) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:event-source-mapping:{uuid}"

    def _mapping(self, uuid: str) -> dict:
        cap = self.caps[uuid]
        return {"UUID": uuid, "EventSourceMappingArn": self.arn(uuid), "FunctionArn": FUNCTION,
                "EventSourceArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:q-{uuid}",
                **({"ScalingConfig": {KEY: cap}} if cap is not None else {})}

    def get_paginator(self, name):
        assert name == "list_event_source_mappings"
        return _Pages([{"EventSourceMappings": [self._mapping(u) for u in sorted(self.caps)]}])

    def get_function(self, FunctionName):
        return {"Configuration": {"FunctionArn": FunctionName}}   # no Concurrency: none reserved

    def get_event_source_mapping(self, UUID):
        return self._mapping(UUID)

    def update_event_source_mapping(self, UUID, ScalingConfig):
        self.caps[UUID] = ScalingConfig.get(KEY)

    def list_tags(self, Resource):
        return {"Tags": dict(self.tags[Resource])}

    def tag_resource(self, Resource, Tags):
        if self.holding:
            self.held.append((Resource, dict(Tags)))
            return {}
        self.tags[Resource].update(Tags)

    def untag_resource(self, Resource, TagKeys):
        for k in TagKeys:
            self.tags[Resource].pop(k, None)

    def land(self) -> None:
        self.holding = False
        for arn, tags in self.held:
            self.tags[arn].update(tags)
        self.held.clear()


class FakeTagging:
    def get_paginator(self, name):
        assert name == "get_resources"
        return _Pages([{"ResourceTagMappingList": [{"ResourceARN": FUNCTION, "Tags": [{"Key": "holdfast:protect", "Value": "true"}]}]}])


@dataclass
class _Pages:
    pages: list

    def paginate(self, **_):
        return copy.deepcopy(self.pages)


class FakeDynamo:
    """The ledger table, for the calls ResourceLedger makes (conditions as it writes them)."""

    def __init__(self):
        self.items: dict[tuple[str, str], dict] = {}

    @staticmethod
    def _key(key):
        return key["pk"]["S"], key["sk"]["S"]

    def put_item(self, TableName, Item, ConditionExpression=None):
        k = self._key(Item)
        if ConditionExpression and ConditionExpression.startswith("attribute_not_exists") and k in self.items:
            raise _error("ConditionalCheckFailedException", "PutItem")
        self.items[k] = copy.deepcopy(Item)

    def get_item(self, TableName, Key, ConsistentRead=True):
        item = self.items.get(self._key(Key))
        return {"Item": copy.deepcopy(item)} if item else {}

    def update_item(self, TableName, Key, UpdateExpression, ConditionExpression, ExpressionAttributeNames,
                    ExpressionAttributeValues):
        """The conditions ResourceLedger writes (holdfast.ledger.conditions: RECORD_UNCHANGED,
        RECORD_VERSION_IS, FIRST_RECORD_VERSION), and its `SET #a = :a, ... ADD #version :one`."""
        k = self._key(Key)
        item, v, names = self.items.get(k), ExpressionAttributeValues, ExpressionAttributeNames
        version = item.get("version", {}).get("N") if item else None
        holds = item is not None and {
            RECORD_UNCHANGED: lambda: item["original"] == v[":old_original"] and item["applied"] == v[":old_applied"],
            RECORD_VERSION_IS: lambda: version == v[":version"]["N"],
            FIRST_RECORD_VERSION: lambda: version is None,
        }[ConditionExpression]()
        if not holds:
            raise _error("ConditionalCheckFailedException", "UpdateItem")
        sets, _, adds = UpdateExpression.removeprefix("SET ").partition(" ADD ")
        for clause in sets.split(", "):
            name, value = clause.split(" = ")
            item[names[name]] = v[value]
        if adds:
            item["version"] = {"N": str(int(version or 0) + 1)}

    def delete_item(self, TableName, Key):
        self.items.pop(self._key(Key), None)

    def get_paginator(self, name):
        assert name == "query"
        return _Pages([{"Items": [copy.deepcopy(i) for (pk, _), i in sorted(self.items.items()) if pk == "RES"]}])

    def record(self, arn: str) -> Record | None:
        item = self.items.get(("RES", arn))
        return None if item is None else Record("esm", arn, json.loads(item["original"]["S"]), json.loads(item["applied"]["S"]))


class FakeClients:
    def __init__(self, lam, dynamo):
        self.services = {"lambda": lam, "dynamodb": dynamo, "resourcegroupstaggingapi": FakeTagging()}

    def __call__(self, service):
        return self.services[service]


@dataclass
class World:
    lam: FakeLambda
    dynamo: FakeDynamo
    truth: dict[str, int | None]                      # uuid -> what the owner wants back now
    stale: EsmActuator | None = None                   # a controller with an old view of the ledger
    log: list = field(default_factory=list)

    def actuator(self, settings=SETTINGS) -> EsmActuator:
        """A controller's actuator as one tick builds it: a fresh ledger view (one Query per run)."""
        clients = FakeClients(self.lam, self.dynamo)
        return EsmActuator(clients, settings, ResourceLedger(Ledger(self.dynamo, "ledger")))

    def resource(self, act, uuid):
        return act.get(FakeLambda.arn(uuid))

    def originals(self, uuid) -> list:
        """Every original recorded for the mapping: on its tag, and in the ledger."""
        arn = FakeLambda.arn(uuid)
        try:
            found = read_record(self.lam.tags[arn])
        except TagError:
            found = None
        copies = [found[0]] if found else []
        ledger = self.dynamo.record(arn)
        copies += [ledger.original] if ledger else []
        return [c[KEY] for c in copies if KEY in c]

    def recorded(self, uuid) -> bool:
        return bool(read_record(self.lam.tags[FakeLambda.arn(uuid)])) or self.dynamo.record(FakeLambda.arn(uuid)) is not None


# ---- the operations ---------------------------------------------------------------------

def engage(w: World, uuid: str) -> None:
    act = w.actuator()
    act.engage(w.resource(act, uuid))


def raise_to(w: World, uuid: str, step: int) -> None:
    act = w.actuator()
    act.relax(w.resource(act, uuid), {KEY: step}, no_guard)


def strip_tags(w: World, uuid: str) -> None:
    """An IaC apply removes the tags it does not know."""
    w.lam.untag_resource(FakeLambda.arn(uuid), list(RECORD_KEYS))


def owner_sets(w: World, uuid: str, value) -> None:
    w.lam.caps[uuid] = value
    w.truth[uuid] = value


def remember_ledger(w: World, _uuid: str) -> None:
    """A controller reads the ledger now and acts on that view later (a long tick)."""
    w.stale = w.actuator()
    w.stale.ledger.records()


def stale_engage(w: World, uuid: str) -> None:
    act = w.stale or w.actuator()
    act.engage(w.resource(act, uuid))


def stale_raise(w: World, uuid: str, step: int) -> None:
    """A redeployed controller passes its first guard and writes its tag — held back, to
    land later — then finds the plan moved on before the cap write."""
    act = w.actuator(REDEPLOYED)
    guards = iter([None, None])

    def guard():
        if next(guards, StalePlan("moved on")) is not None:
            raise StalePlan("plan generation moved on")

    w.lam.holding = True
    act.relax(w.resource(act, uuid), {KEY: step}, guard)


def land(w: World, _uuid: str) -> None:
    w.lam.land()


uuids = st.sampled_from([f"0000000{i}-0000-0000-0000-000000000000" for i in range(MAPPINGS)])
operation = st.one_of(
    st.tuples(st.just(engage), uuids),
    st.tuples(st.just(raise_to), uuids, st.sampled_from([5, 20])),
    st.tuples(st.just(strip_tags), uuids),
    st.tuples(st.just(owner_sets), uuids, st.sampled_from(OWNER_VALUES)),
    st.tuples(st.just(remember_ledger), uuids),
    st.tuples(st.just(stale_engage), uuids),
    st.tuples(st.just(stale_raise), uuids, st.sampled_from([20, 30])),
    st.tuples(st.just(land), uuids),
)
scenario = st.tuples(st.lists(st.sampled_from(OWNER_VALUES), min_size=MAPPINGS, max_size=MAPPINGS),
                     st.lists(operation, max_size=30))


def check(initial, ops) -> None:
    caps = {f"0000000{i}-0000-0000-0000-000000000000": v for i, v in enumerate(initial)}
    w = World(FakeLambda(caps), FakeDynamo(), dict(caps))
    for op, uuid, *args in ops:
        op(w, uuid, *args)
        w.log.append((op.__name__, uuid, *args))
        for u in caps:
            ledger = w.dynamo.record(FakeLambda.arn(u))
            # The ledger's original is the one a restore uses when both copies exist; the tag's
            # alone when the ledger has none. Neither may be one of Holdfast's own values.
            recorded = [ledger.original.get(KEY)] if ledger else w.originals(u)
            assert not set(recorded) & HOLDFAST_VALUES, (
                f"after {w.log}: {u} records Holdfast's own {recorded} as the owner's original")
    # A late write lands within seconds; the full restore comes later.
    w.lam.land()
    for _ in range(2):   # a restore is idempotent: the second finds nothing to do
        act = w.actuator()
        for u in caps:
            act.relax(w.resource(act, u), None, no_guard)
    for u in caps:
        assert w.lam.caps[u] == w.truth[u], f"after {w.log}: {u} is {w.lam.caps[u]}, its owner's is {w.truth[u]}"
        assert not w.recorded(u), f"after {w.log}: {u} still carries a record"


BOUNDED = hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@BOUNDED
@given(scenario)
def test_no_interleaving_records_holdfasts_value_as_the_original_or_loses_the_owners(case):
    check(*case)


RUNS = {"examples": 0}


@pytest.mark.benchmark
def test_bench_record_property_at_least_a_thousand_examples():
    @hsettings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(scenario)
    def run(case):
        RUNS["examples"] += 1
        check(*case)

    started = time.perf_counter()
    run()
    took = time.perf_counter() - started
    print(f"\nrecord property: {RUNS['examples']} examples in {took:.1f} s "
          f"({1000 * took / max(RUNS['examples'], 1):.1f} ms each)")
    assert RUNS["examples"] >= 1000
