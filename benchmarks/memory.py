"""Memory per idle keep-alive connection: what a client that connects and then waits costs a server.

``count`` clients each send one plain ``tools/call`` on a connection of their own, read
the answer and keep the connection open; the server's resident memory is read before
and while they all wait (inside the server's keep-alive timeout). Used by the HTTP part
(``mrtr serve`` with its defaults) and by the soak, at its start and at its end.
"""

from __future__ import annotations

import socket
from typing import Any

from .common import rss_kib
from .instructions import PLAIN


def idle_connections(port: int, pids: list[int], count: int) -> dict[str, Any]:
    """RSS of ``pids`` (summed: workers share the connections) before and with ``count`` idle
    keep-alive connections, and the KiB each costs."""
    before = sum(rss_kib(pid) for pid in pids)
    request = PLAIN.replace(b"%d", str(port).encode(), 1)
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.append(sock)
            sock.sendall(request)
            answer = b""
            while b'"resultType":"complete"' not in answer:
                data = sock.recv(65536)
                if not data:
                    raise RuntimeError(f"the server closed a connection: {answer[:200]!r}")
                answer += data
        with_idle = sum(rss_kib(pid) for pid in pids)
    finally:
        for sock in held:
            sock.close()
    return {"connections": count, "rss_before_kib": before, "rss_idle_kib": with_idle,
            "kib_per_connection": (with_idle - before) / count}
