"""Questions cross eras in all four directions: a two-question conversation, a decline, a cancel, progress.

Each test runs the same conversation through ``mrtr.proxy`` for one pair of eras: the
downstream client's (2026-07-28, or a 2025 session) and the upstream server's (the same
mrtr server, spoken to in the era chosen). Everything runs on loopback HTTP in this
process; every message the downstream client sends and receives is checked against the
schema of its era.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import mrtr
from mrtr.core.eras import LEGACY, MODERN

from ..conftest import until
from .upstream_app import SLOW

DIRECTIONS = [("modern", "modern"), ("legacy", "modern"), ("legacy", "legacy"), ("modern", "legacy")]
"""(downstream client's era, upstream server's era)."""


def _answers(*values: Any) -> Any:
    queue = list(values)
    asked: list[str] = []

    def answer(request: Any) -> Any:
        asked.append(request.message)
        return queue.pop(0)

    answer.asked = asked  # type: ignore[attr-defined]
    return answer


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_two_questions_with_progress_and_logs(bridge, downstream, upstream):
    served = await bridge(upstream)
    answer = _answers(mrtr.accept(name="Ada"), mrtr.accept(colour="blue"))
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[tuple[str, Any]] = []
    client = served.client(downstream, on_elicit=answer, on_progress=lambda p, t, m: progress.append((p, t, m)),
                           on_log=lambda level, logger, data: logs.append((level, data)))
    async with client:
        result = await client.call_tool("interview", {"topic": "cats"})
        assert client.era == (LEGACY if downstream == "legacy" else MODERN)
    assert result.text == "Ada/blue/cats"
    assert answer.asked == ["Your name, for cats?", "Favourite colour, Ada?"]
    assert [entry[0] for entry in progress] == [1, 2]
    assert ("info", "Ada answered") in logs


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_a_decline_reaches_the_upstream(bridge, downstream, upstream):
    served = await bridge(upstream)
    answer = _answers(mrtr.accept(name="Ada"), mrtr.decline())
    async with served.client(downstream, on_elicit=answer) as client:
        result = await client.call_tool("interview", {"topic": "dogs"})
    assert result.text == "Ada/no colour (decline)"


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_a_cancel_reaches_the_upstream(bridge, downstream, upstream):
    served = await bridge(upstream)
    async with served.client(downstream, on_elicit=_answers(mrtr.cancel())) as client:
        result = await client.call_tool("interview", {"topic": "fish"})
    assert result.text == "no name (cancel)"


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_the_catalogue_is_the_upstreams(bridge, downstream, upstream):
    served = await bridge(upstream)
    async with served.client(downstream) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        prompts = await client.list_prompts()
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        discovered = await client.discover()
        forecast = await client.call_tool("forecast", {"city": "Oslo", "days": 2})
        completion = await client.complete("course", "s", prompt="menu")
        welcome = await client.read_resource("notes://welcome")
    async with mrtr.Client(served.upstream_url, era="modern") as direct:
        upstream_tools = {tool["name"]: tool for tool in await direct.list_tools()}
    assert tools.keys() == upstream_tools.keys()
    assert tools["interview"]["annotations"] == {"readOnlyHint": True}
    assert tools["interview"]["_meta"] == {"example.com/owner": "pets-team"}
    assert tools["interview"]["title"] == "Interview"
    assert tools["forecast"]["inputSchema"] == upstream_tools["forecast"]["inputSchema"]
    assert tools["forecast"]["outputSchema"] == upstream_tools["forecast"]["outputSchema"]
    assert [prompt["name"] for prompt in prompts] == ["menu"]
    assert [resource["uri"] for resource in resources] == ["notes://welcome"]
    assert [template["uriTemplate"] for template in templates] == ["notes://{id}/text"]
    assert discovered.get("instructions") == "Ask me about your pets."
    assert forecast.structured == {"city": "Oslo", "days": 2, "sky": "clear"}
    assert completion["values"] == ["starter", "soup"]
    assert welcome.text == "welcome, friend"


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_prompts_and_templated_resources_ask_through_the_proxy(bridge, downstream, upstream):
    served = await bridge(upstream)
    answer = _answers(mrtr.accept(veggie=True), mrtr.accept(password="open"))
    async with served.client(downstream, on_elicit=answer) as client:
        prompt = await client.get_prompt("menu", {"course": "soup"})
        note = await client.read_resource("notes://7/text")
    assert prompt.messages[0]["content"]["text"] == "Suggest a vegetarian soup."
    assert note.text == "note 7"


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_sampling_roots_and_groups_cross(bridge, downstream, upstream):
    served = await bridge(upstream)

    def elicit(request: Any) -> Any:
        return mrtr.accept(email="ada@example.com") if "email" in request.requested_schema["properties"] \
            else mrtr.accept(plan="pro")

    async with served.client(downstream, on_elicit=elicit, on_sample=lambda request: "hi there",
                             on_roots=lambda request: ["file:///home/ada"]) as client:
        paired = await client.call_tool("pair")
        thought = await client.call_tool("think")
    assert paired.text == "ada@example.com on pro"
    assert thought.text == "hi there / file:///home/ada"


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_a_downstream_cancel_cancels_the_upstream_call(bridge, downstream, upstream):
    served = await bridge(upstream)
    tag = f"cancel-{downstream}-{upstream}"
    async with served.client(downstream) as client:
        with trio.move_on_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "slow", {"tag": tag})
                await until(lambda: SLOW.get(tag) == "started")
                nursery.cancel_scope.cancel()
        await until(lambda: SLOW.get(tag) == "cancelled")


@pytest.mark.parametrize("downstream, upstream", DIRECTIONS)
async def test_upstream_errors_pass_through(bridge, downstream, upstream):
    served = await bridge(upstream)
    async with served.client(downstream) as client:
        failed = await client.call_tool("fail")
        with pytest.raises(mrtr.ClientError) as error:
            await client.call_tool("interview", {"topic": 7})
    assert failed.is_error and "the kitchen is closed" in failed.text
    assert error.value.code == -32602
