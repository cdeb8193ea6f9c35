"""Benchmark: engage and resume a large fleet through the CLI, behind a proxy
that throttles like AWS.

    make bench                                   # every benchmark, the issue's fleet
    HOLDFAST_BENCH_SCALE=0.1 .venv/bin/python -m pytest -m benchmark -s tests/bench/test_bench_scale.py
    HOLDFAST_BENCH_LAMBDA_RATE=15 ...            # Holdfast's Lambda budget at AWS's quota (default 10/s)
    HOLDFAST_BENCH_RESUME=0 ...                  # the engage only

The fleet (scale 1): 500 Auto Scaling groups, 750 SQS consumers with event source
mappings, 1,250 functions with async configs, 250 NLB target groups, all selected by the
opt-in tag (holdfast_fixtures.big_fleet), built directly on a moto server. Holdfast then
runs as a new user runs it: the console script, `holdfast --endpoint-url <proxy> --json
engage`, then `resume --now`, with the proxy (holdfast_fixtures.throttle_proxy) in front
of moto enforcing per-account token buckets: Lambda 15/s for every control-plane call but
GetFunction (100/s) and GetPolicy, Auto Scaling, ELB, Application Auto Scaling and the
Tagging API each their own.

Printed for each command: wall time and exit code; per service the calls the CLI made,
the requests the proxy saw (retries included), the throttles it answered, the fewest
calls a correct run needs (holdfast_fixtures.min_calls) and the floor each quota sets
(calls / rate) for both; the ratios wall / floor and calls / minimum; per kind the calls
per resource against the minimum; the throttles that surfaced as failures; and for engage
the consumers' harm curve (holdfast_fixtures.harm_curve): the seconds after the command
began by which 10, 50, 90 and 100 % of the harm the mappings' caps remove had landed.
Moto answers in about a millisecond, so the wall time is the quotas' and the walk's, not
AWS latency's. Measured when the issue was filed: engage 488 s and resume 628 s, both
exit 1, 6,001 Lambda calls each.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from holdfast.ledger import DEFAULT_TABLE
from holdfast.ledger.table import ensure_table
from holdfast.settings import Settings
from holdfast_demo.fleet import snapshot
from holdfast_fixtures import harm_curve, min_calls
from holdfast_fixtures.big_fleet import ISSUE_FLEET, build_big_fleet, consumers_selected_by_function
from holdfast_fixtures.throttle_proxy import DEFAULT_LIMITS, ThrottleProxy
from tests.support import walks
from tests.support.fleet import aws_semantics  # noqa: F401  (a fixture: moto's gaps, patched narrowly)

pytestmark = pytest.mark.benchmark

SCALE = float(os.environ.get("HOLDFAST_BENCH_SCALE", "1"))
# HOLDFAST_BENCH_GOVERNED=1: run the CLI in process with holdfast.budget's Governor on its clients.
GOVERNED = os.environ.get("HOLDFAST_BENCH_GOVERNED") == "1"
HOLDFAST = Path(sys.executable).parent / "holdfast"
# HOLDFAST_BENCH_LAMBDA_RATE=15: Holdfast's own Lambda budget (lambda_writes_per_second, default
# 10/s, which leaves room for the account's deploys) at AWS's quota instead, through a settings file.
LAMBDA_RATE = float(os.environ["HOLDFAST_BENCH_LAMBDA_RATE"]) if os.environ.get("HOLDFAST_BENCH_LAMBDA_RATE") else None
# HOLDFAST_BENCH_RESUME=0: the engage alone (its figures and harm curve), no resume after it.
RESUME = os.environ.get("HOLDFAST_BENCH_RESUME", "1") != "0"
KINDS = tuple(ISSUE_FLEET)
THROTTLE_CODES = ("Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
                  "ProvisionedThroughputExceededException", "RequestLimitExceeded")
# botocore's service names (Clients.calls) -> the signing names the proxy and its buckets use
SIGNING = {"elbv2": "elasticloadbalancing", "resourcegroupstaggingapi": "tagging", "cloudwatch": "monitoring"}
# The proxy bucket that sets each service's floor (Lambda: the control-plane one)
FLOOR_BUCKET = {"lambda": "lambda", "autoscaling": "autoscaling", "elasticloadbalancing": "elasticloadbalancing",
                "tagging": "tagging", "application-autoscaling": "application-autoscaling"}
BASELINE = {"engage": (488, 1, 6001), "resume": (628, 1, 6001)}


def _consumers_harm(direct, fleet) -> dict[str, int]:
    """Each selected mapping's harm before the engage (holdfast_fixtures.harm_curve), by UUID,
    read straight from moto: its cap, and its function's reserved concurrency."""
    lam = direct("lambda")
    selected = set(fleet.selected["esm"])
    mappings = [m for page in lam.get_paginator("list_event_source_mappings").paginate()
                for m in page["EventSourceMappings"] if m.get("EventSourceMappingArn") in selected]
    reserved = {}
    for function in {":".join(m["FunctionArn"].split(":")[:7]) for m in mappings}:
        reserved[function] = (lam.get_function(FunctionName=function).get("Concurrency") or {}).get(
            "ReservedConcurrentExecutions")
    return harm_curve.harm_before(mappings, reserved)


def _print_harm_curve(label: str, weights: dict[str, int], proxy: ThrottleProxy, started: float) -> dict:
    """When each share of the consumers' harm was capped, in seconds after the command began."""
    caps = harm_curve.caps_written(proxy.journal, started)
    points = harm_curve.curve(weights, caps)
    total = sum(weights.values())
    listed = next((a.at - started for a in proxy.journal if a.operation == "ListEventSourceMappings"), None)
    print(f"  {label}: consumers' harm capped (of {total:,} concurrent batches on {len(weights)} mappings, "
          f"{len({u for _, u, _ in caps})} capped): "
          + ", ".join(f"{share} % at {'never' if at is None else f'{at:.1f} s'}" for share, at in points.items())
          + (f"; mappings listed at {listed:.1f} s, first cap at {caps[0][0]:.1f} s" if caps and listed is not None else ""))
    return points


def _run(proxy: ThrottleProxy, command: list[str]) -> tuple[float, int, dict, str]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    env.pop("HOLDFAST_EXPIRED_QUEUE_ARN", None)
    settings = []
    if LAMBDA_RATE is not None:
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"holdfast-bench-settings-{os.getpid()}.json"
        # mode auto: a settings file of its own would otherwise leave the default (recommend), which writes nothing
        path.write_text(json.dumps({"lambda_writes_per_second": LAMBDA_RATE, "mode": "auto"}))
        settings = ["--settings", str(path)]
    started = time.perf_counter()
    done = subprocess.run([str(HOLDFAST), "--endpoint-url", proxy.url, "--rate-budget", "on", *settings, "--json", *command],
                          capture_output=True, text=True, env=env, timeout=4 * 3600)
    wall = time.perf_counter() - started
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"holdfast {' '.join(command)} printed no JSON document (exit {done.returncode}): "
                    f"{done.stderr[-2000:]}")
    return wall, done.returncode, document, done.stderr


def _run_governed(proxy: ThrottleProxy, command: list[str], monkeypatch) -> tuple[float, int, dict, str]:
    """The same command in process (`holdfast.cli.main`), with holdfast.budget's Governor on
    the CLI's clients: what the budgets do before the engine is built around them."""
    import contextlib
    import io

    from holdfast import cli
    from holdfast.budget import Budgets, Governor
    from holdfast.cli.context import Context

    governor = Governor(Budgets())
    made = Context.from_args.__func__

    def from_args(cls, args):
        ctx = made(cls, args)
        governor.govern(ctx.clients)
        return ctx

    monkeypatch.setattr(Context, "from_args", classmethod(from_args))
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--endpoint-url", proxy.url, "--json", *command])
    wall = time.perf_counter() - started
    print(f"\n  governor ({' '.join(command)}): {governor.totals()}")
    return wall, code, json.loads(out.getvalue()), err.getvalue()


def _all_kinds(per_kind: dict[str, Counter]) -> Counter:
    total = Counter()
    for calls in per_kind.values():
        total.update(calls)
    return total


def _lambda_floor_ops(ops: Counter) -> int:
    """Calls that spend Lambda's 15/s control-plane bucket."""
    return sum(n for op, n in ops.items() if op.startswith("lambda:")
               and op.split(":")[1] not in ("GetFunction", "GetPolicy", "Invoke"))


def _report(label: str, wall: float, code: int, doc: dict, proxy: ThrottleProxy,
            minimum: dict[str, Counter], counts: dict[str, int]) -> dict:
    calls = Counter()
    for op, n in doc["api_calls_by_operation"].items():
        service, name = op.split(":", 1)
        calls[f"{SIGNING.get(service, service)}:{name}"] += n
    arrived, throttled = Counter(), Counter()
    for (service, op), n in proxy.requests.items():
        arrived[f"{service}:{op}"] += n
    for (service, op), n in proxy.throttled.items():
        throttled[f"{service}:{op}"] += n
    min_ops = _all_kinds(minimum)

    def service_total(counter: Counter, service: str, floor_only: bool = False) -> int:
        if floor_only and service == "lambda":
            return _lambda_floor_ops(counter)
        return sum(n for op, n in counter.items() if op.split(":")[0] == service)

    failed = doc["failed"]
    surfaced = Counter(next((c for c in THROTTLE_CODES if (f.get("error") or "").startswith(c + ":")), "other")
                       for f in failed)
    print(f"\n{label}: wall {wall:.1f} s, exit {code}, {sum(counts.values())} selected resources, "
          f"summary {doc['summary']}, complete {doc['complete']}")
    print(f"  {'service':<24}{'calls':>7}{'requests':>10}{'throttled':>10}{'minimum':>9}{'rate/s':>8}"
          f"{'floor(calls) s':>16}{'floor(min) s':>14}{'calls/min':>11}")
    floors_made, floors_min = {}, {}
    services = sorted({op.split(":")[0] for op in list(calls) + list(arrived) + list(min_ops)} - {"?"})
    for service in services:
        c, a, t, m = (service_total(calls, service), service_total(arrived, service),
                      service_total(throttled, service), service_total(min_ops, service))
        bucket = DEFAULT_LIMITS.get(FLOOR_BUCKET.get(service, ""))
        fm = fn = None
        if bucket:
            admitted = service_total(arrived, service, floor_only=True) - service_total(throttled, service, floor_only=True)
            fm = floors_made[service] = min_calls.floor_seconds(admitted, bucket.rate, bucket.burst)
            fn = floors_min[service] = min_calls.floor_seconds(service_total(min_ops, service, floor_only=True),
                                                              bucket.rate, bucket.burst)
        print(f"  {service:<24}{c:>7}{a:>10}{t:>10}{m:>9}{(bucket.rate if bucket else ''):>8}"
              f"{(f'{fm:.1f}' if fm is not None else ''):>16}{(f'{fn:.1f}' if fn is not None else ''):>14}"
              f"{(f'{c / m:.2f}' if m else ''):>11}")
    floor_made, floor_min = max(floors_made.values()), max(floors_min.values())
    print(f"  floor the quotas set for the calls made: {floor_made:.1f} s ({max(floors_made, key=floors_made.get)}); "
          f"for the minimum calls: {floor_min:.1f} s ({max(floors_min, key=floors_min.get)})")
    print(f"  wall / floor(calls made) = {wall / floor_made:.2f}; wall / floor(minimum) = {wall / floor_min:.2f}"
          f"  (goal: within 1.15 of the minimum's floor)")
    own = LAMBDA_RATE or Settings().lambda_writes_per_second
    lambda_made = service_total(arrived, "lambda", floor_only=True) - service_total(throttled, "lambda", floor_only=True)
    own_floor = min_calls.floor_seconds(lambda_made, own, 1)
    print(f"  Holdfast's own Lambda budget {own:g}/s (lambda_writes_per_second): floor {own_floor:.1f} s for the "
          f"Lambda calls made; wall / that floor = {wall / own_floor:.2f}" if own_floor else
          f"  Holdfast's own Lambda budget {own:g}/s")
    print(f"  {'kind':<8}{'resources':>10}{'calls':>7}{'per resource':>14}{'minimum':>9}{'calls/min':>11}")
    for kind in KINDS:
        made, least, n = doc["api_calls"].get(kind, 0), sum(minimum[kind].values()), counts[kind]
        print(f"  {kind:<8}{n:>10}{made:>7}{made / n:>14.2f}{least / n:>9.2f}{made / least:>11.2f}")
    by_kind = doc.get("api_calls_by_kind") or {}
    for kind in KINDS:
        made = Counter()
        for op, n in by_kind.get(kind, {}).items():
            service, name = op.split(":", 1)
            made[f"{SIGNING.get(service, service)}:{_model_name(name, label)}"] += n
        least = minimum[kind]
        differ = {op: (made[op], least[op]) for op in sorted(set(made) | set(least)) if made[op] != least[op]}
        if differ:
            print(f"    {kind} calls made / minimum where they differ: "
                  + ", ".join(f"{op} {a}/{b}" for op, (a, b) in differ.items()))
    print(f"  throttles answered by the proxy: {dict(sorted(proxy.throttles_by_service().items()))}; "
          f"failed resources: {len(failed)}, of them for throttling: {sum(n for c, n in surfaced.items() if c != 'other')} "
          f"{dict(surfaced)}")
    for f in failed[:5]:
        print(f"    failed: {f['kind']} {f['arn']}: {f['error']}")
    return {"wall": wall, "code": code, "floor_made": floor_made, "floor_min": floor_min,
            "lambda_calls": service_total(calls, "lambda"), "failed": len(failed)}


def _model_name(operation: str, label: str) -> str:
    """The operation as min_calls names it (its alternatives as one)."""
    if operation in ("PutFunctionEventInvokeConfig", "UpdateFunctionEventInvokeConfig", "DeleteFunctionEventInvokeConfig"):
        return ("PutOrUpdateFunctionEventInvokeConfig" if label == "engage" and operation != "DeleteFunctionEventInvokeConfig"
                else "PutOrDeleteFunctionEventInvokeConfig")
    if operation == "ListFunctionEventInvokeConfigs" and label == "engage":
        return "GetFunctionEventInvokeConfig"   # one call per function either way: the listing names the qualifiers
    return operation


def _check_outcomes(label: str, doc: dict, fleet) -> None:
    """Outcomes name only fleet resources (or a kind's failed listing); say what has none."""
    selected = {arn for kind in KINDS for arn in fleet.selected[kind]}
    arns = [o["arn"] for o in doc["resources"]]
    stray = [a for a in arns if a not in selected and not a.startswith("discover:")]
    assert not stray, f"{label} touched resources outside the selection: {stray[:5]}"
    listing = [o for o in doc["resources"] if o["arn"].startswith("discover:")]
    missing = len(selected - set(arns))
    if listing or missing:
        print(f"  {label}: {len(listing)} failed listings {[(o['arn'], o.get('error')) for o in listing]}, "
              f"{missing} selected resources without an outcome")


def _lowered_functions(direct, fleet, floor: int) -> int:
    """Distinct functions of the selected mappings the floor lowers (no cap, or above it):
    each needs its reserved concurrency read once (min_calls)."""
    selected = set(fleet.selected["esm"])
    pages = direct("lambda").get_paginator("list_event_source_mappings").paginate()
    return len({m["FunctionArn"] for page in pages for m in page["EventSourceMappings"]
                if m.get("EventSourceMappingArn") in selected and not m.get("ProvisionedPollerConfig")
                and ((m.get("ScalingConfig") or {}).get("MaximumConcurrency") or floor + 1) > floor})


def _model(fleet, counts: dict[str, int], resources: list[dict], needs_write: str,
           lowered_functions: int = 0) -> min_calls.Fleet:
    """The min_calls model's view of the fleet: the resources whose outcome is `needs_write`
    are the ones a correct run must write."""
    needed = Counter(o["kind"] for o in resources if o["action"] == needs_write)
    nlb_records = Counter(
        tuple(sorted((k, str(v.get("from"))) for k, v in o.get("changes", {}).items()))
        for o in resources if o["kind"] == "nlb" and o["action"] == needs_write
    )
    return min_calls.Fleet(
        selected=counts, engaged=dict(needed),
        all_mappings=len(fleet.arns("esm")), all_target_groups=len(fleet.arns("nlb")),
        esm_by_own_tag=counts["esm"] - consumers_selected_by_function(counts["esm"]),
        nlb_records=list(nlb_records.values()), esm_lowered_functions=lowered_functions,
    )


def test_engage_and_resume_the_issue_fleet_behind_aws_rate_limits(moto_server, aws_semantics, monkeypatch):
    run = (lambda proxy, command: _run_governed(proxy, command, monkeypatch)) if GOVERNED else _run
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto_server.reset()
    direct = moto_server.clients()
    started = time.perf_counter()
    fleet = build_big_fleet(direct, scale=SCALE)
    counts = {k: len(fleet.selected[k]) for k in KINDS}
    ensure_table(direct("dynamodb"), DEFAULT_TABLE)
    print(f"\n{'in process, governed by holdfast.budget' if GOVERNED else 'the console script'}; "
          f"fleet at scale {SCALE:g} built on moto in {time.perf_counter() - started:.1f} s: {counts} selected, "
          f"5 unselected twins of each kind")
    before = snapshot(direct, fleet)
    # What a correct engage must write: a dry run (`holdfast plan`'s walk) straight on moto.
    plan = walks.engage_all(direct, Settings(), DEFAULT_TABLE, dry_run=True, kinds=KINDS)
    assert not plan.failed, [o.to_dict() for o in plan.failed[:3]]
    lowered = _lowered_functions(direct, fleet, Settings().esm_floor)
    needs = _model(fleet, counts, [o.to_dict() for o in plan.outcomes], "planned", lowered)
    print(f"resources that need a write (dry run): {dict(needs.engaged)}")
    weights = _consumers_harm(direct, fleet)

    with ThrottleProxy(moto_server.url, journal={("lambda", "UpdateEventSourceMapping"), ("lambda", "ListEventSourceMappings")}) as proxy:
        print("proxy buckets (rate/s, burst): " + ", ".join(
            f"{name} {lim.rate:g}/{lim.burst:g}" for name, lim in DEFAULT_LIMITS.items()))
        began = time.monotonic()   # the proxy's clock
        wall, code, engaged, _ = run(proxy, ["engage"])
        _check_outcomes("engage", engaged, fleet)
        least = min_calls.engage(needs)
        result = {"engage": _report("engage", wall, code, engaged, proxy, least, counts)}
        result["engage"]["harm"] = _print_harm_curve("engage", weights, proxy, began)
        for name, variant in (("mappings' records from the Tagging API's index, no ListTags (a what-if: it lags)",
                               min_calls.engage(needs, esm_tags="tagging")),
                              ("the record in the ledger only, no write-ahead tag", min_calls.engage(needs, tag_record=False))):
            lam = _lambda_floor_ops(_all_kinds(variant))
            print(f"  minimum with {name}: {lam} Lambda calls, floor {min_calls.floor_seconds(lam, 15, 15):.1f} s")
        # Holdfast's own budget (10/s by default) sets when the mappings' last cap can land.
        rate = LAMBDA_RATE or Settings().lambda_writes_per_second
        before = {how: min_calls.lambda_before_caps(needs, esm_tags=how) for how in ("index", "listtags")}
        print(f"  Lambda calls no engage avoids before the mappings' last cap: {before['index']} with the "
              f"mappings' tagging index ({before['index'] / rate:.1f} s at {rate:g}/s), {before['listtags']} "
              f"without ({before['listtags'] / rate:.1f} s)")

        if not RESUME:
            return
        proxy.reset()
        wall, code, resumed, _ = run(proxy, ["resume", "--now"])
        _check_outcomes("resume", resumed, fleet)
        # A full restore must undo what the engage above did engage.
        undo = _model(fleet, counts, engaged["resources"], "engaged")
        result["resume"] = _report("resume --now", wall, code, resumed, proxy, min_calls.restore(undo), counts)
        full = min_calls.restore(needs)
        lam = _lambda_floor_ops(_all_kinds(full))
        print(f"  minimum of a full restore of every resource the dry run would engage: {lam} Lambda calls, "
              f"floor {min_calls.floor_seconds(lam, 15, 15):.1f} s")

    after = snapshot(direct, fleet)
    differ = [arn for arn in before if before[arn] != after[arn]]
    print(f"\nfleet after resume equals the fleet before: {not differ} ({len(differ)} resources differ)")
    print("against the issue's measurement (scale 1): " + "; ".join(
        f"{cmd} {result[cmd]['wall']:.0f} s (was {BASELINE[cmd][0]} s), exit {result[cmd]['code']} "
        f"(was {BASELINE[cmd][1]}), {result[cmd]['lambda_calls']} Lambda calls (was {BASELINE[cmd][2]:,})"
        for cmd in ("engage", "resume")))
