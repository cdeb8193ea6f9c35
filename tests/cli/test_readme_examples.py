"""The CLI page's examples and the README's quick start commands, run as they are written
against `make serve` (holdfast_demo.serve in a subprocess, on a free port), which must
start, answer and stop cleanly.

The examples are the lines of docs/cli.md's block between `<!-- readme-examples:start -->`
and `<!-- readme-examples:end -->`; the quick start's commands are the inline
`holdfast ...` spans of README.md's "Quick start". Each runs in bash with the `export`
lines the server printed, and must exit 0.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text()
BIN = Path(sys.executable).parent
START_SECONDS = 240   # the server builds its fleet through the APIs first


def example_lines() -> list[str]:
    block = CLI_PAGE.split("<!-- readme-examples:start -->", 1)[1].split("<!-- readme-examples:end -->", 1)[0]
    body = block.split("```", 2)[1]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in body.splitlines() if line.strip()]


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return list(dict.fromkeys(re.findall(r"`(holdfast [^`]+)`", section)))


def start_server() -> tuple[subprocess.Popen, dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "dev"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "holdfast_demo.serve", "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(proc.stdout.readline, "")], daemon=True).start()
    printed, deadline = [], time.monotonic() + START_SECONDS
    while not printed or printed[-1] != "# Ctrl-C stops it.":
        try:
            printed.append(lines.get(timeout=max(0.1, deadline - time.monotonic())).rstrip("\n"))
        except queue.Empty:
            os.killpg(proc.pid, signal.SIGKILL)   # never leave a server behind a failed test
            raise AssertionError(f"the server printed no ready line in {START_SECONDS} s (exit {proc.poll()}): {printed}")
    return proc, {"printed": "\n".join(printed), "lines": lines}


def shell_env(printed: str) -> dict[str, str]:
    """The environment after the server's `export` and `unset` lines, as a shell would have it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    for line in printed.splitlines():
        if line.startswith("export "):
            for pair in line.removeprefix("export ").split():
                key, value = pair.split("=", 1)
                env[key] = value
        elif line.startswith("unset "):
            for key in line.removeprefix("unset ").split():
                env.pop(key, None)
    return env


def test_serve_deploys_what_the_doctor_looks_for():
    from holdfast import readiness
    from holdfast_demo import serve

    assert (serve.POWERTOOLS_LAYER_PARAMETER, serve.RECONCILER_HANDLER) == \
        (readiness.POWERTOOLS_LAYER_PARAMETER, readiness.RECONCILER_HANDLER)


def test_the_readme_examples_and_quick_start_run_against_make_serve(tmp_path):
    lines, quick = example_lines(), quick_start_commands()
    assert len(lines) >= 8 and {"holdfast doctor", "holdfast plan", "holdfast drill --yes"} <= set(quick), (lines, quick)

    # GIVEN `make serve`, started
    proc, got = start_server()
    try:
        env = shell_env(got["printed"])
        url = env["AWS_ENDPOINT_URL"]
        assert urlparse(url).hostname == "127.0.0.1" and env["AWS_REGION"] == "us-east-1"

        # WHEN each example runs as written THEN it exits 0
        said = {}
        for line in lines + quick:
            run = subprocess.run(["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, (line, run.stdout[-2000:], run.stderr[-2000:])
            said.setdefault(line, run.stdout)
        assert "ReplaceUnhealthy suspended" in said["holdfast plan"]
        assert "held by hand:" in said["holdfast status"]
        assert '"resources": []' in said["holdfast --json status"]      # resume --now put everything back
        # async-destinations, concurrency and retained-ledgers among them, and region-switch (not checked: the
        # local endpoint has no Region switch)
        assert "13 checks, 0 failed" in said["holdfast doctor"]
        drilled = said["holdfast drill --yes"]
        assert drilled.startswith("drill PASSED") and "restore:" in drilled
        # The sample's target group has no target-health datapoints: the routing gate passed on
        # nothing judged, which the report marks; and its times are the drill clock's.
        assert "gate without evidence: routing" in drilled and "times are on the drill clock" in drilled
        report = (tmp_path / "out" / "drill-report.md").read_text()
        assert "**NO EVIDENCE**: 0 target groups judged" in report and "| time (drill clock) |" in report
    finally:
        # THEN Ctrl-C stops it cleanly: exit 0, said so, and the port closed
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    rest = []
    while not got["lines"].empty():
        rest.append(got["lines"].get().rstrip("\n"))
    assert proc.returncode == 0 and rest[-1:] == ["# stopped"], rest
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", urlparse(url).port)) != 0
