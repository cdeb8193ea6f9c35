"""The ledger's signal items and the EventBridge handler, on moto."""

import json
from datetime import timedelta

import pytest

from holdfast.core.detector import IMPAIRED, NORMAL
from holdfast.handlers import detector as handler_module
from holdfast.ledger import Ledger
from holdfast.ledger.signals import HEALTH_PK, LedgerUnavailable, recent, record
from holdfast.observation import collect
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from tests.support.factory import REGION, SETTINGS, capacity, fixture, health, signal, utc

T0 = utc(2025, 10, 20, 6, 58)


def items(clients, table):
    return clients("dynamodb").scan(TableName=table)["Items"]


def test_record_is_idempotent_and_carries_a_ttl(clients, ledger_table):
    s = capacity("web", "us-east-1a", T0)
    assert record(Ledger(clients("dynamodb"), ledger_table), s, ttl_hours=48) is True
    assert record(Ledger(clients("dynamodb"), ledger_table), s, ttl_hours=48) is False
    (item,) = items(clients, ledger_table)
    assert item["pk"]["S"] == "SIGNAL#2025-10-20T06"
    assert int(item["expires_at"]["N"]) == int((s.time + timedelta(hours=48)).timestamp())


def test_recent_reads_the_window_across_hour_buckets_and_every_health_issue(clients, ledger_table):
    db = clients("dynamodb")
    inside = [capacity("web", "us-east-1a", T0), capacity("api", "us-east-1b", T0 + timedelta(minutes=5))]
    outside = [capacity("old", "us-east-1a", T0 - timedelta(hours=2)), capacity("future", "us-east-1a", T0 + timedelta(hours=1))]
    old_issue = signal(health("open", T0 - timedelta(hours=6)))
    for s in inside + outside + [old_issue]:
        record(Ledger(db, ledger_table), s, ttl_hours=48)
    got = recent(Ledger(db, ledger_table), T0 - timedelta(minutes=30), T0 + timedelta(minutes=10))
    assert sorted(s.group or s.klass for s in got) == ["api", "health-open", "web"]
    assert got == sorted(got, key=lambda s: s.source == "aws.health")  # the health partition is read last
    # Expired items are not returned even before DynamoDB's TTL sweep deletes them.
    assert recent(Ledger(db, ledger_table), T0, T0 + timedelta(hours=49)) == []


def test_ledger_errors_are_translated(clients):
    with pytest.raises(LedgerUnavailable, match="cannot record"):
        record(Ledger(clients("dynamodb"), "no-such-table"), capacity("web", "us-east-1a", T0), ttl_hours=1)


# ---- handler ------------------------------------------------------------------------


class Context:
    function_name = "holdfast-detector"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:holdfast-detector"
    aws_request_id = "52fdfc07-2182-154f-163f-5f0f9a621d72"


@pytest.fixture
def shell(clients, ledger_table):
    handler_module.use(Runtime(clients, SETTINGS, ledger_table))
    yield
    handler_module.use(None)


def emitted_metrics(capsys) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in capsys.readouterr().out.splitlines():
        if '"_aws"' in line:
            doc = json.loads(line)
            for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                values = doc[m["Name"]]
                totals[m["Name"]] = totals.get(m["Name"], 0) + (sum(values) if isinstance(values, list) else values)
    return totals


def test_handler_is_idempotent_per_event_id(shell, clients, ledger_table, capsys):
    event = fixture("launch_unsuccessful")
    first = handler_module.handler(event, Context())
    again = handler_module.handler(event, Context())
    assert (first["outcome"], again["outcome"]) == ("recorded", "duplicate")
    assert first["class"] == "capacity"
    assert len(items(clients, ledger_table)) == 1
    assert emitted_metrics(capsys) == {"SignalsRecorded": 1, "Signal-capacity": 1, "SignalsDuplicate": 1}


def test_handler_stores_the_backup_region_health_copy_once(shell, clients, ledger_table):
    at = T0
    for delivered_in in ("us-east-1", "us-west-2"):
        handler_module.handler(health("open", at, delivered_in=delivered_in), Context())
    (item,) = items(clients, ledger_table)
    assert item["pk"]["S"] == HEALTH_PK


@pytest.mark.parametrize("event", ["not an object", {"source": "aws.autoscaling"}, {**fixture("launch_unsuccessful"), "detail": []}])
def test_malformed_events_are_counted_never_raised(shell, clients, ledger_table, capsys, event):
    result = handler_module.handler(event, Context())
    assert result["outcome"] == "malformed" and result["reason"]
    assert items(clients, ledger_table) == []
    assert emitted_metrics(capsys) == {"EventsMalformed": 1}


def test_out_of_scope_events_are_counted_as_ignored(shell, capsys):
    result = handler_module.handler(health("open", T0, region="eu-west-1"), Context())
    assert result["outcome"] == "ignored" and "eu-west-1" in result["reason"]
    assert emitted_metrics(capsys) == {"EventsIgnored": 1}


def test_handler_builds_its_shell_from_the_environment(aws, monkeypatch, capsys):
    from holdfast.aws import Clients
    from holdfast.ledger.table import ensure_table

    ensure_table(Clients(region=REGION)("dynamodb"), "from-env")
    monkeypatch.setenv("HOLDFAST_LEDGER_TABLE", "from-env")
    monkeypatch.setenv("HOLDFAST_SETTINGS", Settings.from_mapping({"signal_ttl_hours": 2}).to_json())
    handler_module.use(None)
    try:
        assert handler_module.handler(fixture("launch_successful"), Context())["outcome"] == "recorded"
    finally:
        handler_module.use(None)
    (item,) = Clients(region=REGION)("dynamodb").scan(TableName="from-env")["Items"]
    assert item["klass"]["S"] == "launch"


# ---- collect: the reconciler's per-tick call ---------------------------------------------


ONLY_DDB_DNS = Settings.from_mapping({"probe_endpoints": ["dynamodb.{region}.amazonaws.com"], "probe_api_services": []})


def test_collect_records_probes_and_evaluates_with_what_the_handler_recorded(clients, ledger_table):
    for g, z in [("web", "us-east-1a"), ("api", "us-east-1b"), ("etl", "us-east-1a")]:
        record(Ledger(clients("dynamodb"), ledger_table), capacity(g, z, T0), ttl_hours=48)
    verdict = collect(Runtime(clients, ONLY_DDB_DNS, ledger_table), T0 + timedelta(minutes=1), None, resolver=lambda h: ["1.2.3.4"])
    assert verdict.state == IMPAIRED and "3 groups in 2 zones" in verdict.reasons[0]
    assert any(i["klass"]["S"] == "probe-ok" for i in items(clients, ledger_table))


def test_collect_without_a_ledger_still_sees_its_own_probes(clients):
    # In October the ledger's region could be the impaired one: no table, DNS empty.
    verdict = collect(Runtime(clients, ONLY_DDB_DNS, "no-such-table"), T0, None, resolver=lambda h: [])
    assert verdict.state == IMPAIRED
    assert "dns:dynamodb.us-east-1.amazonaws.com" in verdict.reasons[0]
    healthy = collect(Runtime(clients, ONLY_DDB_DNS, "no-such-table"), T0, None, resolver=lambda h: ["1.2.3.4"])
    assert healthy.state == NORMAL


def test_an_unclassifiable_launch_failure_is_recorded_unknown_and_counted(shell, clients, ledger_table, capsys):
    from tests.support.factory import launch

    event = launch("web", "us-east-1a", T0, message="The widget reticulator is unhappy. Launching EC2 instance failed.")
    result = handler_module.handler(event, Context())
    assert (result["outcome"], result["class"]) == ("recorded", "unknown")
    assert emitted_metrics(capsys) == {"SignalsRecorded": 1, "Signal-unknown": 1, "LaunchFailuresUnknown": 1}
    handler_module.handler(event, Context())  # a redelivery is not counted twice
    assert emitted_metrics(capsys) == {"SignalsDuplicate": 1}


def test_a_health_check_termination_is_recorded(shell, clients, ledger_table, capsys):
    result = handler_module.handler(fixture("terminate_elb_health_check"), Context())
    assert (result["outcome"], result["class"]) == ("recorded", "elb-termination")
    (item,) = items(clients, ledger_table)
    assert item["klass"]["S"] == "elb-termination" and item["detail"]["M"]["instance"]["S"] == "i-0abcdef1234567890"
