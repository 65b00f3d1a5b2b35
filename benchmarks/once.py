"""Part 6: what ``once=True`` adds to the round that completes a conversation, on SQLite and on Redis.

In process, through ``Server.handle`` (the dispatch every transport uses), one server
per store entered with ``running(tasks_url=...)``. The tool asks one question and
returns a short text; three candidates are timed against each other in the same run:

- **plain**: the final round of the tool without ``once`` (the handler runs);
- **once**: the final round of the same tool declared ``once=True`` (claim, run in the
  background, record the result);
- **retry**: a retry of a final round already recorded (one read of the record; the
  handler does not run).

Every timed call of *plain* and *once* answers a token nobody used yet: the first
rounds that mint them run before the batch, untimed. The candidates take their turns
A B C, C B A, ...; the figure is the median per call of each candidate's batches, in
**wall time** (the store's work happens in a worker thread, SQLite, or in another
process, Redis, which the CPU time of this thread would not see), and the ratios are
to *plain* of the same store and run. Bytes: what one record takes in the store for
this tool's result (its encoded body), and for Redis what ``MEMORY USAGE`` reports for
its key.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

import trio

from .common import log, summary, turn_order
from .tasks import _redis

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def _server() -> Any:
    from mrtr import Elicit, Form, Server

    server = Server("bench-once", secret=b"o" * 32)
    confirm = Form().boolean("ok")

    @server.tool(name="plain")
    def plain(amount: int) -> Any:
        answer = yield Elicit(f"Charge {amount}?", confirm)
        return f"charged {amount}" if answer.value["ok"] else "not charged"

    @server.tool(name="once", once=True)
    def once(amount: int) -> Any:
        answer = yield Elicit(f"Charge {amount}?", confirm)
        return f"charged {amount}" if answer.value["ok"] else "not charged"

    return server


async def _first(server: Any, tool: str, n: int) -> dict[str, Any]:
    message = await server.handle({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                   "params": {"name": tool, "arguments": {"amount": n}, "_meta": META}})
    asked = message["result"]
    return {"name": tool, "arguments": {"amount": n}, "requestState": asked["requestState"],
            "inputResponses": {"elicit-1": {"action": "accept", "content": {"ok": True}}}, "_meta": META}


async def _final(server: Any, params: dict[str, Any]) -> None:
    message = await server.handle({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params})
    if message.get("result", {}).get("content", [{}])[0].get("text") != f"charged {params['arguments']['amount']}":
        raise RuntimeError(f"unexpected answer: {message}")


async def _measure(url: str, *, pairs: int, batch: int) -> dict[str, Any]:
    server = _server()
    samples: dict[str, list[float]] = {"plain": [], "once": [], "retry": []}
    async with server.running(tasks_url=url):
        recorded = await _first(server, "once", 0)
        await _final(server, recorded)  # the record every retry of the last candidate reads
        for warm in range(20):
            await _final(server, await _first(server, "plain", warm))
            await _final(server, await _first(server, "once", warm + 1))
        counter = 100
        for turn in range(pairs):
            for name in turn_order(list(samples), turn):
                if name == "retry":
                    calls = [recorded] * batch
                else:
                    calls = [await _first(server, name, counter + i) for i in range(batch)]
                    counter += batch
                start = time.perf_counter()
                for params in calls:
                    await _final(server, params)
                samples[name].append((time.perf_counter() - start) / batch)
        record = await server.rounds.store.get_round(server.token_carrier.round_key(  # type: ignore[union-attr]
            "tools/call", recorded, None).token)
    from mrtr.carriers.tasks.record import encode

    timings = {name: summary(values) for name, values in samples.items()}
    plain = timings["plain"]["median"]
    return {"timings": timings, "once_ratio": timings["once"]["median"] / plain,
            "retry_ratio": timings["retry"]["median"] / plain,
            "record_bytes": len(encode(record)) if record is not None else None,
            "key": None if record is None else record.key}


def run(*, quick: bool) -> dict[str, Any]:
    """Part 6's results."""
    pairs, batch = (3, 40) if quick else (7, 200)
    workdir = tempfile.mkdtemp(prefix="mrtr-bench-once-")
    skipped: dict[str, str] = {}
    redis, redis_url, why = _redis(workdir)
    stores = {"SQLite": f"sqlite:///{workdir}/rounds.sqlite3"}
    if redis_url:
        stores["Redis"] = redis_url
    else:
        skipped["Redis"] = str(why)
        log(f"part 6: SKIPPED the Redis store: {why}")
    rows: dict[str, Any] = {}
    try:
        for name, url in stores.items():
            log(f"part 6: once=True on {name}, {pairs} turns of {batch} final rounds per candidate")
            rows[name] = trio.run(lambda: _measure(url, pairs=pairs, batch=batch))  # noqa: B023
            if name == "Redis" and rows[name]["key"]:
                rows[name]["redis_memory_bytes"] = _redis_memory(url, rows[name]["key"])
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait(timeout=10)
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return {"pairs": pairs, "batch": batch, "stores": rows, "skipped": skipped,
            "spread": statistics.median(t["spread"] for row in rows.values() for t in row["timings"].values())}


def _redis_memory(url: str, key: str) -> int | None:
    import subprocess
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    done = subprocess.run(["redis-cli", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port),
                           "MEMORY", "USAGE", f"mrtr:round:{key}"], capture_output=True, text=True, timeout=10)
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip().isdigit() else None
