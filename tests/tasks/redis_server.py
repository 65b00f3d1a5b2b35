"""A real redis-server on a free loopback port, started and stopped by the tests themselves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

__all__ = ["redis_server", "free_port", "redis_cli"]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def redis_server(port: int | None = None, workdir: str | None = None, *,
                 persist: bool = False, password: str | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start redis-server and yield its URL and process; stop it after.

    Without ``persist`` nothing is written to disk; with it, every write is in an
    append-only file in ``workdir`` before Redis acknowledges it, so a restart on the same
    ``port`` and ``workdir`` finds the data again. With ``password`` Redis requires it
    (``requirepass``) and the URL carries it (``redis://:password@host:port/0``).

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
    auth = [] if password is None else ["--requirepass", password]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", *durability, "--dir", workdir, *auth],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(64).startswith((b"+PONG", b"-NOAUTH")):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        userinfo = "" if password is None else f":{password}@"
        yield f"redis://{userinfo}127.0.0.1:{port}/0", process
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)


def redis_cli(url: str, *command: str) -> str:
    """Run one command against the Redis at ``url`` with redis-cli (the operator's tool) and return its reply."""
    parts = urllib.parse.urlsplit(url)
    auth = [] if parts.password is None else ["-a", parts.password, "--no-auth-warning"]
    done = subprocess.run(
        ["redis-cli", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port), *auth, *command],
        capture_output=True, text=True, timeout=10, check=True,
    )
    return done.stdout.strip()
