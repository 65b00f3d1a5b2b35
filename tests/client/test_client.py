"""mrtr.Client against mrtr's own server in process, over loopback HTTP and over stdio."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio

import mrtr
from mrtr.client import ElicitationRequest, RootsRequest, SamplingRequest

from .app import SLOW


def answer_name(request: ElicitationRequest) -> dict[str, Any]:
    tag = re.search(r"\[(.*)\]", request.message).group(1)  # type: ignore[union-attr]
    return mrtr.accept(name=f"user-{tag}")


async def test_lists_and_discover(connect):
    async with connect() as client:
        discovered = await client.discover()
        assert discovered["serverInfo"]["name"] == "client-test" if "serverInfo" in discovered else True
        tools = {tool["name"] for tool in await client.list_tools()}
        assert {"ask_name", "interview", "regional"} <= tools
        assert [prompt["name"] for prompt in await client.list_prompts()] == ["menu"]
        assert [resource["uri"] for resource in await client.list_resources()] == ["notes://secret"]
        assert await client.list_resource_templates() == []


async def test_one_question_round_trip(connect):
    seen: list[ElicitationRequest] = []

    def answer(request: ElicitationRequest) -> dict[str, Any]:
        seen.append(request)
        return mrtr.accept(name="Ada")

    async with connect(on_elicit=answer) as client:
        result = await client.call_tool("ask_name", {"tag": "t"})
    assert result.text == "Hello, Ada! [t]" and not result.is_error and result.structured is None
    assert seen[0].mode == "form" and seen[0].requested_schema["properties"]["name"]["type"] == "string"
    first, retry = client.target.sent()
    assert first["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert retry["_meta"]["io.modelcontextprotocol/clientCapabilities"] == first["_meta"][
        "io.modelcontextprotocol/clientCapabilities"]
    assert retry["inputResponses"] == {seen[0].key: {"action": "accept", "content": {"name": "Ada"}}}
    (_, round_one), _ = client.target.calls()
    assert retry["requestState"] == round_one["requestState"]
    assert retry["arguments"] == first["arguments"] == {"tag": "t"}
    ids = [message["id"] for message, _ in client.target.exchanges]
    assert len(set(ids)) == len(ids)


async def test_three_rounds_answer_only_the_latest_keys(connect):
    answers = {"Your name (cats)?": mrtr.accept(name="Ada"), "Your favourite colour?": mrtr.accept(colour="red"),
               "Your age?": mrtr.accept(age=36)}
    async with connect(on_elicit=lambda request: answers[request.message]) as client:
        result = await client.call_tool("interview", {"topic": "cats"})
    assert result.text == "Ada/red/36/cats"
    sent = client.target.sent()
    assert len(sent) == 4 and "requestState" not in sent[0] and "inputResponses" not in sent[0]
    results = [result for _, result in client.target.calls()]
    for number in (1, 2, 3):
        assert list(sent[number]["inputResponses"]) == list(results[number - 1]["inputRequests"])
        assert sent[number]["requestState"] == results[number - 1]["requestState"]


async def test_a_group_round_is_answered_concurrently(connect):
    both_asked = trio.Event()
    asked: list[str] = []

    async def answer(request: ElicitationRequest) -> dict[str, Any]:
        asked.append(request.key)
        if len(asked) == 2:
            both_asked.set()
        with trio.fail_after(5):  # each answerer waits until the other one has started
            await both_asked.wait()
        return mrtr.accept(email="a@b.c") if request.key == "email" else mrtr.accept(plan="pro")

    async with connect(on_elicit=answer) as client:
        result = await client.call_tool("pair")
    assert result.text == "a@b.c on pro"
    assert sorted(asked) == ["email", "plan"]


@pytest.mark.parametrize("answer, expected", [(mrtr.decline(), "decline [d]"), (mrtr.cancel(), "cancel [d]"),
                                              ({"action": "decline"}, "decline [d]")])
async def test_decline_and_cancel(connect, answer, expected):
    async with connect(on_elicit=lambda request: answer) as client:
        result = await client.call_tool("ask_name", {"tag": "d"})
    assert result.text == expected


async def test_progress_reaches_the_callback(connect):
    seen: list[tuple[Any, Any, Any]] = []
    async with connect(on_progress=lambda *update: seen.append(update)) as client:
        result = await client.call_tool("count", {"steps": 3})
    assert result.text == "counted 3"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    token = client.target.sent()[0]["_meta"]["progressToken"]
    assert token == client.target.calls()[0][0]["id"]


async def test_async_progress_callback(connect):
    seen: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        await trio.sleep(0)
        seen.append(progress)

    async with connect(on_progress=on_progress) as client:
        await client.call_tool("count", {"steps": 2})
    assert seen == [1, 2]


async def test_round_cap_is_a_typed_error(connect):
    async with connect(on_elicit=lambda request: mrtr.accept(answer="more"), max_rounds=3) as client:
        with pytest.raises(mrtr.RoundLimitExceeded) as caught:
            await client.call_tool("endless")
    assert isinstance(caught.value, mrtr.ClientError)
    assert caught.value.code == -32603 and caught.value.data["rounds"] == 3
    assert len(client.target.sent()) == 4  # the first request and three answered retries


async def test_parallel_calls_keep_their_own_state(connect):
    async with connect(on_elicit=answer_name) as client:
        results: dict[str, str] = {}

        async def call(tag: str) -> None:
            results[tag] = (await client.call_tool("ask_name", {"tag": tag})).text

        async with trio.open_nursery() as nursery:
            for tag in "abcdef":
                nursery.start_soon(call, tag)
    assert results == {tag: f"Hello, user-{tag}! [{tag}]" for tag in "abcdef"}
    issued = {result["requestState"]: message["params"]["arguments"]["tag"]
              for message, result in client.target.calls() if result and "requestState" in result}
    retries = [params for params in client.target.sent() if "requestState" in params]
    assert len(retries) == 6
    for params in retries:
        assert issued[params["requestState"]] == params["arguments"]["tag"]
        assert params["inputResponses"] == {
            next(iter(params["inputResponses"])): {"action": "accept",
                                                   "content": {"name": f"user-{params['arguments']['tag']}"}}}


async def test_tampered_state_is_refused_by_the_server(connect):
    async with connect(on_elicit=lambda request: mrtr.accept(name="x")) as client:
        first = await client.call_once("tools/call", {"name": "ask_name", "arguments": {"tag": "t"}})
        assert first["resultType"] == "input_required"
        state = first["requestState"]
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(mrtr.ClientError) as caught:
            await client.call_once("tools/call", {
                "name": "ask_name", "arguments": {"tag": "t"}, "requestState": tampered,
                "inputResponses": {key: mrtr.accept(name="x") for key in first["inputRequests"]}})
    assert caught.value.code == -32602
    if connect.kind == "http":
        assert caught.value.status == 400


async def test_server_errors_surface_as_client_error(connect):
    async with connect() as client:
        with pytest.raises(mrtr.ClientError) as caught:
            await client.call_tool("no_such_tool")
        assert caught.value.code == -32602
        with pytest.raises(mrtr.ClientError) as missing:
            await client.call_tool("ask_name")  # asks, but the client declared no elicitation
        assert missing.value.code == -32021
        result = await client.call_tool("fail")
        assert result.is_error


async def test_url_mode_needs_its_own_declaration(connect):
    consents: list[ElicitationRequest] = []

    def consent(request: ElicitationRequest) -> dict[str, Any]:
        consents.append(request)
        return mrtr.accept()

    async with connect(on_elicit=consent) as client:
        with pytest.raises(mrtr.ClientError) as caught:
            await client.call_tool("visit")  # form only: the server must not send a URL request
        assert caught.value.code == -32021
    async with connect(on_elicit=consent, elicitation_modes=("form", "url")) as client:
        assert (await client.call_tool("visit")).text == "url accept"
        sent = client.target.sent()[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert sent == {"elicitation": {"form": {}, "url": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    assert consents[0].mode == "url" and consents[0].url == "https://example.com/login"


async def test_sampling_and_roots(connect):
    async def sample(request: SamplingRequest) -> str:
        assert request.max_tokens == 10 and request.messages[0]["role"] == "user"
        return "hi there"

    def roots(request: RootsRequest) -> list[str]:
        return ["file:///home/ada/project"]

    async with connect(on_sample=sample, on_roots=roots) as client:
        result = await client.call_tool("think")
    assert result.text == "hi there / file:///home/ada/project"
    assert client.target.sent()[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
        "sampling": {}, "roots": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


async def test_prompt_and_resource_rounds(connect):
    def answer(request: ElicitationRequest) -> dict[str, Any]:
        return mrtr.accept(veggie=True) if "veggie" in request.requested_schema["properties"] \
            else mrtr.accept(password="open")

    async with connect(on_elicit=answer) as client:
        prompt = await client.get_prompt("menu", {"course": "soup"})
        assert prompt.text == "Suggest a vegetarian soup."
        resource = await client.read_resource("notes://secret")
        assert resource.text == "the secret"


async def test_structured_content_and_header_parameters(connect):
    async with connect() as client:
        result = await client.call_tool("regional", {"region": "Zürich ", "people": 4, "dry_run": True})
    assert result.structured == {"region": "Zürich ", "people": 4, "dry_run": True}


async def test_an_answerer_that_raises_abandons_the_call(connect):
    def refuse(request: ElicitationRequest) -> dict[str, Any]:
        raise LookupError("no user here")

    async with connect(on_elicit=refuse) as client:
        with pytest.raises(LookupError):
            await client.call_tool("ask_name", {"tag": "x"})
    assert len(client.target.sent()) == 1


async def test_a_bad_answer_is_refused_before_sending(connect):
    async with connect(on_elicit=lambda request: {"action": "maybe"}) as client:
        with pytest.raises(TypeError, match="not a valid elicitation/create answer"):
            await client.call_tool("ask_name", {"tag": "x"})
    assert len(client.target.sent()) == 1


async def test_cancelling_the_caller_cancels_the_server_work(connect, tmp_path):
    if connect.kind == "inprocess":
        pytest.skip("in process the call runs in the caller's task; nothing crosses a boundary")
    marker = tmp_path / "marker"
    started = trio.Event()
    async with connect(on_progress=lambda *update: started.set()) as client:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "slow", {"tag": "cancel-me", "marker": str(marker)})
                with trio.fail_after(10):
                    await started.wait()
                scope.cancel()
        with trio.fail_after(10):
            while marker.read_text() != "cancelled":
                await trio.sleep(0.01)
        # The client stays usable after a cancelled call.
        assert (await client.call_tool("count", {"steps": 1})).text == "counted 1"
    if connect.kind == "http":
        assert SLOW["cancel-me"] == "cancelled"


async def test_a_server_in_process_runs_its_lifespan_as_behind_a_transport():
    server = mrtr.Server("life", secret=b"s" * 32)
    events: list[str] = []

    @server.lifespan
    async def resources():
        events.append("open")
        yield {"greeting": "hi"}
        events.append("close")

    @server.tool
    def greet(ctx: mrtr.Context) -> str:
        return ctx.lifespan["greeting"]

    async with mrtr.Client(server) as client:
        assert events == ["open"]
        assert (await client.call_tool("greet")).text == "hi"
        # the hub for subscriptions/listen is attached too, so list changes are advertised
        assert (await client.discover())["capabilities"]["tools"] == {"listChanged": True}
    assert events == ["open", "close"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999mcp", "ftp://host/mcp", "/mcp"])
def test_an_unusable_url_is_refused_when_the_client_is_built(url):
    with pytest.raises(ValueError, match="not a usable MCP endpoint URL"):
        mrtr.Client(url)
