"""The store contract, run against memory, a real SQLite file and a real redis-server."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from mrtr.core.kinds import Kind
from mrtr.core.ledger import Slot
from mrtr.carriers.tasks import StoreUnavailable, TaskExists, TaskRecord, TaskStore, mutate, new_task_id, open_store

from ..conftest import FakeClock
from .redis_server import free_port


def make_record(**changes: Any) -> TaskRecord:
    now = time.time()
    fields: dict[str, Any] = dict(
        task_id=new_task_id(), tool="t", arguments={"a": 1}, principal="alice", client_capabilities={},
        created_at=now, updated_at=now, ttl_ms=60_000, poll_interval_ms=500,
        ledger=(Slot(Kind.STEP, b"\x01" * 16, None, True, {"x": [1, 2]}),),
    )
    fields.update(changes)
    return TaskRecord(**fields)


def test_task_ids_are_128_random_bits() -> None:
    ids = {new_task_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(task_id) == 22 for task_id in ids)  # 16 bytes, unpadded base64url


async def test_create_then_get_round_trips(store: TaskStore) -> None:
    record = make_record()
    await store.create(record)
    assert await store.get(record.task_id) == record
    assert await store.get(new_task_id()) is None


async def test_create_refuses_an_existing_id(store: TaskStore) -> None:
    record = make_record()
    await store.create(record)
    with pytest.raises(TaskExists):
        await store.create(record)


async def test_replace_is_compare_and_set_on_the_version(store: TaskStore) -> None:
    record = make_record()
    await store.create(record)
    first = record.evolve(time.time(), status_message="one")
    stale = record.evolve(time.time(), status_message="two")
    assert await store.replace(first)
    assert not await store.replace(stale)
    assert not await store.replace(first)  # same version again
    stored = await store.get(record.task_id)
    assert stored is not None and stored.status_message == "one" and stored.version == 2


async def test_concurrent_mutations_all_apply_exactly_once(store: TaskStore) -> None:
    record = make_record(arguments={"n": 0})
    await store.create(record)

    async def bump() -> None:
        _, changed = await mutate(
            store, record.task_id, lambda r, now: r.evolve(now, arguments={"n": r.arguments["n"] + 1})
        )
        assert changed

    async with trio.open_nursery() as nursery:
        for _ in range(25):
            nursery.start_soon(bump)
    stored = await store.get(record.task_id)
    assert stored is not None
    assert stored.arguments == {"n": 25} and stored.version == 26


async def test_two_connections_race_one_wins(store_url: str) -> None:
    if store_url == "memory:":
        pytest.skip("a memory store is one process")
    record = make_record()
    async with open_store(store_url) as one, open_store(store_url) as two:
        await one.create(record)
        wins = []

        async def attempt(store: TaskStore, name: str) -> None:
            if await store.replace(record.evolve(time.time(), status_message=name)):
                wins.append(name)

        async with trio.open_nursery() as nursery:
            for index in range(10):
                nursery.start_soon(attempt, one if index % 2 else two, str(index))
        assert len(wins) == 1
        stored = await two.get(record.task_id)
        assert stored is not None and stored.status_message == wins[0]


async def test_expired_records_are_unknown(clocked_store: TaskStore, clock: FakeClock) -> None:
    store = clocked_store
    record = make_record(ttl_ms=300, created_at=clock.now, updated_at=clock.now)
    await store.create(record)
    clock.advance(0.3)
    assert await store.get(record.task_id) == record  # alive up to its last millisecond
    updated = record.evolve(clock.now, status_message="still here")
    assert await store.replace(updated)
    clock.advance(0.001)
    assert await store.get(record.task_id) is None
    assert not await store.replace(updated.evolve(clock.now))
    assert record.task_id not in await store.claimable(clock.now + 1000)
    # An expired record's id is free again.
    await store.create(record)
    assert await store.get(record.task_id) is None


async def test_redis_expires_a_record_at_its_expiry(redis_url: str) -> None:
    """Redis keeps the time itself: the store hands it each record's expiry, to the millisecond."""
    async with open_store(redis_url) as store:
        record = make_record(ttl_ms=60_000)
        await store.create(record)
        client: Any = store._client  # type: ignore[attr-defined]
        assert record.expires_at is not None
        expiry = await client.pexpiretime(f"mrtr:task:{record.task_id}")  # a datetime, to the millisecond
        assert round(expiry.timestamp() * 1000) == int(record.expires_at * 1000)
        past = make_record(ttl_ms=300, created_at=time.time() - 1)
        await store.create(past)
        assert await store.get(past.task_id) is None
        assert not await store.replace(past.evolve(time.time()))
        assert past.task_id not in await store.claimable(time.time() + 1000)


async def test_unlimited_ttl_is_kept(store: TaskStore) -> None:
    record = make_record(ttl_ms=None, created_at=time.time() - 10_000)
    await store.create(record)
    assert await store.get(record.task_id) == record


async def test_claimable_lists_working_tasks_with_expired_leases(store: TaskStore) -> None:
    now = time.time()
    abandoned = make_record(lease_owner="dead", lease_expiry=now - 1)
    held = make_record(lease_owner="alive", lease_expiry=now + 60)
    waiting = make_record(status="input_required")
    for record in (abandoned, held, waiting):
        await store.create(record)
    found = await store.claimable(now)
    assert abandoned.task_id in found
    assert held.task_id not in found and waiting.task_id not in found
    # Leaving "working" takes a task off the list.
    assert await store.replace(abandoned.evolve(time.time(), status="completed", result={}))
    assert abandoned.task_id not in await store.claimable(time.time())


async def test_delete_is_idempotent(store: TaskStore) -> None:
    record = make_record()
    await store.create(record)
    await store.delete(record.task_id)
    await store.delete(record.task_id)
    assert await store.get(record.task_id) is None


async def test_sqlite_records_survive_reopening(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'durable.sqlite3'}"
    record = make_record()
    async with open_store(url) as store:
        await store.create(record)
    async with open_store(url) as store:
        assert await store.get(record.task_id) == record


async def test_unreachable_redis_fails_at_open_with_the_url() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(StoreUnavailable, match=f"task store {url} cannot be reached"):
        async with open_store(url):
            pass


async def test_unusable_sqlite_path_fails_at_open(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'tasks.sqlite3'}"
    with pytest.raises(StoreUnavailable, match="cannot be opened"):
        async with open_store(url):
            pass


async def test_unknown_url_kind() -> None:
    with pytest.raises(ValueError, match="unknown task store URL"):
        async with open_store("postgres://x"):
            pass
