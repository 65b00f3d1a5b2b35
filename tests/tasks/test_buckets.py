"""Token buckets in the store (what ``RateLimit`` counts with), against memory, a SQLite file and a real Redis.

The rule every store keeps: a bucket nobody took from is full (``burst`` tokens); a take
finds the tokens refilled at ``per_second`` for the time gone by, never above ``burst``,
and takes one, or takes nothing and says how long until one is there; of several
takes racing for the last tokens, across connections and processes, exactly as many
win as there were tokens; a bucket full again is forgotten, so the store holds only the
buckets of recent requests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from mrtr.carriers.tasks import TaskStore, new_task_id, open_store
from mrtr.carriers.tasks import memory as memory_store

from ..conftest import FakeClock, until
from .redis_server import redis_cli


def bucket() -> str:
    return f"test:{new_task_id()}"  # fresh per test: the Redis of the session is shared


async def test_a_fresh_bucket_admits_its_burst_then_says_how_long_to_wait(store: TaskStore) -> None:
    name = bucket()
    assert [await store.take_token(name, 0.01, 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = await store.take_token(name, 0.01, 3)
    assert 0 < wait <= 100.0  # one token at 0.01 a second: at most 100 s away
    assert wait > 99.0  # and nearly all of it, since the bucket was just emptied
    assert await store.take_token(bucket(), 0.01, 3) == 0.0  # another bucket is its own


async def test_a_refused_take_takes_nothing_and_tokens_come_back_at_the_rate(clocked_store: TaskStore,
                                                                              clock: FakeClock) -> None:
    name = bucket()
    assert await clocked_store.take_token(name, 2.0, 2) == 0.0
    assert await clocked_store.take_token(name, 2.0, 2) == 0.0
    assert await clocked_store.take_token(name, 2.0, 2) == pytest.approx(0.5)
    clock.advance(0.25)
    assert await clocked_store.take_token(name, 2.0, 2) == pytest.approx(0.25)  # the refusal took nothing
    clock.advance(0.25)
    assert await clocked_store.take_token(name, 2.0, 2) == 0.0
    assert await clocked_store.take_token(name, 2.0, 2) == pytest.approx(0.5)


async def test_a_bucket_never_holds_more_than_its_burst(clocked_store: TaskStore, clock: FakeClock) -> None:
    name = bucket()
    assert await clocked_store.take_token(name, 1.0, 2) == 0.0
    clock.advance(3600)  # an hour idle refills two tokens, not 3600
    assert [await clocked_store.take_token(name, 1.0, 2) for _ in range(3)][:2] == [0.0, 0.0]
    assert await clocked_store.take_token(name, 1.0, 2) > 0


async def test_buckets_full_again_are_forgotten(tmp_path: Path, clock: FakeClock) -> None:
    async with open_store("memory:", clock=clock) as memory:
        for _ in range(50):
            assert await memory.take_token(bucket(), 1.0, 5) == 0.0
        assert len(memory._buckets) == 50  # type: ignore[attr-defined]
        clock.advance(11)  # each is full again after 1 s; the sweep runs at most every 10 s
        await memory.take_token("one more", 1.0, 5)
        assert list(memory._buckets) == ["one more"]  # type: ignore[attr-defined]
    path = tmp_path / "buckets.sqlite3"
    async with open_store(f"sqlite:///{path}", clock=clock) as sqlite_store:
        for _ in range(50):
            assert await sqlite_store.take_token(bucket(), 1.0, 5) == 0.0

        def rows() -> int:
            with sqlite3.connect(path) as db:
                return int(db.execute("SELECT count(*) FROM mrtr_buckets").fetchone()[0])

        assert rows() == 50
        clock.advance(11)
        await sqlite_store.take_token("one more", 1.0, 5)
        assert rows() == 1


async def test_the_memory_store_holds_at_most_max_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_store, "MAX_BUCKETS", 10)
    async with open_store("memory:") as store:
        names = [bucket() for _ in range(25)]
        for name in names:
            assert await store.take_token(name, 0.001, 1) == 0.0
        kept = list(store._buckets)  # type: ignore[attr-defined]
        assert kept == names[-10:]  # the least recently used went first
        assert await store.take_token(names[-1], 0.001, 1) > 0  # a kept one still counts


async def test_racing_takes_across_connections_win_exactly_the_tokens_there_were(shared_url: str) -> None:
    name = bucket()
    admitted: list[float] = []
    async with open_store(shared_url) as first, open_store(shared_url) as second:
        async def take(store: TaskStore) -> None:
            admitted.append(await store.take_token(name, 0.001, 7))

        async with trio.open_nursery() as nursery:
            for number in range(40):
                nursery.start_soon(take, first if number % 2 else second)
    assert admitted.count(0.0) == 7 and len(admitted) == 40


@pytest.mark.slow
async def test_redis_forgets_a_bucket_once_it_is_full_again(redis_url: str) -> None:
    async with open_store(redis_url) as store:
        name = bucket()
        assert await store.take_token(name, 10.0, 5) == 0.0
        key = f"mrtr:bucket:{name}"
        ttl = int(redis_cli(redis_url, "PTTL", key))
        assert 0 < ttl <= 100  # one token at 10 a second: full again within 100 ms
        await until(lambda: redis_cli(redis_url, "EXISTS", key), lambda found: found == "0", timeout=5)
        assert await store.take_token(name, 10.0, 5) == 0.0  # and a forgotten bucket is a full one
        assert redis_cli(redis_url, "HGET", key, "tokens") == "4"
