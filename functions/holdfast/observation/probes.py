"""Probes, run once a tick: can this region's endpoints be resolved, and do they answer?

- DNS: each host of settings.probe_hosts(region) is resolved; an exception or an
  empty answer is a failure (an empty answer is what clients saw in October). The
  resolver is injected; the default is socket.getaddrinfo.
- API: one cheap read-only call per service in settings.probe_api_services, through
  clients with a single attempt and the probe timeout (a probe measures the region,
  so retrying would only hide what it measures).

All probes run at once in daemon threads and each must answer within
settings.probe_timeout_seconds, so a hung resolver costs one timeout, not a tick.
Each result is a signal (target `dns:<host>` or `api:<service>`); the detector judges
the failure ratio per target over its window. A timeout counts only beside a probe
that answered with a failure (holdfast.core.signals.probe_round): a slow controller
must not read as an impaired region.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import datetime
from typing import Any, Callable

from botocore.config import Config
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from holdfast.core.signals import PROBE_API_CALLS, PROBE_OK, ProbeOutcome, Signal, probe_round
from holdfast.iam import uses

Resolver = Callable[[str], Any]

# One cheap read-only call per service: (method, arguments), declared in the core so the
# settings can name the services without importing the probes.
API_CALLS: dict[str, tuple[str, dict[str, Any]]] = PROBE_API_CALLS


def system_resolver(host: str) -> list:
    return socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)


def probe_config(settings) -> Config:
    timeout = settings.probe_timeout_seconds
    return Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=timeout, read_timeout=timeout)


@uses(
    "dynamodb:ListTables",
    "ec2:DescribeAvailabilityZones",
    "autoscaling:DescribeAutoScalingGroups",
    "lambda:ListFunctions",
    "sqs:ListQueues",
    by=("reconciler",),
)
def run(client_for: Callable[[str], Any], settings, region: str, now: datetime, *, resolver: Resolver = system_resolver) -> list[Signal]:
    """Every probe once; one signal per target, all stamped `now`.

    `client_for(service)` returns a client made with `probe_config(settings)`."""
    tasks: dict[str, Callable[[], None]] = {}
    for host in settings.probe_hosts(region):
        tasks[f"dns:{host}"] = lambda host=host: _resolve(resolver, host)
    for service in settings.probe_api_services:
        method, kwargs = API_CALLS[service]
        tasks[f"api:{service}"] = lambda service=service, method=method, kwargs=kwargs: getattr(client_for(service), method)(**kwargs)
    return probe_round(_bounded(tasks, settings.probe_timeout_seconds), now)


def success_ratio(results: list[Signal]) -> float | None:
    """The share of probes that succeeded, for logs and metrics; None when none ran."""
    if not results:
        return None
    return sum(s.klass == PROBE_OK for s in results) / len(results)


def _resolve(resolver: Resolver, host: str) -> None:
    if not resolver(host):
        raise LookupError(f"empty answer for {host}")


_TIMEOUTS = (TimeoutError, ReadTimeoutError, ConnectTimeoutError)


def _bounded(tasks: dict[str, Callable[[], None]], timeout: float) -> dict[str, ProbeOutcome]:
    """Run the tasks at once; each target's outcome. A task still running at the deadline
    has timed out; its daemon thread is abandoned."""
    errors: dict[str, ProbeOutcome] = {}

    def attempt(name: str, task: Callable[[], None]) -> None:
        try:
            task()
            errors[name] = ProbeOutcome(None)
        except Exception as err:  # noqa: BLE001 - every failure is a failed probe, reported
            errors[name] = ProbeOutcome(f"{type(err).__name__}: {err}", isinstance(err, _TIMEOUTS))

    threads = [threading.Thread(target=attempt, args=item, daemon=True) for item in tasks.items()]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    done = dict(errors)
    return {name: done[name] if name in done else ProbeOutcome(f"timed out after {timeout:g}s", True) for name in tasks}
