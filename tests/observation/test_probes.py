"""Probes: DNS through an injected resolver (no test touches the network), API calls on moto."""

import threading
from datetime import timedelta

from holdfast.core import detector
from holdfast.core.signals import PROBE_FAILED, PROBE_INCONCLUSIVE, PROBE_OK
from holdfast.observation import probes
from holdfast.settings import Settings
from tests.support.factory import utc

NOW = utc(2025, 10, 20, 6, 48)


def by_target(results):
    return {s.detail["target"]: s for s in results}


def no_api(service):
    raise AssertionError(f"no API probe expected, got {service}")


def test_dns_empty_or_failed_answer_is_a_failure():
    answers = {"dynamodb.us-east-1.amazonaws.com": [], "ec2.us-east-1.amazonaws.com": [("AF_INET", "1.2.3.4")]}
    settings = Settings.from_mapping({"probe_api_services": []})
    results = by_target(probes.run(no_api, settings, "us-east-1", NOW, resolver=answers.__getitem__))
    assert results["dns:dynamodb.us-east-1.amazonaws.com"].klass == PROBE_FAILED
    assert "empty answer" in results["dns:dynamodb.us-east-1.amazonaws.com"].detail["error"]
    assert results["dns:ec2.us-east-1.amazonaws.com"].klass == PROBE_OK
    assert probes.success_ratio(list(results.values())) == 0.5


def test_a_hung_resolver_costs_one_timeout_and_alone_proves_nothing():
    # Only timeouts in the round: the controller may be the slow one, so it is inconclusive.
    release = threading.Event()
    settings = Settings.from_mapping({"probe_api_services": [], "probe_timeout_seconds": 0.1,
                                      "probe_endpoints": ["dynamodb.{region}.amazonaws.com"]})
    try:
        (result,) = probes.run(no_api, settings, "eu-west-1", NOW, resolver=lambda host: release.wait(5))
    finally:
        release.set()
    assert result.detail["target"] == "dns:dynamodb.eu-west-1.amazonaws.com"
    assert result.klass == PROBE_INCONCLUSIVE and "timed out" in result.detail["error"]


def test_a_timeout_beside_an_empty_answer_is_a_failure():
    release = threading.Event()
    settings = Settings.from_mapping({"probe_api_services": [], "probe_timeout_seconds": 0.1,
                                      "probe_endpoints": ["dynamodb.{region}.amazonaws.com", "ec2.{region}.amazonaws.com"]})
    answers = {"dynamodb.eu-west-1.amazonaws.com": lambda: [], "ec2.eu-west-1.amazonaws.com": lambda: release.wait(5)}
    try:
        results = by_target(probes.run(no_api, settings, "eu-west-1", NOW, resolver=lambda host: answers[host]()))
    finally:
        release.set()
    assert {t: s.klass for t, s in results.items()} == {
        "dns:dynamodb.eu-west-1.amazonaws.com": PROBE_FAILED, "dns:ec2.eu-west-1.amazonaws.com": PROBE_FAILED}


def test_a_slow_controller_never_reads_as_an_impaired_region():
    # Every API probe times out, round after round, as on a CPU-starved host: no verdict moves.
    class Slow:
        def __getattr__(self, method):
            def call(**_):
                raise TimeoutError("read timed out")
            return call

    settings = Settings.from_mapping({"probe_endpoints": [], "probe_api_services": list(probes.API_CALLS)})
    rounds = [s for minute in range(10)
              for s in probes.run(lambda service: Slow(), settings, "us-east-1", NOW + timedelta(minutes=minute))]
    assert {s.klass for s in rounds} == {PROBE_INCONCLUSIVE}
    verdict = detector.evaluate(rounds, None, settings, NOW + timedelta(minutes=10))
    assert verdict.state == detector.NORMAL, verdict


def test_api_probes_make_one_cheap_read_each(clients):
    # The longest timeout: moto's first call of each service loads its model, slowly.
    settings = Settings.from_mapping({"probe_endpoints": [], "probe_api_services": list(probes.API_CALLS),
                                      "probe_timeout_seconds": 10})
    quick = clients.with_config(probes.probe_config(settings))
    results = probes.run(quick, settings, "us-east-1", NOW)
    assert {s.detail["target"]: s.klass for s in results} == {f"api:{s}": PROBE_OK for s in probes.API_CALLS}
    assert sorted(quick.calls) == sorted([
        "dynamodb:ListTables", "ec2:DescribeAvailabilityZones", "autoscaling:DescribeAutoScalingGroups",
        "lambda:ListFunctions", "sqs:ListQueues",
    ])
    assert set(quick.calls.values()) == {1}  # one attempt each: a probe measures, it does not retry


def test_api_probe_error_is_a_failure():
    class Broken:
        def list_tables(self, **_):
            raise ConnectionError("Could not connect to the endpoint URL")

    settings = Settings.from_mapping({"probe_endpoints": [], "probe_api_services": ["dynamodb"]})
    (result,) = probes.run(lambda service: Broken(), settings, "us-east-1", NOW)
    assert result.klass == PROBE_FAILED and "Could not connect" in result.detail["error"]
