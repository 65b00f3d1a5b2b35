"""Part 11: 2025 calls that survive a node's death, what recording them costs, and a soak with node kills.

- **Cost per answer**: one node serving ``benchmarks.adoption_app:server`` on each shared
  store (SQLite, Redis), K two-question 2025 calls on it one after another (initialize,
  the call, its two answers, ``DELETE``); the store operations the process asked for its
  recorded calls (counted by wrapping every operation of the stores of calls: each one a
  transaction or one script) and the bytes they wrote, per answer; on Redis also what Redis
  itself counted (``INFO stats``: commands, bytes in and out) for the whole 2025 call,
  sessions included, less what the node does idle.
- **Latency per round**: the same calls on a node without a shared store (``memory:``,
  nothing recorded), on SQLite and on Redis, in interleaved turns: from the call's POST
  to its first question, and from each answer's POST to what follows it on the stream
  (the next question, then the result). The figures are the ratios to ``memory:`` in the
  same run; no absolute figure is a goal.
- **Soak with node kills**: three nodes on Redis behind haproxy (the configuration of
  docs/deployment.md), conversations at a fixed concurrency for a bounded time, each
  answering after a think time and resuming its stream with ``Last-Event-ID`` whenever it
  ends early, as the spec says; meanwhile a node is stopped every few seconds, SIGKILL and
  SIGTERM in turn, and started again. Reports calls completed, **calls lost** (a call that
  asked its first question and did not end with its own answers; the goal is 0),
  misrouted answers (0), the kills, the resumptions, and how long calls took.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import trio

from .common import ROOT, free_port, log, stop, wait_for_port
from .nodes import _info
from .tasks import _redis

APP = "benchmarks.adoption_app:server"
LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
          "MCP-Protocol-Version": "2025-11-25"}


def _serve(port: int, store: str, env: dict[str, str], log_path: str, *, lease: float = 5.0,
           allowed: str | None = None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "mrtr", "serve", APP, "--port", str(port), "--store", store,
               "--task-lease", str(lease), "--log-level", "warning", "--no-access-log"]
    if allowed:
        command += ["--allowed-host", allowed]
    with open(log_path, "ab") as errors:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)


def _healthy(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the node on port {port} did not come up")


class Talk:
    """One 2025 session and a two-question call through ``url``, its stream resumed whenever it ends early."""

    def __init__(self, http: httpx.AsyncClient, url: str, host: str | None = None) -> None:
        self.http = http
        self.url = url
        self.headers = dict(LEGACY, Host=host or url.split("/")[2])
        self.response: httpx.Response | None = None
        self.lines: Any = None
        self.last_id: str | None = None
        self.resumptions = 0

    async def open(self) -> None:
        opened = await self.http.post(self.url, headers=self.headers, content=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "bench", "version": "1"}}}))
        if opened.status_code != 200:
            raise RuntimeError(f"initialize: {opened.status_code}")
        self.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        await self.http.post(self.url, headers=self.headers,
                             content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    async def start(self, plan: str) -> dict[str, Any]:
        request = self.http.build_request("POST", self.url, headers=self.headers, content=json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "ask2", "arguments": {"plan": plan}}}))
        self.response = await self.http.send(request, stream=True)
        if self.response.status_code != 200:
            raise RuntimeError(f"tools/call: {self.response.status_code}")
        self.lines = self.response.aiter_lines()
        return await self.next()

    async def next(self) -> dict[str, Any]:
        while True:
            if self.lines is not None:
                try:
                    async for line in self.lines:
                        if line.startswith("id:"):
                            self.last_id = line[3:].strip()
                        elif line.startswith("data:") and line[5:].strip():
                            return json.loads(line[5:])  # type: ignore[no-any-return]
                except httpx.TransportError:
                    pass
                await self.close()
            await self.resume()

    async def resume(self) -> None:
        if self.last_id is None:
            raise RuntimeError("the call's stream ended before anything could be resumed")
        pause = 0.05
        while True:
            request = self.http.build_request("GET", self.url, headers={
                **self.headers, "Accept": "text/event-stream", "Last-Event-ID": self.last_id})
            try:
                response = await self.http.send(request, stream=True)
            except httpx.TransportError:
                await trio.sleep(pause)
                continue
            if response.status_code == 200:
                self.resumptions += 1
                self.response = response
                self.lines = response.aiter_lines()
                return
            await response.aclose()
            await trio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def answer(self, question: dict[str, Any], email: str) -> None:
        response = await self.http.post(self.url, headers=self.headers, content=json.dumps(
            {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"email": email}}}))
        if response.status_code != 202:
            raise RuntimeError(f"an answer: {response.status_code}")

    async def close(self) -> None:
        if self.response is not None:
            await self.response.aclose()
        self.response = None
        self.lines = None

    async def delete(self) -> None:
        await self.http.delete(self.url, headers=self.headers)


async def _timed_call(http: httpx.AsyncClient, url: str, number: int) -> list[float]:
    """One session and call; the seconds to its first question and from each answer to what followed it."""
    talk = Talk(http, url)
    await talk.open()
    started = time.perf_counter()
    question = await talk.start(f"p{number}")
    rounds = [time.perf_counter() - started]
    for which in (1, 2):
        sent = time.perf_counter()
        await talk.answer(question, f"a{which}-{number}@example.com")
        question = await talk.next()
        rounds.append(time.perf_counter() - sent)
    result = question.get("result", {}).get("content", [{}])[0].get("text")
    if result != f"a1-{number}@example.com,a2-{number}@example.com:p{number}":
        raise RuntimeError(f"a call got {question}")
    await talk.close()
    await talk.delete()
    return rounds


async def _store_operations(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await http.post(url, headers={"Content-Type": "application/json",
                                             "Accept": "application/json, text/event-stream",
                                             "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                             "Mcp-Name": "store_operations"}, content=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "store_operations", "arguments": {},
         "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {}}}}))
    answer = response.json()
    if "result" not in answer:
        raise RuntimeError(f"store_operations: {answer}")
    return json.loads(answer["result"]["content"][0]["text"])  # type: ignore[no-any-return]


def costs_and_latency(workdir: str, redis_url: str | None, *, calls: int, turns: int) -> dict[str, Any]:
    """Cost per answer on each shared store, and the latency per round against ``memory:``, in one run."""
    env = {**os.environ, "MRTR_SECRET": base64.b64encode(os.urandom(32)).decode(), "PYTHONPATH": str(ROOT)}
    stores = {"memory:": "memory:", "SQLite": f"sqlite:///{workdir}/calls.sqlite3"}
    if redis_url:
        stores["Redis"] = redis_url
    nodes: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    try:
        for name, store in stores.items():
            port = free_port()
            nodes[name] = (port, _serve(port, store, env, os.path.join(workdir, f"cost-{len(nodes)}.log")))
        for port, process in nodes.values():
            wait_for_port(port, process)
            _healthy(port)
        samples: dict[str, list[list[float]]] = {name: [] for name in stores}

        async def measure() -> dict[str, Any]:
            async with httpx.AsyncClient(timeout=30) as http:
                order = list(stores)
                for turn in range(turns):
                    for name in (order if turn % 2 == 0 else order[::-1]):
                        url = f"http://127.0.0.1:{nodes[name][0]}/mcp"
                        for number in range(calls):
                            samples[name].append(await _timed_call(http, url, turn * calls + number))
                costs: dict[str, Any] = {}
                for name in ("SQLite", "Redis"):
                    if name not in nodes:
                        continue
                    url = f"http://127.0.0.1:{nodes[name][0]}/mcp"
                    before = await _store_operations(http, url)
                    info_before = _info(redis_url) if name == "Redis" and redis_url else None
                    started = time.monotonic()
                    for number in range(calls):
                        await _timed_call(http, url, number)
                    seconds = time.monotonic() - started
                    after = await _store_operations(http, url)
                    operations = {key: after["operations"].get(key, 0) - before["operations"].get(key, 0)
                                  for key in after["operations"]}
                    written = {key: after["bytes"].get(key, 0) - before["bytes"].get(key, 0) for key in after["bytes"]}
                    answers = 2 * calls
                    row = {"operations_per_answer": sum(operations.values()) / answers,
                           "bytes_per_answer": sum(written.values()) / answers,
                           "by_operation": {key: value / answers for key, value in operations.items() if value}}
                    if info_before is not None and redis_url:
                        info_after = _info(redis_url)
                        idle = _idle(redis_url)
                        spent = {key: max(0.0, info_after[key] - info_before[key] - idle[key] * seconds) / calls
                                 for key in info_after}
                        row["redis_per_call"] = {"commands": spent["total_commands_processed"],
                                                 "bytes_in": spent["total_net_input_bytes"],
                                                 "bytes_out": spent["total_net_output_bytes"]}
                    costs[name] = row
                return costs

        costs = trio.run(measure)
    finally:
        for _, process in nodes.values():
            stop(process)
    latency: dict[str, Any] = {}
    base = {which: statistics.median(sample[index] for sample in samples["memory:"])
            for index, which in enumerate(("first question", "second question", "result"))}
    for name, rows in samples.items():
        medians = {which: statistics.median(sample[index] for sample in rows)
                   for index, which in enumerate(("first question", "second question", "result"))}
        per_round = statistics.median(sample[1] for sample in rows) + statistics.median(sample[2] for sample in rows)
        base_round = base["second question"] + base["result"]
        latency[name] = {"median_ms": {which: value * 1000 for which, value in medians.items()},
                         "ratio_per_answer": per_round / base_round,
                         "ratio_first_question": medians["first question"] / base["first question"],
                         "samples": len(rows)}
    return {"calls": calls, "turns": turns, "costs": costs, "latency": latency}


def _idle(url: str) -> dict[str, float]:
    before = _info(url)
    started = time.monotonic()
    time.sleep(1.0)
    seconds = time.monotonic() - started
    return {key: (value - before[key]) / seconds for key, value in _info(url).items()}


class Soak:
    """Three nodes on one Redis behind haproxy, stopped and started again while conversations go on."""

    def __init__(self, workdir: str, redis_url: str) -> None:
        from tests.nodes.balancer import haproxy_config

        self.workdir = workdir
        self.listen = free_port()
        self.url = f"http://127.0.0.1:{self.listen}/mcp"
        self.store = redis_url
        self.env = {**os.environ, "MRTR_SECRET": base64.b64encode(os.urandom(32)).decode(), "PYTHONPATH": str(ROOT),
                    "BENCH_ANSWER_TIMEOUT": "120"}
        self.ports = [free_port() for _ in range(3)]
        self.nodes = [self._start(port) for port in self.ports]
        for port, node in zip(self.ports, self.nodes):
            wait_for_port(port, node)
        config = os.path.join(workdir, "haproxy.cfg")
        with open(config, "w") as file:
            file.write(haproxy_config(("127.0.0.1", self.listen), [("127.0.0.1", port) for port in self.ports],
                                      check_every="300ms"))
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.balancer = subprocess.Popen([binary, "-db", "-f", config], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        wait_for_port(self.listen, self.balancer)
        for port in self.ports:
            _healthy(port)

    def _start(self, port: int) -> subprocess.Popen[bytes]:
        return _serve(port, self.store, self.env, os.path.join(self.workdir, f"node-{port}.log"), lease=1.0,
                      allowed=f"127.0.0.1:{self.listen}")

    def close(self) -> None:
        stop(self.balancer)
        for node in self.nodes:
            stop(node)


def soak(workdir: str, redis_url: str, *, seconds: float, concurrency: int, every: float) -> dict[str, Any]:
    """Conversations through haproxy for ``seconds`` while a node is stopped every ``every`` seconds."""
    cluster = Soak(workdir, redis_url)
    totals = {"completed": 0, "lost": 0, "misrouted": 0, "not_started": 0, "resumptions": 0}
    lost_reasons: list[str] = []
    durations: list[float] = []
    kills = {"SIGKILL": 0, "SIGTERM": 0}

    async def conversation(http: httpx.AsyncClient, number: int) -> None:
        nonce = f"{number}-{secrets.token_hex(3)}"
        talk = Talk(http, cluster.url)
        try:
            await talk.open()
            question = await talk.start(nonce)
        except (RuntimeError, httpx.TransportError, KeyError):
            totals["not_started"] += 1  # refused before it asked anything (its node died under it): tried again
            return
        started = time.monotonic()
        try:
            with trio.fail_after(150):
                for which in (1, 2):
                    await trio.sleep(random.uniform(0.0, 0.8))  # the person thinking
                    if question.get("method") != "elicitation/create":
                        raise RuntimeError(f"expected a question, got {str(question)[:200]}")
                    await talk.answer(question, f"a{which}-{nonce}@example.com")
                    question = await talk.next()
            text = question.get("result", {}).get("content", [{}])[0].get("text", "")
            if text == f"a1-{nonce}@example.com,a2-{nonce}@example.com:{nonce}":
                totals["completed"] += 1
                durations.append(time.monotonic() - started)
            elif nonce not in text and "@example.com" in text:
                totals["misrouted"] += 1
            else:
                totals["lost"] += 1
                lost_reasons.append(str(question)[:300])
        except (RuntimeError, httpx.TransportError, trio.TooSlowError) as error:
            totals["lost"] += 1
            lost_reasons.append(f"{type(error).__name__}: {error}"[:300])
        finally:
            totals["resumptions"] += talk.resumptions
            await talk.close()
            try:
                with trio.move_on_after(5):
                    await talk.delete()
            except httpx.TransportError:
                pass

    async def main() -> None:
        end = trio.current_time() + seconds
        counter = iter(range(1 << 30))

        async def client() -> None:
            async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=90.0),
                                         limits=httpx.Limits(max_keepalive_connections=4)) as http:
                while trio.current_time() < end:
                    await conversation(http, next(counter))

        async def killer() -> None:
            victim = 0
            while trio.current_time() + every < end:
                await trio.sleep(every)
                node = cluster.nodes[victim]
                how = signal.SIGKILL if (kills["SIGKILL"] + kills["SIGTERM"]) % 2 == 0 else signal.SIGTERM
                kills[how.name] += 1
                os.kill(node.pid, how)
                await trio.to_thread.run_sync(node.wait)
                cluster.nodes[victim] = cluster._start(cluster.ports[victim])
                await trio.to_thread.run_sync(_healthy, cluster.ports[victim])
                victim = (victim + 1) % len(cluster.nodes)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(killer)
            for _ in range(concurrency):
                nursery.start_soon(client)

    try:
        started = time.monotonic()
        trio.run(main)
        elapsed = time.monotonic() - started
    finally:
        cluster.close()
    durations.sort()
    return {"seconds": round(elapsed, 1), "concurrency": concurrency, "kill_every_s": every, "kills": kills,
            **totals, "lost_reasons": lost_reasons[:5],
            "call_seconds": {"p50": statistics.median(durations) if durations else None,
                             "p99": durations[int(len(durations) * 0.99)] if durations else None}}


def run(*, quick: bool) -> dict[str, Any]:
    """Part 11's results."""
    calls, turns, seconds, concurrency, every = (10, 2, 15.0, 8, 4.0) if quick else (60, 4, 180.0, 24, 10.0)
    workdir = tempfile.mkdtemp(prefix="mrtr-bench-adoption-")
    redis, url, why = _redis(workdir)
    try:
        log(f"part 11: cost and latency of recorded 2025 calls, {calls} calls x {turns} turns per store")
        measured = costs_and_latency(workdir, url, calls=calls, turns=turns)
        result: dict[str, Any] = {"measured": True, **measured}
        if url is None or (shutil.which("haproxy") is None and not os.path.exists("/usr/sbin/haproxy")):
            result["soak"] = {"measured": False, "reason": why or "haproxy is not installed"}
        else:
            log(f"part 11: soak, {seconds:.0f} s at concurrency {concurrency}, a node stopped every {every:.0f} s")
            result["soak"] = {"measured": True, **soak(workdir, url, seconds=seconds, concurrency=concurrency,
                                                       every=every)}
        return result
    finally:
        if redis is not None:
            stop(redis)
        shutil.rmtree(workdir, ignore_errors=True)
