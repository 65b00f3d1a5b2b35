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
        assert (await records.create("0.abc", {"v": 1, "version": "2025-11-25"}, ttl=5)).stored
        taken = await records.create("0.abc", {"v": 1, "version": "other"}, ttl=5)  # an id is never taken twice
        assert not taken.stored and taken.refused == "taken"
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


async def keys_of(client: Any, layout: Any) -> set[str]:
    """Every key of this test's prefix."""
    found = await client.keys(layout.prefix + "*")
    return {key.decode() if isinstance(key, bytes) else key for key in found}


@pytest.mark.slow
async def test_a_clients_bound_is_counted_in_redis_and_its_least_recently_active_idle_session_makes_room(
        redis_url: str) -> None:
    async with connected(_url(redis_url)) as (client, target):
        records, layout = SessionRecords(client, target.layout, target.url), target.layout
        record = {"v": 1, "version": "2025-11-25"}
        for name in ("a1", "a2", "a3"):
            admitted = await records.create(f"0.{name}", record, ttl=60, client="10.0.0.1", max_per_client=3,
                                            max_sessions=10)
            assert admitted.stored and admitted.ended == []
        await records.load("0.a1", ttl=60)  # a1 is used again: a2 is now the least recently active
        fourth = await records.create("0.a4", record, ttl=60, client="10.0.0.1", max_per_client=3, max_sessions=10)
        assert fourth.stored and fourth.ended == [("0.a2", "client")]
        assert await records.load("0.a2", ttl=60) is None  # gone from Redis with its entries
        assert not await records.save("0.a2", record, ttl=60)
        tag = records.client_tag("10.0.0.1")
        assert {member.decode() for member in await client.smembers(layout.sessions_of(tag))} == {
            "0.a1", "0.a3", "0.a4"}
        assert await client.zscore(layout.sessions_live(), "0.a2") is None
        assert await client.hget(layout.sessions_owners(), "0.a2") is None
        # Another client is counted apart.
        other = await records.create("0.b1", record, ttl=60, client="10.0.0.2", max_per_client=3, max_sessions=10)
        assert other.stored and other.ended == []
        # A busy session (a call in flight on any node) never makes room; all busy: refused, nothing ended.
        for name in ("a1", "a3", "a4"):
            assert await records.begin(f"0.{name}", ttl=60)
        refused = await records.create("0.a5", record, ttl=60, client="10.0.0.1", max_per_client=3, max_sessions=10)
        assert not refused.stored and refused.refused == "client" and refused.ended == []
        assert await records.load("0.a5", ttl=60) is None
        await records.finish("0.a3", ttl=60)  # a3's call ended: a3 is idle again, the only one
        made_room = await records.create("0.a5", record, ttl=60, client="10.0.0.1", max_per_client=3,
                                         max_sessions=10)
        assert made_room.stored and made_room.ended == [("0.a3", "client")]
        assert await client.hget(layout.sessions_busy(), "0.a1") == b"1"
        await records.finish("0.a1", ttl=60)
        assert await client.hget(layout.sessions_busy(), "0.a1") is None  # nothing left behind at zero
        # DELETE takes the record and every entry.
        assert await records.delete("0.a1")
        assert "0.a1" not in {member.decode() for member in await client.smembers(layout.sessions_of(tag))}
        assert await client.zscore(layout.sessions_live(), "0.a1") is None


@pytest.mark.slow
async def test_the_servers_bound_holds_across_clients_and_expired_records_leave_no_entries(redis_url: str) -> None:
    async with connected(_url(redis_url)) as (client, target):
        records, layout = SessionRecords(client, target.layout, target.url), target.layout
        record = {"v": 1, "version": "2025-11-25"}
        for number in range(4):
            admitted = await records.create(f"0.c{number}", record, ttl=60, client=f"10.0.1.{number}",
                                            max_per_client=2, max_sessions=4)
            assert admitted.stored
        assert await records.begin("0.c0", ttl=60)  # the oldest is busy: the next oldest idle one makes room
        fifth = await records.create("0.c4", record, ttl=60, client="10.0.1.9", max_per_client=2, max_sessions=4)
        assert fifth.stored and fifth.ended == [("0.c1", "process")]
        assert await client.zcard(layout.sessions_live()) == 4
        for name in ("c2", "c3", "c4"):
            assert await records.begin(f"0.{name}", ttl=60)
        full = await records.create("0.c5", record, ttl=60, client="10.0.1.8", max_per_client=2, max_sessions=4)
        assert not full.stored and full.refused == "process"
        # A record Redis expired is forgotten by the next initialize, its entries with it, and reported.
        assert (await records.create("0.short", record, ttl=0.2, client="10.0.2.1", max_per_client=2,
                                     max_sessions=100)).stored
        await until(lambda: client.exists([layout.session("0.short")]), lambda found: found == 0)
        later = await records.create("0.next", record, ttl=0.2, client="10.0.2.2", max_per_client=2,
                                     max_sessions=100)  # another client's: the sweep finds it all the same
        assert later.stored and ("0.short", "expired") in later.ended
        assert await client.hget(layout.sessions_owners(), "0.short") is None
        assert await client.zscore(layout.sessions_live(), "0.short") is None


@pytest.mark.slow
async def test_one_clients_records_in_redis_are_bounded_and_measured(redis_url: str) -> None:
    """1,500 ``initialize`` with 15 KiB declarations from one client keep its bound of records, no more.

    And what one record costs Redis (``MEMORY USAGE``), for docs/operations.md.
    """
    async with connected(_url(redis_url)) as (client, target):
        records, layout = SessionRecords(client, target.layout, target.url), target.layout
        small = {"v": 1, "version": "2025-11-25", "capabilities": {"elicitation": {"form": {}}, "roots": {}},
                 "info": {"name": "claude-ai", "version": "0.1.0"}, "principal": None, "client": "10.0.3.1",
                 "level": None, "subscriptions": [], "initialized": True}
        assert (await records.create("0.measured", small, ttl=1800, client="10.0.3.1", max_per_client=100,
                                     max_sessions=10_000)).stored
        usage = await client.memory_usage(layout.session("0.measured"))
        large = {**small, "info": {"name": "flood", "version": "1", "pad": "x" * 15 * 1024}}
        for number in range(1500):
            admitted = await records.create(f"0.flood{number}", large, ttl=1800, client="10.0.3.2",
                                            max_per_client=100, max_sessions=10_000)
            assert admitted.stored
        tag = records.client_tag("10.0.3.2")
        assert await client.scard(layout.sessions_of(tag)) == 100
        flood = [key for key in await keys_of(client, layout) if key.startswith(layout.session("0.flood"))]
        assert len(flood) == 100
        print(f"\nMEMORY USAGE of a session record: {usage} bytes (a typical declaration); "
              f"{await client.memory_usage(flood[0])} bytes with a 15 KiB one; "
              f"indexes: live {await client.memory_usage(layout.sessions_live())}, "
              f"owners {await client.memory_usage(layout.sessions_owners())} bytes for "
              f"{await client.zcard(layout.sessions_live())} sessions")
        assert usage is not None and usage < 1024


@pytest.mark.slow
async def test_a_record_store_that_cannot_be_reached_is_store_unavailable(redis_url: str) -> None:
    from mrtr.carriers.tasks.redis_url import parse_redis_url

    class Broken:
        async def _fail(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("connection refused")

        def register_script(self, script: str) -> Any:
            return lambda *args, **kwargs: self._fail()

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
