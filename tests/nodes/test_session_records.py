"""The pieces 2025-era sessions across nodes are made of: records in a real Redis, a node's own channel, ids.

What the balancer tests (``test_sessions.py``) prove end to end is built from these: a
record written once per id, read with its expiry moved, never revived once gone and
bounded in size; a message to a node nobody listens for reported as unheard; request
and event ids that name the node holding a call, and nothing else parsed as such.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from mrtr.carriers.tasks.bus import MAX_ENVELOPE_BYTES, NodeBus
from mrtr.carriers.tasks.redis import connected
from mrtr.carriers.tasks.sessions import MAX_SESSION_RECORD_BYTES, SessionRecords
from mrtr.carriers.tasks.store import StoreUnavailable
from mrtr.transports.http.streams import EventStream, event_origin, parse_event_id
from mrtr.transports.pending import PendingRequests

from ..conftest import until


def _url(redis_url: str) -> str:
    return redis_url + f"?prefix=t{uuid.uuid4().hex[:8]}:"


@pytest.mark.slow
async def test_a_record_is_written_once_read_with_its_expiry_moved_and_never_revived(redis_url: str) -> None:
    async with connected(_url(redis_url)) as (client, target):
        records = SessionRecords(client, target.layout, target.url)
        key = target.layout.session("0.abc")
        assert await records.create("0.abc", {"v": 1, "version": "2025-11-25"}, ttl=5)
        assert not await records.create("0.abc", {"v": 1, "version": "other"}, ttl=5)  # an id is never taken twice
        assert await client.pttl(key) <= 5000
        assert (await records.load("0.abc", ttl=60))["version"] == "2025-11-25"
        assert 5000 < await client.pttl(key) <= 60_000  # reading it moved its expiry
        assert await records.save("0.abc", {"v": 1, "version": "2025-11-25", "level": "info"}, ttl=60)
        assert (await records.load("0.abc", ttl=60))["level"] == "info"
        assert await records.delete("0.abc")
        assert await records.load("0.abc", ttl=60) is None
        assert not await records.save("0.abc", {"v": 1}, ttl=60)  # gone stays gone
        assert await client.exists([key]) == 0
        with pytest.raises(ValueError):
            await records.create("0.big", {"v": 1, "info": "x" * MAX_SESSION_RECORD_BYTES}, ttl=5)
        await client.set(target.layout.session("0.junk"), b"\xff not json")
        assert await records.load("0.junk", ttl=5) is None


@pytest.mark.slow
async def test_a_record_store_that_cannot_be_reached_is_store_unavailable(redis_url: str) -> None:
    from mrtr.carriers.tasks.redis_url import parse_redis_url

    class Broken:
        async def _fail(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("connection refused")

        def getex(self, *args: Any, **kwargs: Any) -> Any:
            return self._fail()

    target = parse_redis_url(redis_url)
    records = SessionRecords(Broken(), target.layout, "redis://:hunter2@127.0.0.1:1/0")
    with pytest.raises(StoreUnavailable) as raised:
        await records.load("0.abc", ttl=5)
    assert "hunter2" not in str(raised.value) and raised.value.message == StoreUnavailable.CLIENT_MESSAGE


@pytest.mark.slow
async def test_a_message_to_a_node_nobody_listens_for_is_unheard(redis_url: str, nursery: trio.Nursery) -> None:
    async with connected(_url(redis_url)) as (client, target):
        heard: list[Any] = []
        bus = NodeBus(client, target.layout.notifications, url=target.url, deliver=lambda *_: None,
                      lost=lambda: None, layout=target.layout)
        bus.handle("answer", heard.append)
        await nursery.start(bus.serve)
        other = NodeBus(client, target.layout.notifications, url=target.url, deliver=lambda *_: None,
                        lost=lambda: None, layout=target.layout)
        assert bus.node_id != other.node_id and bus.node_id.isdigit() and len(bus.node_id) == 12
        # Sent from a node that is not subscribed itself: only its target hears, on its own channel.
        assert await other.send_to(bus.node_id, "answer", ["s", {"id": "1.1"}])
        await until(lambda: heard == [["s", {"id": "1.1"}]])
        assert not await other.send_to("999999999999", "answer", ["s", {}])  # nobody there: the node is gone
        with pytest.raises(ValueError):
            await other.send_to(bus.node_id, "answer", "x" * MAX_ENVELOPE_BYTES)


def test_event_ids_name_the_node_and_the_request_only_when_they_do() -> None:
    assert parse_event_id("3-4") == (3, 4) and event_origin("3-4") is None
    stream = EventStream(3, b"123456789012.MQ.AAAAAAAAAAAAAAAA.")
    minted = stream.event_id(4).decode()
    assert parse_event_id(minted) == (3, 4) and event_origin(minted) == ("123456789012", "MQ", "AAAAAAAAAAAAAAAA")
    assert event_origin("123456789012..0-2") == ("123456789012", "", "")
    assert event_origin("123456789012.MQ.3-4") == ("123456789012", "MQ", "")  # unmarked: the caller refuses it
    for foreign in ("abc.MQ.3-4", "3-x", "x" * 500 + ".3-4", "", "1.2", "1.a.b.c.3-4"):
        assert event_origin(foreign) is None


async def test_a_nodes_request_ids_name_it() -> None:
    sent: list[bytes] = []
    pending = PendingRequests(sent.append, "123456789012.")
    pending.mark_ready()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: pending.request_all([("roots/list", {})], timeout=5))
        await until(lambda: sent)
        assert b'"id":"123456789012.1"' in sent[0]
        assert pending.answer({"jsonrpc": "2.0", "id": "123456789012.1", "result": {"roots": []}})
