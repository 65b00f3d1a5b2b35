"""The store contract, run against memory, a real SQLite file and a real redis-server."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mrtr.core.kinds import Kind
from mrtr.core.ledger import Slot
from mrtr.carriers.tasks import StoreUnavailable, TaskExists, TaskRecord, TaskStore, mutate, new_task_id, open_store
from mrtr.carriers.tasks.record import encode

from ..conftest import FakeClock
from .redis_server import free_port, redis_cli


def make_record(**changes: Any) -> TaskRecord:
    now = time.time()
    fields: dict[str, Any] = dict(
        task_id=new_task_id(), tool="t", arguments={"a": 1}, principal="alice", client_capabilities={},
        created_at=now, updated_at=now, ttl_ms=60_000, poll_interval_ms=500,
        ledger=(Slot(Kind.STEP, b"\x01" * 16, None, True, {"x": [1, 2]}),),
    )
    fields.update(changes)
    return TaskRecord(**fields).with_lifetime(fields["updated_at"])


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


async def test_renew_moves_only_the_lease_by_compare_and_set(store: TaskStore) -> None:
    now = time.time()
    record = make_record(lease_owner="node", lease_expiry=now + 5)
    await store.create(record)
    renewed = record.renewed(time.time(), time.time() + 60)
    assert (renewed.version, renewed.updated_at, renewed.arguments) == (2, record.updated_at, record.arguments)
    assert renewed.expires_at is not None and record.expires_at is not None and renewed.expires_at > record.expires_at
    assert await store.renew(renewed)
    assert not await store.renew(renewed)  # the same version again
    assert not await store.renew(record.renewed(time.time(), time.time() + 90))  # based on a stale version
    assert await store.get(record.task_id) == renewed
    assert record.task_id not in await store.claimable(now + 30)
    assert record.task_id in await store.claimable(now + 61)
    # A full write based on the renewed version goes through, and a renewal after it too.
    changed = renewed.evolve(time.time(), status_message="half way")
    assert await store.replace(changed)
    assert await store.renew(changed.renewed(time.time(), time.time() + 60))
    stored = await store.get(record.task_id)
    assert stored is not None and stored.status_message == "half way" and stored.version == 4


def store_bytes_written(url: str) -> Callable[[], int]:
    """A counter of what the store behind ``url`` has been sent: SQLite's WAL size (checkpointed now), Redis's input."""
    if url.startswith("sqlite"):
        path = Path(url[len("sqlite:///"):])
        with sqlite3.connect(path, isolation_level=None) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = path.with_name(path.name + "-wal")
        return lambda: wal.stat().st_size if wal.exists() else 0

    def received() -> int:
        stats = redis_cli(url, "INFO", "stats")
        return int(next(line for line in stats.splitlines() if line.startswith("total_net_input_bytes:")).split(":")[1])

    return received


async def test_renew_does_not_rewrite_the_record(store_url: str) -> None:
    """What a renewal costs the store is its lease, not the record: measured on the store itself."""
    if store_url == "memory:":
        pytest.skip("a memory store writes nothing anywhere")
    renewals, padding = 30, 900_000
    async with open_store(store_url) as store:
        record = make_record(arguments={"pad": "x" * padding}, lease_owner="node", lease_expiry=time.time() + 5)
        await store.create(record)
        written = store_bytes_written(store_url)
        before = written()
        for _ in range(renewals):
            record = record.renewed(time.time(), time.time() + 5)
            assert await store.renew(record)
        cost = written() - before
        # Two SQLite pages (lease row, lease index) or a few hundred bytes to Redis; a rewrite costs a share
        # of the 900 kB body each time, even when only the lease columns beside it change.
        assert cost < renewals * 16_000, cost
        assert await store.get(record.task_id) == record


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
    clock.advance(0.001)
    assert await store.get(record.task_id) is None
    assert not await store.replace(record.evolve(clock.now, status_message="too late"))
    assert record.task_id not in await store.claimable(clock.now + 1000)
    # An expired record's id is free again.
    await store.create(record)
    assert await store.get(record.task_id) is None


@pytest.mark.slow
async def test_redis_expires_a_record_at_its_expiry(redis_url: str) -> None:
    """Redis keeps the time itself: the store hands it each record's expiry, to the millisecond."""
    async with open_store(redis_url) as store:
        record = make_record(ttl_ms=60_000)
        await store.create(record)
        client: Any = store._client  # type: ignore[attr-defined]
        assert record.expires_at is not None
        expiry = await client.pexpiretime(f"mrtr:task:{record.task_id}")  # a datetime, to the millisecond
        assert round(expiry.timestamp() * 1000) == int(record.expires_at * 1000)
        past = make_record(ttl_ms=300, created_at=time.time() - 1, updated_at=time.time() - 1)
        await store.create(past)
        assert await store.get(past.task_id) is None
        assert not await store.replace(past.evolve(time.time()))
        assert past.task_id not in await store.claimable(time.time() + 1000)


async def test_each_write_moves_the_end_of_a_records_life(store: TaskStore) -> None:
    record = make_record(ttl_ms=500)
    await store.create(record)
    until = trio.current_time() + 1.5  # three ttls: it lives on as long as it is written
    while trio.current_time() < until:
        record = record.evolve(time.time(), status_message=str(record.version))
        assert await store.replace(record)
        await trio.sleep(0.05)
    assert await store.get(record.task_id) == record
    with trio.fail_after(5):
        while await store.get(record.task_id) is not None:
            await trio.sleep(0.05)


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


async def test_a_sqlite_file_of_the_first_layout_is_moved_to_the_current_one(tmp_path: Path) -> None:
    """Files written before the bodies had their own table open with every record intact."""
    path = tmp_path / "old.sqlite3"
    record = make_record(lease_owner="node", lease_expiry=time.time() + 60)
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("CREATE TABLE mrtr_tasks (id TEXT PRIMARY KEY, version INTEGER NOT NULL, status TEXT NOT NULL, "
                   "lease_expiry REAL NOT NULL, expires_at REAL, body BLOB NOT NULL)")
        db.execute("CREATE INDEX mrtr_tasks_lease ON mrtr_tasks (status, lease_expiry)")
        db.execute("INSERT INTO mrtr_tasks VALUES (?, ?, ?, ?, ?, ?)", (
            record.task_id, record.version, record.status, record.lease_expiry, record.expires_at, encode(record)))
    async with open_store(f"sqlite:///{path}") as store, open_store(f"sqlite:///{path}") as again:
        assert await store.get(record.task_id) == record
        assert await again.get(record.task_id) == record  # opening a second time finds nothing to move
        assert await store.renew(record.renewed(time.time(), time.time() + 90))
        assert record.task_id in await again.claimable(time.time() + 100)


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
