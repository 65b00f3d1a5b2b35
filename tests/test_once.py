"""``once=True`` through the server: the round that completes a conversation runs once per token.

In process, on the memory store (the default for a server without task tools); the
same rounds across processes and nodes, on SQLite and Redis, are in
``tests/tasks/test_once_nodes.py``. Each handler counts its side effect in a list the
test reads; every message the server sends is checked against the 2026-07-28 schema.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Context, Elicit, Form, InvalidParams, Step
from mrtr.server import Server
from mrtr.testing import accept

from .conftest import examples, meta
from .wire_schema import validate_message

TASKS = "io.modelcontextprotocol/tasks"
META = meta({"elicitation": {}})
TASK_META = meta({"elicitation": {}, "extensions": {TASKS: {}}})
CONFIRM = Form().boolean("ok")


def build(effects: list[str], **options: Any) -> Server:
    server = Server("once", secret=b"o" * 32, **options)

    @server.tool(once=True)
    def charge(amount: int) -> Any:
        """Asks to confirm, then charges: the charge must happen once."""
        answer = yield Elicit(f"Charge {amount}?", CONFIRM)
        if not answer.value["ok"]:
            return "not charged"
        effects.append(f"charged {amount}")
        return f"charged {amount} (#{len(effects)})"

    @server.tool
    def charge_twice(amount: int) -> Any:
        """The same tool without once: what the retry does there."""
        yield Elicit(f"Charge {amount}?", CONFIRM)
        effects.append(f"charged {amount}")
        return f"charged {amount} (#{len(effects)})"

    @server.tool(once=True)
    def ping() -> str:
        """No question: a first call has no token to name it."""
        effects.append("ping")
        return f"pong {len(effects)}"

    @server.tool(once=True)
    def fails(ctx: Context) -> Any:
        yield Elicit("Go?", CONFIRM)
        effects.append("failed")
        raise RuntimeError("the card was declined")

    @server.tool(once=True)
    def refuses() -> Any:
        yield Elicit("Go?", CONFIRM)
        effects.append("refused")
        raise InvalidParams("the amount is out of range")

    @server.tool(once=True)
    def two() -> Any:
        first = yield Elicit("First?", CONFIRM)
        effects.append("between")
        second = yield Elicit("Second?", CONFIRM)
        effects.append("end")
        return f"{first.value['ok']} {second.value['ok']}"

    @server.prompt(once=True)
    def greeting(name: str) -> Any:
        yield Elicit("Sign the guest book?", CONFIRM)
        effects.append(f"greeted {name}")
        return f"Hello {name} (#{len(effects)})"

    @server.prompt(once=True)
    def broken_prompt() -> Any:
        yield Elicit("Go?", CONFIRM)
        effects.append("prompt failed")
        raise RuntimeError("kaput")

    @server.resource("notes://once", once=True)
    def note() -> Any:
        yield Elicit("Open it?", CONFIRM)
        effects.append("read")
        return f"note #{len(effects)}"

    @server.tool(task="optional", once=True)
    def ship(item: str) -> Any:
        """A task tool: its task is created on the round that answers the question."""
        yield Elicit(f"Ship {item}?", CONFIRM)
        label = yield Step(_label, item)
        effects.append(f"shipped {label}")
        return label

    return server


def _label(item: str) -> str:
    return f"label-{item}"


async def rpc(server: Server, method: str, params: dict[str, Any], *, envelope: dict[str, Any] = META,
              request_id: int = 1) -> dict[str, Any]:
    message = await server.handle({"jsonrpc": "2.0", "id": request_id, "method": method,
                                   "params": {**params, "_meta": envelope}})
    validate_message(message)
    return message


def retry_of(asked: dict[str, Any], params: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    result = asked["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    return {**params, "requestState": result["requestState"], "inputResponses": {key: accept(ok=ok)}}


@pytest.fixture
async def served() -> Any:
    effects: list[str] = []
    server = build(effects, tasks_url="memory:")
    async with server.running():
        yield server, effects


async def test_a_retried_final_round_runs_once_and_every_retry_gets_its_result(served):
    server, effects = served
    call = {"name": "charge", "arguments": {"amount": 5}}
    final = retry_of(await rpc(server, "tools/call", call), call)
    answers = [await rpc(server, "tools/call", final, request_id=n) for n in range(3)]
    assert effects == ["charged 5"]
    assert [a["result"] for a in answers] == [answers[0]["result"]] * 3
    assert answers[0]["result"]["content"][0]["text"] == "charged 5 (#1)"


async def test_without_once_the_same_retry_charges_again(served):
    server, effects = served
    call = {"name": "charge_twice", "arguments": {"amount": 5}}
    final = retry_of(await rpc(server, "tools/call", call), call)
    for n in range(3):
        await rpc(server, "tools/call", final, request_id=n)
    assert effects == ["charged 5"] * 3


async def test_twenty_concurrent_retries_charge_once(served):
    server, effects = served
    call = {"name": "charge", "arguments": {"amount": 7}}
    final = retry_of(await rpc(server, "tools/call", call), call)
    texts: list[str] = []

    async def retry(n: int) -> None:
        texts.append((await rpc(server, "tools/call", final, request_id=n))["result"]["content"][0]["text"])

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(retry, n)
    assert effects == ["charged 7"] and texts == ["charged 7 (#1)"] * 20


async def test_a_retry_with_other_answers_is_refused(served):
    server, effects = served
    call = {"name": "charge", "arguments": {"amount": 5}}
    asked = await rpc(server, "tools/call", call)
    done = await rpc(server, "tools/call", retry_of(asked, call, ok=True))
    other = await rpc(server, "tools/call", retry_of(asked, call, ok=False))
    assert done["result"]["content"][0]["text"] == "charged 5 (#1)"
    assert other["error"]["code"] == -32602
    assert other["error"]["message"].startswith("requestState was already used to complete this request with other "
                                                "inputResponses")
    assert effects == ["charged 5"]


async def test_a_malformed_answer_records_nothing_and_the_corrected_retry_runs(served):
    server, effects = served
    call = {"name": "charge", "arguments": {"amount": 5}}
    asked = (await rpc(server, "tools/call", call))["result"]
    bad = {**call, "requestState": asked["requestState"],
           "inputResponses": {"elicit-1": {"action": "accept", "content": {"ok": "yes please"}}}}
    refused = await rpc(server, "tools/call", bad)
    assert refused["error"]["code"] == -32602 and "ok" in refused["error"]["message"]
    good = await rpc(server, "tools/call", {**bad, "inputResponses": {"elicit-1": accept(ok=True)}})
    assert good["result"]["content"][0]["text"] == "charged 5 (#1)" and effects == ["charged 5"]


async def test_a_first_call_without_a_token_runs_every_time(served):
    server, effects = served
    first = await rpc(server, "tools/call", {"name": "ping", "arguments": {}})
    second = await rpc(server, "tools/call", {"name": "ping", "arguments": {}})
    assert [first["result"]["content"][0]["text"], second["result"]["content"][0]["text"]] == ["pong 1", "pong 2"]


async def test_only_the_round_that_completes_is_recorded(served):
    server, effects = served
    call = {"name": "two", "arguments": {}}
    asked = await rpc(server, "tools/call", call)
    middle = retry_of(asked, call)
    # A retry of the middle round runs again, as before (it asks another question and has its own token).
    second = [await rpc(server, "tools/call", middle, request_id=n) for n in range(2)]
    assert effects == ["between", "between"]
    final = retry_of(second[0], call)
    for n in range(2):
        assert (await rpc(server, "tools/call", final, request_id=n))["result"]["content"][0]["text"] == "True True"
    assert effects == ["between", "between", "between", "end"]  # the final round's code before its end ran once


async def test_a_failing_handler_is_recorded_as_its_tool_error(served):
    server, effects = served
    call = {"name": "fails", "arguments": {}}
    final = retry_of(await rpc(server, "tools/call", call), call)
    results = [(await rpc(server, "tools/call", final, request_id=n))["result"] for n in range(2)]
    assert results[0] == results[1] and results[0]["isError"] is True  # the same reference too: recorded
    assert results[0]["content"][0]["text"].startswith("tool fails failed with an internal error (reference ")
    assert effects == ["failed"]


async def test_a_protocol_error_the_handler_raises_records_nothing(served):
    server, effects = served
    call = {"name": "refuses", "arguments": {}}
    final = retry_of(await rpc(server, "tools/call", call), call)
    errors = [(await rpc(server, "tools/call", final, request_id=n))["error"] for n in range(2)]
    assert errors == [{"code": -32602, "message": "the amount is out of range"}] * 2
    assert effects == ["refused", "refused"]


async def test_prompts_and_resources_run_once_too(served):
    server, effects = served
    get = {"name": "greeting", "arguments": {"name": "Ada"}}
    final = retry_of(await rpc(server, "prompts/get", get), get)
    prompts = [await rpc(server, "prompts/get", final, request_id=n) for n in range(2)]
    assert prompts[0]["result"] == prompts[1]["result"]
    assert prompts[0]["result"]["messages"][0]["content"]["text"] == "Hello Ada (#1)"
    read = {"uri": "notes://once"}
    final = retry_of(await rpc(server, "resources/read", read), read)
    notes = [await rpc(server, "resources/read", final, request_id=n) for n in range(2)]
    assert notes[0]["result"] == notes[1]["result"] and notes[0]["result"]["contents"][0]["text"] == "note #2"
    failing = {"name": "broken_prompt", "arguments": {}}
    final = retry_of(await rpc(server, "prompts/get", failing), failing)
    errors = [(await rpc(server, "prompts/get", final, request_id=n))["error"] for n in range(2)]
    assert errors[0] == errors[1] and errors[0]["code"] == -32603
    assert errors[0]["message"].startswith("Internal error: prompt broken_prompt failed with an internal error")
    assert effects == ["greeted Ada", "read", "prompt failed"]


async def test_a_retried_round_that_creates_a_task_returns_the_same_task(served):
    server, effects = served
    call = {"name": "ship", "arguments": {"item": "book"}}
    final = retry_of(await rpc(server, "tools/call", call, envelope=TASK_META), call)
    created = [(await rpc(server, "tools/call", final, envelope=TASK_META, request_id=n))["result"]
               for n in range(3)]
    assert created[0]["resultType"] == "task"
    assert [task["taskId"] for task in created] == [created[0]["taskId"]] * 3
    assert server.tasks is not None
    store = server.tasks.store  # type: ignore[attr-defined]

    async def finished() -> Any:
        return (await rpc(server, "tasks/get", {"taskId": created[0]["taskId"]}, envelope=TASK_META))["result"]

    from .conftest import until

    task = await until(finished, lambda task: task["status"] == "completed")
    assert task["result"]["content"][0]["text"] == "label-book"
    assert effects == ["shipped label-book"]
    assert await store.in_flight() == []
    # The client without the extension gets the result on the call, once, through the server's rounds.
    final = retry_of(await rpc(server, "tools/call", call), call)
    plain = [(await rpc(server, "tools/call", final, request_id=n))["result"] for n in range(2)]
    assert plain[0] == plain[1] and plain[0]["content"][0]["text"] == "label-book"
    assert effects == ["shipped label-book"] * 2


async def test_a_server_that_is_not_running_refuses_a_once_round():
    server = build([])
    call = {"name": "charge", "arguments": {"amount": 5}}
    asked = await rpc(server, "tools/call", call)  # a first round needs no store
    refused = await rpc(server, "tools/call", retry_of(asked, call))
    assert refused["error"]["code"] == -32603 and "no task store is running" in refused["error"]["message"]


async def test_a_once_server_without_task_tools_keeps_its_rounds_in_memory():
    server = Server("memory", secret=b"o" * 32)

    @server.tool(once=True)
    def confirm() -> Any:
        yield Elicit("Sure?", CONFIRM)
        return "done"

    assert not server.has_task_tools and server.has_once_handlers
    async with server.running():
        assert server.rounds is not None and server.tasks is None
        assert server.rounds.store.url == "memory:"  # type: ignore[attr-defined]
    assert server.rounds is None


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
ANSWERS = st.one_of(
    JSON,  # anything at all as inputResponses
    st.builds(lambda value: {"elicit-1": value}, JSON),  # anything under the issued key
    st.builds(lambda ok: {"elicit-1": accept(ok=ok)}, st.booleans()),  # a well-formed answer, either way
)


@settings(max_examples=examples(60), deadline=None)
@given(attempts=st.lists(ANSWERS, min_size=1, max_size=5))
def test_any_retries_of_a_final_round_run_it_at_most_once_and_agree(attempts: list[Any]):
    """Whatever a client sends with one token: a result or a -32602, one charge at most, one result for one set
    of answers, and a refusal for any other set once the round completed."""
    from mrtr.core.jsonrpc import canonical

    effects: list[str] = []

    async def main() -> None:
        server = build(effects, tasks_url="memory:")
        async with server.running():
            call = {"name": "charge", "arguments": {"amount": 1}}
            token = (await rpc(server, "tools/call", call))["result"]["requestState"]
            completed: tuple[bytes, dict[str, Any]] | None = None
            for n, responses in enumerate(attempts):
                message = await rpc(server, "tools/call", {**call, "requestState": token, "inputResponses": responses},
                                    request_id=n)
                if "error" in message:
                    assert message["error"]["code"] == -32602, message
                    if completed is not None and canonical(responses or {}) != completed[0]:
                        assert "other inputResponses" in message["error"]["message"]
                    continue
                result = message["result"]
                if result["resultType"] == "input_required":
                    continue  # an answer that answers nothing (lenient keys): asked again, nothing recorded
                if completed is None:
                    completed = (canonical(responses or {}), result)
                else:
                    assert canonical(responses or {}) == completed[0] and result == completed[1]
        assert len(effects) <= 1

    trio.run(main)


async def test_a_token_that_fails_its_checks_claims_nothing(served):
    server, effects = served
    call = {"name": "charge", "arguments": {"amount": 5}}
    asked = await rpc(server, "tools/call", call)
    token = asked["result"]["requestState"]
    store = server.rounds.store.store  # the memory store under the status observer
    bad = [{**call, "requestState": token[:-2] + ("AA" if token[-2:] != "AA" else "BA")},  # tampered
           {**call, "requestState": "x" * 40},
           {**call, "arguments": {"amount": 6}, "requestState": token},  # another call's token
           {"name": "charge", "arguments": {"amount": 5}, "inputResponses": {"elicit-1": accept(ok=True)}}]
    for params in bad:
        refused = await rpc(server, "tools/call", params)
        assert refused["error"]["code"] == -32602, refused
    assert store._rounds == {} and effects == []  # nothing was claimed, nothing ran


async def test_a_once_round_of_a_sync_handler_in_a_worker_thread_runs_once():
    from mrtr.transports.shared import run_in_thread

    effects: list[str] = []
    server = build(effects, tasks_url="memory:", sync_handlers="thread")
    call = {"name": "charge", "arguments": {"amount": 9}}

    async def post(params: dict[str, Any], n: int) -> dict[str, Any]:
        message = await server.handle({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                       "params": {**params, "_meta": META}}, run_sync=run_in_thread)
        validate_message(message)
        return message

    async with server.running():
        final = retry_of(await post(call, 0), call)
        texts: list[str] = []

        async def retry(n: int) -> None:
            texts.append((await post(final, n))["result"]["content"][0]["text"])

        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(retry, n)
    assert effects == ["charged 9"] and texts == ["charged 9 (#1)"] * 5
