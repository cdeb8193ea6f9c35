"""`make serve` (holdfast_demo.serve) on a port that is taken exits 1 within seconds with a
line naming the port and how to choose another; SIGTERM and SIGINT stop it within
seconds, once it serves and while it is still building its fleet. Each wait is bounded
and polls the process; a server left behind a failed test is killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_readme_examples import START_SECONDS, start_server

ROOT = Path(__file__).resolve().parents[2]


def module(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "dev"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "holdfast_demo.serve", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def finished_within(proc: subprocess.Popen, seconds: float) -> float | None:
    """Seconds until `proc` exited, polled; None (and the process killed) when it did not."""
    began = time.monotonic()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    return time.monotonic() - began


@pytest.fixture
def taken_port():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_taken_port_is_exit_1_within_10_seconds_naming_the_port_and_how_to_choose_another(taken_port):
    proc = module("--port", str(taken_port))
    assert finished_within(proc, 10) is not None, "still running on a taken port"
    err = proc.stderr.read()
    assert proc.returncode == 1, err
    line, = err.strip().splitlines()
    assert f"port {taken_port} on 127.0.0.1 is in use" in line
    assert f"PORT={taken_port + 1} make serve" in line and f"--port {taken_port + 1}" in line


def test_make_serve_passes_PORT_to_the_module():
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "serve", "PORT=5077"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert dry.returncode == 0 and "-m holdfast_demo.serve --port 5077" in dry.stdout, dry.stdout + dry.stderr


def test_sigterm_stops_a_serving_server_within_5_seconds():
    proc, started = start_server()
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        took = finished_within(proc, 5)
        assert took is not None, "SIGTERM did not stop it within 5 s"
        printed = []   # the reader thread of start_server holds stdout: its queue, to the end
        while not printed or printed[-1] != "# stopped\n":
            printed.append(started["lines"].get(timeout=5))
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_it_builds_its_fleet_stops_it_within_5_seconds(signum):
    proc = module("--port", "0")
    # Once its handlers are in place (the first API call of the set-up comes after them),
    # and long before the fleet is built.
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and proc.poll() is None and not _listening(proc.pid):
        time.sleep(0.05)
    assert proc.poll() is None
    os.killpg(proc.pid, signum)
    assert finished_within(proc, 5) is not None, f"signal {signum} during the set-up did not stop it within 5 s"
    assert proc.returncode == 0 and proc.stdout.read().rstrip().endswith("# stopped")


def _listening(pid: int) -> bool:
    """The process has a listening TCP socket (its moto server is up): /proc/net/tcp's
    state 0A is LISTEN, matched to the process's socket inodes."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")}
        rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    except OSError:
        return False
    return any(row[3] == "0A" and row[9] in inodes for row in rows)
