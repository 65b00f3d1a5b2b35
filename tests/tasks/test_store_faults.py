"""Stores that fail while serving: every store error is :class:`StoreUnavailable`, none names the store to a client.

Real faults only: a redis-server put out of memory (``maxmemory`` with ``noeviction``),
made a read-only replica, or stopped; a SQLite file corrupted under an open store.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mrtr.tasks import StoreUnavailable, open_store
from mrtr.carriers.tasks.store import masked

from .redis_server import redis_cli, redis_server
from .test_store import make_record

PASSWORD = "s3cret-Pa55"


def assert_hides_the_store(error: StoreUnavailable, url: str) -> None:
    """What a client gets of a store error: a -32603 that names neither the store nor its credentials."""
    wire = error.to_error_object()
    assert wire["code"] == -32603
    text = repr(wire)
    assert PASSWORD not in text and url not in text and "redis" not in text.lower() and "sqlite" not in text.lower()
    assert "127.0.0.1" not in text and "tasks.sqlite3" not in text


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
    ("redis://user:p@ss@h:1/0?db=1&password=x", "redis://user:***@h:1/0?db=1&password=***"),
    ("rediss://h:1/0?password=abc", "rediss://h:1/0?password=***"),
    ("redis://:pa/ss@h:1/0", "redis://***@h:1/0"),
    ("redis://user@h:1/0", "redis://user@h:1/0"),
    ("sqlite:////abs/tasks.sqlite3", "sqlite:////abs/tasks.sqlite3"),
    ("memory:", "memory:"),
])
def test_logs_show_store_urls_with_the_password_masked(url: str, shown: str) -> None:
    assert masked(url) == shown


@contextmanager
def out_of_memory(url: str) -> Iterator[None]:
    """Redis refuses every command that could grow its memory (``-OOM``) until the block ends."""
    redis_cli(url, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    redis_cli(url, "CONFIG", "SET", "maxmemory", "1")
    try:
        yield
    finally:
        redis_cli(url, "CONFIG", "SET", "maxmemory", "0")


@pytest.mark.slow
async def test_redis_out_of_memory_is_store_unavailable_and_passes(tmp_path: Path) -> None:
    with redis_server(password=PASSWORD) as (url, _process):
        async with open_store(url) as store:
            kept = make_record()
            await store.create(kept)
            with out_of_memory(url):
                changed = kept.evolve(time.time(), status_message="x")
                for attempt in (store.create(make_record()), store.replace(changed)):
                    with pytest.raises(StoreUnavailable) as caught:
                        await attempt
                    assert_hides_the_store(caught.value, url)
                    assert "OOM" in str(caught.value)  # the server-side text says why
                assert await store.get(kept.task_id) == kept  # reads still work
            # Nothing to reconnect: the next write simply works.
            assert await store.replace(kept.evolve(time.time(), status_message="after"))


@pytest.mark.slow
async def test_a_read_only_redis_is_store_unavailable_until_promoted(tmp_path: Path) -> None:
    with redis_server(password=PASSWORD) as (url, _process), redis_server() as (primary, _other):
        async with open_store(url) as store:
            primary_port = primary.rsplit(":", 1)[1].split("/")[0]
            redis_cli(url, "REPLICAOF", "127.0.0.1", primary_port)  # a failover demoted our Redis
            try:
                with pytest.raises(StoreUnavailable) as caught:
                    await store.create(make_record())
                assert_hides_the_store(caught.value, url)
                assert "read only replica" in str(caught.value)
            finally:
                redis_cli(url, "REPLICAOF", "NO", "ONE")
            record = make_record()
            await store.create(record)
            assert await store.get(record.task_id) == record


@pytest.mark.slow
async def test_a_stopped_redis_is_store_unavailable_on_every_method(tmp_path: Path) -> None:
    with redis_server(password=PASSWORD) as (url, process):
        async with open_store(url) as store:
            record = make_record()
            await store.create(record)
            process.terminate()
            process.wait()
            for attempt in (store.get(record.task_id), store.create(make_record()),
                            store.replace(record.evolve(time.time())), store.claimable(time.time()),
                            store.delete(record.task_id)):
                with pytest.raises(StoreUnavailable) as caught:
                    await attempt
                assert_hides_the_store(caught.value, url)


def corrupt(path: Path) -> bytes:
    """Overwrite every page but the first with noise; return the bytes it had, to put back."""
    with sqlite3.connect(path, isolation_level=None) as checkpoint:
        checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    original = path.read_bytes()
    with open(path, "r+b") as file:
        file.seek(4096)
        file.write(os.urandom(len(original) - 4096))
    return original


def touch(path: Path) -> None:
    """Another process's write: open connections drop their page cache and read the file again."""
    other = sqlite3.connect(path, isolation_level=None)
    version = other.execute("PRAGMA user_version").fetchone()[0]
    other.execute(f"PRAGMA user_version={version + 1}")
    other.close()


async def test_a_corrupt_sqlite_file_is_store_unavailable_and_passes(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    url = f"sqlite:///{path}"
    async with open_store(url) as store:
        records = [make_record(arguments={"pad": "x" * 3000}) for _ in range(40)]  # several pages
        for record in records:
            await store.create(record)
        original = corrupt(path)
        touch(path)
        kept = records[7]
        for attempt in (store.get(kept.task_id), store.create(make_record()),
                        store.replace(kept.evolve(time.time())), store.claimable(time.time())):
            with pytest.raises(StoreUnavailable) as caught:
                await attempt
            assert_hides_the_store(caught.value, url)
            assert "malformed" in str(caught.value)
        path.write_bytes(original)  # the file is repaired (restored) under the running store
        touch(path)
        assert await store.get(kept.task_id) == kept


async def test_an_undecodable_record_is_store_unavailable(shared_url: str) -> None:
    async with open_store(shared_url) as store:
        record = make_record()
        await store.create(record)
        if shared_url.startswith("sqlite"):
            with sqlite3.connect(shared_url[len("sqlite:///"):], isolation_level=None) as db:
                db.execute("UPDATE mrtr_task_bodies SET body = ? WHERE id = ?", (b"{not json", record.task_id))
        else:
            redis_cli(shared_url, "HSET", f"mrtr:task:{record.task_id}", "body", "{not json")
        with pytest.raises(StoreUnavailable) as caught:
            await store.get(record.task_id)
        assert_hides_the_store(caught.value, shared_url)


async def test_a_node_outlives_its_sqlite_file_corrupted_and_repaired(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    from mrtr import Context, Step

    from .test_carrier import ALICE, node, start, status, task_until

    gate = trio.Event()

    async def gated(ctx: Context) -> Any:
        opened = yield Step(gate.wait)
        yield f"opened {opened}"

    path = tmp_path / "tasks.sqlite3"
    url = f"sqlite:///{path}"
    async with open_store(url) as store, node(store, {"gated": gated}, lease=0.3) as carrier:
        for _ in range(40):  # several pages, so the noise lands on records
            await store.create(make_record(arguments={"pad": "x" * 3000}))
        task_id = await start(carrier, "gated")
        original = corrupt(path)
        touch(path)
        with pytest.raises(StoreUnavailable) as caught:
            await carrier.get(task_id, ALICE)
        assert_hides_the_store(caught.value, url)
        with pytest.raises(StoreUnavailable):
            await start(carrier, "gated")
        # The lease keeper and the take-over scan both meet the corrupt file, and live on.
        with trio.fail_after(10):
            while not all(any(marker in line for line in caplog.messages)
                          for marker in ("cannot renew the lease", "cannot look for abandoned tasks")):
                await trio.sleep(0.02)
        path.write_bytes(original)
        touch(path)
        gate.set()
        task = await task_until(carrier, task_id, status("completed"))
        assert task["result"]["content"][0]["text"] == "opened None"


async def test_a_sqlite_file_another_node_is_switching_to_wal_is_opened_once_it_is_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two nodes opening one new file at once: SQLite refuses one of them at once ("database is locked")
    # instead of letting two shared locks wait on each other. That node tries again; a file that stays
    # locked past the busy timeout is still StoreUnavailable.
    from mrtr.carriers.tasks import sqlite as module

    refusals = {"left": 2}
    connect = sqlite3.connect

    class Contended:
        """A real connection whose first WAL switches meet another node's lock."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.db = connect(*args, **kwargs)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "PRAGMA journal_mode=WAL" and refusals["left"]:
                refusals["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.db.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.db, name)

    monkeypatch.setattr(module.sqlite3, "connect", Contended)
    url = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    async with open_store(url) as store:
        record = make_record()
        await store.create(record)
        assert await store.get(record.task_id) == record
    assert refusals["left"] == 0
    refusals["left"] = 10 ** 9
    monkeypatch.setattr(module, "_BUSY_TIMEOUT", 0.2)
    with pytest.raises(StoreUnavailable, match="database is locked"):
        async with open_store(f"sqlite:///{tmp_path / 'other.sqlite3'}"):
            pass
