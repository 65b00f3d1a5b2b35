"""A real redis-server on a free loopback port, started and stopped by the tests themselves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ..conftest import stop

__all__ = ["redis_server", "free_port"]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def redis_server(port: int | None = None, workdir: str | None = None, *,
                 persist: bool = False) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start redis-server and yield its URL and process; stop it after.

    Without ``persist`` nothing is written to disk; with it, every write is in an
    append-only file in ``workdir`` before Redis acknowledges it, so a restart on the same
    ``port`` and ``workdir`` finds the data again.

    Without a redis-server binary the test is skipped, except in CI (``CI=true``), where
    Redis is part of what must be tested and a missing binary is a failure.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed; .ci/run installs it (apt-get install redis-server)")
        pytest.skip("redis-server is not installed")
    port = port or free_port()
    owned = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="mrtr-redis-")
    durability = ["--appendonly", "yes", "--appendfsync", "always"] if persist else ["--appendonly", "no"]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", *durability, "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0", process
    finally:
        stop(process, timeout=5)
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)
