"""An upstream task is a downstream task: the proxy's own task drives the upstream's, its questions included."""

from __future__ import annotations

import pytest

import mrtr


async def test_a_modern_client_gets_a_task_that_asks_through_the_proxy(bridge):
    served = await bridge("modern")
    asked: list[str] = []

    def answer(request):
        asked.append(request.message)
        return mrtr.accept(sure=True)

    async with served.client("modern", on_elicit=answer) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        handle = await client.start_task("adopt", {"pet": "Rex"})
        assert handle.id is not None  # the proxy made a task of it
        result = await handle.wait()
        audited = await client.call_tool("audit")
    assert tools["adopt"]["execution"] == {"taskSupport": "optional"}
    assert tools["audit"]["execution"] == {"taskSupport": "required"}
    assert result.text == "adopted Rex"
    assert asked == ["Adopt Rex?"]
    assert audited.is_error and "the audit found problems" in audited.text


async def test_without_the_tasks_extension_a_required_task_tool_is_refused_as_upstream_refuses_it(bridge):
    served = await bridge("modern")
    async with served.client("modern", tasks=False) as client:
        with pytest.raises(mrtr.ClientError) as refused:
            await client.call_tool("audit")
    assert refused.value.code == -32021


@pytest.mark.parametrize("downstream", ["modern", "legacy"])
async def test_an_optional_task_tool_called_plainly_still_asks(bridge, downstream):
    served = await bridge("modern")
    async with served.client(downstream, tasks=False, on_elicit=lambda request: mrtr.decline()) as client:
        result = await client.call_tool("adopt", {"pet": "Tom"})
    assert result.text == "kept looking (decline)"


async def test_a_question_asked_before_the_upstream_makes_its_task_is_a_round_and_the_task_comes_after(bridge):
    # The sequence of the conformance scenario tasks-mrtr-composition, through the proxy: the
    # upstream asks in a round on the call, then makes a task; the downstream sees the same.
    served = await bridge("modern")
    asked: list[str] = []

    def answer(request):
        asked.append(request.message)
        return mrtr.accept(name="Alice")

    async with served.client("modern", on_elicit=answer) as client:
        handle = await client.start_task("greet")
        result = await handle.wait()
        calls = client.target.calls()
    assert asked == ["What is your name?"]
    assert [reply["resultType"] for _, reply in calls] == ["input_required", "task"]
    first, second = calls[0][1], calls[1][1]
    assert "taskId" not in first and list(first["inputRequests"]) == ["user_name"]
    assert calls[1][0]["params"]["inputResponses"]["user_name"]["content"] == {"name": "Alice"}
    assert second["taskId"] == handle.id and "requestState" not in second and "inputRequests" not in second
    assert result.text == "Hello, Alice!"
