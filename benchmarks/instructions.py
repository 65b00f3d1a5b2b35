"""Instructions per request, counted by callgrind: a before/after measure that load cannot move.

Usage: ``python -m benchmarks.instructions [--requests N] [--before PATH] [--only NAMES]``
(needs ``valgrind``; about a minute per server)

Wall-clock rates on a machine whose cores other work shares move by tens of percent
from one minute to the next; the number of instructions a server executes for the same
requests does not. Each server runs under ``valgrind --tool=callgrind`` in its own
process; one client on one keep-alive connection sends the requests one after another
(so every request meets the same idle server), ``callgrind_control`` zeroes the
counters after a warm-up and dumps them after ``N`` more requests, and the dump's total
divided by ``N`` is the figure. It counts user-space instructions only: the system
calls (the ``send`` that on loopback delivers the answer inside the kernel) are not in
it, which is why the wall-clock suite stays the measure of rates.

Servers (``--only`` picks some by name):

- ``default``: ``mrtr serve benchmarks.apps:server``, as a user starts it (access lines
  on, text, to a file); ``json``: the same with ``--log-format json``; ``no-log``: with
  ``--no-access-log``;
- ``floor``: the bare trio + httptools server of :mod:`benchmarks.apps` (fixed bytes).

Requests: ``plain`` (``tools/call`` of ``echo``, which asks nothing) and ``ask`` (the
one-question conversation: two requests, counted per conversation). With ``--before
PATH`` each mrtr server also runs with another checkout's ``mrtr`` package, for an A/B.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import ROOT, free_port, log, stop, wait_for_port
from .loadgen import META

SERVERS = {
    "default": ["serve"],
    "json": ["serve", "--log-format", "json"],
    "no-log": ["serve", "--no-access-log"],
    "floor": None,
}
_LAUNCH = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from mrtr.cli import main; "
           "sys.exit(main(sys.argv[1:]))")


def _request(body: dict[str, Any], name: str) -> bytes:
    payload = json.dumps(body).encode()
    return (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: tools/call\r\nMcp-Name: " + name.encode() + b"\r\nContent-Length: "
            + str(len(payload)).encode() + b"\r\n\r\n" + payload)


class _Client:
    """One blocking keep-alive connection: a request out, its whole answer in."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.buffer = b""

    def call(self, template: bytes) -> dict[str, Any]:
        self.sock.sendall(template.replace(b"%d", str(self.port).encode(), 1))
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))  # type: ignore[union-attr]
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected answer: {head[:80]!r} {body[:200]!r}")
        return json.loads(body)  # type: ignore[no-any-return]

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        self.buffer += data

    def close(self) -> None:
        self.sock.close()


PLAIN = _request({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": META}}, "echo")
ASK = _request({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "ask", "arguments": {"plan": "pro"}, "_meta": META}}, "ask")


def _retry(first: dict[str, Any]) -> bytes:
    result = first["result"]
    if result.get("resultType") != "input_required":  # the floor's fixed bytes carry no real token
        raise RuntimeError(f"expected input_required, got {result}")
    key = next(iter(result["inputRequests"]))
    return _request({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "ask", "arguments": {"plan": "pro"}, "_meta": META, "requestState": result["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"email": "a@b.io"}}}}}, "ask")


def _one(client: _Client, flow: str) -> None:
    if flow == "plain":
        client.call(PLAIN)
    else:
        client.call(_retry(client.call(ASK)))


def measure(name: str, args: list[str] | None, flow: str, requests: int, mrtr_root: Path,
            workdir: Path) -> float:
    """Instructions per request (``plain``) or per conversation (``ask``) of one server."""
    port = free_port()
    out = workdir / f"{name}-{flow}.callgrind"
    if args is None:
        command = [sys.executable, "-m", "benchmarks.apps", "floor-httptools", str(port)]
    else:
        command = [sys.executable, "-c", _LAUNCH, str(mrtr_root), args[0], "benchmarks.apps:server", "--port",
                   str(port), *args[1:]]
    env = {**os.environ, "PYTHONHASHSEED": "0", "MRTR_SECRET": "YmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmI="}
    with open(workdir / f"{name}-{flow}.stderr", "wb") as errors:
        process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", *command],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        wait_for_port(port, process, timeout=300)
        client = _Client(port)
        for _ in range(max(50, requests // 10)):  # warm: imports, caches and the first-use paths
            _one(client, flow)
        _control("-z", process.pid)
        for _ in range(requests):
            _one(client, flow)
        _control("-d", process.pid)
        client.close()
    finally:
        stop(process, timeout=120)  # under valgrind a shutdown takes its time
    dumps = sorted(workdir.glob(f"{out.name}.*"), key=lambda p: p.stat().st_mtime)
    totals = [_total(path) for path in dumps]
    if not totals:
        raise RuntimeError(f"no callgrind dump for {name} {flow}; see {workdir}")
    return totals[0] / requests


def _control(flag: str, pid: int) -> None:
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True, timeout=120)
    time.sleep(0.2)  # the command is taken at the process's next scheduling point


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests (or conversations) counted per server")
    parser.add_argument("--before", type=Path, metavar="PATH", help="also count another checkout's mrtr")
    parser.add_argument("--only", default=",".join(SERVERS), help=f"comma-separated servers of {', '.join(SERVERS)}")
    parser.add_argument("--flows", default="plain,ask", help="plain, ask or both")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind (with callgrind_control) is needed: apt-get install valgrind", file=sys.stderr)
        return 1
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    flows = [flow.strip() for flow in args.flows.split(",") if flow.strip()]
    roots = [("", ROOT)] + ([(" (before)", args.before.resolve())] if args.before else [])
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mrtr-callgrind-") as tmp:
        for name in names:
            for suffix, root in roots:
                if SERVERS[name] is None and suffix:
                    continue
                label = name + suffix
                for flow in flows:
                    if SERVERS[name] is None and flow == "ask":
                        continue  # fixed bytes: no conversation to follow
                    log(f"callgrind: {label}, {flow}, {args.requests} requests")
                    rows.setdefault(label, {})[flow] = measure(name, SERVERS[name], flow, args.requests, root,
                                                              Path(tmp))
    floor = rows.get("floor", {}).get("plain")
    print("| server | instructions per plain tools/call | vs floor | per one-question conversation |")
    print("|---|---|---|---|")
    for label, row in rows.items():
        plain = row.get("plain")
        ratio = f"{plain / floor:.2f}x" if plain and floor else "n/a"
        ask = row.get("ask")
        print(f"| {label} | {plain:,.0f} | {ratio} | {ask:,.0f} |" if ask else f"| {label} | {plain:,.0f} | {ratio} | n/a |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
