"""What the proxy keeps, bounded: a 2025 upstream's calls held for modern clients, and a catalogue kept current."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import mrtr

from ..conftest import until
from .upstream_app import server as upstream_server


async def _first_round(client: mrtr.Client, topic: str) -> dict[str, Any]:
    result = await client.call_once("tools/call", {"name": "interview", "arguments": {"topic": topic}})
    assert result["resultType"] == "input_required"
    return result


async def test_a_held_call_past_its_answer_timeout_is_gone_and_says_so(bridge):
    served = await bridge("legacy", held_answer_timeout=0.3)
    async with served.client("modern", on_elicit=lambda request: mrtr.decline()) as client:
        first = await _first_round(client, "late")
        await trio.sleep(0.6)  # the answer timeout passing is the condition under test
        with pytest.raises(mrtr.ClientError) as gone:
            await client.call_once("tools/call", {
                "name": "interview", "arguments": {"topic": "late"}, "requestState": first["requestState"],
                "inputResponses": {key: mrtr.accept(name="Ada") for key in first["inputRequests"]}})
    assert gone.value.code == -32603
    assert gone.value.data["reason"] == "held-call-gone"
    assert "answer timeout" in gone.value.message


async def test_held_calls_are_bounded_and_the_refusal_names_the_bound(bridge):
    served = await bridge("legacy", max_held=1)
    async with served.client("modern", on_elicit=lambda request: mrtr.decline()) as client:
        await _first_round(client, "one")
        with pytest.raises(mrtr.ClientError) as refused:
            await _first_round(client, "two")
    assert refused.value.code == -32603
    assert refused.value.data == {"limit": 1, "bound": "process", "option": "max_held"}


async def test_a_retry_with_the_answers_continues_the_held_call(bridge):
    served = await bridge("legacy")
    async with served.client("modern", on_elicit=lambda request: mrtr.decline()) as client:
        first = await _first_round(client, "manual")
        second = await client.call_once("tools/call", {
            "name": "interview", "arguments": {"topic": "manual"}, "requestState": first["requestState"],
            "inputResponses": {key: mrtr.accept(name="Ada") for key in first["inputRequests"]}})
        assert second["resultType"] == "input_required"
        with pytest.raises(mrtr.ClientError) as again:  # the first round, retried: its answer went upstream
            await client.call_once("tools/call", {
                "name": "interview", "arguments": {"topic": "manual"}, "requestState": first["requestState"],
                "inputResponses": {key: mrtr.accept(name="Bo") for key in first["inputRequests"]}})
    assert again.value.data["reason"] == "held-call-gone"


@pytest.mark.parametrize("upstream", ["modern", "legacy"])
@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_a_list_change_upstream_reaches_the_downstream(bridge, upstream, downstream):
    served = await bridge(upstream)
    changed: list[str] = []
    async with served.client(downstream, on_list_changed=changed.append) as client:
        before = {tool["name"] for tool in await client.list_tools()}
        await until(lambda: client.era is not None and (downstream == "legacy" or client.listening))

        def late_tool() -> str:
            """Registered while the proxy runs."""
            return "late"

        upstream_server.tool(late_tool)
        try:
            upstream_server.notify_tools_changed()
            await until(lambda: "tools" in changed)
            after = {tool["name"] for tool in await client.list_tools()}
            called = await client.call_tool("late_tool")
        finally:
            del upstream_server.catalog.tools["late_tool"]
            upstream_server.notify_tools_changed()
    assert "late_tool" not in before and "late_tool" in after
    assert called.text == "late"


async def test_a_proxy_mounted_in_another_server_serves_under_its_namespace(nursery):
    from functools import partial

    from mrtr.transports.http.native import serve

    port = await nursery.start(partial(serve, upstream_server, "127.0.0.1", 0))
    parent = mrtr.Server("parent", secret=b"q" * 32)
    parent.mount(mrtr.proxy(f"http://127.0.0.1:{port}/mcp", secret=b"p" * 32, store_url="memory:"), "pets")
    answers = iter([mrtr.accept(name="Ada"), mrtr.accept(colour="red")])
    async with mrtr.Client(parent, on_elicit=lambda request: next(answers)) as client:
        names = {tool["name"] for tool in await client.list_tools()}
        result = await client.call_tool("pets_interview", {"topic": "mounts"})
    assert "pets_interview" in names
    assert result.text == "Ada/red/mounts"
