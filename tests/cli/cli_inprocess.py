"""The `holdfast` command run in this process: `holdfast.cli.main(argv)` with stdin,
stdout and stderr of its own and the environment it would have been started with, and
the result a subprocess gives (exit code, stdout, stderr).

For tests about a command's behaviour. Starting the console script costs about half a
second of CPU each time (the interpreter, botocore, the command modules); the tests that
prove the console script itself works (its entry point, its exit code, a real terminal)
still start it: tests/cli/test_cli_output.py, test_confirmed_writes.py (the terminal),
test_resources_cli.py, test_drill_local.py, test_readme_examples.py,
tests/packaging/test_wheel.py.

What a subprocess would not share with the test is not shared here either: `main` builds
its parser, context, settings and clients anew on every call, and botocore reads the
proxy variables when a client is made, inside the call.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from unittest import mock


class _Input(io.StringIO):
    """stdin: what is typed, on a terminal or not."""

    def __init__(self, text: str, tty: bool):
        super().__init__(text)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


class _Output(io.StringIO):
    def isatty(self) -> bool:   # a pipe, as for a subprocess with captured output
        return False

    def fileno(self) -> int:    # as a pipe's would, without being one: BrokenPipe handling never runs here
        raise io.UnsupportedOperation("fileno")


def run(argv, *, env: dict[str, str] | None = None, answer: str | None = None) -> subprocess.CompletedProcess:
    """`holdfast *argv` as a subprocess with captured output would run it. `env`: variables
    set on top of this process's environment for the call. `answer`: typed on a terminal
    (stdin a terminal); else stdin is empty and no terminal, as /dev/null is."""
    from holdfast.cli import main

    argv = [str(a) for a in argv]
    stdin = _Input("" if answer is None else answer + "\n", tty=answer is not None)
    stdout, stderr = _Output(), _Output()
    # COLUMNS: argparse wraps help at the terminal's width, 80 where there is none (a subprocess's pipe).
    columns = os.environ.get("COLUMNS", "80")
    with mock.patch.dict(os.environ, {"COLUMNS": columns, **(env or {})}), \
            mock.patch.object(sys, "stdin", stdin), mock.patch.object(sys, "stdout", stdout), \
            mock.patch.object(sys, "stderr", stderr):
        try:
            code = main(argv)
        except SystemExit as done:   # argparse: --help, --version, a usage error
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return subprocess.CompletedProcess(["holdfast", *argv], code, stdout.getvalue(), stderr.getvalue())
