"""``mrtr check-tasks`` and the check under it: replay the tasks in flight against new code, run nothing.

The check is driven on task records written the way the tasks carrier writes them (one
store of each kind lists the tasks in flight); the command line on a SQLite file, an
unreachable Redis and a store URL of no known kind. The replay of real tasks recorded
by ``mrtr serve`` under another version of the code is in ``test_patch_nodes.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mrtr import Elicit, Form, Step
from mrtr.carriers.contract import ToolBinding
from mrtr.carriers.tasks import TaskRecord, TaskStore, new_task_id, open_store
from mrtr.carriers.tasks.check import check_tasks
from mrtr.cli.commands import main
from mrtr.core.context import Context
from mrtr.core.errors import InvalidParams
from mrtr.core.replay import InputRequired, replay
from mrtr.core.versions import handler_version

from .redis_server import free_port

FORM = Form().string("value")
RUNS: list[str] = []


def measure() -> int:
    RUNS.append("measure")
    return 7


def original(service: str) -> Any:
    size = yield Step(measure)
    answer = yield Elicit(f"Deploy {service} ({size})?", FORM)
    RUNS.append("after the question")
    done = yield Step(measure)
    return f"{answer.value['value']} {done}"


def reworded(service: str) -> Any:
    size = yield Step(measure)
    answer = yield Elicit(f"Really deploy {service} ({size})?", FORM)
    return answer.value["value"]


def asks_first(service: str) -> Any:
    size = yield Step(measure)
    yield Elicit("Which region?", FORM, key="region")
    return size


def fails(service: str) -> Any:
    yield Step(measure)
    raise RuntimeError("no such service")


def resolver(handlers: dict[str, Any]) -> Any:
    def resolve(tool: str, arguments: dict[str, Any]) -> ToolBinding:
        if tool not in handlers:
            raise InvalidParams(f"Unknown tool: {tool}")
        return ToolBinding(handlers[tool], arguments, lambda value: {"content": []}, lambda error: {})

    return resolve


def waiting(tool: str = "deploy", *, answered: bool = False, status: str = "input_required") -> TaskRecord:
    """A task of ``original`` recorded past its first Step, waiting for (or given) its answer."""
    ctx = Context({"service": "api"}, client_capabilities={"elicitation": {}})
    asked = replay(original, {"service": "api"}, ctx, until_step=False)  # runs the first Step once
    assert isinstance(asked, InputRequired)
    ledger = asked.ledger.slots
    if answered:
        from mrtr.core.ledger import Ledger, merge_answers

        ledger = merge_answers(Ledger(ledger), {"elicit-2": {"action": "accept", "content": {"value": "go"}}})[0].slots
    now = time.time()
    return TaskRecord(task_id=new_task_id(), tool=tool, arguments={"service": "api"}, principal=None,
                      client_capabilities={"elicitation": {}}, created_at=now, updated_at=now, ttl_ms=3_600_000,
                      poll_interval_ms=1000, status=status, ledger=ledger,  # type: ignore[arg-type]
                      input_requests={} if answered else asked.to_wire(), expires_at=now + 3600,
                      handler_version=handler_version(original))


async def test_the_tasks_in_flight_are_the_unfinished_ones(store: TaskStore):
    mine = [waiting(), waiting(answered=True, status="working")]
    done = [waiting(status="completed"), waiting(status="failed"), waiting(status="cancelled")]
    for record in mine + done:
        await store.create(record)
    listed = set(await store.in_flight())
    assert {record.task_id for record in mine} <= listed
    assert not {record.task_id for record in done} & listed


async def test_the_check_replays_up_to_the_next_step_and_runs_none(store: TaskStore):
    records = [waiting(), waiting(answered=True, status="working")]
    for record in records:
        await store.create(record)
    RUNS.clear()
    ids = [record.task_id for record in records]
    checks = await check_tasks(store, resolver({"deploy": original}), task_ids=ids)
    assert [(check.task_id, check.problem) for check in checks] == [(ids[0], None), (ids[1], None)]
    # The recorded Step was not run again, the unrecorded one not at all; code between them ran once.
    assert RUNS == ["after the question"]
    assert checks[0].started_by == checks[0].running == handler_version(original)


async def test_each_way_a_task_would_fail_is_reported(store: TaskStore):
    records = {name: waiting(name) for name in ("reworded", "asks_first", "gone")}
    records["fails"] = waiting("fails", answered=True, status="working")
    for record in records.values():
        await store.create(record)
    handlers = {"reworded": reworded, "asks_first": asks_first, "fails": fails}
    checks = {check.tool: check for check in await check_tasks(
        store, resolver(handlers), task_ids=[record.task_id for record in records.values()])}
    reworded_check = checks["reworded"].problem or ""
    assert reworded_check.startswith("MRTR replay mismatch at ordinal #2")
    assert f"deploy: handler reworded runs version {handler_version(reworded)} here and this ledger was recorded " \
           f"by version {handler_version(original)}" in reworded_check
    assert 'Patched("reworded-' in reworded_check
    assert "MRTR replay mismatch at ordinal #2" in (checks["asks_first"].problem or "")  # the key changed
    assert checks["gone"].problem == "the code has no tool that can run it: Unknown tool: gone"
    assert checks["gone"].running is None
    assert (checks["fails"].problem or "").startswith("the handler fails on replay at ")
    assert "RuntimeError: no such service" in (checks["fails"].problem or "")


async def test_a_waiting_task_the_code_would_ask_other_keys_of_is_reported(store: TaskStore):
    record = waiting("deploy")
    await store.create(record)

    def finishes(service: str) -> Any:
        yield Step(measure)
        return "no question any more"

    from mrtr.core.kinds import Kind

    # A ledger whose pending question the new code never reaches: it finishes first.
    short = TaskRecord(**{**{f: getattr(record, f) for f in record.__struct_fields__},
                          "ledger": tuple(s for s in record.ledger if s.kind == Kind.STEP),
                          "task_id": new_task_id()})
    await store.create(short)
    (check,) = await check_tasks(store, resolver({"deploy": finishes}), task_ids=[short.task_id])
    assert check.problem == "the task waits for answers to elicit-2, and the code would now ask for nothing"


def test_the_command_reports_an_empty_store_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    url = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    assert main(["check-tasks", "tests.tasks.app:server", "--tasks", url]) == 0
    out = capsys.readouterr().out
    assert out == f"mrtr check-tasks: 0 tasks in flight in {url}; 0 would fail under tests.tasks.app:server\n"


def test_the_command_exits_3_when_the_store_cannot_be_read(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MRTR_STORE", f"redis://:s3cret-word@127.0.0.1:{free_port()}/0")
    assert main(["check-tasks", "tests.tasks.app:server"]) == 3
    said = capsys.readouterr()
    assert "cannot be reached" in said.err and "s3cret-word" not in said.err + said.out


def test_the_command_refuses_a_password_on_its_command_line(capsys: pytest.CaptureFixture[str]):
    for url in (f"redis://:s3cret-word@127.0.0.1:{free_port()}/0", "redis://127.0.0.1/0?password=s3cret-word"):
        assert main(["check-tasks", "tests.tasks.app:server", "--store", url]) == 2
        said = capsys.readouterr()
        assert "MRTR_REDIS_PASSWORD" in said.err and "s3cret-word" not in said.err + said.out


def test_the_command_refuses_bad_usage(capsys: pytest.CaptureFixture[str]):
    assert main(["check-tasks"]) == 2
    assert main(["check-tasks", "tests.tasks.app:server", "--tasks", "ftp://nowhere"]) == 2
    assert "unknown task store URL" in capsys.readouterr().err
    assert main(["check-tasks", "tests.tasks.nope:server"]) == 2


def test_the_command_writes_nothing_and_exits_1_for_a_task_that_would_fail(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]):
    import trio

    url = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    record = waiting()

    async def write() -> None:
        async with open_store(url) as store:
            await store.create(record)

    async def read() -> TaskRecord | None:
        async with open_store(url) as store:
            return await store.get(record.task_id)

    trio.run(write)
    assert main(["check-tasks", "tests.tasks.app:server", "--tasks", url]) == 1  # its tool is not in that app
    out = capsys.readouterr().out
    assert f"task {record.task_id} (tool deploy, input_required, started by version {record.handler_version}) " \
           "would fail:\n  the code has no tool that can run it: Unknown tool: deploy" in out
    assert trio.run(read) == record  # nothing written
