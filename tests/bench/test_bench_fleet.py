"""Benchmark: engage and restore a fleet of 550 resources on a moto server.

Run with `.venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_fleet.py`.
It prints, per kind, the API calls per resource Holdfast made next to the minimum
possible, and the wall time. Each kind is walked by its own engine call with its own
`Clients`, so every call it makes (discovery included) is counted against it exactly;
the engine walks kinds one after another anyway.

Moto answers in about a millisecond and never throttles, so its wall time is not AWS's.
On AWS the bound is Lambda's control plane, about 15 write requests a second for the
whole account; Holdfast's own client-side limit (`lambda_writes_per_second`) is below
it, so the Lambda kinds' wall time here is that limiter's, and the floor at 15/s is
printed next to it.

The minimum per resource and direction (engage, or a full restore):
- 2 resource writes: the write-ahead tag (added on engage, removed on restore) and the
  setting itself. Neither can be skipped: the tag is the write-ahead record, and no API changes a
  setting and a tag in one call.
- 1 ledger write: a conditional put of the original on engage (it must never overwrite a
  recorded one, so it cannot be a batch write), a delete on restore.
- Reads, from what each service can list in bulk (AWS API references):
  asg: DescribeAutoScalingGroups with a tag filter, 100 groups a call, suspended
       processes and tags included: 0.01.
  esm: ListEventSourceMappings returns no tags and mappings do not inherit their
       function's, so one Lambda ListTags per mapping, plus a GetResources page (100)
       for the function tags and the listing: 1.02.
  async: GetResources (100 a page) finds the functions with their tags; there is no bulk
       read of async configs, so one GetFunctionEventInvokeConfig each: 1.01.
  nlb: GetResources finds the groups with their tags; attributes are one
       DescribeTargetGroupAttributes each: 1.01.
  scalable-target: DescribeScalableTargets (50 a page) has no tags and the tagging API
       does not list targets, so one ListTagsForResource each, plus GetResources for the
       ECS services: 1.03; and RegisterScalableTarget creates a target that is gone, so a
       safe write first checks it still exists: one more DescribeScalableTargets, 2.03.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from holdfast.core.model import ENGAGED
from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.settings import Settings
from holdfast_demo.fleet import KINDS, build_fleet, snapshot
from tests.support import walks
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)

pytestmark = pytest.mark.benchmark

FLEET = dict(asgs=120, esms=120, asyncs=120, nlbs=80, services=80)
MIN_READS = {"asg": 0.01, "esm": 1.02, "async": 1.01, "nlb": 1.01, "scalable-target": 2.03}
MIN_WRITES = 2 + 1  # write-ahead tag + setting, + the ledger
LAMBDA_WRITES = {
    "UpdateEventSourceMapping", "PutFunctionEventInvokeConfig", "UpdateFunctionEventInvokeConfig",
    "DeleteFunctionEventInvokeConfig", "TagResource", "UntagResource",
}
AWS_LAMBDA_WRITE_RATE = 15.0  # requests per second, all Lambda control-plane APIs together (Lambda quotas)


def _lambda_writes(calls: Counter) -> int:
    return sum(n for op, n in calls.items() if op.startswith("lambda:") and op.split(":")[1] in LAMBDA_WRITES)


def _walk(label: str, moto_server, walk, counts: dict[str, int], expect: dict[str, int] | None = None) -> dict[str, int]:
    """Run `walk(clients, kind)` for every kind and print calls per resource against the minimum.
    Every one of `expect[kind]` resources (default: every selected one) has an outcome; returns
    per kind how many were engaged (what a restore must then walk: a mapping already capped
    at or below the floor is left alone, and has nothing to restore)."""
    print(f"\n{label}:\n  {'kind':<16}{'resources':>10}{'wall s':>8}{'calls':>7}{'per resource':>14}{'minimum':>9}"
          f"{'Lambda writes':>15}{'floor at 15/s':>15}")
    total_wall, total_writes, failed, engaged = 0.0, 0, [], {}
    for kind in KINDS:
        clients = moto_server.clients()
        started = time.perf_counter()
        report = walk(clients, kind)
        wall = time.perf_counter() - started
        calls, writes, n = sum(clients.calls.values()), _lambda_writes(clients.calls), counts[kind]
        total_wall, total_writes = total_wall + wall, total_writes + writes
        failed += report.failed
        assert len(report.outcomes) == (expect or counts)[kind]
        engaged[kind] = sum(1 for o in report.outcomes if o.action == ENGAGED)
        floor = f"{writes / AWS_LAMBDA_WRITE_RATE:.1f} s" if writes else ""
        print(f"  {kind:<16}{n:>10}{wall:>8.1f}{calls:>7}{calls / n:>14.2f}{MIN_WRITES + MIN_READS[kind]:>9.2f}"
              f"{writes or '':>15}{floor:>15}")
        if report.api_calls.get(kind) != calls:
            print(f"    (the engine's Report.api_calls says {report.api_calls.get(kind)} for {kind})")
        print(f"    {dict(sorted(clients.calls.items()))}")
    n = sum(counts.values())
    print(f"  {'all':<16}{n:>10}{total_wall:>8.1f}{'':>7}{'':>14}{'':>9}{total_writes:>15}"
          f"{total_writes / AWS_LAMBDA_WRITE_RATE:>13.1f} s")
    assert not failed, [o.to_dict() for o in failed]
    return engaged


def test_engage_and_restore_a_550_resource_fleet(moto_server, aws_semantics):
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    moto_server.reset()
    builder = moto_server.clients()
    started = time.perf_counter()
    fleet = build_fleet(builder, **FLEET, unselected=5, workers=16)
    counts = {k: len(v) for k, v in fleet.selected.items()}
    print(f"\nfleet built in {time.perf_counter() - started:.1f} s: {counts} selected "
          f"(every fourth mapping selected by its function's tag, which makes that function an async resource), "
          f"5 unselected twins of each kind")
    assert sum(counts.values()) >= 500
    ensure_table(builder("dynamodb"), DEFAULT_TABLE)
    before = snapshot(builder, fleet)
    settings = Settings()
    print(f"Holdfast's client-side Lambda write limit: {settings.lambda_writes_per_second:g}/s")

    engaged = _walk("engage", moto_server, lambda c, kind: walks.engage_all(c, settings, DEFAULT_TABLE, kinds=(kind,)), counts)
    _walk("restore", moto_server, lambda c, kind: walks.relax_all(c, settings, DEFAULT_TABLE, kinds=(kind,)), counts,
          expect=engaged)
    assert snapshot(builder, fleet) == before

    print(f"\n1,000 mappings + 1,000 async configs at 15 Lambda writes/s: "
          f"{2000 / AWS_LAMBDA_WRITE_RATE:.0f} s for the settings alone, "
          f"{4000 / AWS_LAMBDA_WRITE_RATE:.0f} s with the write-ahead tags (per direction)")
