"""What a handler reads is the same in every round and on every carrier, and what it cannot be is its own failure.

Found by attacking the replay: an accepted answer without content, Step values of types
JSON does not keep (tuples, bytes, integer keys), integers past what a token carries, a
Step value its annotation refuses, a key that is not a string, and a result that cannot
be shaped in a round that runs once. Through the server in process, every message
checked against the 2026-07-28 schema; tasks on every kind of store.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from mrtr import Elicit, Form, Step
from mrtr.core.jsonrpc import parse_message
from mrtr.server import Server
from mrtr.testing import accept

from ..conftest import until
from ..test_once import CONFIRM, META, TASK_META
from ..wire_schema import validate_message



async def wire(server: Server, method: str, params: dict[str, Any], envelope: dict[str, Any] = META) -> dict[str, Any]:
    """A request as a transport hands it over: JSON text parsed by the transport's own parser."""
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": envelope}})
    message = await server.handle(parse_message(text.encode()))
    validate_message(message)
    return message


def task_of(server: Server, task_id: str) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A probe of the task's ``GetTaskResult``, for :func:`until`."""
    async def task() -> dict[str, Any]:
        return (await wire(server, "tasks/get", {"taskId": task_id}, TASK_META))["result"]

    return task


def retry(asked: dict[str, Any], params: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    result = asked["result"]
    assert result["resultType"] == "input_required", asked
    (key,) = result["inputRequests"]
    return {**params, "requestState": result["requestState"], "inputResponses": {key: answer}}


def pair():  # type: ignore[no-untyped-def]  # unannotated: what the ledger gives back, a list
    return ("mon", 10)


def raw() -> bytes:
    return b"\x01\x02"


def numbered() -> dict[int, str]:
    return {1: "a"}


def numbered_untyped():  # type: ignore[no-untyped-def]
    return {1: "a"}


def huge() -> int:
    return 2 ** 64


def wrong() -> int:
    return "seven"  # type: ignore[return-value]


def build(seen: list[Any], **options: Any) -> Server:
    server = Server("recorded", secret=b"r" * 32, **options)

    @server.tool
    def nickname() -> Any:
        nick = yield Elicit("A nickname? (optional)", Form().string("nick", optional=True))
        seen.append(nick.content)
        name = nick.content.get("nick", "anonymous")
        yield Elicit(f"Sign up as {name}?", CONFIRM)
        return f"signed up as {name}"

    @server.tool
    def values() -> Any:
        untyped = yield Step(numbered_untyped)
        typed = yield Step(numbered)
        got = yield Step(raw)
        slot = yield Step(pair)
        seen.append((untyped, typed, got, slot))
        yield Elicit(f"Use {untyped} {typed} {got!r} {slot}?", CONFIRM)
        return "used"

    @server.tool(task="optional")
    def values_task() -> Any:
        got = yield Step(raw)
        slot = yield Step(pair)
        seen.append((got, slot))
        yield Elicit(f"Use {got!r} {slot}?", CONFIRM)
        return "used"

    @server.tool
    def count() -> Any:
        answer = yield Elicit("How many?", Form().integer("n"))
        yield Elicit("Sure?", CONFIRM)
        return str(answer.content["n"])

    @server.tool
    def too_big() -> Any:
        yield Step(huge)
        yield Elicit("Sure?", CONFIRM)

    @server.tool
    def mistyped() -> Any:
        yield Step(wrong)
        yield Elicit("Sure?", CONFIRM)

    @server.tool
    def badly_keyed() -> Any:
        yield Elicit("Sure?", CONFIRM, key=5)  # type: ignore[arg-type]

    return server


async def test_an_accepted_answer_without_content_reads_the_same_in_every_round():
    seen: list[Any] = []
    server = build(seen)
    call = {"name": "nickname", "arguments": {}}
    second = await wire(server, "tools/call", retry(await wire(server, "tools/call", call), call, {"action": "accept"}))
    assert second["result"]["inputRequests"]["elicit-2"]["params"]["message"] == "Sign up as anonymous?"
    done = await wire(server, "tools/call", retry(second, call, accept(ok=True)))
    assert done["result"]["content"][0]["text"] == "signed up as anonymous"
    assert seen == [{}, {}]


async def test_a_steps_value_reads_in_its_first_round_as_in_every_later_one():
    seen: list[Any] = []
    server = build(seen)
    call = {"name": "values", "arguments": {}}
    asked = await wire(server, "tools/call", call)
    done = await wire(server, "tools/call", retry(asked, call, accept(ok=True)))
    assert done["result"]["content"][0]["text"] == "used", done
    # the JSON data model unless annotated: string keys, Base64 text, lists; the annotation converts back
    recorded = ({"1": "a"}, {1: "a"}, b"\x01\x02", ["mon", 10])
    assert seen == [recorded, recorded]


async def test_a_task_reads_its_steps_values_as_the_token_carrier_does(store_url: str):
    seen: list[Any] = []
    server = build(seen, tasks_url=store_url)
    async with server.running():
        created = await wire(server, "tools/call", {"name": "values_task", "arguments": {}}, TASK_META)
        task_id = created["result"]["taskId"]

        task = task_of(server, task_id)

        waiting = await until(task, lambda found: found["status"] != "working")
        assert waiting["status"] == "input_required", waiting
        (key,) = waiting["inputRequests"]
        await wire(server, "tasks/update", {"taskId": task_id, "inputResponses": {key: accept(ok=True)}}, TASK_META)
        finished = await until(task, lambda found: found["status"] not in ("working", "input_required"))
    assert finished["status"] == "completed", finished
    assert seen == [(b"\x01\x02", ["mon", 10])] * 2


async def test_an_integer_a_token_cannot_carry_is_the_clients_error_or_the_handlers():
    server = build([])
    call = {"name": "count", "arguments": {}}
    asked = await wire(server, "tools/call", call)
    for n in (2 ** 64, -(2 ** 63) - 1):
        refused = await wire(server, "tools/call", retry(asked, call, accept(n=n)))
        assert refused["error"]["code"] == -32602
        assert 'field "n" holds an integer outside the 64-bit range' in refused["error"]["message"]
    edge = await wire(server, "tools/call", retry(asked, call, accept(n=2 ** 64 - 1)))
    assert edge["result"]["resultType"] == "input_required"
    failed = await wire(server, "tools/call", {"name": "too_big", "arguments": {}})
    assert failed["result"]["isError"] is True  # the handler's failure: a tool error result, not -32603


async def test_a_step_value_its_annotation_refuses_and_a_key_that_is_no_string_are_the_handlers_failures(caplog):
    server = build([], mask_errors=False)
    mistyped = await wire(server, "tools/call", {"name": "mistyped", "arguments": {}})
    assert mistyped["result"]["isError"] is True
    assert "does not convert to its return annotation int" in mistyped["result"]["content"][0]["text"]
    keyed = await wire(server, "tools/call", {"name": "badly_keyed", "arguments": {}})
    assert keyed["result"]["isError"] is True
    assert "key must be a non-empty string, got 5" in keyed["result"]["content"][0]["text"]
    with pytest.raises(TypeError, match="non-empty string"):
        Elicit("Sure?", CONFIRM, key="")


class Receipt:
    """Neither text, content nor anything msgspec encodes."""


async def test_a_once_round_whose_result_cannot_be_shaped_is_recorded_and_runs_once():
    charges: list[int] = []
    server = Server("once", secret=b"o" * 32)

    @server.tool(once=True)
    def charge() -> Any:
        yield Elicit("Charge?", CONFIRM)
        charges.append(1)
        return Receipt()

    @server.prompt(once=True)
    def greet() -> Any:
        yield Elicit("Greet?", CONFIRM)
        charges.append(2)
        return 42

    async with server.running():
        call = {"name": "charge", "arguments": {}}
        final = retry(await wire(server, "tools/call", call), call, accept(ok=True))
        answers = [await wire(server, "tools/call", final) for _ in range(3)]
        assert answers[0]["result"]["isError"] is True
        assert all(answer["result"]["content"] == answers[0]["result"]["content"] for answer in answers)
        get = {"name": "greet", "arguments": {}}
        final = retry(await wire(server, "prompts/get", get), get, accept(ok=True))
        errors = [(await wire(server, "prompts/get", final))["error"] for _ in range(3)]
        assert errors[0]["code"] == -32603 and errors == [errors[0]] * 3
    assert charges == [1, 2]


class Even(msgspec.Struct):
    n: int

    def __post_init__(self) -> None:
        if self.n % 2:
            raise ValueError("must be even")


def begin() -> int:
    return 1


async def test_a_task_asks_again_for_an_answer_its_model_refuses(store_url: str):
    # tasks/update checks an answer against the form on the wire; the Struct's own check runs when the
    # task reaches the answer. One bad answer must not fail a waiting task: it asks again, saying why.
    server = Server("even", secret=b"e" * 32, tasks_url=store_url)

    @server.tool(task="optional")
    def even() -> Any:
        yield Step(begin)
        answer = yield Elicit("An even number?", Even)
        return f"got {answer.value.n}"

    async with server.running():
        created = await wire(server, "tools/call", {"name": "even", "arguments": {}}, TASK_META)
        task_id = created["result"]["taskId"]

        task = task_of(server, task_id)

        async def answered(n: int) -> dict[str, Any]:
            updated = await wire(server, "tasks/update",
                                 {"taskId": task_id, "inputResponses": {"elicit-2": accept(n=n)}}, TASK_META)
            assert updated["result"] == {"resultType": "complete", "_meta": updated["result"]["_meta"]}
            return await until(task, lambda found: found["status"] != "working")

        waiting = await until(task, lambda found: found["status"] != "working")
        assert list(waiting["inputRequests"]) == ["elicit-2"]
        again = await answered(3)
        assert again["status"] == "input_required", again
        assert list(again["inputRequests"]) == ["elicit-2"]
        assert again["inputRequests"]["elicit-2"] == waiting["inputRequests"]["elicit-2"]
        assert "must be even" in again["statusMessage"]
        done = await answered(4)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "got 4"
    assert "refused" not in (done.get("statusMessage") or "")  # the reason went with the refused answer


STRICT: list[bool] = []


class Strict(msgspec.Struct):
    n: int

    def __post_init__(self) -> None:
        if STRICT and self.n > 3:
            raise ValueError("at most 3 now")


async def test_an_answer_accepted_in_an_earlier_run_and_refused_now_fails_the_task(store_url: str):
    # Asking again would leave the answers and Steps recorded after it in place: the task fails.
    STRICT.clear()
    server = Server("strict", secret=b"s" * 32, tasks_url=store_url)

    @server.tool(task="optional")
    def strict() -> Any:
        yield Step(begin)
        first = yield Elicit("A number?", Strict)
        yield Elicit(f"Keep {first.value.n}?", CONFIRM)
        return "kept"

    async with server.running():
        created = await wire(server, "tools/call", {"name": "strict", "arguments": {}}, TASK_META)
        task_id = created["result"]["taskId"]

        task = task_of(server, task_id)

        async def answer(key: str, content: dict[str, Any]) -> dict[str, Any]:
            await wire(server, "tasks/update", {"taskId": task_id, "inputResponses": {key: accept(**content)}},
                       TASK_META)
            return await until(task, lambda found: found["status"] != "working")

        await until(task, lambda found: found["status"] != "working")
        assert list((await answer("elicit-2", {"n": 5}))["inputRequests"]) == ["elicit-3"]
        STRICT.append(True)  # a stricter model deployed while the task waits
        ended = await answer("elicit-3", {"ok": True})
    STRICT.clear()
    assert ended["status"] == "failed", ended
    assert "at most 3 now" in ended["error"]["message"]


def not_a_number() -> float:
    return float("nan")


async def test_a_step_value_json_cannot_hold_fails_the_handler():
    server = Server("nan", secret=b"n" * 32, mask_errors=False)

    @server.tool
    def measured() -> Any:
        value = yield Step(not_a_number)
        yield Elicit(f"Use {value}?", CONFIRM)

    failed = await wire(server, "tools/call", {"name": "measured", "arguments": {}})
    assert failed["result"]["isError"] is True
    assert "cannot be recorded in the ledger" in failed["result"]["content"][0]["text"]
