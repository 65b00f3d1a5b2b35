"""The store operations of recorded 2025 calls, on SQLite and on a real Redis, the same rules for both.

A call's record names its holder; a write is a compare-and-set by that holder; an
adopter's claim succeeds only when nobody holds the call or its holder's lease lapsed
(or its slot was taken by a replacement); an answer is recorded only for a question the
call waits on, the first one winning; the stream keeps its last events within bounds,
and an ended call keeps them for a while, with no holder and no state.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from mrtr.carriers.tasks.calls import KEPT_EVENTS, MAX_EVENT_BYTES, Calls, Created
from mrtr.core.calls import TakenOver
from mrtr.carriers.tasks.calls_redis import RedisCalls
from mrtr.carriers.tasks.calls_sqlite import SQLiteCalls
from mrtr.carriers.tasks.redis import connected
from mrtr.core.calls import CallState, Claimed, Held, Question, Stored
from mrtr.core.ledger import Slot

from .conftest import REDIS

SESSION = "1.session"
CREATED = Created(b"7", b'{"method": "tools/call", "params": {"name": "t"}, "principal": "ada"}')


@pytest.fixture(params=["sqlite", REDIS])
async def calls_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A call store of each shared kind (a fresh key prefix on the session's Redis)."""
    if request.param == "sqlite":
        store = await SQLiteCalls.open(tmp_path / "calls.sqlite3")
        try:
            yield store
        finally:
            await store.aclose()
        return
    url = f"{request.getfixturevalue('redis_url')}?prefix=calls{secrets.token_hex(4)}:"
    async with connected(url) as (client, target):
        yield RedisCalls(client, target.layout, url)


async def create(store: Any, node: str = "111", *, stream: str = "111.1", pending: list[str] | None = None,
                 events: list[tuple[int, bytes]] | None = None) -> int:
    state = msgspec.json.encode(CallState(ledger=(Slot(1, b"f" * 16),), rounds=1,
                                          pending=(Question("elicit-1", "111.1", "elicitation/create"),)))
    return await store.write(SESSION, stream, node=node, version=0, created=CREATED, state=state,
                             pending=pending if pending is not None else ['"111.1"'], events=events or [(1, b"{}")],
                             done=False, ttl=60)


async def test_a_call_is_held_by_its_node_while_its_lease_lives_then_claimed_once(calls_store: Any) -> None:
    store = calls_store
    await store.hold_lease("111", None, 30)
    await store.hold_lease("222", None, 30)
    assert await create(store) == 1
    assert await create(store) == 0  # a stream is recorded once
    held = await store.claim(SESSION, "111.1", "222")
    assert held is not None and held.status == "held" and held.holder == "111"
    # Its holder writes on; a write at a stale version is refused.
    assert await store.write(SESSION, "111.1", node="111", version=1, created=None, state=None, pending=None,
                             events=[(2, b'{"n":2}')], done=False, ttl=60) == 2
    assert await store.write(SESSION, "111.1", node="111", version=1, created=None, state=None, pending=None,
                             events=[], done=False, ttl=60) == 0
    await store.end_lease("111")  # the holder stopped
    claimed = await store.claim(SESSION, "111.1", "222")
    assert claimed is not None and claimed.status == "claimed" and claimed.version == 3
    assert msgspec.json.decode(claimed.meta)["principal"] == "ada"
    assert msgspec.json.decode(claimed.state, type=CallState).pending[0].id == "111.1"
    assert claimed.events == [(1, b"{}"), (2, b'{"n":2}')] and claimed.last == 2
    again = await store.claim(SESSION, "111.1", "333")  # the adopter lives: nobody else gets it
    assert again is not None and again.status == "held" and again.holder == "222"
    # The first holder, back (a stall longer than its lease), is refused: its call was taken over.
    assert await store.write(SESSION, "111.1", node="111", version=2, created=None, state=None, pending=None,
                             events=[(3, b"{}")], done=False, ttl=60) == 0
    assert await store.write(SESSION, "111.1", node="222", version=3, created=None, state=None, pending=None,
                             events=[(3, b"{}")], done=False, ttl=60) == 4


async def test_an_answer_is_recorded_for_a_pending_question_only_and_the_first_wins(calls_store: Any) -> None:
    store = calls_store
    await store.hold_lease("111", None, 30)
    await create(store)
    assert await store.answer(SESSION, '"999.1"', b'{"id":"999.1"}') is None  # no call waits for it
    assert await store.answer("other", '"111.1"', b'{"id":"111.1"}') is None  # nor in another session
    route = await store.answer(SESSION, '"111.1"', b'{"id":"111.1","result":{"first":1}}')
    assert route is not None and route.stream == "111.1" and route.holder == "111" and route.alive
    await store.answer(SESSION, '"111.1"', b'{"id":"111.1","result":{"second":1}}')
    await store.end_lease("111")
    claimed = await store.claim(SESSION, "111.1", "222")
    assert claimed.answers == {'"111.1"': b'{"id":"111.1","result":{"first":1}}'}
    # The adopter records its next round: the answers of the round before go (its state holds them now).
    assert await store.write(SESSION, "111.1", node="222", version=claimed.version, created=None, state=b"{}",
                             pending=['"222.1"'], events=[], done=False, ttl=60) == claimed.version + 1
    await store.end_lease("222")
    claimed = await store.claim(SESSION, "111.1", "333")
    assert claimed.answers == {}
    assert await store.answer(SESSION, '"111.1"', b"{}") is None  # no longer pending


async def test_a_released_call_is_claimed_at_once_and_a_replaced_slot_lets_its_calls_go(calls_store: Any) -> None:
    store = calls_store
    await store.hold_lease("111", "host:10:1", 30)
    await store.hold_lease("222", None, 30)
    await create(store)
    assert await store.release(SESSION, "111.1", "111", 2) == 0  # not at its version
    assert await store.release(SESSION, "111.1", "111", 1) == 2
    claimed = await store.claim(SESSION, "111.1", "222")  # 111 lives, but let the call go
    assert claimed.status == "claimed"
    await create(store, "111", stream="111.2", pending=[])
    # Worker slot 1 is replaced: the new process ends its predecessor's lease as it takes the slot.
    await store.hold_lease("444", "host:10:1", 30)
    taken = await store.claim(SESSION, "111.2", "222")
    assert taken.status == "claimed"


async def test_the_stream_keeps_its_last_events_within_bounds_and_an_ended_call_keeps_them(calls_store: Any) -> None:
    store = calls_store
    await store.hold_lease("111", None, 30)
    await create(store)
    version = 1
    events = [(position, b'{"n":%d}' % position) for position in range(2, KEPT_EVENTS + 40)]
    version = await store.write(SESSION, "111.1", node="111", version=version, created=None, state=None,
                                pending=None, events=events, done=False, ttl=60)
    stored = await store.read(SESSION, "111.1")
    assert isinstance(stored, Stored) and stored.last == KEPT_EVENTS + 39 and len(stored.events) == KEPT_EVENTS
    assert stored.events[-1][0] == KEPT_EVENTS + 39 and stored.holder == "111" and stored.alive
    big = b"x" * (MAX_EVENT_BYTES // 2 + 1)
    version = await store.write(SESSION, "111.1", node="111", version=version, created=None, state=None,
                                pending=None, events=[(KEPT_EVENTS + 40, big), (KEPT_EVENTS + 41, big)], done=False,
                                ttl=60)
    stored = await store.read(SESSION, "111.1")
    assert [position for position, _ in stored.events] == [KEPT_EVENTS + 41]  # bytes: the oldest went, never the last
    assert await store.find(SESSION, "7") == "111.1"
    version = await store.write(SESSION, "111.1", node="111", version=version, created=None, state=None,
                                pending=[], events=[(KEPT_EVENTS + 42, b'{"id":7,"result":{}}')], done=True, ttl=60)
    assert version > 0
    done = await store.claim(SESSION, "111.1", "222")
    assert done.status == "done" and done.events[-1] == (KEPT_EVENTS + 42, b'{"id":7,"result":{}}')
    assert await store.find(SESSION, "7") is None
    stored = await store.read(SESSION, "111.1")
    assert stored.done and stored.holder == ""
    await store.forget(SESSION)
    assert await store.read(SESSION, "111.1") is None


class Source:
    """An event stream as a journal sees it: events kept in a list, delivered once recorded."""

    def __init__(self) -> None:
        self.events: list[tuple[int, bytes]] = []
        self.stored = 0
        self.held = False
        self.ended = False

    def hold(self) -> None:
        self.held = True

    def unstored(self) -> tuple[list[tuple[int, bytes]], int, bool]:
        return [event for event in self.events if event[0] > self.stored], len(self.events), self.ended

    def stored_to(self, position: int, ended: bool) -> None:
        self.stored = max(self.stored, position)

    def unhold(self) -> None:
        self.held = False


async def test_journals_record_a_call_that_another_process_adopts_and_a_late_holder_is_told(calls_store: Any) -> None:
    first = Calls(calls_store, "111", lease=30, ttl=60)
    second = Calls(calls_store, "222", lease=30, ttl=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(first.serve)
        await nursery.start(second.serve)
        source = Source()
        journal = first.journal(SESSION, "111.1", 7, "tools/call", {"name": "t"}, source)
        journal.principal = "ada"
        assert not journal.recorded
        await journal.flush()  # nothing recorded before the first save
        assert not journal.recorded
        source.events.append((1, b'{"progress":1}'))
        journal.hold()
        await journal.save(CallState(rounds=1, pending=(Question("elicit-1", "111.1", "elicitation/create"),)))
        assert journal.recorded and source.stored == 1
        assert isinstance(await second.claim(SESSION, "111.1"), Held)
        assert await second.answer(SESSION, {"jsonrpc": "2.0", "id": "111.1", "result": {"action": "decline"}})
        assert await second.cancel(SESSION, 7) == Held("111")
        # The first process hands it over; the second adopts it with the answer that arrived.
        assert await first.release(journal)
        claimed = await second.claim(SESSION, "111.1")
        assert isinstance(claimed, Claimed) and claimed.request_id == 7 and claimed.method == "tools/call"
        assert claimed.journal.principal == "ada" and claimed.events == [(1, b'{"progress":1}')]
        assert claimed.journal.resumed is not None
        assert claimed.journal.resumed.answers == {"111.1": {"jsonrpc": "2.0", "id": "111.1",
                                                            "result": {"action": "decline"}}}
        # A journal that lost its call (another holder wrote since) is told at its next write.
        stale = first.journal(SESSION, "111.1", 7, "tools/call", {}, Source())
        stale._version = 3  # what the first process had before the adopter's claim
        with pytest.raises(TakenOver):
            await stale.save(CallState())
        # Cancelling a call nobody holds ends it with its questions withdrawn on its stream.
        adopter = claimed.journal
        adopter_source = Source()
        adopter_source.stored = 1
        adopter.attach(adopter_source)
        await second.release(adopter)
        assert await first.cancel(SESSION, 7) is True
        ended = await first.stored(SESSION, "111.1")
        assert ended is not None and ended.done
        assert msgspec.json.decode(ended.events[-1][1])["method"] == "notifications/cancelled"
        nursery.cancel_scope.cancel()


class Failing:
    """A store of calls that cannot be reached (every write fails as a store does)."""

    url = "redis://gone:6379/0"

    async def write(self, *args: Any, **kwargs: Any) -> int:
        from mrtr.carriers.tasks.store import StoreUnavailable

        raise StoreUnavailable("task store redis://gone:6379/0 failed: ConnectionError")


async def test_a_call_whose_store_stays_away_goes_on_unrecorded_its_events_no_longer_held() -> None:
    calls = Calls(Failing(), "111", lease=30, ttl=60, patience=0.3)  # type: ignore[arg-type]
    source = Source()
    journal = calls.journal(SESSION, "111.1", 7, "tools/call", {}, source)
    journal.hold()
    source.events.append((1, b'{"question":1}'))
    with trio.fail_after(5):
        await journal.save(CallState(rounds=1, pending=(Question("elicit-1", "111.1", "elicitation/create"),)))
    assert journal.lost and not journal.recorded and not source.held  # the question goes out all the same
    await journal.flush(done=True)  # nothing more is tried for it


async def test_a_call_whose_record_would_pass_its_bound_goes_on_unrecorded(tmp_path: Path) -> None:
    store = await SQLiteCalls.open(tmp_path / "calls.sqlite3")
    try:
        calls = Calls(store, "111", lease=30, ttl=60)
        source = Source()
        journal = calls.journal(SESSION, "111.1", 7, "tools/call", {"big": "x" * (1 << 20)}, source)
        journal.hold()
        await journal.save(CallState(rounds=1))
        assert journal.lost and not source.held
        assert await store.read(SESSION, "111.1") is None  # nothing of it was written
    finally:
        await store.aclose()
