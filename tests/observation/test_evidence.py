"""The built-in evidence read from the selected fleet and CloudWatch, on moto with AWS's
GetMetricData rules (holdfast_fixtures.moto_patches): which consumers and target groups
are watched, the metrics AWS's services would publish for them, 500 queries a call,
pages, and what a failed read does. Then observe(): only what the next gate needs."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import pytest
from botocore.stub import Stubber

from holdfast.core import gates, policy
from holdfast.core.evidence import DRAIN, ROUTING
from holdfast.core.model import KINDS, Record
from holdfast.ledger import Ledger
from holdfast.ledger.resources import ResourceLedger
from holdfast.observation import evidence as builtin
from holdfast.observation import observe
from holdfast.observation.cloudwatch import COMPLETE_AFTER, complete_until
from holdfast.runtime import Runtime
from holdfast.settings import Settings
from holdfast_fixtures.moto_patches import publish_service_metrics
from tests.support.factory import utc

ACCOUNT, REGION = "123456789012", "us-east-1"
NOW = utc(2025, 10, 20, 21, 0)
MIN = timedelta(minutes=1)
SETTINGS = Settings()
TAGS = {"holdfast:protect": "true"}


@pytest.fixture
def semantics(aws):
    from holdfast_fixtures.moto_patches import aws_semantics

    with aws_semantics():
        yield


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("index.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


@pytest.fixture
def fleet(semantics, clients, ledger_table):
    """Three SQS consumers: one selected by its function's tag, one by its own tag (and held,
    so the ledger knows it), one unselected; two target groups: one selected behind an NLB,
    one selected with no load balancer; an unselected one behind the NLB."""
    iam, lam, sqs = clients("iam"), clients("lambda"), clients("sqs")
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    mappings = {}
    for name, tagged_fn in (("orders", True), ("audit", False), ("other", False)):
        url = sqs.create_queue(QueueName=f"{name}-q")["QueueUrl"]
        queue = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        lam.create_function(FunctionName=f"{name}-fn", Runtime="python3.12", Role=role, Handler="index.handler",
                            Code={"ZipFile": _zip()}, Tags=TAGS if tagged_fn else {})
        mappings[name] = lam.create_event_source_mapping(EventSourceArn=queue, FunctionName=f"{name}-fn", BatchSize=10)
    held = mappings["audit"]["EventSourceMappingArn"]
    ResourceLedger(Ledger(clients("dynamodb"), ledger_table)).put_original(Record("esm", held, {"MaximumConcurrency": None},
                                                                          {"MaximumConcurrency": 2}), "audit")
    ec2, elb = clients("ec2"), clients("elbv2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    nlb = elb.create_load_balancer(Name="edge", Subnets=[subnet], Type="network", Scheme="internal")["LoadBalancers"][0]
    groups = {}
    for name, tagged, behind in (("web", True, True), ("spare", True, False), ("theirs", False, True)):
        tags = [{"Key": k, "Value": v} for k, v in TAGS.items()] if tagged else []
        arn = elb.create_target_group(Name=name, Protocol="TCP", Port=80 + len(groups), VpcId=vpc, TargetType="instance",
                                      **({"Tags": tags} if tags else {}))["TargetGroups"][0]["TargetGroupArn"]
        if behind:
            elb.create_listener(LoadBalancerArn=nlb["LoadBalancerArn"], Protocol="TCP", Port=80 + len(groups),
                                DefaultActions=[{"Type": "forward", "TargetGroupArn": arn}])
        groups[name] = arn
    return {"mappings": mappings, "groups": groups, "nlb": nlb["LoadBalancerArn"]}


def publish(namespace, name, dims, values, end=NOW):
    publish_service_metrics(ACCOUNT, REGION, namespace, [
        {"MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
         "Timestamp": end - (len(values) - i) * MIN + timedelta(seconds=10), "Value": v}
        for i, v in enumerate(values)])


def runtime(clients, table):
    return Runtime(clients, SETTINGS, table)


def test_the_watched_consumers_are_the_selected_and_held_mappings(fleet, clients, ledger_table):
    held = {fleet["mappings"]["audit"]["EventSourceMappingArn"]}
    watched = builtin.consumers(clients, SETTINGS, held)
    assert sorted((q, f) for _, q, f in watched) == [("audit-q", "audit-fn"), ("orders-q", "orders-fn")]


COMPLETE = NOW - COMPLETE_AFTER   # where CloudWatch's datapoints are complete


def test_drain_evidence_is_what_sqs_and_lambda_publish_for_them(fleet, clients, ledger_table):
    publish("AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": "orders-q"}, range(3000, 1600, -100), end=COMPLETE)
    publish("AWS/Lambda", "Invocations", {"FunctionName": "orders-fn"}, [100] * 14, end=COMPLETE)
    publish("AWS/Lambda", "Errors", {"FunctionName": "orders-fn"}, [20] * 14, end=COMPLETE)
    # The last two minutes, still being reported: partial, and "healthier" than they will be.
    publish("AWS/Lambda", "Errors", {"FunctionName": "orders-fn"}, [1, 0], end=NOW)
    publish("AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": "orders-q"}, [5, 5], end=NOW)
    publish("AWS/Lambda", "Errors", {"FunctionName": "other-fn"}, [99] * 14)  # not watched
    publish("Custom/App", "Errors", {"FunctionName": "orders-fn"}, [99] * 14)  # same name, another namespace
    ev = builtin.read(runtime(clients, ledger_table), NOW, {DRAIN})
    assert ev.routing is None and ev.drain.error is None
    assert (ev.drain.start, ev.drain.end) == (COMPLETE - 12 * MIN, COMPLETE) == (NOW - 14 * MIN, complete_until(NOW))
    orders = next(c for c in ev.drain.consumers if c.function == "orders-fn")
    assert [v for _, v in orders.age] == [float(v) for v in range(2800, 1600, -100)]   # the last 12 minutes
    assert sum(v for _, v in orders.errors) == 20 * 12 and orders.throttles == ()
    audit = next(c for c in ev.drain.consumers if c.function == "audit-fn")
    assert audit.age == audit.invocations == ()   # nothing published: no data, not zero
    judged = gates.drain_gate(ev.drain, NOW, SETTINGS)
    assert not judged.open and "consumer orders-fn (orders-q): errors 20.0%" in judged.blocking[0] and not judged.back


def test_routing_evidence_is_the_selected_target_groups_health_behind_their_load_balancers(fleet, clients, ledger_table):
    web = fleet["groups"]["web"]
    dims = {"TargetGroup": web.split(":")[-1], "LoadBalancer": fleet["nlb"].split(":loadbalancer/")[1]}
    assert dims["LoadBalancer"].startswith("net/edge/")
    publish("AWS/NetworkELB", "UnHealthyHostCount", dims, [0, 2, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], end=COMPLETE)
    ev = builtin.read(runtime(clients, ledger_table), NOW, {ROUTING})
    assert ev.drain is None
    by_name = {t.target_group.split("/")[1]: t for t in ev.routing.target_groups}
    assert set(by_name) == {"web", "spare"}
    assert by_name["spare"].load_balancers == () and by_name["web"].load_balancers == (fleet["nlb"],)
    assert [v for _, v in by_name["web"].unhealthy] == [0.0, 3.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 6
    verdict = type("V", (), {"last_health_check_terminations": None, "launches_unhealthy_at": None,
                             "last_successful_launch": NOW - MIN, "failure_share": 0.0})()
    judged = gates.routing_gate(ev.routing, verdict, NOW, SETTINGS)
    assert any("target group web: unhealthy hosts rose 0 -> 1" in b for b in judged.blocking), judged
    assert any("not judged" in e and "spare" in e for e in judged.evidence)


def test_up_to_500_queries_a_call_and_pages_are_followed(semantics, clients):
    names = [f"fn-{i}" for i in range(501)]
    for name in names[:3]:
        publish("AWS/Lambda", "Errors", {"FunctionName": name}, [1] * 5)
    queries = [builtin._query(f"e{i}", "AWS/Lambda", "Errors", {"FunctionName": n}, "Sum") for i, n in enumerate(names)]
    before = clients.calls["cloudwatch:GetMetricData"]
    data = builtin.metric_data(clients("cloudwatch"), queries, NOW - 10 * MIN, NOW)
    assert clients.calls["cloudwatch:GetMetricData"] - before == 2
    assert [len(data.get(f"e{i}", ())) for i in range(4)] == [5, 5, 5, 0]
    before = clients.calls["cloudwatch:GetMetricData"]
    paged = builtin.metric_data(clients("cloudwatch"), queries[:3], NOW - 10 * MIN, NOW, max_datapoints=4)
    assert clients.calls["cloudwatch:GetMetricData"] - before == 4   # 15 datapoints, 4 a page
    assert paged == {k: v for k, v in data.items() if k in ("e0", "e1", "e2")}


def test_percentiles_are_of_the_raw_values_and_absent_for_statistic_sets(semantics, clients):
    """CloudWatch computes a percentile from raw values (a statistic set only when its
    SampleCount is 1 or Min equals Max); moto 5.2.5 raises on any extended statistic."""
    at = NOW - 3 * MIN + timedelta(seconds=5)
    publish_service_metrics(ACCOUNT, REGION, "AWS/Lambda", [
        {"MetricName": "Duration", "Dimensions": [{"Name": "FunctionName", "Value": "raw"}], "Timestamp": at, "Value": float(v)}
        for v in range(1, 11)] + [
        # Ten invocations of 4 ms each: a statistic set whose Minimum equals its Maximum.
        {"MetricName": "Duration", "Dimensions": [{"Name": "FunctionName", "Value": "even"}], "Timestamp": at,
         "StatisticValues": {"SampleCount": 10, "Sum": 40, "Minimum": 4, "Maximum": 4}}])
    clients("cloudwatch").put_metric_data(Namespace="App", MetricData=[
        {"MetricName": "Duration", "Dimensions": [{"Name": "FunctionName", "Value": "set"}], "Timestamp": at,
         "StatisticValues": {"SampleCount": 10, "Sum": 55, "Minimum": 1, "Maximum": 10}}])
    queries = [builtin._query("raw", "AWS/Lambda", "Duration", {"FunctionName": "raw"}, "p90"),
               builtin._query("rawavg", "AWS/Lambda", "Duration", {"FunctionName": "raw"}, "Average"),
               builtin._query("set", "App", "Duration", {"FunctionName": "set"}, "p90"),
               builtin._query("setsum", "App", "Duration", {"FunctionName": "set"}, "Sum"),
               builtin._query("even", "AWS/Lambda", "Duration", {"FunctionName": "even"}, "p90"),
               builtin._query("evensum", "AWS/Lambda", "Duration", {"FunctionName": "even"}, "Sum")]
    data = builtin.metric_data(clients("cloudwatch"), queries, NOW - 10 * MIN, NOW)
    assert [v for _, v in data["raw"]] == [9.0] and [v for _, v in data["rawavg"]] == [5.5]
    assert data.get("set", ()) == () and [v for _, v in data["setsum"]] == [55.0]
    assert [v for _, v in data["even"]] == [4.0] and [v for _, v in data["evensum"]] == [40.0]


def test_aws_refuses_what_moto_would_take(semantics, clients):
    from botocore.exceptions import ClientError

    cloudwatch = clients("cloudwatch")
    with pytest.raises(ClientError, match="greater than 500"):
        cloudwatch.get_metric_data(MetricDataQueries=[builtin._query(f"q{i}", "A", "B", {}, "Sum") for i in range(501)],
                                   StartTime=NOW - MIN, EndTime=NOW)
    with pytest.raises(ClientError, match="lowercase letter"):
        cloudwatch.get_metric_data(MetricDataQueries=[builtin._query("Q1", "A", "B", {}, "Sum")], StartTime=NOW - MIN, EndTime=NOW)
    with pytest.raises(ClientError, match="InvalidParameterValue"):
        cloudwatch.put_metric_data(Namespace="AWS/Lambda", MetricData=[{"MetricName": "Errors", "Value": 1}])


@pytest.mark.parametrize("answer", [
    {"service_error_code": "Throttling", "service_message": "Rate exceeded"},
    {"service_response": {"MetricDataResults": [{"Id": "age0", "StatusCode": "InternalError",
                                                 "Messages": [{"Code": "InternalError", "Value": "try later"}]}]}},
])
def test_an_unreadable_read_is_the_evidence_error_and_keeps_the_gate_shut(fleet, clients, ledger_table, answer):
    cloudwatch = clients("cloudwatch")
    with Stubber(cloudwatch) as stub:
        if "service_error_code" in answer:
            stub.add_client_error("get_metric_data", **answer)
        else:
            stub.add_response("get_metric_data", answer["service_response"])
        ev = builtin.read(runtime(clients, ledger_table), NOW, {DRAIN})
    assert ev.drain.error and ev.drain.consumers == ()
    assert ("Throttling" in ev.drain.error) or ("InternalError" in ev.drain.error)
    assert not gates.drain_gate(ev.drain, NOW, SETTINGS).open


def test_observe_reads_only_what_the_next_gate_needs(fleet, clients, ledger_table):
    from holdfast.core.detector import Verdict
    from holdfast.ledger import plan as ledger_plan

    rt = runtime(clients, ledger_table)
    generations = iter(range(1, 10))

    def seen(stage, state):
        plan = policy.Plan(generation=next(generations), stage=stage, entered_at=NOW - 30 * MIN,
                           impaired_at=NOW - 60 * MIN, done=frozenset(KINDS))
        ledger_plan.write(Ledger(clients("dynamodb"), ledger_table), plan, controller_id="t", now=NOW)
        verdict = Verdict(state, NOW - 20 * MIN, (), None, NOW - MIN)
        before = clients.calls["cloudwatch:GetMetricData"]
        got = observe(rt, NOW, collect=lambda *_: verdict)
        return got, clients.calls["cloudwatch:GetMetricData"] - before

    got, calls = seen("fresh-work", "recovering")
    assert got.evidence.routing is not None and got.evidence.drain is None and calls == 1
    assert gates.routing_gate(got.evidence.routing, got.verdict, NOW, SETTINGS).open  # no datapoint: not judged
    got, calls = seen("hold", "impaired")
    assert got.evidence.drain is None and got.evidence.routing is None and calls == 0
    got, calls = seen("capacity", "recovering")
    assert calls == 0


def test_an_answer_of_an_unexpected_shape_is_an_error_never_an_exception(fleet, clients, ledger_table):
    lam = clients("lambda")
    with Stubber(lam) as stub:
        stub.add_response("list_event_source_mappings", {"EventSourceMappings": [{"EventSourceArn": "arn:aws:sqs:x"}]})
        ev = builtin.read(runtime(clients, ledger_table), NOW, {DRAIN, ROUTING})
    assert "KeyError" in ev.drain.error or "IndexError" in ev.drain.error
    assert ev.routing.error == ev.drain.error   # read in the same pass: both gates stay shut this tick
