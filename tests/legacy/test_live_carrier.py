"""The live carrier over the transports' pending-request machinery, with a client played on the other end.

Nothing here is a stand-in for the machinery under test: the carrier sends through a real
:class:`mrtr.transports.pending.PendingRequests`, whose writes the client's end
(``conftest.Wire``) decodes as JSON and answers (or does not) through
``PendingRequests.answer``, as the stdio transport does with what it reads from stdin.
Every message written is validated against the 2025-11-25 schema.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
import trio

from mrtr import Context, Elicit, ElicitURL, Form, HandlerError, InvalidParams, ListRoots, Sample, Step
from mrtr.carriers.live import LiveCarrier
from mrtr.core.eras import Unexpressible
from mrtr.core.peer import AnswerTimeout, ClientAnswerError, SessionEnded, TooManySuspended
from mrtr.server.sessions import SessionRegistry
from mrtr.transports.pending import PendingRequests
from mrtr.transports.shared import run_in_thread

from .conftest import Wire, answering

EVERYTHING = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def carrier(wire: Wire, *, version: str = "2025-11-25", timeout: float = 30.0, notify: Any = None,
            suspensions: Any = None) -> LiveCarrier:
    return LiveCarrier(wire.pending.peer(), version=version, answer_timeout=timeout, notify=notify,
                       suspensions=suspensions)


async def execute(live: LiveCarrier, handler: Any, arguments: dict[str, Any] | None = None, *,
                  capabilities: dict[str, Any] = EVERYTHING, run_sync: Any = None) -> Any:
    ctx = Context(arguments, client_capabilities=capabilities)
    return (await live.execute("tools/call", {}, handler, arguments, ctx, run_sync=run_sync)).result


async def failure(wire: Wire, handler: Any, act: Any) -> BaseException:
    """What a call of ``handler`` fails with while ``act()`` plays the client's part."""
    errors: list[BaseException] = []

    async def call() -> None:
        try:
            await execute(carrier(wire), handler)
        except Exception as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await act()
    [error] = errors
    return error


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_a_conversation_sends_each_round_at_once_and_resumes_when_all_are_answered():
    ran = []

    def handler(ctx: Context, company: str):
        name = yield Elicit("Name?", Form().string("name"))
        ran.append(company)
        hello = yield Step(lambda: "hi")
        both = yield (Sample("Poem?", max_tokens=9), ListRoots())
        return f"{hello} {name.content['name']}: {both[0].content.text} in {both[1].roots[0].uri}"

    wire = Wire()
    async with trio.open_nursery() as nursery:
        result: list[Any] = []

        async def call() -> None:
            result.append(await execute(carrier(wire), handler, {"company": "acme"}))

        nursery.start_soon(call)
        [first] = await wire.wait_requests(1)
        assert first["method"] == "elicitation/create" and first["params"]["message"] == "Name?"
        assert ran == []  # suspended at the yield
        wire.answer(first, accept({"name": "Ada"}))
        _, sampling, roots = await wire.wait_requests(3)
        assert [sampling["method"], roots["method"]] == ["sampling/createMessage", "roots/list"]
        wire.answer(roots, {"roots": [{"uri": "file:///w"}]})
        await trio.sleep(0.05)
        assert not result  # one of two answered: still waiting
        wire.answer(sampling, {"role": "assistant", "content": {"type": "text", "text": "roses"}, "model": "m"})
    assert result == ["hi Ada: roses in file:///w"] and ran == ["acme"]
    assert wire.cancels == [] and wire.pending.waiting == 0


async def test_no_answer_in_time_fails_the_call_runs_finally_and_withdraws_the_question():
    cleaned = []

    def handler():
        try:
            yield Elicit("Name?", Form().string("name"))
        finally:
            cleaned.append("finally")

    wire = Wire()
    with pytest.raises(AnswerTimeout) as failed:
        await execute(carrier(wire, timeout=0.2), handler)
    assert failed.value.code == -32603 and failed.value.data == {"method": "elicitation/create", "timeoutSeconds": 0.2}
    assert cleaned == ["finally"]
    assert wire.cancels == [wire.requests[0]["id"]] and wire.pending.waiting == 0
    assert not wire.answer(wire.requests[0], accept({"name": "late"}))  # a late answer is dropped


async def test_an_error_answer_fails_the_round_at_once_and_withdraws_the_rest():
    cleaned = []

    def handler():
        try:
            yield (Sample("Hi", max_tokens=5), Elicit("Name?", Form().string("name")))
        finally:
            cleaned.append("finally")

    wire = Wire()

    async def reject() -> None:
        sampling, _ = await wire.wait_requests(2)
        wire.answer(sampling, error={"code": -1, "message": "User rejected sampling request"})

    error = await failure(wire, handler, reject)
    assert isinstance(error, ClientAnswerError)
    elicit = wire.requests[1]
    assert error.data == {"method": "sampling/createMessage", "clientError": {"code": -1, "message": "User rejected sampling request"}}
    assert cleaned == ["finally"] and wire.cancels == [elicit["id"]]


async def test_a_cancelled_call_closes_the_generator_and_withdraws_what_it_asked():
    cleaned = []

    async def handler():
        try:
            yield Elicit("Name?", Form().string("name"))
            yield "never"
        finally:
            cleaned.append("finally")

    wire = Wire()
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def call() -> None:
            with scope:
                await execute(carrier(wire), handler)
                raise AssertionError("a cancelled call has no result")

        nursery.start_soon(call)
        [asked] = await wire.wait_requests(1)
        scope.cancel()
    assert cleaned == ["finally"] and wire.cancels == [asked["id"]]


async def test_a_session_that_ends_fails_its_waiting_calls():
    cleaned = []

    def handler():
        try:
            yield Elicit("Name?", Form().string("name"))
        finally:
            cleaned.append("finally")

    wire = Wire()

    async def end() -> None:
        await wire.wait_requests(1)
        wire.pending.end("the client closed stdin")

    error = await failure(wire, handler, end)
    assert isinstance(error, SessionEnded) and error.data["reason"] == "the client closed stdin"
    assert cleaned == ["finally"] and wire.cancels == []  # nobody left to tell
    with pytest.raises(SessionEnded):
        await execute(carrier(wire), handler)  # and nothing more is asked


async def test_requests_wait_for_the_initialized_notification():
    wire = Wire()
    wire.pending = PendingRequests(wire.write)

    def handler():
        answer = yield Elicit("Name?", Form().string("name"))
        return answer.content["name"]

    async with trio.open_nursery() as nursery:
        result: list[Any] = []

        async def call() -> None:
            result.append(await execute(carrier(wire), handler))

        nursery.start_soon(call)
        await trio.sleep(0.1)
        assert wire.requests == []
        wire.pending.mark_ready()
        [asked] = await wire.wait_requests(1)
        wire.answer(asked, accept({"name": "Ada"}))
    assert result == ["Ada"]


async def test_the_process_wide_limit_of_waiting_handlers_refuses_before_anything_is_sent():
    registry = SessionRegistry(max_suspended=1)
    one, another = (registry.open(version="2025-11-25", client_capabilities={}, client_info=None, principal=None,
                                  client=address) for address in ("10.0.0.1", "10.0.0.2"))
    cleaned = []

    def handler():
        try:
            answer = yield Elicit("Name?", Form().string("name"))
            return answer.action
        finally:
            cleaned.append("finally")

    first, second = Wire(), Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(execute, carrier(first, suspensions=registry.waits_of(one)), handler)
        await first.wait_requests(1)
        assert registry.suspended == 1 and one.waiting == 1 and registry.waiting_of("10.0.0.1") == 1
        with pytest.raises(TooManySuspended) as refused:
            await execute(carrier(second, suspensions=registry.waits_of(another)), handler)
        assert refused.value.data == {"method": "elicitation/create", "limit": 1, "bound": "process",
                                      "option": "max_suspended"}
        assert "The server is holding 1 calls waiting" in refused.value.message
        assert second.sent == [] and cleaned == ["finally"]
        first.answer(first.requests[0], {"action": "decline"})
    assert registry.suspended == 0 and cleaned == ["finally", "finally"]
    assert one.waiting == 0 and registry.waiting_of("10.0.0.1") == 0


async def test_a_round_the_version_cannot_carry_sends_nothing():
    def handler():
        yield (Elicit("Name?", Form().string("name")), Elicit("Days?", Form().choices("days", ["mon", "tue"])))

    wire = Wire()
    with pytest.raises(Unexpressible):
        await execute(carrier(wire, version="2025-06-18"), handler, capabilities={"elicitation": {"form": {}}})
    assert wire.sent == []


async def test_an_invalid_answer_fails_the_call_with_the_modern_paths_error():
    def handler():
        answer = yield Elicit("Age?", Form().integer("age"))
        return answer.content

    wire = Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, wire, lambda request: accept({"age": "old"}))
        with pytest.raises(InvalidParams, match='"age"'):
            await execute(carrier(wire), handler)
        nursery.cancel_scope.cancel()


async def test_an_accepted_url_elicitation_is_completed_when_the_handler_goes_past_it():
    notified: list[tuple[str, dict[str, Any]]] = []

    def handler():
        signed = yield ElicitURL("Sign in", "https://example.com/in")
        again = yield ElicitURL("Sign in", "https://example.com/in")  # not done yet: the same page again
        name = yield Elicit("Name?", Form().string("name"))
        return [signed.action, again.action, name.content["name"]]

    wire = Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, wire, lambda request: (
            {"action": "accept"} if request["params"]["mode"] == "url" else accept({"name": "Ada"})))
        result = await execute(carrier(wire, notify=lambda method, params: notified.append((method, params))), handler)
        nursery.cancel_scope.cancel()
    assert result == ["accept", "accept", "Ada"]
    first, second, _ = wire.requests
    assert first["params"]["elicitationId"] != second["params"]["elicitationId"]
    assert notified == [("notifications/elicitation/complete", {"elicitationId": second["params"]["elicitationId"]})]


async def test_a_declined_url_elicitation_is_never_completed():
    notified: list[Any] = []

    def handler():
        answer = yield ElicitURL("Pay", "https://example.com/pay")
        return answer.action

    wire = Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, wire, lambda request: {"action": "decline"})
        assert await execute(carrier(wire, notify=lambda *args: notified.append(args)), handler) == "decline"
        nursery.cancel_scope.cancel()
    assert notified == []


async def test_a_sync_handler_runs_in_a_worker_thread_when_the_server_says_so():
    threads: list[str] = []

    def handler():
        threads.append(threading.current_thread().name)
        answer = yield Elicit("Name?", Form().string("name"))
        threads.append(threading.current_thread().name)
        return answer.content["name"]

    wire = Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, wire, lambda request: accept({"name": "Ada"}))
        assert await execute(carrier(wire), handler, run_sync=run_in_thread) == "Ada"
        nursery.cancel_scope.cancel()
    main = threading.main_thread().name
    assert len(threads) == 2 and main not in threads


async def test_a_handler_error_after_an_answer_is_the_handler_error():
    def handler():
        yield Elicit("Name?", Form().string("name"))
        raise RuntimeError("boom")

    wire = Wire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answering, wire, lambda request: {"action": "cancel"})
        with pytest.raises(HandlerError, match="RuntimeError: boom"):
            await execute(carrier(wire), handler)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan])
async def test_the_answer_timeout_must_be_positive(timeout):
    with pytest.raises(ValueError, match="answer_timeout"):
        LiveCarrier(Wire().pending.peer(), version="2025-11-25", answer_timeout=timeout)
