"""Shared fixtures. The only boundary mocked is AWS itself (moto); nothing inside Holdfast is.

- `aws`: moto's in-process mock for one test.
- `clients`: Holdfast's client factory inside that mock.
- `ledger_table`: the ledger table, created the way `holdfast ledger-init` creates it.
- `moto_server`: one ThreadedMotoServer on 127.0.0.1 for the session, for tests that
  drive the real console script in a subprocess, or `holdfast.cli.main` in this process.
  Reset between uses with `reset`. This process's own clients of it skip the socket
  (`MotoServer`); a subprocess reaches it over HTTP.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests draw the same examples on every run (a run never fails on a draw the last
# one did not make); HYPOTHESIS_PROFILE=explore draws new ones, to look for counterexamples.
hypothesis_settings.register_profile("default", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Never reach real AWS, whatever the developer's shell has.
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_var, None)
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    CDK_DISABLE_CLI_TELEMETRY="true",
    POWERTOOLS_DEV="false",
    POWERTOOLS_METRICS_NAMESPACE="Holdfast",
    POWERTOOLS_SERVICE_NAME="holdfast",
    POWERTOOLS_TRACE_DISABLED="true",
)

from holdfast_fixtures import fast_moto  # noqa: E402

fast_moto.install()  # before moto is imported: one default AMI, one botocore loader per process

from moto import mock_aws  # noqa: E402  (moto before any boto3 client)

from holdfast.aws import Clients  # noqa: E402
from holdfast.ledger import DEFAULT_TABLE  # noqa: E402
from holdfast.ledger.table import ensure_table  # noqa: E402

REGION = "us-east-1"


@pytest.fixture
def aws():
    with mock_aws():
        yield


@pytest.fixture
def clients(aws) -> Clients:
    return Clients(region=REGION)


@pytest.fixture
def ledger_table(clients) -> str:
    ensure_table(clients("dynamodb"), DEFAULT_TABLE)
    return DEFAULT_TABLE


class MotoServer:
    """Clients of this process answered by the server's WSGI application in the calling
    thread, as the demo's are (holdfast_demo.embedded.answer_in_process): the request
    signed and serialized for the wire, the answer parsed as if it came over HTTP; only
    the socket, the listener's thread and HTTP's framing are left out. A request for any
    other URL (through a proxy, a closed port) and every other process go over HTTP."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        _IN_PROCESS[self.url] = _as_served(self._server._server.app)

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")).read()

    def clients(self) -> Clients:
        return Clients(region=REGION, endpoint_url=self.url)

    def stop(self) -> None:
        _IN_PROCESS.pop(self.url, None)
        self._server.stop()


# The session's moto server: its URL and its WSGI application.
_IN_PROCESS: dict = {}


def _as_served(app):
    """`app` as werkzeug's listener serves it: an exception in it (an action moto lacks)
    is an HTML 500 page, not an exception in the caller."""
    from werkzeug.exceptions import InternalServerError

    def served(environ, start_response):
        try:
            return app(environ, start_response)
        except Exception:
            return InternalServerError()(environ, start_response)

    return served


def _answer_in_process(request, **kwargs):
    """botocore's `before-send` on every boto3 session of this process (the CLI's own, in
    `main`, among them): a request for the session's moto server answered in this thread;
    None (over HTTP) for any other URL."""
    from urllib.parse import urlsplit

    parts = urlsplit(request.url)
    app = _IN_PROCESS.get(f"{parts.scheme}://{parts.netloc}")
    if app is None:
        return None
    from holdfast_demo import embedded

    embedded._APPS.setdefault(f"{parts.scheme}://{parts.netloc}", app)
    return embedded.answer_in_process(request, **kwargs)


def _register_in_process_answers() -> None:
    import boto3.session

    init = boto3.session.Session.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.events.register("before-send", _answer_in_process)

    boto3.session.Session.__init__ = __init__


_register_in_process_answers()


class VirtualWait:
    """The clock of the rate budgets that Holdfast's own wiring builds in this process
    (holdfast.runtime.govern: the CLI's `main` against moto in this process, a handler's
    runtime; holdfast.cli.accounts' token buckets): a wait moves this clock on instead of
    blocking, and the time it reads is the system's plus every wait so far. Against moto
    the waits were real time in which nothing happened (a rate budget paces calls that
    no quota throttles here: most of a CLI test's wall time); the budgets decide as
    before, each call's slot on the same clock. The share board's lease times are on the
    same clock (wall time plus the waits), so a lease a newcomer waits out lapses by that
    clock too. A budget or bucket given its own clock (tests/budget) keeps it.

    botocore's backoff before a retry (botocore.endpoint) waits on it too: the retries here
    are of an endpoint that is down (a closed port: the CLI's exit 3) or that no test
    serves (moto has no Region switch), which no wait changes; the attempts are the same."""

    def __init__(self):
        import threading
        import time

        self._time, self._offset, self._lock = time, 0.0, threading.Lock()

    def monotonic(self) -> float:
        return self._time.monotonic() + self._offset

    def time(self) -> float:
        return self._time.time() + self._offset

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self._offset += seconds
        self._time.sleep(0)   # other threads run, as a wait would let them

    def install(self) -> None:
        import functools

        from holdfast import budget, ratelimit
        from holdfast.ledger import budget_board

        def defaults(cls, **clocks):
            init = cls.__init__
            if getattr(init, "virtual_wait", False):
                return

            @functools.wraps(init)
            def __init__(obj, *args, **kwargs):
                for name, clock in clocks.items():
                    kwargs.setdefault(name, clock)
                init(obj, *args, **kwargs)

            __init__.virtual_wait = True
            cls.__init__ = __init__

        defaults(budget.RateBudget, monotonic=self.monotonic, sleep=self.sleep)
        defaults(budget.Governor, monotonic=self.monotonic)
        defaults(ratelimit.TokenBucket, monotonic=self.monotonic, sleep=self.sleep)
        defaults(budget_board.LedgerShareBoard, clock=self.time)

        import types

        import botocore.endpoint

        botocore.endpoint.time = types.SimpleNamespace(sleep=self.sleep)


VirtualWait().install()


def _offline() -> None:
    """Nothing here reaches the network (docs/testing.md): a name other than the loopback's
    does not resolve in this process, as on a machine with no network, so a call that
    moto does not answer (an API it lacks, a command run outside `aws`) fails the same way
    on every machine instead of reaching AWS with the test credentials."""
    import socket

    resolve = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or name in ("localhost", "::1") or str(name).startswith("127."):
            return resolve(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"the tests are offline: {name} is not resolved")

    socket.getaddrinfo = getaddrinfo


_offline()


def _fewer_collections() -> None:
    """Python's cyclic garbage collector runs its youngest generation every 700 allocations
    net, and each older one walks every object that survived: the modules, service models
    and moto backends imported above are hundreds of thousands of objects, walked again and
    again though none of them is ever garbage. They are frozen out of the collector's view
    (gc.freeze), and the youngest generation is collected every 100,000 allocations: about
    6 % less CPU over the moto-backed tests (tests/scenarios/test_crashes.py with
    tests/fixtures/test_recovery_model.py: 59.8 and 52.3 s of CPU before, 55.3 and 49.1 s
    after). Cycles are still collected, later; nothing here waits on a collection."""
    import gc

    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


_fewer_collections()


@pytest.fixture(scope="session")
def moto_server():
    server = MotoServer()
    yield server
    server.stop()


# ---- running on several workers (pytest-xdist, `make test`) ---------------------------

# The session fixtures of tests/stack/conftest.py: each synthesizes an app (seconds of CPU
# in the jsii node process), once per worker that runs a test asking for it.
SYNTH_FIXTURES = {"synthesized", "org_synthesized", "foreign", "game_day_synthesized"}
SYNTH_DIR = "tests/stack/"
# The work units that take 5 s or more, longest first (their seconds in a run of the whole
# suite on 2 workers, `--durations=0` summed per unit), handed out in this order: the
# longest start first and the short ones fill in at the end, so that neither worker runs
# a long unit alone while the other has finished (longest processing time first). Every
# other unit follows in xdist's order (most tests first). A unit missing here only starts
# later than it should; measure again when one grows.
LONGEST_FIRST = (
    SYNTH_DIR,                                   # 48
    "tests/cli/test_readme_examples.py",         # 38
    "tests/scenarios/test_crashes.py",           # 32
    "tests/demo/test_demo.py",                   # 31
    "tests/scenarios/test_interleavings.py",     # 19
    "tests/fixtures/test_recovery_model.py",     # 19
    "tests/cli/test_output_formats.py",          # 16
    "tests/cli/test_drill_fis.py",               # 16
    "tests/actuators/test_resilience.py",        # 13
    "tests/cli/test_drill_local.py",             # 13
    "tests/cli/test_resources_cli.py",           # 10
    "tests/stages/test_capacity_stage.py",       # 9
    "tests/cli/test_org_commands.py",            # 9
    "tests/cli/test_confirmed_writes.py",        # 9
    "tests/stages/test_drain_stage.py",          # 9
    "tests/reconciler/test_release_requests.py", # 8
    "tests/demo/test_serve_signals.py",          # 7
    "tests/cli/test_arn_option_scope.py",        # 7
    "tests/scenarios/test_event.py",             # 7
    "tests/packaging/test_wheel.py",             # 6
    "tests/cli/test_accounts_file.py",           # 6
    "tests/actuators/test_esm_provisioned.py",   # 5
    "tests/reconciler/test_stuck.py",            # 5
    "tests/core/drain/test_drain_control.py",    # 5
    "tests/cli/test_cli_output.py",              # 5
    "tests/cli/test_doctor.py",                  # 5
    "tests/scenarios/test_untuned_scenarios.py", # 5
)


def work_unit(nodeid: str) -> str:
    """What runs whole on one worker: a test file, so its module fixtures (the demo's
    replay, a module's fleet) are built once; and all of tests/stack/, so each synthesized
    app is built once."""
    path = nodeid.split("::", 1)[0]
    return SYNTH_DIR if path.startswith(SYNTH_DIR) else path


def pytest_collection_modifyitems(config, items):
    """The work units rest on this: a test outside tests/stack/ that asked for a
    synthesized app would synthesize it again on another worker."""
    strays = sorted({item.nodeid.split("::")[0] for item in items
                     if SYNTH_FIXTURES & set(item.fixturenames) and not item.nodeid.startswith(SYNTH_DIR)})
    if strays:
        raise pytest.UsageError(f"{', '.join(strays)} use a synthesized app ({', '.join(sorted(SYNTH_FIXTURES))}): "
                                f"move them under {SYNTH_DIR}, where one worker builds each app once")


@pytest.hookimpl(optionalhook=True)   # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with `work_unit`'s groups, longest first. xdist's own loadgroup
    reads `xdist_group` marks by renaming each test (`item._nodeid`), which pytest 9 no
    longer reads; the units are named here from the test ids instead."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_ordered", False):
                rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
                order = sorted(self.workqueue, key=lambda unit: rank.get(unit, len(rank)))
                for unit in order:
                    self.workqueue.move_to_end(unit)
                self._ordered = True
            super()._assign_work_unit(node)

    return WorkUnits(config, log)
