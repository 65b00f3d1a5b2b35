"""Part 4: a soak of whole conversations against the native server with ``--workers 2``.

Ten minutes of three-question conversations (four requests each) at concurrency 64,
every final result checked against that conversation's own answers. Reports errors,
misrouted answers (must be 0) and the resident memory of each worker process before
the load and after every minute (must be flat: the server keeps nothing between
rounds), and the memory an idle keep-alive connection costs a worker, at the start and
at the end. ``--quick`` runs three chunks of two seconds at concurrency 16.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from . import loadgen
from .common import ROOT, children, log, rss_kib
from .http_throughput import Running
from .memory import idle_connections


def run(*, quick: bool) -> dict[str, Any]:
    """Part 4's results."""
    chunks, chunk_s, concurrency = (3, 2.0, 16) if quick else (10, 60.0, 64)
    server = Running("mrtr native, 2 workers", [sys.executable, "-m", "benchmarks.apps", "native", "{port}", "2"])
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
        memory: list[dict[str, Any]] = [{"conversations": 0, "seconds": 0.0,
                                         "rss_kib": {str(pid): rss_kib(pid) for pid in pids}}]
        idle = [_idle(server.port, pids)]
        totals = {"completed": 0, "errors": 0, "misrouted": 0, "conversations": 0}
        first_errors: list[str] = []
        p50s, p99s, started = [], [], time.monotonic()
        for chunk in range(chunks):
            log(f"part 4: soak, minute {chunk + 1}/{chunks}" if not quick else f"part 4: soak, chunk {chunk + 1}")
            result = loadgen.run(server.port, "ask3", concurrency=concurrency, seconds=chunk_s)
            for key in totals:
                totals[key] += result[key]
            first_errors += result["first_errors"][: 5 - len(first_errors)]
            p50s.append(result["p50_ms"])
            p99s.append(result["p99_ms"])
            memory.append({"conversations": totals["conversations"], "seconds": round(time.monotonic() - started, 1),
                           "rss_kib": {str(pid): rss_kib(pid) for pid in pids}})
        idle.append(_idle(server.port, pids))
        elapsed = time.monotonic() - started
        # A worker that died would have been replaced under a new pid.
        alive = server.process.poll() is None and children(supervisor) == pids
        supervisor_rss = rss_kib(supervisor)
    finally:
        server.stop()
    first, last = memory[1]["rss_kib"], memory[-1]["rss_kib"]
    growth = {pid: last[pid] - first[pid] for pid in first}
    return {"conversations": totals["conversations"], "concurrency": concurrency,
            "flow": "the three-question flow, four requests each", "seconds": round(elapsed, 1),
            "workers": pids, "errors": totals["errors"], "misrouted": totals["misrouted"],
            "first_errors": first_errors, "completed": totals["completed"],
            "per_second": totals["completed"] / elapsed, "p50_ms": statistics.median(p50s),
            "p99_ms": statistics.median(p99s), "memory": memory, "rss_growth_kib_after_first_mark": growth,
            "idle_connections": idle, "workers_alive": alive, "supervisor_rss_kib": supervisor_rss,
            "root": str(ROOT)}


def _idle(port: int, pids: list[int]) -> dict[str, Any]:
    """KiB per idle keep-alive connection over both workers (the kernel spreads the connections)."""
    return idle_connections(port, pids, 100)
