"""Part 9: several ``mrtr serve`` nodes on one Redis behind haproxy, on this machine.

- **Scaling**: two-question conversations per second through haproxy (round robin) with
  one, two and three nodes, each count in turns (1 2 3, 3 2 1, ...), the load
  generator's connections fixed; the ratio to one node is the figure (the machine has
  few cores: the nodes, haproxy, Redis and the load generator share them), with the CPU
  seconds per thousand conversations that haproxy and Redis used beside the nodes'.
- **Notification latency**: a listen stream held on node 2; node 1 (called directly,
  not through the balancer) publishes ``resources/updated`` and answers the wall clock
  just before; latency is the time from there to the stream's receipt of it, median
  and p99.
- **Redis cost**: commands (``INFO stats``' ``total_commands_processed``) and network
  bytes in and out per plain conversation, per task of three Steps (created, run,
  read once) and per final round recorded by ``once=True``, on one node, less what the
  node does idle in the same time (lease sweeps); and what one record occupies
  (``MEMORY USAGE``); and per 2025-era session, every request of which reaches
  another node than the one before: ``initialize`` on node 1, ``notifications/initialized``
  on node 2, a two-question call on node 1 whose answers go to node 2 (each passed on
  to node 1 over its channel), ``tools/list`` on node 3, ``DELETE`` on node 2.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import trio

from . import loadgen
from .common import ROOT, children, cpu_seconds, free_port, log, stop, wait_for_port
from .tasks import _redis

APP = "benchmarks.nodes_app:server"
TASKS = "io.modelcontextprotocol/tasks"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28"}


class Cluster:
    """Three nodes on one Redis, and haproxy in front of the first ``count`` of them (restarted to change it)."""

    def __init__(self, workdir: str, redis_url: str, listen: int) -> None:
        self.workdir = workdir
        self.redis_url = redis_url
        self.listen = listen
        self.ports = [free_port() for _ in range(3)]
        self.env = {**os.environ, "MRTR_SECRET": base64.b64encode(os.urandom(32)).decode(),
                    "PYTHONPATH": str(ROOT)}
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.balancer: subprocess.Popen[bytes] | None = None
        for port in self.ports:
            with open(os.path.join(workdir, f"node-{port}.log"), "wb") as errors:
                self.nodes.append(subprocess.Popen(
                    [sys.executable, "-m", "mrtr", "serve", APP, "--port", str(port), "--store", redis_url,
                     "--allowed-host", f"127.0.0.1:{listen}", "--log-level", "warning", "--no-access-log"],
                    cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=errors))
        for port, node in zip(self.ports, self.nodes):
            wait_for_port(port, node)

    def balance(self, count: int) -> None:
        """haproxy over the first ``count`` nodes, the configuration of docs/deployment.md."""
        from tests.nodes.balancer import haproxy_config

        if self.balancer is not None:
            stop(self.balancer)
        config = os.path.join(self.workdir, f"haproxy-{count}.cfg")
        with open(config, "w") as file:
            file.write(haproxy_config(("127.0.0.1", self.listen), [("127.0.0.1", port) for port in self.ports[:count]]))
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.balancer = subprocess.Popen([binary, "-db", "-f", config], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        wait_for_port(self.listen, self.balancer)
        # Every node in rotation (its first health check passed) before anything is timed.
        deadline = time.monotonic() + 30
        seen: set[str] = set()
        with httpx.Client(timeout=2) as http:
            while len(seen) < count and time.monotonic() < deadline:
                try:
                    response = http.get(f"http://127.0.0.1:{self.listen}/healthz")
                    if response.status_code == 200:
                        seen.add(response.headers.get("x-mrtr-node", ""))
                        continue
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        if len(seen) < count:
            raise RuntimeError(f"haproxy reached {sorted(seen)} of {count} nodes")

    def node_pids(self, count: int = 3) -> list[int]:
        return [pid for node in self.nodes[:count] for pid in (node.pid, *children(node.pid))]

    def close(self) -> None:
        if self.balancer is not None:
            stop(self.balancer)
        for node in self.nodes:
            stop(node)


def _info(url: str) -> dict[str, int]:
    """Redis' command and network counters."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    done = subprocess.run(["redis-cli", "-p", port, "INFO", "stats"], capture_output=True, text=True, timeout=10,
                          check=True)
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    return {name: int(fields[name]) for name in ("total_commands_processed", "total_net_input_bytes",
                                                 "total_net_output_bytes")}


def _memory(url: str, pattern: str) -> int | None:
    port = url.rsplit(":", 1)[1].split("/")[0]
    keys = subprocess.run(["redis-cli", "-p", port, "--scan", "--pattern", pattern], capture_output=True, text=True,
                          timeout=10, check=True).stdout.split()
    if not keys:
        return None
    sizes = [int(subprocess.run(["redis-cli", "-p", port, "MEMORY", "USAGE", key], capture_output=True, text=True,
                                timeout=10, check=True).stdout) for key in keys[:50]]
    return int(statistics.median(sizes))


def _stored_session(cluster: Cluster, url: str) -> int | None:
    """What one open session's record occupies (the benchmark's own sessions end with DELETE)."""
    opened = httpx.post(f"http://127.0.0.1:{cluster.ports[0]}/mcp", headers={
        **LEGACY, "Host": f"127.0.0.1:{cluster.listen}"}, content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "bench", "version": "1"}}}), timeout=30)
    opened.raise_for_status()
    return _memory(url, "mrtr:session:*")


def scaling(cluster: Cluster, redis: subprocess.Popen[bytes], *, turns: int, seconds: float,
            concurrency: int) -> dict[str, Any]:
    """Conversations per second through haproxy with 1, 2 and 3 nodes, in turns."""
    samples: dict[int, list[dict[str, Any]]] = {1: [], 2: [], 3: []}
    for turn in range(turns):
        for count in ([1, 2, 3] if turn % 2 == 0 else [3, 2, 1]):
            cluster.balance(count)
            assert cluster.balancer is not None
            pids = {"nodes": cluster.node_pids(count), "haproxy": [cluster.balancer.pid], "redis": [redis.pid]}
            before = {name: cpu_seconds(group) for name, group in pids.items()}
            result = loadgen.run(cluster.listen, "ask2", concurrency=concurrency, seconds=seconds)
            used = {name: cpu_seconds(group) - before[name] for name, group in pids.items()}
            thousands = max(result["completed"], 1) / 1000
            samples[count].append({
                "per_second": result["per_second"], "errors": result["errors"], "misrouted": result["misrouted"],
                "p50_ms": result["p50_ms"], "p99_ms": result["p99_ms"],
                "cpu_s_per_1000": {name: value / thousands for name, value in used.items()},
                "cpu_share": {name: value / result["seconds"] for name, value in used.items()},
                "client_cpu_share": result["client_cpu_s"] / result["seconds"],
            })
            log(f"part 9: {count} node(s): {result['per_second']:.0f} conversations/s, {result['errors']} errors"
                + (f" (first: {result['first_errors'][0]})" if result["first_errors"] else ""))
    rows: dict[str, Any] = {}
    for count, runs in samples.items():
        rows[str(count)] = {
            "per_second": statistics.median(run["per_second"] for run in runs),
            "errors": sum(run["errors"] for run in runs), "misrouted": sum(run["misrouted"] for run in runs),
            "p50_ms": statistics.median(run["p50_ms"] for run in runs),
            "p99_ms": statistics.median(run["p99_ms"] for run in runs),
            "cpu_s_per_1000": {name: statistics.median(run["cpu_s_per_1000"][name] for run in runs)
                               for name in ("nodes", "haproxy", "redis")},
            "cpu_share": {name: statistics.median(run["cpu_share"][name] for run in runs)
                          for name in ("nodes", "haproxy", "redis")},
            "client_cpu_share": statistics.median(run["client_cpu_share"] for run in runs),
        }
    one = rows["1"]["per_second"]
    for row in rows.values():
        row["ratio"] = row["per_second"] / one if one else None
    return rows


async def _latency(cluster: Cluster, samples: int) -> dict[str, Any]:
    """Publish on node 1, receive on a listen stream held by node 2."""
    publisher, listener = cluster.ports[0], cluster.ports[1]
    uri = "bench://touched"
    delays: list[float] = []
    received: list[tuple[float, dict[str, Any]]] = []
    arrived = trio.Event()
    async with httpx.AsyncClient(timeout=30, headers={"Host": f"127.0.0.1:{cluster.listen}"}) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                "params": {"notifications": {"resourceSubscriptions": [uri]}, "_meta": META}}
        acknowledged = trio.Event()

        async def listen() -> None:
            nonlocal arrived
            async with http.stream("POST", f"http://127.0.0.1:{listener}/mcp", content=json.dumps(body),
                                   headers={**HEADERS, "Mcp-Method": "subscriptions/listen"}) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line[5:])
                    if message.get("method") == "notifications/subscriptions/acknowledged":
                        acknowledged.set()
                    elif message.get("method") == "notifications/resources/updated":
                        received.append((time.time(), message))
                        arrived.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            with trio.fail_after(30):
                await acknowledged.wait()
            for number in range(samples + 20):  # the first 20 warm the path, untimed
                arrived = trio.Event()
                request = {"jsonrpc": "2.0", "id": number + 2, "method": "tools/call",
                           "params": {"name": "touch", "arguments": {"uri": uri}, "_meta": META}}
                response = await http.post(f"http://127.0.0.1:{publisher}/mcp", content=json.dumps(request),
                                           headers={**HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": "touch"})
                published = float(response.json()["result"]["content"][0]["text"])
                with trio.fail_after(10):
                    await arrived.wait()
                if number >= 20:
                    delays.append(received[-1][0] - published)
            nursery.cancel_scope.cancel()
    delays.sort()
    return {"samples": len(delays), "median_ms": statistics.median(delays) * 1000,
            "p99_ms": delays[min(len(delays) - 1, int(0.99 * len(delays)))] * 1000}


async def _call(http: httpx.AsyncClient, port: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name") or params.get("taskId") or ""
    response = await http.post(f"http://127.0.0.1:{port}/mcp", content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}),
        headers={**HEADERS, "Mcp-Method": method, "Mcp-Name": str(name)})
    message = response.json()
    if "error" in message:
        raise RuntimeError(f"{method}: {message['error']}")
    return dict(message["result"])


async def _conversation(http: httpx.AsyncClient, port: int, tool: str, number: int) -> None:
    params: dict[str, Any] = {"name": tool, "arguments": {"plan": f"p{number}"}}
    for question in range(3):
        result = await _call(http, port, "tools/call", params)
        if result["resultType"] == "complete":
            return
        responses = {key: {"action": "accept", "content": {"email": f"c{number}q{question}@example.com"}}
                     for key in result["inputRequests"]}
        params = {**params, "requestState": result["requestState"], "inputResponses": responses}
    raise RuntimeError("more rounds than asked")


async def _task(http: httpx.AsyncClient, port: int) -> tuple[str, int]:
    """One task of three Steps, polled until it completes; its id and the number of ``tasks/get`` it took."""
    created = await _call(http, port, "tools/call", {"name": "job", "arguments": {"steps": 3}})
    task_id = created["taskId"]
    polls = 0
    with trio.fail_after(30):
        while True:
            polls += 1
            if (await _call(http, port, "tasks/get", {"taskId": task_id}))["status"] == "completed":
                return task_id, polls
            await trio.sleep(0.01)


LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
          "MCP-Protocol-Version": "2025-11-25"}


async def _session(http: httpx.AsyncClient, ports: list[int], number: int) -> None:
    """One 2025-era session whose requests go round the nodes (see the module docs)."""
    first, second, third = (f"http://127.0.0.1:{port}/mcp" for port in ports[:3])
    opened = await http.post(first, headers=LEGACY, content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "bench", "version": "1"}}}))
    headers = {**LEGACY, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    await http.post(second, headers=headers, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask2",
                                                                         "arguments": {"plan": f"p{number}"}}}
    final = None
    async with http.stream("POST", first, headers=headers, content=json.dumps(call)) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:") or not line[5:].strip():
                continue
            message = json.loads(line[5:])
            if message.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {
                    "action": "accept", "content": {"email": f"s{number}@example.com"}}}
                accepted = await http.post(second, headers=headers, content=json.dumps(answer))
                if accepted.status_code != 202:
                    raise RuntimeError(f"an answer passed on between nodes: {accepted.status_code}")
            elif "id" in message and "method" not in message:
                final = message
    if final is None or "result" not in final:
        raise RuntimeError(f"a 2025 session's call across nodes: {final}")
    await http.post(third, headers=headers, content=b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
    await http.delete(second, headers=headers)


def costs(cluster: Cluster, url: str, *, count: int) -> dict[str, Any]:
    """Redis commands and bytes per plain conversation, task and final round, on node 1, less its idle work."""
    port = cluster.ports[0]

    polls = 0
    done: list[str] = []

    async def batch(kind: str) -> float:
        nonlocal polls
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=30, headers={"Host": f"127.0.0.1:{cluster.listen}"}) as http:
            for number in range(count):
                if kind == "conversation":
                    await _conversation(http, port, "ask2", number)
                elif kind == "final round":
                    await _conversation(http, port, "once1", number)
                elif kind == "session (2025 era)":
                    await _session(http, cluster.ports, number)
                elif kind == "task":
                    task_id, polled = await _task(http, port)
                    polls += polled
                    done.append(task_id)
                else:  # a tasks/get of a completed task: what each poll above cost
                    await _call(http, port, "tasks/get", {"taskId": done[number % len(done)]})
        return time.monotonic() - started

    def counters() -> dict[str, int]:
        return _info(url)

    # What the three nodes do idle (lease sweeps, a ping per subscription), per second.
    before = counters()
    idle_started = time.monotonic()
    time.sleep(3)
    idle_seconds = time.monotonic() - idle_started
    idle = {name: (value - before[name]) / idle_seconds for name, value in counters().items()}
    rows: dict[str, Any] = {}
    for kind in ("conversation", "task", "final round", "read", "session (2025 era)"):
        before = counters()
        seconds = trio.run(batch, kind)
        after = counters()
        spent = {name: max(0.0, after[name] - before[name] - idle[name] * seconds) / count for name in after}
        rows[kind] = {"commands": spent["total_commands_processed"], "bytes_in": spent["total_net_input_bytes"],
                      "bytes_out": spent["total_net_output_bytes"], "per_second_one_client": count / seconds}
    # A client polling tasks/get pays a read per poll; the task's own cost is without them.
    read = rows.pop("read")
    per_task = polls / count
    for name, key in (("commands", "commands"), ("bytes_in", "bytes_in"), ("bytes_out", "bytes_out")):
        rows["task"][name] = max(0.0, rows["task"][name] - per_task * read[key])
    rows["task"]["polls_subtracted"] = per_task
    rows["tasks/get"] = {**read, "stored_bytes": 0}
    rows["task"]["stored_bytes"] = _memory(url, "mrtr:task:*")
    rows["final round"]["stored_bytes"] = _memory(url, "mrtr:round:*")
    rows["conversation"]["stored_bytes"] = 0
    rows["session (2025 era)"]["stored_bytes"] = _stored_session(cluster, url)
    return {"count": count, "idle_commands_per_second": idle["total_commands_processed"], "rows": rows}


def run(*, quick: bool) -> dict[str, Any]:
    """Part 9's results."""
    turns, seconds, concurrency, samples, count = (1, 2.0, 16, 100, 30) if quick else (3, 8.0, 24, 1000, 200)
    if shutil.which("haproxy") is None and not os.path.exists("/usr/sbin/haproxy"):
        return {"measured": False, "reason": "haproxy is not installed (apt-get install haproxy)"}
    workdir = tempfile.mkdtemp(prefix="mrtr-bench-nodes-")
    redis, url, why = _redis(workdir)
    if redis is None or url is None:
        return {"measured": False, "reason": str(why)}
    cluster = None
    try:
        cluster = Cluster(workdir, url, free_port())
        log(f"part 9: {turns} turn(s) of {seconds:.0f} s per node count, {concurrency} connections")
        scaled = scaling(cluster, redis, turns=turns, seconds=seconds, concurrency=concurrency)
        log(f"part 9: notification latency across nodes, {samples} samples")
        latency = trio.run(_latency, cluster, samples)
        log(f"part 9: Redis cost, {count} of each")
        cost = costs(cluster, url, count=count)
    finally:
        if cluster is not None:
            cluster.close()
        stop(redis)
        shutil.rmtree(workdir, ignore_errors=True)
    return {"measured": True, "turns": turns, "seconds": seconds, "concurrency": concurrency,
            "scaling": scaled, "latency": latency, "costs": cost}
