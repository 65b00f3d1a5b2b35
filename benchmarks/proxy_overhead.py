"""What ``mrtr proxy`` adds, against calling the upstream directly in the same run.

Usage: ``python benchmarks/proxy_overhead.py [--quick]`` (or ``python -m benchmarks --only proxy``)

Serves ``tests.bridge.upstream_app:server`` with ``mrtr serve`` and ``mrtr proxy`` of it
(two processes, each one worker), then, with ``mrtr.Client`` in this process:

- **per round**, for each direction the proxy serves (the downstream client's era and
  the upstream's): whole ``interview`` conversations (two questions: three requests in
  the modern era, one call with two live questions in a 2025 session), run directly
  against the upstream and through the proxy, turn about; the latency per round and the
  CPU seconds per round of the server processes (the proxy and the upstream together,
  against the upstream alone); reported as the ratio through / direct;
- **memory per waiting call** in the modern -> 2025 direction (``--upstream-era legacy``):
  30 conversations left after their first round, each holding an upstream call live
  in the proxy (an mrtr upstream lets one 2025 session hold 32 calls waiting, and the
  proxy's calls share its one session); the proxy's resident memory before and after,
  per held call.

No figure is asserted: the ratios are read off the report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mrtr  # noqa: E402
from benchmarks.common import clean_env, cpu_seconds, free_port, log, rss_kib, stop, wait_for_port  # noqa: E402

APP = "tests.bridge.upstream_app:server"
DIRECTIONS = [("modern", "modern"), ("legacy", "modern"), ("legacy", "legacy"), ("modern", "legacy")]


def _answer(request: Any) -> Any:
    return mrtr.accept(name="Ada") if "name" in request.requested_schema["properties"] else mrtr.accept(colour="red")


def _start(args: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "mrtr", *args, "--port", str(port), "--log-level", "warning",
                                "--no-access-log"], cwd=ROOT, env={**clean_env(), "MRTR_SECRET": "A" * 43 + "="},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process)
    return process, f"http://127.0.0.1:{port}/mcp"


async def _conversations(url: str, era: str, count: int) -> tuple[float, int]:
    """Seconds for ``count`` interview conversations, and the requests they took."""
    async with mrtr.Client(url, era=era, on_elicit=_answer) as client:
        await client.call_tool("interview", {"topic": "warm"})  # connection, session, tools/list
        started = time.perf_counter()
        for _ in range(count):
            await client.call_tool("interview", {"topic": "bench"})
        elapsed = time.perf_counter() - started
    return elapsed, count * (3 if era == "modern" else 1)


async def _held(url: str, count: int) -> None:
    async with mrtr.Client(url, era="modern", on_elicit=_answer) as client:
        for _ in range(count):
            result = await client.call_once("tools/call", {"name": "interview", "arguments": {"topic": "held"}})
            assert result["resultType"] == "input_required", result


def run(*, quick: bool = False) -> dict[str, Any]:
    """Measure (see the module); the figures as a dict."""
    count = 20 if quick else 200
    held = 30  # an mrtr upstream holds 32 waiting calls per 2025 session, and the proxy's is one session
    rows: list[dict[str, Any]] = []
    upstream, upstream_url = _start(["serve", APP])
    try:
        for downstream, era in DIRECTIONS:
            proxy, proxy_url = _start(["proxy", upstream_url, "--upstream-era", era, "--store", "memory:"])
            try:
                figures: dict[str, Any] = {"downstream": downstream, "upstream": era}
                for label, url, pids in (("direct", upstream_url, [upstream.pid]),
                                         ("through", proxy_url, [upstream.pid, proxy.pid])):
                    cpu_before = cpu_seconds(pids)
                    seconds, requests = trio.run(_conversations, url, downstream if label == "through" else era,
                                                 count)
                    cpu = cpu_seconds(pids) - cpu_before
                    rounds = count * 3  # rounds of a two-question conversation, however its era carries them
                    figures[label] = {"ms_per_round": round(seconds / rounds * 1000, 3),
                                      "cpu_ms_per_round": round(cpu / rounds * 1000, 3), "requests": requests}
                figures["latency_ratio"] = round(figures["through"]["ms_per_round"] /
                                                 figures["direct"]["ms_per_round"], 2)
                figures["cpu_ratio"] = round(figures["through"]["cpu_ms_per_round"] /
                                             max(figures["direct"]["cpu_ms_per_round"], 1e-9), 2)
                rows.append(figures)
                log(f"proxy {downstream}->{era}: {figures}")
            finally:
                stop(proxy)
        proxy, proxy_url = _start(["proxy", upstream_url, "--upstream-era", "legacy", "--store", "memory:"])
        try:
            trio.run(_held, proxy_url, 1)  # warm: the first held call's imports and buffers
            before = rss_kib(proxy.pid)
            trio.run(_held, proxy_url, held)
            after = rss_kib(proxy.pid)
        finally:
            stop(proxy)
    finally:
        stop(upstream)
    memory = {"held_calls": held, "rss_before_kib": before, "rss_after_kib": after,
              "kib_per_held_call": round((after - before) / held, 1)}
    log(f"proxy memory per held call: {memory}")
    return {"rounds": rows, "memory": memory, "conversations": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer conversations and held calls")
    print(json.dumps(run(quick=parser.parse_args().quick), indent=2))


if __name__ == "__main__":
    main()
