"""Part 4: a soak of whole conversations against the native server with ``--workers 2``.

10,000 three-question conversations (four requests each) at concurrency 64, every
final result checked against that conversation's own answers. Reports errors,
misrouted answers (must be 0) and the resident memory of each worker process before
the load and at 1k, 5k and 10k conversations (must be flat: the server keeps nothing
between rounds). ``--quick`` runs 300 conversations at concurrency 16.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from . import loadgen
from .common import ROOT, children, log, rss_kib
from .http_throughput import Running


def run(*, quick: bool) -> dict[str, Any]:
    """Part 4's results."""
    total, concurrency = (300, 16) if quick else (10_000, 64)
    marks = (100, 200, 300) if quick else (1_000, 5_000, 10_000)
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
        memory: list[dict[str, Any]] = [{"conversations": 0, "rss_kib": {str(pid): rss_kib(pid) for pid in pids}}]

        def sample(mark: int) -> Any:
            return lambda: memory.append({"conversations": mark, "rss_kib": {str(pid): rss_kib(pid) for pid in pids}})

        log(f"part 4: soak, {total} conversations at concurrency {concurrency}")
        result = loadgen.run(server.port, "ask3", concurrency=concurrency, conversations=total,
                             milestones={mark: sample(mark) for mark in marks})
        # A worker that died would have been replaced under a new pid.
        alive = server.process.poll() is None and children(supervisor) == pids
        supervisor_rss = rss_kib(supervisor)
    finally:
        server.stop()
    first, last = memory[1]["rss_kib"], memory[-1]["rss_kib"]
    growth = {pid: last[pid] - first[pid] for pid in first}
    return {"conversations": total, "concurrency": concurrency, "flow": "the three-question flow, four requests each",
            "workers": pids, "errors": result["errors"], "misrouted": result["misrouted"],
            "first_errors": result["first_errors"], "completed": result["completed"],
            "per_second": result["per_second"], "p50_ms": result["p50_ms"], "p99_ms": result["p99_ms"],
            "memory": memory, "rss_growth_kib_after_first_mark": growth, "workers_alive": alive,
            "supervisor_rss_kib": supervisor_rss,
            "root": str(ROOT)}
