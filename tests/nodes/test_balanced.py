"""Three ``mrtr serve`` nodes on one Redis behind haproxy (round robin, nothing sticky), killed and restarted mid-run.

Every message the nodes send is checked against the schema of the core or of the
tasks extension. The counts each test measures (conversations, failures a dead node
caused, retries, seconds) are printed, so ``pytest -s`` shows them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from ..conftest import meta, until
from .cluster import CAPABILITIES, Caller, Nodes, check, nodes, timed

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
RETRIES = 4  # attempts at one round before the conversation counts as failed


class Failure(Exception):
    """A conversation that could not complete."""


async def conversation(caller: Caller, number: int, tally: Counter[str]) -> list[str]:
    """One whole two-question conversation of ``signup``; the nodes that served its rounds.

    A round whose request fails for want of a node (a connection cut, a 502/503 from
    the balancer) is sent again as it was, as a client does; each such failure is
    counted. An answer made of anything but this conversation's own answers is counted
    ``misrouted``.
    """
    plan = f"c{number}"
    email, name = f"c{number}@example.com", f"Person {number}"
    params: dict[str, Any] = {"name": "signup", "arguments": {"plan": plan}}
    served: list[str] = []
    for round_number in range(3):
        for attempt in range(RETRIES):
            try:
                status, message, node = await caller.request("tools/call", params)
            except httpx.TransportError:
                tally["dead node: connection failed"] += 1
                continue
            if status in (502, 503, 504):
                tally[f"dead node: HTTP {status}"] += 1
                continue
            break
        else:
            raise Failure(f"conversation {number}: round {round_number + 1} failed {RETRIES} times")
        if attempt:
            tally["rounds retried"] += 1
        served.append(node)
        if "error" in message or status != 200:
            raise Failure(f"conversation {number}: HTTP {status} {message}")
        result = message["result"]
        if result["resultType"] == "complete":
            if result["content"][0]["text"] != f"{plan}:{email}:{name}":
                tally["misrouted"] += 1
            return served
        ((key, asked),) = result["inputRequests"].items()
        wanted = ["Your email?", "Your name?"][round_number]
        if asked["params"]["message"] != wanted:
            tally["misrouted"] += 1  # the question of another conversation's round
            return served
        content = {"email": email} if round_number == 0 else {"name": name}
        params = {"name": "signup", "arguments": {"plan": plan}, "requestState": result["requestState"],
                  "inputResponses": {key: {"action": "accept", "content": content}}}
    raise Failure(f"conversation {number}: more than three rounds")


async def run_conversations(url: str, total: int, *, concurrency: int = 12,
                            milestones: dict[int, Any] | None = None) -> tuple[Counter[str], list[list[str]]]:
    """``total`` conversations over ``concurrency`` connections; the tally and each conversation's nodes."""
    tally: Counter[str] = Counter()
    paths: list[list[str]] = []
    counter = iter(range(total))
    pending = dict(milestones or {})
    finished = 0

    async def worker() -> None:
        nonlocal finished
        async with httpx.AsyncClient(timeout=20, limits=httpx.Limits(max_connections=1)) as http:
            caller = Caller(http, url)
            for number in counter:
                try:
                    paths.append(await conversation(caller, number, tally))
                    tally["completed"] += 1
                except Failure as failure:
                    tally["failed"] += 1
                    tally.setdefault("first failure", failure)  # type: ignore[arg-type]
                finished += 1
                action = pending.pop(finished, None)
                if action is not None:
                    await action()

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    return tally, paths


def report(title: str, numbers: dict[str, Any]) -> None:
    print(f"\n{title}: " + ", ".join(f"{key} {value}" for key, value in numbers.items()))


async def test_a_thousand_conversations_across_three_nodes_without_an_error_or_a_misrouted_answer(tmp_path: Path):
    numbers: dict[str, Any] = {}
    async with nodes(tmp_path) as cluster:
        with timed("seconds", numbers):
            tally, paths = await run_conversations(cluster.url, 1000)
    numbers.update(tally)
    report("1000 conversations, 3 nodes", numbers)
    assert tally["completed"] == 1000 and tally["failed"] == 0, tally
    assert tally["misrouted"] == 0, tally
    assert not any(key.startswith("dead node") for key in tally), tally
    per_node = Counter(node for path in paths for node in path)
    assert set(per_node) == {"node1", "node2", "node3"}, per_node
    assert min(per_node.values()) > 0.25 * sum(per_node.values()), per_node  # round robin, no stickiness
    spread = sum(1 for path in paths if len(set(path)) > 1)
    assert spread > 0.5 * len(paths), spread  # most conversations had their rounds on several nodes


async def test_the_nginx_configuration_of_the_deployment_page_balances_conversations_too(tmp_path: Path):
    numbers: dict[str, Any] = {}
    async with nodes(tmp_path, balancer_kind="nginx") as cluster:
        with timed("seconds", numbers):
            tally, paths = await run_conversations(cluster.url, 200)
        per_node = Counter(cluster.name_of(node) for path in paths for node in path)
    numbers.update(tally)
    report("200 conversations through nginx, 3 nodes", numbers)
    assert tally["completed"] == 200 and tally["failed"] == 0 and tally["misrouted"] == 0, tally
    assert set(per_node) == {"node1", "node2", "node3"}, per_node


async def test_conversations_go_on_while_one_node_is_killed_and_another_restarted(tmp_path: Path):
    numbers: dict[str, Any] = {}
    async with nodes(tmp_path) as cluster:
        one, two, _ = cluster.nodes

        async def kill_one() -> None:
            cluster.kill(one)

        async def restart_two() -> None:
            cluster.restart(two)

        with timed("seconds", numbers):
            tally, paths = await run_conversations(cluster.url, 1000, milestones={300: kill_one, 600: restart_two})
        assert not one.alive and two.alive
        await cluster.ready(two)
    numbers.update(tally)
    report("1000 conversations, node1 SIGKILLed at 300, node2 restarted at 600", numbers)
    assert tally["failed"] == 0, tally  # every round that hit a dead node succeeded on a live one when retried
    assert tally["completed"] == 1000 and tally["misrouted"] == 0, tally
    after = [path for path in paths[400:]]
    assert all("node1" not in path[-1:] for path in after[50:]), "the balancer kept sending to the dead node"


class Stream:
    """One ``subscriptions/listen`` stream through the balancer: its node and its messages as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.node = response.headers.get("x-mrtr-node", "")
        self.lines = response.aiter_lines()
        self.messages: list[dict[str, Any]] = []

    async def next(self, timeout: float = 20) -> dict[str, Any]:
        """The next message (keep-alive comments skipped), schema-checked."""
        data: list[str] = []
        with trio.fail_after(timeout):
            async for line in self.lines:
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    message = json.loads("\n".join(data))
                    check("subscriptions/listen", message)
                    self.messages.append(message)
                    return message
        raise AssertionError("the listen stream ended")

    async def until(self, wanted: Any, timeout: float = 20) -> dict[str, Any]:
        """Read messages until one satisfies ``wanted``."""
        with trio.fail_after(timeout):
            while True:
                message = await self.next(timeout)
                if wanted(message):
                    return message


@asynccontextmanager
async def listening(http: httpx.AsyncClient, url: str, notifications: dict[str, Any], *,
                    avoid: str | None = None, on: str | None = None) -> AsyncIterator[Stream]:
    """A listen stream through the balancer, opened again until it lands on a node other than ``avoid``
    (or on ``on``); acknowledged before it is given."""
    for _attempt in range(30):
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                "params": {"notifications": notifications, "_meta": meta(CAPABILITIES)}}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
        async with http.stream("POST", url, headers=headers, content=json.dumps(body)) as response:
            assert response.status_code == 200, await response.aread()
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                raise AssertionError(f"listen answered {(await response.aread()).decode(errors='replace')}")
            stream = Stream(response)
            if (avoid is not None and stream.node == avoid) or (on is not None and stream.node != on):
                continue
            ack = await stream.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            yield stream
            return
    raise AssertionError(f"no listen stream landed where wanted (avoid {avoid}, on {on})")


async def accepts_listen(http: httpx.AsyncClient, url: str, node: str) -> bool:
    """Whether ``node`` acknowledges a listen stream now; ``False`` while it answers -32603 unavailable."""
    try:
        async with listening(http, url, {"toolsListChanged": True}, on=node):
            return True
    except AssertionError as refused:
        if "notifications are unavailable" not in str(refused):
            raise
        return False


async def test_a_listener_on_one_node_hears_every_status_of_a_task_run_on_another_in_order(tmp_path: Path):
    gate = tmp_path / "gate"
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        caller = Caller(http, cluster.url)
        _, created, runner = await caller.request("tools/call", {"name": "counted",
                                                                 "arguments": {"steps": 8, "gate": str(gate)}})
        task_id = created["result"]["taskId"]
        async with listening(http, cluster.url, {"taskIds": [task_id]}, avoid=runner) as elsewhere, \
                listening(http, cluster.url, {"taskIds": [task_id]}, on=runner) as there:
            assert elsewhere.node != runner == there.node
            gate.touch()
            heard = {}
            for stream in (elsewhere, there):
                await stream.until(lambda m: m.get("method") == "notifications/tasks"
                                   and m["params"]["status"] == "completed")
                heard[stream.node] = [(m["params"]["status"], m["params"].get("statusMessage"))
                                      for m in stream.messages if m.get("method") == "notifications/tasks"]
        report("task status across nodes", {"runner": runner, "listener": elsewhere.node,
                                             "notifications": len(heard[runner])})
        # The task's first status may be published before the second stream opened, so only
        # what follows the gate must match: every one of them, in the same order.
        after_gate = {node: [entry for index, entry in enumerate(entries)
                             if entry[1] is not None or any(e[1] is not None for e in entries[:index])]
                      for node, entries in heard.items()}
        assert after_gate[elsewhere.node] == after_gate[runner], heard
        steps = [int(message.split("/")[0]) for status, message in heard[runner] if status == "working" and message]
        assert steps and steps == sorted(set(steps)), heard
        assert heard[runner][-1] == ("completed", "8/8"), heard


async def test_a_list_change_made_on_one_node_reaches_a_listener_on_another(tmp_path: Path):
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        caller = Caller(http, cluster.url)
        async with listening(http, cluster.url, {"toolsListChanged": True,
                                                 "resourceSubscriptions": ["node://pid"]}) as stream:
            changes = 0
            while True:  # until one change was made by another node
                _, reply, node = await caller.request("tools/call", {"name": "change_tools", "arguments": {}})
                assert reply["result"]["content"][0]["text"] == "changed"
                changes += 1
                if node != stream.node:
                    break
            _, reply, updater = await caller.request("tools/call", {"name": "touch", "arguments": {"uri": "node://pid"}})
            # Each node publishes from its own connection, so what two nodes publish reaches
            # Redis in either order: the resource update may overtake the last list change.
            heard: list[dict[str, Any]] = [await stream.next() for _ in range(changes + 1)]
            listed = [note for note in heard if note["method"] == "notifications/tools/list_changed"]
            updated = [note for note in heard if note["method"] == "notifications/resources/updated"]
            assert len(listed) == changes and len(updated) == 1, heard
            assert all(note["params"]["_meta"] == {SUBSCRIPTION_ID: 1} for note in listed), listed
            assert updated[0]["params"]["uri"] == "node://pid", updated
        report("list changes across nodes", {"listener": stream.node, "changes": changes, "updater": updater})


async def test_a_task_whose_node_dies_is_resumed_by_another_through_the_balancer(tmp_path: Path):
    journal = tmp_path / "journal.txt"
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        caller = Caller(http, cluster.url)
        _, created, runner = await caller.request("tools/call", {"name": "journal", "arguments": {"path": str(journal)}})
        task_id = created["result"]["taskId"]
        await until(lambda: journal.exists() and "long" in journal.read_text(), timeout=20)
        victim = next(node for node in cluster.nodes if node.name == runner)
        cluster.kill(victim)

        async def status() -> dict[str, Any]:
            code, reply, _node = await caller.request("tasks/get", {"taskId": task_id})
            return reply.get("result") or {"status": f"HTTP {code}"}

        with trio.fail_after(30):
            task = await until(status, lambda task: task["status"] in ("completed", "failed", "cancelled"), timeout=30)
        assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "journal done", task
    lines = journal.read_text().split("\n")[:-1]
    assert lines[0] == f"prepare {victim.pid}" and sum(line.startswith("prepare") for line in lines) == 1
    longs = [line.split()[1] for line in lines if line.startswith("long")]
    assert longs[0] == str(victim.pid) and len(longs) == 2 and longs[1] != longs[0], lines


async def test_redis_stopped_for_ten_seconds_mid_run(tmp_path: Path):
    gate = tmp_path / "gate"
    numbers: dict[str, Any] = {}
    async with nodes(tmp_path) as cluster, httpx.AsyncClient(timeout=30) as http:
        caller = Caller(http, cluster.url)
        tasks = []
        for _ in range(3):
            _, created, _node = await caller.request("tools/call", {"name": "counted",
                                                                    "arguments": {"steps": 2, "gate": str(gate)}})
            tasks.append(created["result"]["taskId"])
        window: Counter[str] = Counter()
        stopped = trio.Event()
        back = trio.Event()

        async def outage() -> None:
            cluster.stop_redis()
            stopped.set()
            await trio.sleep(10)
            cluster.start_redis()
            back.set()

        async def during() -> None:
            """Store calls while Redis is away: each must fail with the typed -32603, and name nothing."""
            await stopped.wait()
            while not back.is_set():
                code, reply, _node = await caller.request("tasks/get", {"taskId": tasks[0]})
                if "error" in reply:
                    error = reply["error"]
                    assert code == 200 and error["code"] == -32603, reply
                    assert "unavailable" in error["message"] and "redis" not in json.dumps(reply), reply
                    window["store calls refused"] += 1
                else:
                    window["store calls answered"] += 1  # just before Redis went, or just after it came back
                await trio.sleep(0.2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(outage)
            nursery.start_soon(during)
            await stopped.wait()
            with timed("conversations during the outage, seconds", numbers):
                tally, _paths = await run_conversations(cluster.url, 150, concurrency=4)
        assert tally["completed"] == 150 and tally["failed"] == 0, tally  # the stateless path needs no Redis
        numbers.update(window)

        # The nodes recover by themselves: what was recorded survives, and new work goes through.
        gate.touch()
        with timed("seconds until the tasks of before completed", numbers):
            for task_id in tasks:
                async def status(task_id: str = task_id) -> str:
                    _, reply, _node = await caller.request("tasks/get", {"taskId": task_id})
                    return str(reply.get("result", {}).get("status"))

                assert await until(status, lambda value: value in ("completed", "failed"), timeout=60) == "completed"
        _, created, _node = await caller.request("tools/call", {"name": "counted",
                                                                "arguments": {"steps": 1, "gate": str(gate)}})
        assert created["result"]["resultType"] == "task"
        # Each node subscribes again by itself within its back-off (about a second): until then it
        # refuses listen streams with the typed -32603, never a stream that would miss something.
        with timed("seconds until every node took listen streams again", numbers):
            for node in cluster.nodes:
                await until(lambda node=node: accepts_listen(http, cluster.url, node.name), timeout=15, every=0.1)
        async with listening(http, cluster.url, {"toolsListChanged": True}) as stream:
            await caller.request("tools/call", {"name": "change_tools", "arguments": {}})
            assert (await stream.next())["method"] == "notifications/tools/list_changed"
        assert all(node.alive for node in cluster.nodes), cluster.logs()
        logs = cluster.logs()
    report("Redis stopped for 10 s", numbers)
    assert window["store calls refused"] > 10, window
    assert "Traceback" not in logs, logs
    assert logs.count("notifications between nodes: subscribed to") == 3, logs
