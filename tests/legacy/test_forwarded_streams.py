"""A 2025 session's GET stream relayed between workers ends with its client.

With ``--workers 2`` a GET that lands on the worker not holding the session is relayed to
its owner. When the client hangs up, the relay must close at once so the owner lets go of
the stream: a client that reconnects gets its stream back (200), not ``409 Conflict`` until
a keep-alive write fails. The kernel decides which worker takes a connection, so the test
repeats until the log shows GETs that were forwarded: the debug line of a relay closed because
its client went, or the access line of a forwarded GET answered whole (a forwarded GET whose
client hung up is "aborted" in the access log, so that line alone would be too rare a sign).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from ..interop.test_interop import _tail, served

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

APP = "tests.legacy.app:server"
FORWARDED_WANTED = 2
TRIALS = 400


def _exchange(port: int, method: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """One request on a connection of its own; the answer's first bytes; the client then hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        sock.sendall(f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{fields}Content-Length: {len(body)}\r\n\r\n"
                     .encode() + body)
        return sock.recv(65536)


def _session(port: int) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}}).encode()
    answer = _exchange(port, "POST", {"Content-Type": "application/json",
                                      "Accept": "application/json, text/event-stream"}, body)
    (session,) = [line.split(b":", 1)[1].strip().decode() for line in answer.split(b"\r\n")
                  if line.lower().startswith(b"mcp-session-id:")]
    _exchange(port, "POST", {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                             "Mcp-Session-Id": session},
              b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return session


def _status(port: int, session: str) -> bytes:
    return _exchange(port, "GET", {"Accept": "text/event-stream", "Mcp-Session-Id": session}).split(b" ", 2)[1]


def _forwarded_gets(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if ("mrtr.access" in line and "GET /mcp" in line and " forwarded" in line)
               or "a client went away from a forwarded request" in line)


def test_a_relayed_get_stream_is_released_when_its_client_goes(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with served(APP, log, "--workers", "2", "--log-level", "debug") as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        for _ in range(TRIALS):
            session = _session(port)
            assert _status(port, session) == b"200"  # opened, and the client hung up at once
            deadline = time.monotonic() + 3  # the next connection's GET finds the stream free
            while (status := _status(port, session)) == b"409":
                assert time.monotonic() < deadline, f"the stream was still held: {_tail(log.read_text())}"
                time.sleep(0.1)
            assert status == b"200", status
            if _forwarded_gets(log) >= FORWARDED_WANTED:
                break
    assert _forwarded_gets(log) >= FORWARDED_WANTED, "no GET was forwarded between the workers"
