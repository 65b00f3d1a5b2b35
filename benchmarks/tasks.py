"""Part 5: tasks, from creation to completion with two ``tasks/update`` rounds, on SQLite and Redis.

The tool (``review`` in :mod:`benchmarks.apps`) runs only as a task: a Step starts it,
then it asks two questions through the task. One flow over HTTP:

``tools/call`` (``CreateTaskResult``) -> ``tasks/get`` until ``input_required`` ->
``tasks/update`` -> ``tasks/get`` until ``input_required`` -> ``tasks/update`` ->
``tasks/get`` until ``completed``, whose result must be that flow's own two answers.

The native server (one worker) runs with ``--tasks sqlite:///...`` (a fresh file) and
with ``--tasks redis://...`` (a redis-server on a free loopback port, started and
stopped here); the two are taken in turns. Polls go out back to back (a 1 ms pause),
so the figures are what the store and the carrier allow, not a client's poll interval.
Reported: completed tasks per second, p50/p99 from the call to the completed
``tasks/get``, polls per task, errors and misrouted results.

Without the tasks carrier (no ``mrtr.tasks``) the part reports itself as not
measured; without a redis-server binary or the ``redis`` extra, the Redis row is
skipped and the run says so.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import msgspec
import trio

from .common import log, turn_order
from .http_throughput import Running
from .loadgen import META, Connection, Failure

TASKS = "io.modelcontextprotocol/tasks"
TASK_META = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}},
                                                                     "extensions": {TASKS: {}}}}


async def _until(conn: Connection, task_id: str, statuses: tuple[str, ...], polls: list[int]) -> dict[str, Any]:
    for _ in range(100_000):
        result = await conn.call(task_id, {"taskId": task_id, "_meta": TASK_META}, "tasks/get")
        polls[0] += 1
        if result["status"] in statuses:
            return result
        if result["status"] in ("failed", "cancelled", "completed"):
            raise Failure(f"task ended {result['status']}: {result}")
        await trio.sleep(0.001)
    raise Failure("task never reached " + "/".join(statuses))


async def _flow(conn: Connection, number: int, polls: list[int]) -> bool:
    plan = f"p{number}"
    created = await conn.call("review", {"name": "review", "arguments": {"plan": plan}, "_meta": TASK_META})
    if created.get("resultType") != "task":
        raise Failure(f"expected a task, got {created}")
    task_id = created["taskId"]
    emails = []
    for _ in range(2):
        task = await _until(conn, task_id, ("input_required",), polls)
        email = f"c{number}q{len(emails)}@example.com"
        emails.append(email)
        answers = {key: {"action": "accept", "content": {"email": email}} for key in task["inputRequests"]}
        await conn.call(task_id, {"taskId": task_id, "inputResponses": answers, "_meta": TASK_META}, "tasks/update")
    task = await _until(conn, task_id, ("completed",), polls)
    return task["result"]["content"][0]["text"] == f"{','.join(emails)}:{plan}"


async def _load(port: int, seconds: float, concurrency: int) -> dict[str, Any]:
    counter = 0
    errors = 0
    misrouted = 0
    first_errors: list[str] = []
    latencies: list[float] = []
    polls = [0]
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal counter, errors, misrouted
        conn: Connection | None = None
        while time.monotonic() < deadline:
            number = counter
            counter += 1
            start = time.perf_counter()
            try:
                if conn is None:
                    conn = Connection(await trio.open_tcp_stream("127.0.0.1", port), "127.0.0.1", port)
                ok = await _flow(conn, number, polls)
            except (Failure, OSError, trio.BrokenResourceError, KeyError, ValueError, msgspec.DecodeError) as exc:
                errors += 1
                if len(first_errors) < 3:
                    first_errors.append(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    await conn.stream.aclose()
                conn = None
            else:
                latencies.append(time.perf_counter() - start)
                misrouted += not ok
        if conn is not None:
            await conn.stream.aclose()

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    elapsed = time.perf_counter() - started
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {"completed": len(latencies), "errors": errors, "misrouted": misrouted, "first_errors": first_errors,
            "per_second": len(latencies) / elapsed, "p50_ms": percentile(0.5), "p99_ms": percentile(0.99),
            "polls_per_task": polls[0] / max(len(latencies), 1)}


def _redis(workdir: str) -> tuple[subprocess.Popen[bytes] | None, str | None, str | None]:
    """A redis-server on a free port (no persistence), its URL, or why there is none."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None, None, "redis-server is not installed (apt-get install redis-server)"
    if importlib.util.find_spec("coredis") is None:
        return None, None, "the redis extra is not installed (pip install -e '.[redis]')"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0", None
        except OSError:
            time.sleep(0.02)
    process.terminate()
    process.wait()
    return None, None, "redis-server did not start"


def run(*, quick: bool) -> dict[str, Any]:
    """Part 5's results, or why it was not measured."""
    if importlib.util.find_spec("mrtr.tasks") is None:
        return {"measured": False, "reason": "the tasks carrier is not on the main line yet (no mrtr.tasks to measure)"}
    pairs, seconds, concurrency = (3, 0.5, 8) if quick else (5, 3.0, 8)
    skipped: dict[str, str] = {}
    workdir = tempfile.mkdtemp(prefix="mrtr-bench-tasks-")
    redis, redis_url, why = _redis(workdir)
    if why:
        skipped["Redis"] = why
        log(f"part 5: SKIPPED the Redis store: {why}")
    stores = {"SQLite": f"sqlite:///{workdir}/tasks.sqlite3"}
    if redis_url:
        stores["Redis"] = redis_url
    servers: dict[str, Running] = {}
    try:
        for name, url in stores.items():
            servers[name] = Running(f"tasks on {name}", [sys.executable, "-m", "benchmarks.apps", "tasks", "{port}",
                                                        "1", url])
        for server in servers.values():
            server.ready()
        for server in servers.values():
            trio.run(_load, server.port, 0.3, concurrency)  # warm up
        turns: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for turn in range(pairs):
            log(f"part 5: tasks, turn {turn + 1}/{pairs}")
            for name in turn_order(list(servers), turn):
                turns[name].append(trio.run(_load, servers[name].port, seconds, concurrency))
    finally:
        for server in servers.values():
            server.stop()
        if redis is not None:
            redis.terminate()
            redis.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
    rows = {}
    for name, samples in turns.items():
        rows[name] = {
            "per_second": statistics.median(s["per_second"] for s in samples),
            "per_second_turns": [s["per_second"] for s in samples],
            "p50_ms": statistics.median(s["p50_ms"] for s in samples),
            "p99_ms": statistics.median(s["p99_ms"] for s in samples),
            "polls_per_task": statistics.median(s["polls_per_task"] for s in samples),
            "completed": sum(s["completed"] for s in samples),
            "errors": sum(s["errors"] for s in samples),
            "misrouted": sum(s["misrouted"] for s in samples),
            "first_errors": [e for s in samples for e in s["first_errors"]][:3],
        }
    return {"measured": True, "pairs": pairs, "seconds": seconds, "concurrency": concurrency, "stores": rows,
            "skipped": skipped}
