"""Part 3: whole conversations end to end over HTTP, the peers and the floors side by side.

Servers, each in its own process, all started before the first measurement and taken
in turns (A B C ..., then reversed, ...) so a burst of load elsewhere on the machine lands on all
of them alike:

- ``mrtr native``: ``mrtr.http.run_http`` with 1 worker, and with 2 workers;
- ``mrtr ASGI (hypercorn trio)``: the ASGI app under hypercorn's trio worker;
- ``SDK MCPServer (uvicorn)``: the official ``mcp==2.3.0`` server, ``Resolve``-based
  tools, stateless Streamable HTTP with JSON answers (skipped, and said so, when its
  virtualenv cannot be installed);
- ``floor: trio + h11`` and ``floor: trio + httptools``: fixed bytes, no MCP;
- with ``--before PATH``: the native server (1 worker) of another checkout, for an A/B
  of a change in the same turns;
- in a full run with wrk, ``mrtr serve, defaults, calls answered from a table``
  (:class:`benchmarks.apps.TableAnswered`): ``mrtr serve`` as a user starts it, with each
  repeated ``tools/call`` answered from a table instead of by the MCP layer. Driven by wrk
  only (its requests repeat; the Python generator's do not), it is what a request costs
  without the MCP layer: the most a per-tool plan confined to that layer could give.

Flows: ``ask`` (one question: two requests) and ``ask3`` (three questions: four
requests). The load generator is :mod:`benchmarks.loadgen` (every conversation's final
result checked against its own answers; the floors' fixed answers are not checked).
Reported per server: conversations per second (median of the turns, and as a ratio to
the SDK and to the h11 floor), p50/p99 latency of a whole conversation, and server and
client CPU per conversation (from /proc and getrusage: the client's share shows it was
not the bottleneck).

With wrk installed (:mod:`benchmarks.wrk`), the one-question flow is also driven by
wrk, whose cost per request is far below the Python generator's, in the same turns:
when the two rates agree, the Python generator did not limit the server. A full run
also takes plain request rates with wrk (``tools/call`` of a tool that asks nothing,
against the floors' fixed answer): the transport's own ceiling.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import loadgen, wrk
from .memory import idle_connections
from .common import (ROOT, children, clean_env, cpu_seconds, free_port, log, sdk_missing, sdk_python, stop,
                     turn_order, wait_for_port)

LOGS = ROOT / ".cache" / "bench-logs"
SERVERS = {
    "mrtr serve, defaults": ["mrtr-serve"],
    "mrtr native, 1 worker": ["native", "1"],
    "mrtr native, 2 workers": ["native", "2"],
    "mrtr ASGI (hypercorn trio)": ["asgi"],
    "SDK MCPServer (uvicorn), defaults": "serve-defaults",
    "SDK MCPServer (uvicorn)": "serve",
    "floor: trio + h11": ["floor-h11"],
    "floor: trio + httptools": ["floor-httptools"],
}
TABLE = "mrtr serve, defaults, calls answered from a table"
"""A measuring device (:class:`benchmarks.apps.TableAnswered`), wrk only and not in a quick run: what is
left of a request when the MCP layer costs a dictionary lookup."""
SERVERS[TABLE] = ["mrtr-serve-table"]
SDK = "SDK MCPServer (uvicorn)"
SDK_DEFAULTS = "SDK MCPServer (uvicorn), defaults"
DEFAULTS = "mrtr serve, defaults"
FLOOR = "floor: trio + h11"
HTTPTOOLS_FLOOR = "floor: trio + httptools"
FLOWS = {"ask": 1, "ask3": 3}  # tool: questions


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


def start_servers(install_sdk: bool, before: Path | None = None,
                  with_table: bool = True) -> tuple[dict[str, Running], dict[str, str]]:
    """Every server of the part, listening; and the ones skipped, with why.

    ``with_table``: start :data:`TABLE` too (a full run with wrk).

    ``before``: another checkout (for example the previous commit's); its mrtr is served
    by the native transport next to this one's, in the same turns.
    """
    running: dict[str, Running] = {}
    skipped: dict[str, str] = {}
    for name, args in SERVERS.items():
        if name == TABLE and not with_table:
            continue
        if isinstance(args, str):
            python = sdk_python(install=install_sdk)
            if python is None:
                skipped[name] = sdk_missing(install_sdk)
                log(f"part 3: SKIPPED {name}: {skipped[name]}")
                continue
            command = [str(python), str(ROOT / "benchmarks" / "sdk_peer.py"), args, "{port}"]
            running[name] = Running(name, command, clean_env())
        elif args in (["mrtr-serve"], ["mrtr-serve-table"]):
            # As a user starts it: one worker, access lines on (text, to stderr: this server's log file).
            app = "benchmarks.apps:server" if args == ["mrtr-serve"] else "benchmarks.apps:table_answered"
            running[name] = Running(name, [sys.executable, "-m", "mrtr", "serve", app, "--port", "{port}"])
        else:
            kind, *rest = args
            running[name] = Running(name, [sys.executable, "-m", "benchmarks.apps", kind, "{port}", *rest])
        if name == "mrtr native, 2 workers" and before is not None:
            # apps.py as a script with the other checkout first on the path: its mrtr shadows this one's.
            running[f"mrtr native, 1 worker, before ({before.name})"] = Running(
                "before", [sys.executable, str(ROOT / "benchmarks" / "apps.py"), "native", "{port}", "1"],
                {**os.environ, "PYTHONPATH": str(before.resolve())})
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


def run(*, quick: bool, install_sdk: bool, before: Path | None = None) -> dict[str, Any]:
    """Part 3's results."""
    pairs, seconds, concurrency = (3, 0.4, 8) if quick else (5, 3.0, 8)
    use_wrk = wrk.available()
    running, skipped = start_servers(install_sdk, before, with_table=use_wrk and not quick)
    if not use_wrk:
        skipped["wrk"] = "wrk is not installed (apt-get install wrk): the wrk rows are not measured"
        log(f"part 3: SKIPPED wrk rows: {skipped['wrk']}")
    measured = [name for name in running if name != TABLE]  # the table's answers repeat only under wrk
    table: dict[str, Any] = {}
    # A quick run drives wrk once per flow, against one server, so the script cannot rot.
    wrk_servers = [name for name in running if not quick or name == "mrtr native, 1 worker"]
    flows: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    try:
        for tool, questions in FLOWS.items():
            for name, server in running.items():  # warm up: imports, caches, cold paths
                if name == TABLE:
                    wrk.run(server.port, wrk.conversation_script(tool, questions), 1.0, concurrency, server.pids())
                else:
                    measure(server, tool, 0.2 if quick else 1.0, concurrency)
            turns: dict[str, list[dict[str, Any]]] = {name: [] for name in measured}
            wrk_turns: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
            for turn in range(pairs):
                log(f"part 3: {tool}, turn {turn + 1}/{pairs}")
                for name in turn_order(list(running), turn):
                    server = running[name]
                    if name != TABLE:
                        turns[name].append(measure(server, tool, seconds, concurrency))
                    if use_wrk and name in wrk_servers and (not quick or turn == 0):
                        script = wrk.conversation_script(tool, questions, check=not name.startswith("floor"))
                        wrk_turns[name].append(wrk.run(server.port, script, 1.0 if quick else seconds, concurrency,
                                                       server.pids()))
            flows[tool] = {name: summarize(samples, wrk_turns[name]) for name, samples in turns.items()}
            if TABLE in running:
                table[tool] = summarize_wrk(wrk_turns[TABLE])
        if use_wrk and not quick:
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": loadgen.META}}
            script = wrk.plain_script(call, "echo")
            rates: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
            for turn in range(pairs):
                log(f"part 3: request rate, turn {turn + 1}/{pairs}")
                for name in turn_order(list(running), turn):
                    server = running[name]
                    rates[name].append(wrk.run(server.port, script, 3.0, concurrency, server.pids()))
            for name, samples in rates.items():
                good = [r for r in samples if "failure" not in r] or [{"per_second": 0.0, "wrk_cpu_share": 0.0,
                                                                       "server_cpu_share": 0.0}]
                requests[name] = {"per_second": statistics.median(r["per_second"] for r in good),
                                  "per_second_turns": [r["per_second"] for r in good],
                                  "wrk_cpu_share": statistics.median(r["wrk_cpu_share"] for r in good),
                                  "server_cpu_share": statistics.median(r["server_cpu_share"] for r in good),
                                  "errors": sum(r["errors"] for r in samples),
                                  "broken_turns": [r["failure"] for r in samples if "failure" in r]}
        memory = None
        if DEFAULTS in running:  # 200 stays under the per-client cap of 256 connections
            memory = idle_connections(running[DEFAULTS].port, [running[DEFAULTS].process.pid], 50 if quick else 200)
    finally:
        for server in running.values():
            server.stop()
    for rows in flows.values():
        for rate, suffix in (("per_second", ""), ("wrk_per_second", "_wrk")):
            sdk = rows.get(SDK, {}).get(rate)
            sdk_defaults = rows.get(SDK_DEFAULTS, {}).get(rate)
            floor = rows.get(FLOOR, {}).get(rate)
            for row in rows.values():
                row["vs_sdk" + suffix] = row[rate] / sdk if sdk and row[rate] else None
                row["vs_sdk_defaults" + suffix] = row[rate] / sdk_defaults if sdk_defaults and row[rate] else None
                row["vs_floor" + suffix] = row[rate] / floor if floor and row[rate] else None
    for row in requests.values():
        for floor_name, key in ((FLOOR, "vs_floor"), (HTTPTOOLS_FLOOR, "vs_floor_httptools")):
            row[key] = row["per_second"] / requests[floor_name]["per_second"] if floor_name in requests else None
    for tool, row in table.items():
        sdk_defaults = flows[tool].get(SDK_DEFAULTS, {}).get("wrk_per_second")
        row["vs_sdk_defaults_wrk"] = row["wrk_per_second"] / sdk_defaults if sdk_defaults else None
    return {"pairs": pairs, "seconds": seconds, "concurrency": concurrency, "flows": flows, "requests": requests,
            "table": table,
            "idle_connections": memory, "skipped": skipped, "load_generator": "benchmarks.loadgen (Python, trio, one process); wrk for the "
            "one-question flow and the request rates"}


def summarize_wrk(wrk_samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one server's wrk turns (all of the table row's, :data:`TABLE`), and what went wrong in them."""
    broken = [w["failure"] for w in wrk_samples if "failure" in w]
    good = [w for w in wrk_samples if "failure" not in w]
    return {
        "wrk_per_second": _median(w["per_second"] for w in good),
        "wrk_per_second_turns": [w["per_second"] for w in good],
        "wrk_spread": (max(w["per_second"] for w in good) / min(w["per_second"] for w in good)
                       if good and min(w["per_second"] for w in good) > 0 else None),
        "wrk_p50_request_ms": _median(w.get("p50_request_ms", float("nan")) for w in good),
        "wrk_p99_request_ms": _median(w.get("p99_request_ms", float("nan")) for w in good),
        "wrk_cpu_share": _median(w["wrk_cpu_share"] for w in good),
        "wrk_server_cpu_us_per_conversation": (sum(w["server_cpu_s"] for w in good)
                                               / max(sum(w.get("completed", 0) for w in good), 1) * 1e6
                                               if good else None),
        "wrk_failed": sum(w.get("failed", 0) for w in wrk_samples),
        "wrk_completed": sum(w.get("completed", 0) for w in good),
        "wrk_errors": sum(w["errors"] for w in good) + len(broken),  # a broken turn counts once
        "wrk_broken_turns": broken,
    }


def summarize(samples: list[dict[str, Any]], wrk_samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one server's turns, plus everything needed to judge them."""
    rates = [s["per_second"] for s in samples]
    completed = sum(s["completed"] for s in samples)
    wrk_summary = summarize_wrk(wrk_samples)
    return {
        "per_second": statistics.median(rates),
        "per_second_turns": rates,
        "spread": max(rates) / min(rates) if min(rates) > 0 else float("inf"),
        "p50_ms": statistics.median(s["p50_ms"] for s in samples),
        "p99_ms": statistics.median(s["p99_ms"] for s in samples),
        "conversations": sum(s["conversations"] for s in samples),
        "errors": sum(s["errors"] for s in samples),
        "misrouted": sum(s["misrouted"] for s in samples) + wrk_summary["wrk_failed"],
        "first_errors": [e for s in samples for e in s["first_errors"]][:3],
        "server_cpu_us_per_conversation": sum(s["server_cpu_s"] for s in samples) / max(completed, 1) * 1e6,
        "client_cpu_us_per_conversation": sum(s["client_cpu_s"] for s in samples) / max(completed, 1) * 1e6,
        **wrk_summary,
    }


def _median(values: Any) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None
