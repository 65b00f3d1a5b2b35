"""Fixtures for the proxy tests: an upstream, the proxy in front of it, a downstream client; all on loopback.

``bridge(upstream_era, downstream_era)`` serves ``tests.bridge.upstream_app:server`` on a
loopback port (the native HTTP server, in the test's nursery), puts ``mrtr.proxy`` of it
(speaking the upstream era chosen) behind another port, and returns a Client for the
proxy speaking the downstream era chosen, its traffic checked against the schema of its
era (:class:`tests.client.conftest.Checked`). Nothing starts a process: these run in the
quick tier.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr.transports.http.native import serve

from ..client.conftest import Checked
from .upstream_app import server as upstream_server


@dataclass
class Bridge:
    """What one test's bridge is: the upstream's and the proxy's URLs and the proxy server."""

    upstream_url: str
    url: str
    proxy: Any

    def client(self, era: str, **options: Any) -> mrtr.Client:
        client = mrtr.Client(self.url, era=era, **options)
        client.target = Checked(client.target)
        return client


@pytest.fixture
async def bridge(nursery: trio.Nursery) -> Any:
    """``await bridge(upstream_era, **proxy_options)``: a served upstream and a served proxy of it.

    The upstream server object lives for the whole run: the 2025 sessions the proxies opened
    in it are ended after each test (a proxy stopped with its test may not have said goodbye).
    """

    served: list[Any] = [upstream_server]

    async def make(upstream_era: str = "auto", upstream: Any = None, **options: Any) -> Bridge:
        if upstream is not None and upstream not in served:
            served.append(upstream)
        port = await nursery.start(partial(serve, upstream or upstream_server, "127.0.0.1", 0))
        upstream_url = f"http://127.0.0.1:{port}/mcp"
        proxied = mrtr.proxy(upstream_url, upstream_era=upstream_era, secret=b"p" * 32, store_url="memory:", **options)
        proxy_port = await nursery.start(partial(serve, proxied, "127.0.0.1", 0))
        return Bridge(upstream_url, f"http://127.0.0.1:{proxy_port}/mcp", proxied)

    yield make
    for server in served:
        legacy = server.legacy
        if legacy is not None:
            legacy.sessions.close("the test is over")
