"""Part 4: a soak of both eras' conversations against the native server with ``--workers 2``.

Ten minutes of load, every final result checked against that conversation's own answers:

- three-question conversations of the 2026 era (four requests each, the token carrying the
  answers) at concurrency 64 (:mod:`benchmarks.loadgen`);
- beside them, whole 2025-era sessions at concurrency 8 (``initialize``, a call whose
  question arrives on its stream, the answer as a POST of its own, the result, ``DELETE``;
  :mod:`benchmarks.legacy_http`), a session's requests reaching either worker.

Reports errors and misrouted answers of each (must be 0), the resident memory of each
worker before the load and after every minute (must be flat: nothing outlives a
conversation), and at the start and at the end of the soak what one of each costs the
workers: an idle keep-alive connection, an idle 2025 session and a call suspended at its
question (each session opened for that measure is deleted afterwards). ``--quick`` runs
three chunks of two seconds at concurrency 16 and 4.

The server is the flows' server as :mod:`benchmarks.legacy_http` serves it, with room for
the sessions and connections the memory marks open from one address.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import trio

from . import legacy_http, loadgen
from .common import ROOT, children, log, rss_kib
from .http_throughput import Running
from .memory import idle_connections


def run(*, quick: bool) -> dict[str, Any]:
    """Part 4's results."""
    chunks, chunk_s, concurrency, sessions_at_once = (3, 2.0, 16, 4) if quick else (10, 60.0, 64, 8)
    marks = (100, 20) if quick else (1_000, 200)  # idle sessions, suspended calls, at each memory mark
    server = Running("mrtr native, 2 workers", [sys.executable, "-m", "benchmarks.legacy_http", "serve", "{port}",
                                                "2"])
    try:
        server.ready()
        # With workers=2 the process started is a supervisor that serves nothing and forks
        # the two workers; wait (bounded) until both exist.
        supervisor = server.process.pid
        deadline = time.monotonic() + 20
        while len(pids := children(supervisor)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if len(pids) != 2:
            raise RuntimeError(f"expected 2 worker processes under {supervisor}, found {pids}")
        log("part 4: soak, memory at the start")
        per_unit = [_per_unit(server.port, pids, *marks)]
        memory: list[dict[str, Any]] = [{"conversations": 0, "sessions": 0, "seconds": 0.0,
                                         "rss_kib": {str(pid): rss_kib(pid) for pid in pids}}]
        totals = {"completed": 0, "errors": 0, "misrouted": 0, "conversations": 0}
        legacy = {"completed": 0, "errors": 0, "misrouted": 0, "conversations": 0}
        first_errors: list[str] = []
        p50s, p99s, legacy_p50s, started = [], [], [], time.monotonic()
        for chunk in range(chunks):
            log(f"part 4: soak, minute {chunk + 1}/{chunks}" if not quick else f"part 4: soak, chunk {chunk + 1}")
            modern, sessions = trio.run(_both, server.port, concurrency, sessions_at_once, chunk_s)
            for key in totals:
                totals[key] += modern[key]
                legacy[key] += sessions[key]
            first_errors += (modern["first_errors"] + sessions["first_errors"])[: 5 - len(first_errors)]
            p50s.append(modern["p50_ms"])
            p99s.append(modern["p99_ms"])
            legacy_p50s.append(sessions["p50_ms"])
            memory.append({"conversations": totals["conversations"], "sessions": legacy["conversations"],
                           "seconds": round(time.monotonic() - started, 1),
                           "rss_kib": {str(pid): rss_kib(pid) for pid in pids}})
        elapsed = time.monotonic() - started
        log("part 4: soak, memory at the end")
        per_unit.append(_per_unit(server.port, pids, *marks))
        # A worker that died would have been replaced under a new pid.
        alive = server.process.poll() is None and children(supervisor) == pids
        supervisor_rss = rss_kib(supervisor)
    finally:
        server.stop()
    first, last = memory[1]["rss_kib"], memory[-1]["rss_kib"]
    growth = {pid: last[pid] - first[pid] for pid in first}
    return {"conversations": totals["conversations"], "concurrency": concurrency,
            "flow": "the three-question flow, four requests each", "seconds": round(elapsed, 1),
            "workers": pids, "errors": totals["errors"] + legacy["errors"],
            "misrouted": totals["misrouted"] + legacy["misrouted"],
            "first_errors": first_errors, "completed": totals["completed"],
            "per_second": totals["completed"] / elapsed, "p50_ms": statistics.median(p50s),
            "p99_ms": statistics.median(p99s),
            "legacy": {**legacy, "concurrency": sessions_at_once, "per_second": legacy["completed"] / elapsed,
                       "p50_ms": statistics.median(legacy_p50s)},
            "memory": memory, "rss_growth_kib_after_first_mark": growth,
            "idle_connections": [mark["keepalive"] for mark in per_unit], "per_unit": per_unit,
            "workers_alive": alive, "supervisor_rss_kib": supervisor_rss, "root": str(ROOT)}


async def _both(port: int, concurrency: int, sessions_at_once: int, seconds: float) -> tuple[dict[str, Any],
                                                                                              dict[str, Any]]:
    """One chunk of the soak: both eras' loads at once, for ``seconds``."""
    results: dict[str, dict[str, Any]] = {}

    async def modern() -> None:
        results["modern"] = await loadgen.load(port, "ask3", concurrency=concurrency, seconds=seconds)

    async def sessions() -> None:
        results["legacy"] = await legacy_http.load(port, "ask", concurrency=sessions_at_once, seconds=seconds)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(modern)
        nursery.start_soon(sessions)
    return results["modern"], results["legacy"]


def _per_unit(port: int, pids: list[int], sessions: int, waiting: int) -> dict[str, Any]:
    """What one idle keep-alive connection, one idle 2025 session and one suspended call cost both workers."""
    keepalive = idle_connections(port, pids, 100)
    held = trio.run(lambda: legacy_http.memory(port, pids, "ask", sessions, waiting, release=True))
    return {"keepalive": keepalive, "idle_session_bytes": held["idle_session_bytes"],
            "waiting_call_bytes": held["waiting_call_bytes"], "sessions": sessions, "waiting": waiting}
