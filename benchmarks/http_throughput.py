"""Part 3: whole conversations end to end over HTTP, the peers and the floors side by side.

Servers, each in its own process, all started before the first measurement and taken
in turns (A B C ... A B C ...) so a burst of load elsewhere on the machine lands on all
of them alike:

- ``mrtr native``: ``mrtr.http.run`` with 1 worker, and with 2 workers;
- ``mrtr ASGI (hypercorn trio)``: the ASGI app under hypercorn's trio worker;
- ``SDK MCPServer (uvicorn)``: the official ``mcp==2.3.0`` server, ``Resolve``-based
  tools, stateless Streamable HTTP with JSON answers (skipped, and said so, when its
  virtualenv cannot be installed);
- ``floor: trio + h11`` and ``floor: trio + httptools``: fixed bytes, no MCP.

Flows: ``ask`` (one question: two requests) and ``ask3`` (three questions: four
requests). The load generator is :mod:`benchmarks.loadgen` (every conversation's final
result checked against its own answers; the floors' fixed answers are not checked).
Reported per server: conversations per second (median of the turns, and as a ratio to
the SDK and to the h11 floor), p50/p99 latency of a whole conversation, and server and
client CPU per conversation (from /proc and getrusage: the client's share shows it was
not the bottleneck).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

from . import loadgen
from .common import ROOT, children, clean_env, cpu_seconds, free_port, log, sdk_python, stop, wait_for_port

LOGS = ROOT / ".cache" / "bench-logs"
SERVERS = {
    "mrtr native, 1 worker": ["native", "1"],
    "mrtr native, 2 workers": ["native", "2"],
    "mrtr ASGI (hypercorn trio)": ["asgi"],
    "SDK MCPServer (uvicorn)": None,
    "floor: trio + h11": ["floor-h11"],
    "floor: trio + httptools": ["floor-httptools"],
}
SDK = "SDK MCPServer (uvicorn)"
FLOOR = "floor: trio + h11"
FLOWS = {"ask": "one question", "ask3": "three questions"}


class Running:
    """One server process (and its forked workers) on a free port."""

    def __init__(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = free_port()
        if "{port}" not in command:
            command = [*command, "{port}"]
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log = LOGS / ("".join(c if c.isalnum() else "-" for c in name) + ".log")
        with open(self.log, "wb") as errors:
            self.process = subprocess.Popen([str(self.port) if part == "{port}" else part for part in command],
                                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)

    def ready(self) -> None:
        try:
            wait_for_port(self.port, self.process)
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name}: {exc}; its log is {self.log}") from None

    def pids(self) -> list[int]:
        return [self.process.pid, *children(self.process.pid)]

    def stop(self) -> None:
        stop(self.process)


def start_servers(install_sdk: bool) -> tuple[dict[str, Running], dict[str, str]]:
    """Every server of the part, listening; and the ones skipped, with why."""
    running: dict[str, Running] = {}
    skipped: dict[str, str] = {}
    for name, args in SERVERS.items():
        if args is None:
            python = sdk_python(install=install_sdk)
            if python is None:
                skipped[name] = "mcp==2.3.0 is not installed in .cache/interop-venv and could not be installed (offline?)"
                log(f"part 3: SKIPPED {name}: {skipped[name]}")
                continue
            command = [str(python), str(ROOT / "benchmarks" / "sdk_peer.py"), "serve", "{port}"]
            running[name] = Running(name, command, clean_env())
        else:
            kind, *rest = args
            running[name] = Running(name, [sys.executable, "-m", "benchmarks.apps", kind, "{port}", *rest])
    try:
        for server in running.values():
            server.ready()
    except Exception:
        for server in running.values():
            server.stop()
        raise
    return running, skipped


def measure(server: Running, tool: str, seconds: float, concurrency: int) -> dict[str, Any]:
    """One turn: load for ``seconds``, with the server's CPU over the same time."""
    pids = server.pids()
    before = cpu_seconds(pids)
    result = loadgen.run(server.port, tool, concurrency=concurrency, seconds=seconds,
                         check=not server.name.startswith("floor"))
    result["server_cpu_s"] = cpu_seconds(pids) - before
    return result


def run(*, quick: bool, install_sdk: bool) -> dict[str, Any]:
    """Part 3's results."""
    pairs, seconds, concurrency = (3, 0.4, 8) if quick else (5, 4.0, 8)
    running, skipped = start_servers(install_sdk)
    flows: dict[str, Any] = {}
    try:
        for tool in FLOWS:
            for server in running.values():  # warm up: imports, caches, JIT-less but cold paths
                measure(server, tool, 0.2 if quick else 1.0, concurrency)
            turns: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
            for turn in range(pairs):
                log(f"part 3: {tool}, turn {turn + 1}/{pairs}")
                for name, server in running.items():
                    turns[name].append(measure(server, tool, seconds, concurrency))
            flows[tool] = {name: summarize(samples) for name, samples in turns.items()}
    finally:
        for server in running.values():
            server.stop()
    for rows in flows.values():
        sdk = rows.get(SDK, {}).get("per_second")
        floor = rows.get(FLOOR, {}).get("per_second")
        for row in rows.values():
            row["vs_sdk"] = row["per_second"] / sdk if sdk else None
            row["vs_floor"] = row["per_second"] / floor if floor else None
    return {"pairs": pairs, "seconds": seconds, "concurrency": concurrency, "flows": flows, "skipped": skipped,
            "load_generator": "benchmarks.loadgen (Python, trio, one process)"}


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one server's turns, plus everything needed to judge them."""
    rates = [s["per_second"] for s in samples]
    completed = sum(s["completed"] for s in samples)
    return {
        "per_second": statistics.median(rates),
        "per_second_turns": rates,
        "spread": max(rates) / min(rates) if min(rates) > 0 else float("inf"),
        "p50_ms": statistics.median(s["p50_ms"] for s in samples),
        "p99_ms": statistics.median(s["p99_ms"] for s in samples),
        "conversations": sum(s["conversations"] for s in samples),
        "errors": sum(s["errors"] for s in samples),
        "misrouted": sum(s["misrouted"] for s in samples),
        "first_errors": [e for s in samples for e in s["first_errors"]][:3],
        "server_cpu_us_per_conversation": sum(s["server_cpu_s"] for s in samples) / max(completed, 1) * 1e6,
        "client_cpu_us_per_conversation": sum(s["client_cpu_s"] for s in samples) / max(completed, 1) * 1e6,
    }
