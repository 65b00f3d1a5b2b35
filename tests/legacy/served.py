"""``mrtr serve`` over HTTP in a subprocess, for the tests that drive it with real 2025 clients.

:func:`served` starts ``mrtr serve APP --port <free port> ...`` (any extra arguments:
``--workers 2``, say), waits until it answers, yields its URL and its log file, and
stops it. The log is the server's stderr: access lines, one per request, name how each
was answered.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import clean_env, stop
from ..interop.test_interop import SERVER_START_TIMEOUT, _answers, _free_port, _mrtr_command, _tail

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def served(app: str, log_path: Path, *args: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """The MCP endpoint of ``mrtr serve app --port P *args``, running until the block ends."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    environment = {**clean_env(), **(env or {})}
    with log_path.open("wb") as log:
        process = subprocess.Popen([_mrtr_command(), "serve", app, "--port", str(port), *args],
                                   cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   env=environment)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _answers(url):
            if process.poll() is not None:
                pytest.fail(f"`mrtr serve` exited with {process.returncode} before answering:\n"
                            f"{_tail(log_path.read_text(errors='replace'))}")
            if time.monotonic() > deadline:
                pytest.fail(f"`mrtr serve` did not answer at {url} within {SERVER_START_TIMEOUT} s:\n"
                            f"{_tail(log_path.read_text(errors='replace'))}")
            time.sleep(0.1)
        yield url
    finally:
        stop(process, timeout=15)
