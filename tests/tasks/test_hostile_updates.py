"""Hostile tasks/update calls over real loopback HTTP: the task keeps waiting, nothing is lost."""

from __future__ import annotations

from typing import Any


from .test_http import Client, accept, client  # noqa: F401  (fixture)

__all__ = ["client"]


async def _waiting_for_city(client: Client) -> str:
    status, reply = await client.post("tools/call", {"name": "onboard", "arguments": {"plan": "pro"}})
    status, reply = await client.post("tools/call", {
        "name": "onboard", "arguments": {"plan": "pro"},
        "inputResponses": {"elicit-1": accept(name="Ada")}, "requestState": reply["result"]["requestState"],
    })
    task_id: str = reply["result"]["taskId"]
    await client.until(task_id, "input_required")
    return task_id


async def test_an_update_that_breaks_the_form_is_refused_and_the_task_keeps_waiting(client: Client) -> None:
    """A tasks/update whose accepted content misses a required field used to be taken (200), and the
    task then failed for good with -32602: one bad update killed the task. It must be refused as
    invalid params, leaving the task waiting for a good answer."""
    task_id = await _waiting_for_city(client)
    bad: list[dict[str, Any]] = [
        {"action": "accept"},
        {"action": "accept", "content": {}},
        {"action": "accept", "content": {"city": 5}},
        {"action": "accept", "content": {"city": "Oslo", "extra": "x"}},
    ]
    for answer in bad:
        status, reply = await client.post("tasks/update", {"taskId": task_id, "inputResponses": {"elicit-3": answer}})
        assert status == 400 and reply["error"]["code"] == -32602, (answer, reply)
        status, reply = await client.post("tasks/get", {"taskId": task_id})
        assert reply["result"]["status"] == "input_required", (answer, reply["result"])
    status, reply = await client.post("tasks/update", {"taskId": task_id, "inputResponses": {"elicit-3": accept(city="Oslo")}})
    assert status == 200
    task = await client.until(task_id, "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "Ada (T-pro) from Oslo"}]
