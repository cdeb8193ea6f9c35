"""Shared fixtures. The only boundary mocked is AWS itself (moto); nothing inside Holdfast is.

- `aws`: moto's in-process mock for one test.
- `clients`: Holdfast's client factory inside that mock.
- `ledger_table`: the ledger table, created the way `holdfast ledger-init` creates it.
- `moto_server`: one ThreadedMotoServer on 127.0.0.1 for the session, for tests that
  drive the real console script in a subprocess. Reset between uses with `reset`.
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
    def __init__(self):
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def reset(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")).read()

    def clients(self) -> Clients:
        return Clients(region=REGION, endpoint_url=self.url)

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture(scope="session")
def moto_server():
    server = MotoServer()
    yield server
    server.stop()


# ---- running on several workers (pytest-xdist, `make test`) ---------------------------

# The session fixtures of tests/stack/conftest.py: each synthesizes an app (seconds of CPU
# in the jsii node process), once per worker that runs a test asking for it.
SYNTH_FIXTURES = {"synthesized", "org_synthesized", "foreign", "game_day_synthesized"}


def pytest_collection_modifyitems(config, items):
    """Groups for `--dist loadgroup`: a test file runs whole on one worker, so its module
    fixtures (the demo's replay, a module's fleet) are built once; the files that use a
    synthesized app share one group, so each app is synthesized once. Without xdist the
    mark does nothing."""
    synth_files = {item.path for item in items if SYNTH_FIXTURES & set(item.fixturenames)}
    for item in items:
        group = "cdk-synth" if item.path in synth_files else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
