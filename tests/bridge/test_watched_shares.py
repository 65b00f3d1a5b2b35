"""The shares of :class:`mrtr.bridge.watched.UpstreamWatch`, on its own: who holds what, undone exactly.

The upstream here is a stand-in that only records what the watch asks of it; the same
rules through real HTTP are in ``test_resource_updates.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mrtr.bridge.watched import UpstreamWatch
from mrtr.core.errors import InvalidParams


class _Upstream:
    """The part of the proxy's upstream the watch uses: a client that subscribes and unsubscribes."""

    def __init__(self) -> None:
        self.subscribed: set[str] = set()  # subscribing twice to one uri is one subscription, as upstream

    async def client(self) -> Any:
        return self

    async def subscribe(self, uri: str) -> None:
        self.subscribed.add(uri)

    async def unsubscribe(self, uri: str) -> None:
        self.subscribed.discard(uri)


async def test_a_holders_share_counts_its_listeners_and_comes_back_when_they_go():
    upstream = _Upstream()
    watch = UpstreamWatch(upstream, lambda uri: None, max_uris=10, max_per_client=2)
    async with watch.running():
        await watch.watch("a", "alice")
        await watch.watch("a", "alice")  # a second stream of hers naming the same uri: no more of her share
        await watch.watch("b", "alice")
        with pytest.raises(InvalidParams) as refused:
            await watch.watch("c", "alice")  # a third uri is past her share of two
        assert refused.value.data == {"uri": "c", "limit": 2, "bound": "client",
                                      "option": "max_upstream_subscriptions_per_client"}
        assert watch.counts == {"a": 2, "b": 1}  # the refusal left nothing behind
        assert watch.held == {"alice": {"a": 2, "b": 1}}
        await watch.watch("c", "bob")
        await watch.watch("d", None)  # a listener nobody can name counts only against the process
        watch.unwatch("a", "alice")
        with pytest.raises(InvalidParams):
            await watch.watch("c", "alice")  # one of her two listeners of "a" is still there
        watch.unwatch("a", "alice")
        await watch.watch("c", "alice")  # "a" given back: its place is hers again
        assert watch.held == {"alice": {"b": 1, "c": 1}, "bob": {"c": 1}}
        for uri, holder in (("b", "alice"), ("c", "alice"), ("c", "bob"), ("d", None)):
            watch.unwatch(uri, holder)
        assert watch.held == {} and watch.counts == {}
        with trio.fail_after(5):
            while upstream.subscribed:  # the unsubscriptions run in the background
                await trio.sleep(0)


async def test_a_refused_upstream_subscription_gives_the_share_back():
    class Refusing(_Upstream):
        async def subscribe(self, uri: str) -> None:
            raise RuntimeError("the upstream went away")

        def closing(self, client: Any, error: BaseException) -> InvalidParams:
            return InvalidParams(f"upstream unavailable: {error}")

    watch = UpstreamWatch(Refusing(), lambda uri: None, max_per_client=1)
    async with watch.running():
        with pytest.raises(InvalidParams):
            await watch.watch("a", "alice")
        assert watch.held == {} and watch.counts == {}


@pytest.mark.parametrize("keyword", ["max_uris", "max_per_client"])
@pytest.mark.parametrize("value", [0, -1, True, 2.5, "10"])
def test_the_bounds_are_positive_integers(keyword, value):
    with pytest.raises(ValueError, match=keyword):
        UpstreamWatch(_Upstream(), lambda uri: None, **{keyword: value})
