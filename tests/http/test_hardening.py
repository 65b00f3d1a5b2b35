"""Hostile load on the native server: a client that never reads, and many silent sockets.

The flood runs against a server in its own process so its memory can be measured from
``/proc``; the silent-socket test runs in process.
"""

from __future__ import annotations

import os
from functools import partial

import pytest
import trio

from mrtr.transports.http.native import serve

from .app import server as app_server
from .conftest import raw_post, rpc
from .test_native import RawClient
from .test_workers import listening_socket, start_process


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RSS from /proc")
async def test_a_pipelining_flood_that_never_reads_keeps_the_server_memory_bounded():
    sock = listening_socket()
    port = sock.getsockname()[1]
    code = ("from tests.http.app import server; from mrtr.transports.http.workers import run; "
            "run(server, sock=sock, shutdown_grace=1, write_timeout=60)")
    process = await start_process(code, sock)
    try:
        probe = None
        with trio.fail_after(20):
            while probe is None:
                try:
                    probe = await RawClient.connect(port)
                except OSError:
                    await trio.sleep(0.05)
            response, _ = await probe.request(rpc("tools/call", {"name": "pid"}), port)
            assert response.status_code == 200
        before = rss_bytes(process.pid)
        batch = raw_post(rpc("tools/call", {"name": "pid"}), port) * 1000
        flood = await trio.open_tcp_stream("127.0.0.1", port)
        sent = 0
        with trio.move_on_after(3):  # send until the server stops taking bytes (or 3 s pass)
            while sent < 300 * 1024 * 1024:
                await flood.send_all(batch)
                sent += len(batch)
        after = rss_bytes(process.pid)
        # the server took what fits in one read plus the kernel buffers, then stopped reading
        assert sent < 300 * 1024 * 1024, "the server read everything it was sent"
        assert after - before < 40 * 1024 * 1024, (before, after, sent)
        # and it still answers everyone else
        response, _ = await probe.request(rpc("tools/call", {"name": "pid"}, id=2), port) \
            if probe.conn.start_next_cycle() is None else (None, None)
        assert response is not None and response.status_code == 200
        await flood.aclose()
    finally:
        process.terminate()
        with trio.fail_after(10):
            await process.wait()


async def test_a_normal_client_is_served_while_many_silent_sockets_are_open(nursery):
    shutdown = trio.Event()
    port = await nursery.start(partial(serve, app_server, "127.0.0.1", 0, shutdown_event=shutdown,
                                       max_connections=50, max_connections_per_client=None,
                                       first_byte_timeout=30))
    silent = []
    try:
        for _ in range(300):
            silent.append(await trio.open_tcp_stream("127.0.0.1", port))
        for number in range(20):
            client = await RawClient.connect(port)
            response, _ = await client.request(rpc("tools/call", {"name": "pid"}, id=number), port)
            assert response.status_code == 200
            await client.stream.aclose()
            silent.append(await trio.open_tcp_stream("127.0.0.1", port))  # and more keep arriving
    finally:
        for stream in silent:
            await stream.aclose()
        shutdown.set()
