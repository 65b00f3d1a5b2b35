"""Part 10: what the middleware pipeline costs a plain ``tools/call``, in process and over HTTP.

The request is a first-round ``tools/call`` of ``echo`` (a sync tool that asks nothing,
running inline: the cheapest request there is, so a fixed cost shows most). Candidates,
each measured against **no middleware** in the same run (the ratio is the figure):

- **no middleware**: the empty pipeline, which the dispatch passes with a list check;
- **one** and **five pass-through middleware**: ``async def mw(request, call_next):
  return await call_next(request)``, each its own stage, so the figure is what the
  pipeline itself costs (the view of the request, a stage per middleware), not what a
  middleware does;
- with ``--before PATH``, **no middleware** in another checkout (the commit before the
  pipeline existed): whether an empty pipeline costs anything at all;
- over HTTP, the official SDK (``mcp`` 2.3.0, ``MCPServer`` under uvicorn, stateless JSON)
  with no middleware and with five pass-through ``ServerMiddleware``: the same comparison
  for the peer, its ratio to its own baseline (skipped, saying so, without its virtualenv).

And what ``RateLimit`` adds to each request it counts: one ``take_token`` of its store, in
wall time (SQLite works in a worker thread, Redis in another process), for the memory
store, a SQLite file and a Redis started for the run (skipped, saying so, without one).

In process: each checkout in a child process of its own (so two versions of ``mrtr`` can
be timed side by side), the request dispatched through ``Server.handle`` and driven to
its end without an event loop turn (nothing in it suspends), in CPU time of the child's
thread, the candidates in interleaved batches (A B C, C B A, ...); the figure is the
median per request. Over HTTP: each candidate a native server in its own process (one
worker, access lines off), driven by wrk with a few connections in the same interleaved
turns; the figure is the server's CPU time per request (what a middleware adds to the
server's work; requests per second are shown too, but two cores shared with wrk make
them the noisier figure).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import wrk
from .common import (ROOT, BatchChild, children, clean_env, free_port, log, sdk_missing, sdk_python, stop, summary,
                     turn_order, wait_for_port)

NONE, ONE, FIVE, BEFORE = "no middleware", "one pass-through", "five pass-through", "no middleware, before"
STAGES = {NONE: 0, ONE: 1, FIVE: 5}
SDK_NONE, SDK_FIVE = "SDK 2.3.0, no middleware", "SDK 2.3.0, five pass-through"

_CHILD = r'''
import sys
sys.path.insert(0, sys.argv[2])
from benchmarks.common import drive, serve_batches  # first: the checkout timed may hold other benchmarks
sys.path.insert(0, sys.argv[1])
import mrtr
assert mrtr.__file__.startswith(sys.argv[1]), mrtr.__file__
from mrtr import Server

MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "echo", "arguments": {"text": "ok"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}}}}


def build(stages):
    server = Server("bench-middleware", secret=b"w" * 32)

    @server.tool
    def echo(text: str) -> str:
        return text

    for _ in range(stages):
        async def passing(request, call_next):
            return await call_next(request)

        server.middleware(passing)
    return server


calls = {}
for stages in sys.argv[3].split(","):
    server = build(int(stages))
    answer = drive(server.handle(MESSAGE))
    assert answer["result"]["content"][0]["text"] == "ok", answer
    calls[stages] = lambda server=server: drive(server.handle(MESSAGE))
serve_batches(calls)
'''


def _child(checkout: Path, stages: list[int]) -> BatchChild:
    """One checkout's child process, timing batches of requests through ``stages`` middleware on demand."""
    return BatchChild([sys.executable, "-c", _CHILD, str(checkout), str(ROOT), ",".join(map(str, stages))], ROOT,
                      str(checkout))


def _in_process(*, pairs: int, batch_s: float, before: Path | None) -> dict[str, Any]:
    from .common import interleave

    now = _child(ROOT, list(STAGES.values()))
    earlier = _child(before, [0]) if before is not None else None
    try:
        candidates: dict[str, Any] = {name: now.candidate(str(stages)) for name, stages in STAGES.items()}
        if earlier is not None:
            candidates[BEFORE] = earlier.candidate("0")
        timings = interleave(candidates, pairs=pairs, batch_s=batch_s)
    finally:
        now.close()
        if earlier is not None:
            earlier.close()
    base = timings[NONE]["median"]
    return {name: {"us": row["median"] * 1e6, "ratio": row["median"] / base, "spread": row["spread"]}
            for name, row in timings.items()}


class _Server:
    def __init__(self, name: str, stages: int, before: Path | None = None, sdk: Path | None = None) -> None:
        self.name = name
        self.port = free_port()
        env = dict(os.environ)
        if sdk is not None:
            command = [str(sdk), str(ROOT / "benchmarks" / "sdk_peer.py"), "serve-middleware", str(self.port),
                       str(stages)]
            env = clean_env()
        elif before is not None:
            # apps.py as a script with the other checkout first on the path: its mrtr shadows this one's.
            command = [sys.executable, str(ROOT / "benchmarks" / "apps.py"), "native", str(self.port), "1"]
            env["PYTHONPATH"] = str(before.resolve())
        else:
            command = [sys.executable, "-m", "benchmarks.apps", "middleware", str(self.port), "1", str(stages)]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def pids(self) -> list[int]:
        return [self.process.pid, *children(self.process.pid)]


def _over_http(*, turns: int, seconds: float, connections: int, before: Path | None,
               sdk: Path | None) -> dict[str, Any]:
    servers = [_Server(name, stages) for name, stages in STAGES.items()]
    if before is not None:
        servers.append(_Server(BEFORE, 0, before))
    if sdk is not None:
        servers += [_Server(SDK_NONE, 0, sdk=sdk), _Server(SDK_FIVE, 5, sdk=sdk)]
    script = wrk.plain_script({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": wrk.META}}, "echo")
    samples: dict[str, list[dict[str, float]]] = {server.name: [] for server in servers}
    try:
        for server in servers:
            wait_for_port(server.port, server.process)
            wrk.run(server.port, script, 1.0, connections, server.pids())  # warm up, untimed
        for turn in range(turns):
            for server in turn_order(servers, turn):
                result = wrk.run(server.port, script, seconds, connections, server.pids())
                if "failure" in result or result.get("errors"):
                    raise RuntimeError(f"{server.name}: wrk failed: {result}")
                requests = result["per_second"] * max(1, round(seconds))
                samples[server.name].append({"per_second": result["per_second"],
                                             "cpu_us": result["server_cpu_s"] / requests * 1e6})
    finally:
        for server in servers:
            stop(server.process)
    rows = {name: {"per_second": statistics.median(s["per_second"] for s in turns_),
                   "cpu_us": summary([s["cpu_us"] for s in turns_])} for name, turns_ in samples.items()}
    measured = {}
    for name, row in rows.items():
        base = rows[SDK_NONE if name.startswith("SDK") else NONE]  # each against its own baseline
        measured[name] = {"per_second": row["per_second"], "rate_ratio": row["per_second"] / base["per_second"],
                          "cpu_us": row["cpu_us"]["median"],
                          "cpu_ratio": row["cpu_us"]["median"] / base["cpu_us"]["median"],
                          "spread": row["cpu_us"]["spread"]}
    return measured


def _buckets(count: int, skipped: dict[str, str]) -> dict[str, float]:
    """Microseconds of wall time per ``take_token`` of a rate limit's bucket, per store."""
    import shutil
    import tempfile
    import time

    import trio

    from mrtr.carriers.tasks import open_store

    from .tasks import _redis

    async def takes(url: str) -> float:
        async with open_store(url) as store:
            for number in range(50):  # warm: the connection, the script, the table's pages
                await store.take_token(f"warm{number}", 1e6, 1e6)
            started = time.perf_counter()
            for number in range(count):
                await store.take_token(f"caller{number % 100}", 1e6, 1e6)  # never refused: each a take
            return (time.perf_counter() - started) / count * 1e6

    workdir = tempfile.mkdtemp(prefix="mrtr-bench-buckets-")
    redis, redis_url, why = _redis(workdir)
    stores = {"memory": "memory:", "SQLite": f"sqlite:///{workdir}/buckets.sqlite3"}
    if redis_url:
        stores["Redis"] = redis_url
    else:
        skipped["Redis buckets"] = str(why)
    try:
        return {name: trio.run(takes, url) for name, url in stores.items()}
    finally:
        if redis is not None:
            stop(redis)
        shutil.rmtree(workdir, ignore_errors=True)


def run(*, quick: bool, before: Path | None = None, install_sdk: bool = True) -> dict[str, Any]:
    """Part 10's results."""
    pairs, batch_s = (3, 0.1) if quick else (9, 0.4)
    log(f"part 10: the middleware pipeline in process, {pairs} turns" + (f", before: {before}" if before else ""))
    result: dict[str, Any] = {"pairs": pairs, "in_process": _in_process(pairs=pairs, batch_s=batch_s, before=before),
                              "skipped": {}}
    takes = 300 if quick else 3000
    log(f"part 10: a RateLimit's take of a token, {takes} per store")
    result["buckets"] = _buckets(takes, result["skipped"])
    result["bucket_takes"] = takes
    if not wrk.available():
        result["skipped"]["http"] = "wrk is not installed (apt-get install wrk): the HTTP rows are not measured"
        log(f"part 10: SKIPPED over HTTP: {result['skipped']['http']}")
        return result
    sdk = sdk_python(install=install_sdk)
    if sdk is None:
        result["skipped"]["SDK"] = sdk_missing(install_sdk)
        log(f"part 10: SKIPPED the SDK's rows: {result['skipped']['SDK']}")
    turns, seconds, connections = (2, 1.0, 4) if quick else (6, 3.0, 4)
    log(f"part 10: over HTTP, {turns} turns of {seconds:g} s of wrk per server, {connections} connections")
    result["http"] = _over_http(turns=turns, seconds=seconds, connections=connections, before=before, sdk=sdk)
    result["http_turns"] = turns
    return result
