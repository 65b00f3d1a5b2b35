"""The tasks carrier against real stores: resume by update, exactly-once resume, cancel,
failures, TTL, principals, progress, and takeover of a task whose node died."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from mrtr import Context, Elicit, Form, InvalidParams, Step
from mrtr.carriers.tasks import TaskCarrier, TaskStore, ToolBinding, UnknownTask, open_store

from ..conftest import FakeClock, until
from .tasks_schema import validate_task

ALICE = "alice"


def resolver(handlers: Mapping[str, Any]) -> Callable[[str, Mapping[str, Any]], ToolBinding]:
    def resolve(name: str, arguments: Mapping[str, Any]) -> ToolBinding:
        if name not in handlers:
            raise InvalidParams(f"Unknown tool: {name}")
        return ToolBinding(
            handlers[name],
            arguments,
            shape=lambda value: {"content": [{"type": "text", "text": str(value)}]},
            handler_failed=lambda error: {"content": [{"type": "text", "text": error.message}], "isError": True},
        )

    return resolve


@asynccontextmanager
async def node(store: TaskStore, handlers: Mapping[str, Any], **options: Any) -> AsyncIterator[TaskCarrier]:
    """A carrier serving in its own nursery; leaving the block kills it like a dead process would."""
    carrier = TaskCarrier(store, resolver(handlers), **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(carrier.serve)
        yield carrier
        nursery.cancel_scope.cancel()


async def start(carrier: TaskCarrier, tool: str, arguments: Mapping[str, Any] | None = None,
                principal: str | None = ALICE) -> str:
    record = await carrier.create(tool, arguments, principal=principal, client_capabilities={"elicitation": {}})
    validate_task("CreateTaskResult", {**record.to_wire(), "resultType": "task"})
    return record.task_id


async def task_until(carrier: TaskCarrier, task_id: str, predicate: Callable[[dict[str, Any]], bool],
                     principal: str | None = ALICE, timeout: float = 10) -> dict[str, Any]:
    """Poll tasks/get until ``predicate`` holds (or fail after ``timeout`` seconds)."""

    async def get() -> dict[str, Any]:
        return validate_task("GetTaskResult", await carrier.get(task_id, principal))

    return await until(get, predicate, timeout=timeout)


def status(*names: str) -> Callable[[dict[str, Any]], bool]:
    return lambda task: task["status"] in names


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def two_questions(ctx: Context) -> Any:
    name = yield Elicit("Name?", Form().string("name"))
    city = yield Elicit("City?", Form().string("city"))
    return f"{name.value['name']} from {city.value['city']}"


async def test_a_task_that_asks_twice_through_update(store: TaskStore) -> None:
    async with node(store, {"ask": two_questions}) as carrier:
        task_id = await start(carrier, "ask")
        task = await task_until(carrier, task_id, status("input_required"))
        assert list(task["inputRequests"]) == ["elicit-1"]
        assert "requestState" not in task
        ack = await carrier.update(task_id, ALICE, {"elicit-1": accept(name="Ada")})
        validate_task("UpdateTaskResult", ack)
        task = await task_until(carrier, task_id, lambda t: t["status"] == "input_required" and "elicit-2" in t["inputRequests"])
        assert list(task["inputRequests"]) == ["elicit-2"]
        await carrier.update(task_id, ALICE, {"elicit-2": accept(city="London"), "bogus": {"x": 1}})
        task = await task_until(carrier, task_id, status("completed"))
        assert task["result"] == {"content": [{"type": "text", "text": "Ada from London"}]}


def both_at_once(ctx: Context) -> Any:
    answers = yield {"first": Elicit("First?", Form().string("v")), "second": Elicit("Second?", Form().string("v"))}
    return answers["first"].value["v"] + answers["second"].value["v"]


async def test_partial_update_leaves_only_the_pending_keys(store: TaskStore) -> None:
    async with node(store, {"both": both_at_once}) as carrier:
        task_id = await start(carrier, "both")
        task = await task_until(carrier, task_id, status("input_required"))
        assert sorted(task["inputRequests"]) == ["first", "second"]
        await carrier.update(task_id, ALICE, {"first": accept(v="a")})
        task = validate_task("GetTaskResult", await carrier.get(task_id, ALICE))
        assert task["status"] == "input_required" and list(task["inputRequests"]) == ["second"]
        # An answer to a key already answered is ignored, not an error, and does not resume.
        await carrier.update(task_id, ALICE, {"first": accept(v="z")})
        assert (await carrier.get(task_id, ALICE))["status"] == "input_required"
        await carrier.update(task_id, ALICE, {"second": accept(v="b")})
        task = await task_until(carrier, task_id, status("completed"))
        assert task["result"]["content"][0]["text"] == "ab"


async def test_a_malformed_answer_is_a_clear_error_and_changes_nothing(store: TaskStore) -> None:
    async with node(store, {"ask": two_questions}) as carrier:
        task_id = await start(carrier, "ask")
        before = await task_until(carrier, task_id, status("input_required"))
        with pytest.raises(InvalidParams, match="elicit-1"):
            await carrier.update(task_id, ALICE, {"elicit-1": "not an object"})
        assert await carrier.get(task_id, ALICE) == before
        # Content that does not fit the asked form is refused too: stored, it would fail the task later.
        with pytest.raises(InvalidParams, match="elicit-1"):
            await carrier.update(task_id, ALICE, {"elicit-1": accept(name=42)})
        assert await carrier.get(task_id, ALICE) == before


async def test_concurrent_updates_from_two_nodes_resume_once(shared_url: str) -> None:
    runs: list[str] = []

    def guarded(ctx: Context) -> Any:
        answer = yield Elicit("Go?", Form().string("go"))
        yield Step(runs.append, answer.value["go"])
        return "done"

    handlers = {"guarded": guarded}
    async with open_store(shared_url) as one, open_store(shared_url) as two:
        async with node(one, handlers) as first, node(two, handlers) as second:
            task_id = await start(first, "guarded")
            await task_until(first, task_id, status("input_required"))
            async with trio.open_nursery() as nursery:
                for index in range(30):
                    carrier = first if index % 2 else second
                    nursery.start_soon(carrier.update, task_id, ALICE, {"elicit-1": accept(go=str(index))})
            task = await task_until(second, task_id, status("completed"))
            assert task["result"]["content"][0]["text"] == "done"
    assert len(runs) == 1


async def test_cancel_during_a_step_stops_it_and_stays_cancelled(store: TaskStore) -> None:
    started = trio.Event()
    stopped = trio.Event()

    async def wait_forever() -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async def slow(ctx: Context) -> Any:
        yield Step(wait_forever)
        yield "never"

    async with node(store, {"slow": slow}) as carrier:
        task_id = await start(carrier, "slow")
        await started.wait()
        validate_task("CancelTaskResult", await carrier.cancel(task_id, ALICE))
        with trio.fail_after(5):
            await stopped.wait()
        task = validate_task("GetTaskResult", await carrier.get(task_id, ALICE))
        assert task["status"] == "cancelled"
        await carrier.update(task_id, ALICE, {"step-1": {}})
        await carrier.cancel(task_id, ALICE)
        assert (await carrier.get(task_id, ALICE))["status"] == "cancelled"


async def test_a_terminal_task_never_changes(store: TaskStore) -> None:
    async with node(store, {"quick": lambda: "ok"}) as carrier:
        task_id = await start(carrier, "quick")
        done = await task_until(carrier, task_id, status("completed"))
        await carrier.cancel(task_id, ALICE)
        assert await carrier.get(task_id, ALICE) == done


def broken() -> Any:
    yield Step(lambda: 1)
    raise RuntimeError("disk on fire")


def refusing() -> Any:
    yield Step(lambda: 1)
    raise InvalidParams("no such account", data={"account": 7})


async def test_failing_handlers(store: TaskStore) -> None:
    async with node(store, {"broken": broken, "refusing": refusing, "gone": None}) as carrier:
        # Handler code that raises: the tool's error result, as on the wire (the task completed).
        task_id = await start(carrier, "broken")
        task = await task_until(carrier, task_id, status("completed", "failed"))
        assert task["status"] == "completed" and task["result"]["isError"] is True
        assert "disk on fire" in task["result"]["content"][0]["text"]
        # A protocol error: the task failed with the JSON-RPC error.
        task_id = await start(carrier, "refusing")
        task = await task_until(carrier, task_id, status("completed", "failed"))
        assert task["status"] == "failed"
        assert task["error"] == {"code": -32602, "message": "no such account", "data": {"account": 7}}


async def test_expired_tasks_are_unknown(clocked_store: TaskStore, clock: FakeClock) -> None:
    async with node(clocked_store, {"ask": two_questions}, ttl_ms=400, clock=clock) as carrier:
        task_id = await start(carrier, "ask")
        task = await task_until(carrier, task_id, status("input_required"))
        assert task["ttlMs"] == 400
        clock.advance(0.4)
        assert (await carrier.get(task_id, ALICE))["status"] == "input_required"
        clock.advance(0.001)
        with pytest.raises(UnknownTask):
            await carrier.get(task_id, ALICE)
        with pytest.raises(UnknownTask):
            await carrier.update(task_id, ALICE, {"elicit-1": accept(name="late")})
        with pytest.raises(UnknownTask):
            await carrier.cancel(task_id, ALICE)


async def test_a_task_working_past_its_ttl_completes_and_its_outcome_stays_readable(store: TaskStore) -> None:
    gate = trio.Event()

    async def slow(ctx: Context) -> Any:
        opened = yield Step(gate.wait)
        yield f"finished after its ttl {opened}"

    ttl, lease = 0.5, 0.6
    async with node(store, {"slow": slow}, ttl_ms=int(ttl * 1000), lease=lease) as carrier:
        task_id = await start(carrier, "slow")
        created = trio.current_time()
        with trio.fail_after(10):
            # The condition is the time itself: past the ttl, and past ttl and lease together.
            while trio.current_time() < created + 2 * (ttl + lease):
                task = validate_task("GetTaskResult", await carrier.get(task_id, ALICE))
                assert task["status"] == "working"
                await trio.sleep(0.02)
        gate.set()
        done = await task_until(carrier, task_id, status("completed"))
        assert done["result"]["content"][0]["text"] == "finished after its ttl None"
        assert done["ttlMs"] == 500
        # A finished task lives its ttl from the end, then is unknown like any expired one.
        with trio.fail_after(5):
            while True:
                try:
                    await carrier.get(task_id, ALICE)
                except UnknownTask:
                    break
                await trio.sleep(0.02)


async def test_another_principal_sees_an_unknown_task(store: TaskStore) -> None:
    async with node(store, {"ask": two_questions}) as carrier:
        task_id = await start(carrier, "ask")
        await task_until(carrier, task_id, status("input_required"))
        errors = []
        for call in (
            carrier.get(task_id, "mallory"),
            carrier.update(task_id, "mallory", {"elicit-1": accept(name="x")}),
            carrier.cancel(task_id, "mallory"),
            carrier.get(task_id, None),
            carrier.get("no-such-task", ALICE),
        ):
            with pytest.raises(UnknownTask) as caught:
                await call
            errors.append(caught.value.to_error_object())
        assert errors == [{"code": -32602, "message": "Unknown task"}] * 5
        assert (await carrier.get(task_id, ALICE))["status"] == "input_required"


async def test_progress_becomes_the_status_message(store: TaskStore) -> None:
    release = trio.Event()

    async def reporting(ctx: Context) -> Any:
        ctx.progress(1, 4, "copying")
        yield Step(release.wait)
        yield "copied"

    async with node(store, {"copy": reporting}, lease=3) as carrier:
        task_id = await start(carrier, "copy")
        task = await task_until(carrier, task_id, lambda t: t.get("statusMessage") == "1/4: copying")
        assert task["status"] == "working"
        release.set()
        task = await task_until(carrier, task_id, status("completed"))
        assert task["result"]["content"][0]["text"] == "copied"


async def test_a_dead_nodes_task_is_taken_over_without_rerunning_recorded_steps(shared_url: str) -> None:
    calls: list[str] = []
    second_attempt = trio.Event()

    def prepare() -> str:
        calls.append("prepare")
        return "prepared"

    async def long_work(attempts: list[str]) -> str:
        calls.append("long")
        if calls.count("long") == 1:
            await trio.sleep_forever()  # the node dies in here
        second_attempt.set()
        return "worked"

    async def job(ctx: Context) -> Any:
        first = yield Step(prepare)
        second = yield Step(long_work, [])
        yield f"{first}+{second}"

    handlers = {"job": job}
    async with open_store(shared_url) as one, open_store(shared_url) as two:
        async with node(one, handlers, lease=0.6) as dying:
            task_id = await start(dying, "job")
            await until(lambda: calls == ["prepare", "long"], timeout=5)
        # The first node is gone mid-Step; its lease runs out and the second node replays.
        assert (await two.get(task_id)) is not None
        async with node(two, handlers, lease=0.6) as survivor:
            task = await task_until(survivor, task_id, status("completed"))
        assert task["result"]["content"][0]["text"] == "prepared+worked"
        assert calls == ["prepare", "long", "long"]


@pytest.mark.slow
async def test_redis_going_away_mid_run_loses_nothing(tmp_path: Any) -> None:
    from mrtr.carriers.tasks import StoreUnavailable

    from .redis_server import free_port, redis_server

    calls: list[str] = []
    gate = trio.Event()

    def prepare() -> str:
        calls.append("prepare")
        return "prepared"

    async def wait_for_gate() -> str:
        calls.append("wait")
        await gate.wait()
        return "waited"

    async def job(ctx: Context) -> Any:
        first = yield Step(prepare)
        second = yield Step(wait_for_gate)
        yield f"{first}+{second}"

    port, workdir = free_port(), str(tmp_path)
    with redis_server(port, workdir, persist=True) as (url, first_redis):
        async with open_store(url) as store, node(store, {"job": job}, lease=0.5) as carrier:
            task_id = await start(carrier, "job")
            await until(lambda: calls == ["prepare", "wait"], timeout=5)
            first_redis.terminate()
            first_redis.wait()
            # While Redis is away, calls fail with an error that names the store.
            with pytest.raises(StoreUnavailable, match=f"task store {url}"):
                await carrier.get(task_id, ALICE)
            gate.set()  # the running Step ends, but its result cannot be saved: the run stops
            await until(lambda: not carrier._runs, timeout=5)
            with redis_server(port, workdir, persist=True):
                task = await task_until(carrier, task_id, status("completed"), timeout=20)
    assert task["result"]["content"][0]["text"] == "prepared+waited"
    assert calls == ["prepare", "wait", "wait"]  # the recorded Step did not run again


class Faulty:
    """A memory store whose writes, renewals and lease scans raise RuntimeError while ``broken``: a bug, not an outage."""

    def __init__(self) -> None:
        from mrtr.carriers.tasks.memory import MemoryStore

        self.inner = MemoryStore()
        self.url = self.inner.url
        self.broken = False
        self.failed: list[str] = []

    def _check(self, name: str) -> None:
        if self.broken:
            self.failed.append(name)
            raise RuntimeError(f"{name} is broken")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def replace(self, record: Any) -> bool:
        self._check("replace")
        return await self.inner.replace(record)

    async def renew(self, record: Any) -> bool:
        self._check("renew")
        return await self.inner.renew(record)

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        self._check("claimable")
        return await self.inner.claimable(now, limit)


async def test_an_unexpected_error_in_the_background_loops_leaves_the_node_serving() -> None:
    gate = trio.Event()

    async def gated(ctx: Context) -> Any:
        opened = yield Step(gate.wait)
        yield f"opened {opened}"

    store = Faulty()
    async with node(store, {"gated": gated}, lease=0.3) as carrier:  # type: ignore[arg-type]
        task_id = await start(carrier, "gated")
        store.broken = True
        with trio.fail_after(10):
            while not {"renew", "claimable"} <= set(store.failed):  # the lease keeper and the scan both hit it
                await trio.sleep(0.01)
        store.broken = False
        gate.set()
        task = await task_until(carrier, task_id, status("completed"))
        assert task["result"]["content"][0]["text"] == "opened None"
        assert (await task_until(carrier, await start(carrier, "gated"), status("completed")))["status"] == "completed"


CAP = 20_000


@asynccontextmanager
async def capped(store_url: str) -> AsyncIterator[TaskStore]:
    """The store of each kind, holding records of at most ``CAP`` bytes."""
    async with open_store(store_url, max_record_bytes=CAP) as opened:
        yield opened


async def test_a_task_over_the_size_cap_is_refused_at_creation(store_url: str) -> None:
    from mrtr.tasks import TaskTooLarge

    async with capped(store_url) as store, node(store, {"quick": lambda blob: "ok"}) as carrier:
        with pytest.raises(TaskTooLarge) as caught:
            await start(carrier, "quick", {"blob": "x" * CAP})
        error = caught.value.to_error_object()
        assert error["code"] == -32602
        assert f"over the limit of {CAP} bytes" in error["message"]
        assert error["data"]["limit"] == CAP and error["data"]["size"] > CAP
        assert not carrier._runs
        task_id = await start(carrier, "quick", {"blob": "x" * (CAP // 2)})  # under the cap: fine
        assert (await task_until(carrier, task_id, status("completed")))["result"]["content"][0]["text"] == "ok"


async def test_a_step_result_over_the_size_cap_fails_the_task_clearly(store_url: str) -> None:
    after: list[str] = []

    def bloated(ctx: Context) -> Any:
        yield Step(lambda: "x" * CAP)
        after.append("went on")  # never: the result could not be saved, so the handler must not go on
        return "never"

    def big_answer(ctx: Context) -> Any:
        yield Step(lambda: 1)
        return "y" * CAP  # the outcome itself is over the cap

    async with capped(store_url) as store, node(store, {"bloated": bloated, "big": big_answer}) as carrier:
        for tool in ("bloated", "big"):
            task = await task_until(carrier, await start(carrier, tool), status("completed", "failed"))
            assert task["status"] == "failed", task
            assert task["error"]["code"] == -32603
            assert f"over the limit of {CAP} bytes" in task["error"]["message"]
        assert after == []
        # The node is fine: the next task runs.
        assert (await task_until(carrier, await start(carrier, "big"), status("failed")))["status"] == "failed"


async def test_answers_over_the_size_cap_are_refused_and_the_task_keeps_waiting(store_url: str) -> None:
    from mrtr.tasks import TaskTooLarge

    async with capped(store_url) as store, node(store, {"ask": two_questions}) as carrier:
        task_id = await start(carrier, "ask")
        before = await task_until(carrier, task_id, status("input_required"))
        with pytest.raises(TaskTooLarge):
            await carrier.update(task_id, ALICE, {"elicit-1": accept(name="z" * CAP)})
        assert await carrier.get(task_id, ALICE) == before
        await carrier.update(task_id, ALICE, {"elicit-1": accept(name="Ada")})
        await task_until(carrier, task_id, lambda t: "elicit-2" in t.get("inputRequests", {}))


async def test_lease_renewals_of_a_large_running_task_do_not_rewrite_it(shared_url: str, tmp_path: Any) -> None:
    from .test_store import store_bytes_written

    gate = trio.Event()

    async def gated(ctx: Context, pad: str) -> Any:
        opened = yield Step(gate.wait)
        yield f"opened {opened}"

    async with open_store(shared_url) as store, node(store, {"gated": gated}, lease=0.3) as carrier:
        written = store_bytes_written(shared_url)
        task_id = await start(carrier, "gated", {"pad": "x" * 900_000})
        first = await store.get(task_id)
        assert first is not None
        before = written()
        with trio.fail_after(10):
            while (current := await store.get(task_id)) is not None and current.version < first.version + 10:
                await trio.sleep(0.02)
        assert current is not None and current.updated_at == first.updated_at  # nothing a client sees changed
        renewals = current.version - first.version
        assert written() - before < renewals * 16_000, (written() - before, renewals)
        gate.set()
        assert (await task_until(carrier, task_id, status("completed")))["result"]["content"][0]["text"] == "opened None"
