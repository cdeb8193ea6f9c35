"""The reconciler's drain driving a mapping in provisioned mode, on moto with the real engine:
the controller decides caps in concurrent batches as for any mapping, the walk writes each
as MaximumPollers (10 concurrent invokes a poller, rounded down, at least 2), the pollers
read back as the cap the drain wrote, and once caught up the owner's pollers come back
exactly. The consumer and its metrics are test_drain_stage's."""

from __future__ import annotations

import pytest

from holdfast.core import drain as dc
from holdfast.core.policy import HOLD
from holdfast.settings import Settings
from tests.stages.test_drain_stage import SETTINGS, Cloud, Controller, minute
from tests.support.fleet import aws_semantics, make_function, make_mapping  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("aws_semantics")

OWNER = {"MinimumPollers": 4, "MaximumPollers": 60}


@pytest.fixture
def consumer(clients):
    """test_drain_stage's consumer (16 concurrent before the event, its downstream alarm by
    tag), its mapping in provisioned mode with the owner's pollers."""
    fn = make_function(clients, "consumer", tags={"holdfast:downstream-alarms": "db-slo"})
    mapping = make_mapping(clients, fn, "orders", enabled=False, pollers=OWNER)
    cloud = Cloud(clients)
    clients("cloudwatch").put_metric_alarm(
        AlarmName="db-slo", Namespace="App", MetricName="Latency", Dimensions=[{"Name": "Database", "Value": "orders-db"}],
        Statistic="Average", Period=60, EvaluationPeriods=1, Threshold=0.25, ComparisonOperator="GreaterThanThreshold")
    cloud.alarm("OK")
    for m in range(-30, 0):
        cloud.put(minute(m), age=2, visible=40, sent=1200, deleted=1200, errors=0, throttles=0, concurrency=16, latency=0.1)
    return mapping, cloud


def pollers(clients, mapping) -> dict:
    return clients("lambda").get_event_source_mapping(UUID=mapping["UUID"])["ProvisionedPollerConfig"]


def test_the_pollers_move_as_the_controller_decides_and_read_back_as_its_caps(clients, ledger_table, consumer):
    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    assert c.at(0).stage == HOLD
    assert pollers(clients, mapping) == {"MinimumPollers": 2, "MaximumPollers": 2}   # held at the API's least
    d, _ = c.drain(mapping)
    # The owner's 60 pollers carry 600 concurrent batches: the drain never passes that.
    assert d.last.action == dc.WAIT and d.facts.owner_cap == 600

    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3)
    d, _ = c.drain(mapping)
    # From the 20 batches the 2 pollers carry (above the 16 the consumer ran at before the
    # event); no probe until 20 has a whole minute measured; the owner's 600 the ceiling.
    assert (d.last.action, d.state.cap) == (dc.START, 20)
    assert any("starting from" in r for r in d.last.reasons) and any("up to 600" in r for r in d.last.reasons)
    assert pollers(clients, mapping) == {"MinimumPollers": 2, "MaximumPollers": 2}

    c.at(4)   # minute 3 is not published yet
    d, _ = c.drain(mapping)
    assert (d.last.action, d.state.cap) == (dc.HOLD, 20)
    assert pollers(clients, mapping)["MaximumPollers"] == 2

    cloud.put(minute(3), age=700, visible=11_000, sent=1200, deleted=1200, errors=0, latency=0.1)
    c.at(6.1)   # minute 3 is whole: its invocations ended and were published
    d, _ = c.drain(mapping)
    assert (d.last.action, d.state.cap) == (dc.RAISE, 35)   # the slow start's probe, 20 × 1.75 -> 3 pollers
    assert pollers(clients, mapping)["MaximumPollers"] == 3
    # Every cap the drain wrote read back as itself: never taken for one someone else set.
    assert not any("has shown" in r for r in d.last.reasons), d.last.reasons
    assert [cap for _, cap in d.state.history][-2:] == [20, 35]


def test_caught_up_the_owners_pollers_come_back_exactly(clients, ledger_table, consumer):
    mapping, cloud = consumer
    c = Controller(clients, ledger_table, Settings.from_mapping({**SETTINGS.to_mapping(), "drain_restore_after_minutes": 5}))
    c.at(0)
    cloud.put(minute(0), age=30, visible=500, sent=1200, deleted=1500, errors=0, latency=0.1)
    c.at(3)
    assert pollers(clients, mapping)["MaximumPollers"] == 2
    for m in range(4, 14):
        cloud.put(minute(m - 2), age=3, visible=40, sent=1200, deleted=1200, errors=0, latency=0.1)
        c.at(m, "recovering")
        if pollers(clients, mapping) == OWNER:
            break
    d, _ = c.drain(mapping)
    assert d.restored and d.last.action == dc.RESTORE
    assert pollers(clients, mapping) == OWNER
    tags = clients("lambda").list_tags(Resource=mapping["EventSourceMappingArn"])["Tags"]
    assert not [k for k in tags if k.startswith("holdfast:")]


def test_holdfast_stage_shows_the_pollers_each_cap_is_written_as(clients, ledger_table, consumer, capsys, monkeypatch):
    import json

    from holdfast.cli import main

    mapping, cloud = consumer
    c = Controller(clients, ledger_table)
    monkeypatch.setattr("holdfast.cli.context.SystemClock", lambda: c.clock)
    c.at(0)
    cloud.put(minute(0), age=600, visible=12_000, sent=1200, deleted=120, errors=0, latency=0.1)
    c.at(3)
    capsys.readouterr()
    assert main(["--json", "stage"]) == 0
    [row] = json.loads(capsys.readouterr().out)["drain"]
    assert (row["action"], row["cap"], row["pollers"], row["ceiling"]) == (dc.START, 20, 2, 600)
    assert main(["stage"]) == 0
    text = capsys.readouterr().out
    assert "20 (2" in text and "pollers)" in text   # the table wraps the cell at 120 columns
