"""HTTP throughput of the native server against a bare trio + h11 baseline, same run.

Usage: ``python benchmarks/http_throughput.py [--seconds 5] [--connections 8]``

Needs ``wrk`` on the PATH (Debian: ``apt-get install wrk``). Starts, one at a time and
each in its own process:

- ``baseline``: a bare trio + h11 server answering every POST with a fixed small JSON
  body (no MCP at all) — the ceiling for this stack on this machine;
- ``mrtr tools/call``: the native server answering a plain ``tools/call`` with all the
  MCP header and envelope checks;
- ``mrtr input_required``: the first round of an eliciting tool (replay, then a token is
  minted and sealed);
- ``mrtr retry``: the final round of that tool (the token is unsealed and checked, the
  answer merged and validated, the handler replayed to completion).

Reports requests per second and the ratio to the baseline. The load generator shares
the machine's cores with the server, so absolute numbers are lower than on a separate
client; the ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINE = textwrap.dedent('''
    import sys, trio, h11
    BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"resultType":"complete"}}'
    async def handle(stream):
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
                continue
            if isinstance(event, h11.EndOfMessage):
                await stream.send_all(conn.send(h11.Response(status_code=200, headers=[
                    ("content-type", "application/json"), ("content-length", str(len(BODY)))])))
                await stream.send_all(conn.send(h11.Data(data=BODY)) + conn.send(h11.EndOfMessage()))
                conn.start_next_cycle()
            elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED.__class__)):
                return
    trio.run(trio.serve_tcp, handle, int(sys.argv[1]))
''')

APP = textwrap.dedent('''
    import sys
    from mrtr import Elicit, Form
    from mrtr.server import Server
    import mrtr.http
    server = Server("bench", secret=b"b" * 32)
    @server.tool
    def echo(text: str) -> str:
        return text
    @server.tool
    def ask(plan: str):
        answer = yield Elicit("Your email?", Form().string("email", format="email"))
        return f"{answer.content['email']}:{plan}"
    mrtr.http.run(server, "127.0.0.1", int(sys.argv[1]))
''')

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def lua(body: dict, name: str | None) -> str:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": body["method"],
    }
    if name:
        headers["Mcp-Name"] = name
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(json.dumps(body))}"]
    lines += [f'wrk.headers["{key}"] = {json.dumps(value)}' for key, value in headers.items()]
    return "\n".join(lines) + "\n"


def run_wrk(port: int, script: str, seconds: int, connections: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    try:
        output = subprocess.run(
            ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "-s", handle.name,
             f"http://127.0.0.1:{port}/mcp"],
            check=True, capture_output=True, text=True,
        ).stdout
    finally:
        os.unlink(handle.name)
    if "Non-2xx" in output:
        raise RuntimeError(f"non-2xx responses:\n{output}")
    for line in output.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(output)


def serve(code: str, port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", code, str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    return process


def first_round_token(port: int) -> str:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask", "arguments": {"plan": "pro"}, "_meta": META}}
    response = httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers={
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "ask"})
    return response.json()["result"]["requestState"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")

    results: dict[str, float] = {}
    port = free_port()
    process = serve(BASELINE, port)
    try:
        results["baseline (bare trio + h11)"] = run_wrk(
            port, lua({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, None), args.seconds, args.connections)
    finally:
        process.terminate()
        process.wait()

    port = free_port()
    process = serve(APP, port)
    try:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": META}}
        results["mrtr tools/call"] = run_wrk(port, lua(call, "echo"), args.seconds, args.connections)
        ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "ask", "arguments": {"plan": "pro"}, "_meta": META}}
        results["mrtr input_required"] = run_wrk(port, lua(ask, "ask"), args.seconds, args.connections)
        retry = json.loads(json.dumps(ask))
        retry["params"]["requestState"] = first_round_token(port)
        retry["params"]["inputResponses"] = {"elicit-1": {"action": "accept", "content": {"email": "a@b.io"}}}
        results["mrtr retry"] = run_wrk(port, lua(retry, "ask"), args.seconds, args.connections)
    finally:
        process.terminate()
        process.wait()

    baseline = results["baseline (bare trio + h11)"]
    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:9.0f} req/s  {value / baseline:5.2f}x baseline")


if __name__ == "__main__":
    main()
