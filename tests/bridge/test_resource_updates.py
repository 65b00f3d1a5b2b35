"""Resource subscriptions cross the proxy: a downstream subscribe reaches the upstream, its updates come back.

The upstream is ``tests.client.watched_app:server`` (its ``touch`` tool changes a note and
says so), served on loopback HTTP in this process, behind ``mrtr.proxy``; the downstream
clients speak either era, every message checked against the schema of its era. The
upstream's own resource watcher (:meth:`mrtr.Server.watch_resources`) counts the
listeners it has, which are the proxy's: one per uri however many downstream clients
subscribed.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from functools import partial

import pytest

import mrtr
from mrtr.transports.http.native import serve

from ..client.conftest import REPO, Checked
from ..client.watched_app import server as watched_server
from ..conftest import clean_env, until
from .test_directions import DIRECTIONS


class Counted:
    """The upstream's resource watcher: how many listeners want each uri now."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()

    async def watch(self, uri: str, holder: str | None) -> None:
        self.now[uri] += 1

    def unwatch(self, uri: str, holder: str | None) -> None:
        self.now[uri] -= 1


@pytest.fixture
def upstream_listeners() -> Iterator[Counted]:
    counted = Counted()
    watched_server.watch_resources(counted)
    try:
        yield counted
    finally:
        watched_server.watch_resources(None)


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_updates_reach_each_subscribed_client_through_one_upstream_subscription(bridge, downstream, upstream,
                                                                                      upstream_listeners):
    served = await bridge(upstream, upstream=watched_server)
    heard: dict[str, list[str]] = {"first": [], "second": [], "other": []}
    async with served.client(downstream, on_resource_updated=heard["first"].append) as first, \
            served.client(downstream, on_resource_updated=heard["second"].append) as second, \
            served.client(downstream, on_resource_updated=heard["other"].append) as other:
        await first.subscribe("notes://a")
        await second.subscribe("notes://a")
        await other.subscribe("notes://b")
        # One listener upstream per uri (a modern client's stream replaced as its set grew goes a moment later).
        await until(lambda: upstream_listeners.now["notes://a"] == 1 and upstream_listeners.now["notes://b"] == 1)
        await first.call_tool("touch", {"uri": "notes://a", "text": "new a"})
        await until(lambda: heard["first"] == ["notes://a"] and heard["second"] == ["notes://a"])
        assert (await second.read_resource("notes://a")).text == "new a"

        await first.unsubscribe("notes://a")
        assert upstream_listeners.now["notes://a"] == 1  # the second client still wants it
        await second.unsubscribe("notes://a")
        await until(lambda: upstream_listeners.now["notes://a"] == 0)  # the last one gone: unsubscribed upstream
        await first.call_tool("touch", {"uri": "notes://a"})
        await first.call_tool("touch", {"uri": "notes://b"})  # sent after the one above: heard, it is not
        await until(lambda: heard["other"] == ["notes://b"])
    assert heard["first"] == heard["second"] == ["notes://a"]


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_a_client_that_goes_away_ends_its_share(bridge, downstream, upstream_listeners):
    served = await bridge("modern", upstream=watched_server)
    async with served.client(downstream, on_resource_updated=lambda uri: None) as client:
        await client.subscribe("notes://b")
        assert upstream_listeners.now["notes://b"] == 1
    await until(lambda: upstream_listeners.now["notes://b"] == 0)


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_upstream_subscriptions_are_bounded(bridge, downstream, upstream_listeners):
    served = await bridge("modern", upstream=watched_server, max_upstream_subscriptions=1)
    async with served.client(downstream, on_resource_updated=lambda uri: None) as client:
        await client.subscribe("notes://a")
        with pytest.raises(mrtr.ClientError) as refused:
            await client.subscribe("notes://b")
        assert refused.value.code == -32602 and "at most 1 resources upstream" in refused.value.message
        assert client.subscribed == ["notes://a"] and upstream_listeners.now["notes://b"] == 0
        await client.unsubscribe("notes://a")
        await until(lambda: upstream_listeners.now["notes://a"] == 0)
        await client.subscribe("notes://b")  # the share freed is usable again
        assert upstream_listeners.now["notes://b"] == 1


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_a_mounted_proxy_hears_of_its_own_uris(nursery, downstream, upstream_listeners):
    port = await nursery.start(partial(serve, watched_server, "127.0.0.1", 0))
    parent = mrtr.Server("parent", secret=b"m" * 32, store_url="memory:")
    parent.mount(mrtr.proxy(f"http://127.0.0.1:{port}/mcp", secret=b"q" * 32), "p")
    parent_port = await nursery.start(partial(serve, parent, "127.0.0.1", 0))
    heard: list[str] = []
    client = mrtr.Client(f"http://127.0.0.1:{parent_port}/mcp", era=downstream, on_resource_updated=heard.append)
    client.target = Checked(client.target)
    try:
        async with client:
            await client.subscribe("notes://p/a")
            assert upstream_listeners.now == Counter({"notes://a": 1})  # in the proxy's (the upstream's) names
            await client.call_tool("p_touch", {"uri": "notes://a"})
            await until(lambda: heard == ["notes://p/a"])
    finally:
        legacy = watched_server.legacy
        if legacy is not None:
            legacy.sessions.close("the test is over")


@pytest.mark.slow  # starts processes: mrtr proxy --stdio, and the stdio upstream it starts
@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_a_restarted_upstream_is_subscribed_again_and_each_resource_reported(downstream):
    upstream = [sys.executable, "-m", "mrtr", "serve", "tests.client.watched_app:server", "--stdio",
                "--log-level", "warning"]
    command = [sys.executable, "-m", "mrtr", "proxy", "--stdio", "--log-level", "warning", "--store", "memory:",
               "--", *upstream]
    heard: list[str] = []
    client = mrtr.Client.stdio(command, cwd=str(REPO), stderr=subprocess.DEVNULL, era=downstream, env=clean_env(),
                               on_resource_updated=heard.append)
    client.target = Checked(client.target)
    async with client:
        await client.subscribe("notes://a")
        with pytest.raises(mrtr.ClientError):
            await client.call_tool("crash")
        # Started again, the upstream knows nothing of the proxy's subscription: made again, and reported.
        await until(lambda: heard == ["notes://a"], timeout=30)
        await client.call_tool("touch", {"uri": "notes://a", "text": "after"})
        await until(lambda: heard == ["notes://a", "notes://a"])
        assert (await client.read_resource("notes://a")).text == "after"


def _user(info: mrtr.server.catalog.RequestInfo) -> str | None:
    """The proxy's principal: the ``x-user`` header (each test client names its own)."""
    return info.headers.get("x-user")


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_one_client_cannot_take_every_upstream_subscription(bridge, downstream, upstream_listeners):
    served = await bridge("modern", upstream=watched_server, max_upstream_subscriptions=3,
                          max_upstream_subscriptions_per_client=2, principal=_user)
    quiet = {"on_resource_updated": lambda uri: None}
    async with served.client(downstream, headers={"x-user": "greedy"}, **quiet) as greedy, \
            served.client(downstream, headers={"x-user": "other"}, **quiet) as other:
        await greedy.subscribe("notes://a")
        await greedy.subscribe("notes://b")
        with pytest.raises(mrtr.ClientError) as refused:
            await greedy.subscribe("notes://c")  # its share spent: the third uri is left for the others
        assert refused.value.code == -32602 and "one client holds at most 2" in refused.value.message
        assert refused.value.data["bound"] == "client"
        assert refused.value.data["option"] == "max_upstream_subscriptions_per_client"
        assert greedy.subscribed == ["notes://a", "notes://b"] and upstream_listeners.now["notes://c"] == 0
        await other.subscribe("notes://c")  # another client still gets the last uri the proxy may hold
        await until(lambda: upstream_listeners.now["notes://c"] == 1)
        with pytest.raises(mrtr.ClientError) as full:
            await other.subscribe("notes://d")  # within its share, but the proxy's bound is reached
        assert full.value.data["bound"] == "process" and full.value.data["option"] == "max_upstream_subscriptions"
        await other.subscribe("notes://a")  # a uri already held upstream takes none of the proxy's bound
        await greedy.unsubscribe("notes://b")
        await greedy.subscribe("notes://b")  # a share given back is usable again
