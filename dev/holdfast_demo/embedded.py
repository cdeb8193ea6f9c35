"""An embedded AWS for the demo: moto's server on 127.0.0.1, in this process, with
AWS's semantics where moto departs from them (holdfast_fixtures.moto_patches).

Credentials are fixed dummies, so the demo can never reach a real account whatever
the shell's environment holds.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from holdfast_fixtures.moto_patches import aws_semantics

REGION = "us-east-1"


@contextmanager
def moto_server(*, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """A moto server on `host` (127.0.0.1) and `port` (0: a free one), with AWS's semantics,
    and empty; yields its URL.

    moto's backends are global to the process: a server started in a process that ran
    other moto work (a test suite) would see its tables, plans and functions. The demo's
    AWS is its own, so every backend is reset before the first call and after the last."""
    from moto.moto_api import _internal
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    _internal.moto_api_backend.reset()
    try:
        with aws_semantics():
            host, port = server.get_host_and_port()
            yield f"http://{host}:{port}"
    finally:
        server.stop()
        _internal.moto_api_backend.reset()


def session():
    """A boto3 session with dummy credentials: the embedded AWS accepts any."""
    import boto3

    return boto3.session.Session(aws_access_key_id="demo", aws_secret_access_key="demo", region_name=REGION)
