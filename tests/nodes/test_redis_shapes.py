"""The Redis store and the bus on Redis as it is deployed: a 3-primary Cluster, a Sentinel in front
of a primary and its replica, TLS only, and a password from the environment; all real redis-server
processes the tests start on loopback.

The store contract of tests/tasks/test_store.py and the round records of test_rounds.py run
again here against each shape (imported, so the same assertions), then what each shape adds:
a cluster spreads tasks over its primaries and still publishes each change once; a Sentinel
failover leaves the store and the bus working on the new primary with nothing recorded lost;
TLS refuses a certificate the client does not trust, naming the store.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mrtr.carriers.tasks import StoreUnavailable, TaskStore, open_store
from mrtr.carriers.tasks.host import serve_bus

from ..conftest import until
from ..tasks.redis_server import redis_server
from ..tasks.test_rounds import (  # noqa: F401  (collected again here, on each shape)
    rounds,
    test_a_claim_is_stored_once_and_only_its_attempt_settles_or_releases_it,
    test_twenty_concurrent_attempts_run_the_round_once_and_get_one_result,
)
from ..tasks.test_store import (  # noqa: F401  (collected again here, on each shape)
    make_record,
    test_claimable_lists_working_tasks_with_expired_leases,
    test_concurrent_mutations_all_apply_exactly_once,
    test_create_refuses_an_existing_id,
    test_create_then_get_round_trips,
    test_delete_is_idempotent,
    test_each_write_moves_the_end_of_a_records_life,
    test_renew_moves_only_the_lease_by_compare_and_set,
    test_replace_is_compare_and_set_on_the_version,
    test_two_connections_race_one_wins,
    test_unlimited_ttl_is_kept,
)
from .redis_shapes import redis_cluster, redis_sentinel, redis_tls

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[int]]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int, int]]:
    with redis_sentinel(tmp_path_factory.mktemp("sentinel")) as started:
        yield started


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    with redis_tls(tmp_path_factory.mktemp("tls")) as started:
        yield started


def tls_url(tls: tuple[int, Path]) -> str:
    port, certificate = tls
    return f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={certificate}"


@pytest.fixture(params=["cluster", "sentinel", "tls"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A Redis store URL of each deployed shape."""
    if request.param == "tls":
        return tls_url(request.getfixturevalue("tls"))
    return str(request.getfixturevalue(request.param)[0])


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[TaskStore]:
    async with open_store(store_url) as opened:
        yield opened


class Heard:
    """What one node's end of the bus delivered, and how often it lost its subscription."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.losses = 0

    def deliver(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))

    def lost(self) -> None:
        self.losses += 1

    def of(self, task_id: str) -> list[str | None]:
        return [params.get("statusMessage") for method, params in self.notes
                if method == "notifications/tasks" and params["taskId"] == task_id]


async def two_nodes_hear_a_task(url: str, writes: int = 5) -> tuple[Heard, Heard]:
    """Two ends of the bus on ``url``; one task created and changed ``writes`` times by a store of its own."""
    one, two = Heard(), Heard()
    async with serve_bus(url, deliver=one.deliver, lost=one.lost), \
            serve_bus(url, deliver=two.deliver, lost=two.lost), open_store(url) as writer:
        record = make_record()
        await writer.create(record)
        for number in range(1, writes + 1):
            record = record.evolve(time.time(), status_message=f"{number}/{writes}")
            assert await writer.replace(record)
        renewed = record.renewed(time.time(), time.time() + 30)
        assert await writer.renew(renewed)  # changes nothing a client sees: publishes nothing
        wanted = [None, *(f"{number}/{writes}" for number in range(1, writes + 1))]
        await until(lambda: one.of(record.task_id) == wanted and two.of(record.task_id) == wanted, timeout=10)
        marker = make_record()
        await writer.create(marker)  # everything before it was delivered by now: nothing came twice
        await until(lambda: one.of(marker.task_id) and two.of(marker.task_id), timeout=10)
        assert one.of(record.task_id) == wanted == two.of(record.task_id)
    return one, two


@pytest.mark.parametrize("shape", ["cluster", "sentinel", "tls"])
async def test_every_node_hears_each_change_of_a_task_once_in_order(shape: str, request: pytest.FixtureRequest):
    url = tls_url(request.getfixturevalue("tls")) if shape == "tls" else request.getfixturevalue(shape)[0]
    one, two = await two_nodes_hear_a_task(url)
    assert one.losses == two.losses == 0


async def test_a_cluster_spreads_tasks_over_its_primaries(cluster: tuple[str, list[int]]):
    url, ports = cluster
    async with open_store(url) as store:
        records = [make_record(status="working", lease_owner="n", lease_expiry=time.time() - 1) for _ in range(64)]
        for record in records:
            await store.create(record)
        assert set(await store.in_flight()) >= {record.task_id for record in records}
        assert set(await store.claimable(time.time(), limit=1000)) >= {record.task_id for record in records}
    sizes = [int(subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True,
                                check=True).stdout) for port in ports]
    assert sum(1 for size in sizes if size > 0) >= 2, sizes  # hash tags spread the tasks, not one slot


async def test_2025_session_records_and_their_bounds_work_in_a_cluster(cluster: tuple[str, list[int]]):
    """The scripts that keep a session's record and its index entries together run in one slot of a cluster."""
    from mrtr.carriers.tasks.redis import connected
    from mrtr.carriers.tasks.sessions import SessionRecords

    url, _ = cluster
    async with connected(url) as (client, target):
        records, layout = SessionRecords(client, target.layout, target.url), target.layout
        tag = "{" + layout.prefix + "sessions}"  # one hash tag: one slot for the records and their indexes
        assert all(key.startswith(tag) for key in (layout.session("0.x"), layout.sessions_live(),
                                                     layout.sessions_owners(), layout.sessions_busy(),
                                                     layout.sessions_of("t")))
        record = {"v": 1, "version": "2025-11-25"}
        for name in ("k1", "k2"):
            assert (await records.create(f"0.{name}", record, ttl=60, client="10.9.0.1", max_per_client=2,
                                         max_sessions=100)).stored
        assert (await records.load("0.k1", ttl=60))["version"] == "2025-11-25"
        assert await records.begin("0.k1", ttl=60)
        third = await records.create("0.k3", record, ttl=60, client="10.9.0.1", max_per_client=2, max_sessions=100)
        assert third.stored and third.ended == [("0.k2", "client")]  # k1 is busy
        await records.finish("0.k1", ttl=60)
        assert await records.load("0.k2", ttl=60) is None
        assert await records.delete("0.k1") and await records.delete("0.k3")
        assert await client.zcard(layout.sessions_live()) == 0


async def test_a_sentinel_failover_keeps_the_store_and_the_bus_working(sentinel: tuple[str, int, int, int]):
    url, primary, replica, sentinel_port = sentinel
    heard = Heard()
    async with open_store(url) as store, serve_bus(url, deliver=heard.deliver, lost=heard.lost) as bus:
        before = make_record()
        await store.create(before)
        # The replica has it before the failover: WAIT for one replica to acknowledge.
        subprocess.run(["redis-cli", "-p", str(primary), "WAIT", "1", "5000"], check=True, capture_output=True)
        done = subprocess.run(["redis-cli", "-p", str(sentinel_port), "SENTINEL", "FAILOVER", "mymaster"],
                              capture_output=True, text=True, check=True)
        assert "OK" in done.stdout, done.stdout + done.stderr

        def promoted() -> bool:
            reply = subprocess.run(["redis-cli", "-p", str(sentinel_port), "SENTINEL", "get-master-addr-by-name",
                                    "mymaster"], capture_output=True, text=True, check=True).stdout.split()
            return reply[-1:] == [str(replica)]

        await until(promoted, timeout=30, every=0.1)

        async def written() -> bool:
            after = make_record()
            try:
                await store.create(after)
            except StoreUnavailable:
                return False  # the old primary is a replica now (READONLY) or restarting: a clear error
            return True

        await until(written, timeout=30, every=0.2)  # the store follows the new primary by itself
        assert await store.get(before.task_id) == before  # nothing recorded is lost
        await until(lambda: bus.connected, timeout=30, every=0.1)
        marker = make_record()
        await store.create(marker)
        await until(lambda: any(params["taskId"] == marker.task_id for _, params in heard.notes), timeout=15)


async def test_tls_refuses_a_certificate_it_does_not_trust(tls: tuple[int, Path], tmp_path: Path):
    from .redis_shapes import self_signed

    port, _certificate = tls
    other, _key = self_signed(tmp_path, "other")
    with pytest.raises(StoreUnavailable) as refused:
        async with open_store(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={other}"):
            pass
    assert f"127.0.0.1:{port}" in str(refused.value) and "certificate" in str(refused.value).lower()
    with pytest.raises(StoreUnavailable):  # a plain connection to a TLS port gets nowhere either
        async with open_store(f"redis://127.0.0.1:{port}/0"):
            pass


async def test_the_password_comes_from_the_environment_and_a_wrong_one_is_refused_unnamed(
        monkeypatch: pytest.MonkeyPatch):
    with redis_server(password="s3cret-pass") as (with_password, _process):
        bare = with_password.replace(":s3cret-pass@", "")
        monkeypatch.setenv("MRTR_REDIS_PASSWORD", "s3cret-pass")
        async with open_store(bare) as store:
            record = make_record()
            await store.create(record)
            assert await store.get(record.task_id) == record
        await two_nodes_hear_a_task(bare, writes=2)
        monkeypatch.setenv("MRTR_REDIS_PASSWORD", "wrong-pass")
        with pytest.raises(StoreUnavailable) as refused:
            async with open_store(bare):
                pass
        assert "wrong-pass" not in str(refused.value) and "127.0.0.1" in str(refused.value)
