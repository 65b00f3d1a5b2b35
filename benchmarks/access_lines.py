"""What one access line costs, text and JSON, against the record alone, measured in the same run.

Usage: ``python -m benchmarks.access_lines [--before PATH] [--lines N]``

In a child process per checkout (``--before`` adds another checkout's ``mrtr``), with
the handler ``mrtr.transports.logs.configure`` installs writing to a real file (each
write a system call, as to stderr), CPU time per request of:

- ``record``: an ``AccessRecord`` filled in as a transport fills it, with no line
  (``mrtr.access`` silenced): the baseline;
- ``text`` and ``json``: the same plus its line, as ``mrtr serve`` writes it; on a
  checkout with deferred lines, eight lines go out per write, as under load, where the
  loop goes idle every few requests (``text, one write per line``: the worst case, a
  loop idle after every request);
- ``text through logging``: the line forced through ``logging`` (a pass-through filter
  on ``mrtr.access``), what every line cost before lines could skip it.

Each figure is the fastest of interleaved batches (turns A B C, C B A, ...); the line's
cost is the figure minus ``record``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, log, turn_order

_CHILD = r'''
import io, json, logging, os, sys, time
sys.path.insert(0, sys.argv[1])
from mrtr.transports import logs
lines, turns, path = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": {}}}
ANSWER = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "resultType": "complete"}}
stream = open(path, "w")
root = logging.getLogger()
handler = getattr(logs, "LineHandler", logging.StreamHandler)(stream)
root.handlers[:] = [handler]
access = logging.getLogger("mrtr.access")
deferred = hasattr(logs, "write_behind")


class PassAll(logging.Filter):
    pass


def one() -> None:
    record = logs.AccessRecord("http", "POST", "/mcp")
    record.request(MESSAGE)
    record.response(ANSWER)
    record.finish(200)


def batch(kind: str) -> float:
    fmt = logs.JsonFormatter() if kind == "json" else logging.Formatter(logs.TEXT_FORMAT)
    handler.setFormatter(fmt)
    access.setLevel(logging.WARNING if kind == "record" else logging.INFO)
    access.filters[:] = [PassAll()] if kind == "text through logging" else []
    group = 8 if deferred and kind in ("text", "json") else 1
    if deferred and group > 1:
        logs._deferral = deferral = logs._Deferral()  # what write_behind starts, without a loop to run it
    started = time.thread_time()
    for number in range(lines):
        one()
        if group > 1 and number % group == group - 1:
            deferral.flush()  # the loop went idle: one write for the lines of the batch
    elapsed = time.thread_time() - started
    if deferred and group > 1:
        deferral.flush()
        logs._deferral = None
    stream.seek(0)
    stream.truncate()
    return elapsed / lines


kinds = ["record", "text", "json", "text through logging"] + (["text, one write per line"] if deferred else [])
for kind in kinds:
    batch(kind if kind != "text, one write per line" else "text through logging")  # warm up
best = {kind: float("inf") for kind in kinds}
for turn in range(turns):
    for kind in (kinds if turn % 2 == 0 else kinds[::-1]):
        if kind == "text, one write per line":
            handler.setFormatter(logging.Formatter(logs.TEXT_FORMAT))
            access.setLevel(logging.INFO)
            access.filters[:] = []
            started = time.thread_time()
            for _ in range(lines):
                one()
            seconds = (time.thread_time() - started) / lines
            stream.seek(0)
            stream.truncate()
        else:
            seconds = batch(kind)
        best[kind] = min(best[kind], seconds)
print(json.dumps(best))
'''


def measure(root: Path, lines: int, turns: int) -> dict[str, float]:
    """Seconds per request of each kind, for the checkout at ``root``."""
    with tempfile.TemporaryDirectory(prefix="mrtr-lines-") as tmp:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(lines), str(turns),
                               os.path.join(tmp, "access.log")], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.access_lines", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, metavar="PATH", help="also measure another checkout's mrtr")
    parser.add_argument("--lines", type=int, default=20_000, help="requests per batch")
    parser.add_argument("--rounds", type=int, default=3, help="child processes per checkout, taken in turns")
    args = parser.parse_args(argv)
    roots = {"this checkout": ROOT}
    if args.before:
        roots[f"before ({args.before.name})"] = args.before.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    for turn in range(args.rounds):
        for name in turn_order(list(roots), turn):
            log(f"access lines: {name}, round {turn + 1}/{args.rounds}")
            runs[name].append(measure(roots[name], args.lines, 5))
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| checkout | what | µs per request | the line alone (µs) |")
    print("|---|---|---|---|")
    for name, results in runs.items():
        kinds = list(results[0])
        median = {kind: statistics.median(result[kind] for result in results) for kind in kinds}
        for kind in kinds:
            alone = "" if kind == "record" else f"{(median[kind] - median['record']) * 1e6:.1f}"
            print(f"| {name} | {kind} | {median[kind] * 1e6:.1f} | {alone} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
