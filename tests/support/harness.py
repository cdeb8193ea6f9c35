"""Fixtures for the reconciler tests: a fake clock, a scripted verdict, controllers
that share one ledger (moto), and a stepper harness for scripted interleavings."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from holdfast.aws import Clients
from holdfast.clock import FakeClock
from holdfast.reconciler import tick
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from tests.support.fakes import FakeEngine, FakeStages, Script, Stepper, World

T0 = datetime(2025, 10, 20, 6, 48, tzinfo=timezone.utc)
SETTINGS = Settings.from_mapping({"mode": "auto", "hold_minutes": 10, "capacity_hold_minutes": 30})


class GatedClients(Clients):
    """Clients whose every AWS call first passes the controller's gate (a crash point)."""

    gate = None

    def __call__(self, service):
        client = super().__call__(service)
        if not getattr(client, "_holdfast_gated", False):
            client.meta.events.register("before-call", lambda **_: self.gate and self.gate())
            client._holdfast_gated = True
        return client


class Harness:
    def __init__(self, clients, table, settings=SETTINGS, per_kind=2):
        self.settings = settings
        self.table = table
        self.clock = FakeClock(T0)
        self.script = Script()
        self.observer = clients
        self.world = World(settings, clients("dynamodb"), table, per_kind=per_kind)
        # What a deployed stack publishes, where the CLI finds its ledger and settings.
        for leaf, value in (("ledger-table", table), ("settings", settings.to_json())):
            clients("ssm").put_parameter(Name=f"/holdfast/Holdfast/{leaf}", Value=value, Type="String", Overwrite=True)
        self.engine = FakeEngine(self.world)
        self.stages = FakeStages()

    def controller(self, name: str, *, endpoint_url: str | None = None) -> Stepper:
        clients = GatedClients(region="us-east-1", endpoint_url=endpoint_url)
        stepper = Stepper(name, lambda: self.tick(name, clients))
        clients.gate = stepper.gate
        return stepper

    def tick(self, name: str, clients=None):
        return tick(self.runtime(name, clients), collect=self.script.collect, engine=self.engine, stages=self.stages)

    def runtime(self, name: str, clients=None) -> Runtime:
        return Runtime(clients=clients or self.observer, settings=self.settings, table=self.table, clock=self.clock,
                       controller_id=name)

    def plan(self):
        return self.world.plan_now()

    def minutes(self, n: float) -> None:
        self.clock.advance(n * 60)


@pytest.fixture
def harness(clients, ledger_table) -> Harness:
    return Harness(clients, ledger_table)
