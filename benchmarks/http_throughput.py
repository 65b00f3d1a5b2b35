"""HTTP throughput of the native server against bare trio servers, interleaved in one run.

Usage: ``python benchmarks/http_throughput.py [--seconds 4] [--rounds 3] [--connections 8] [--workers]``

Needs ``wrk`` on the PATH (Debian: ``apt-get install wrk``). Every server runs in its
own process, all started up front; each round runs wrk against every case once, in
the same order (A B C ... A B C ...), so a busy neighbour on a shared machine slows
every case of a round alike. Ratios are taken within a round, and the report gives
the median over the rounds.

The cases:

- ``h11 echo``: a bare trio + h11 server answering every POST with a fixed small JSON
  body, no MCP at all (the parser mrtr used before);
- ``httptools echo``: the same on trio + httptools (the parser mrtr uses now): the
  ceiling for this stack;
- ``mrtr tools/call``: the native server answering a plain ``tools/call`` with all the
  MCP header and envelope checks;
- ``mrtr one-question``: whole conversations of an eliciting tool. The wrk script
  follows ``requestState``: a first round is answered ``input_required`` with a token,
  the token is sent back with the answer, and the final result is checked; reported
  in conversations per second (two requests each);
- with ``--workers``: ``mrtr tools/call`` on ``run(..., workers=2)``;
- with ``--before PATH``: the same two mrtr cases on the mrtr of another checkout (for
  example the previous commit's), imported from ``PATH`` in the same run;
- with ``--sdk``: the official Python SDK (``mcp==2.3.0``, ``MCPServer`` under uvicorn,
  stateless JSON responses, a hand-built ``InputRequiredResult`` guard with the SDK's
  default state sealing) on the same plain call and the same conversations. It is
  installed into its own virtualenv, ``.cache/interop-venv``, as the interop tests do.

wrk must not be the bottleneck: the report gives the CPU wrk used (its rusage) and the
CPU the server used (``/proc``), each as a share of one core over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BODY = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"resultType":"complete"}}'

H11_ECHO = textwrap.dedent('''
    import sys, trio, h11
    BODY = %r.encode()
    async def serve(stream):
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
                    ("content-type", "application/json"), ("content-length", str(len(BODY)))]))
                    + conn.send(h11.Data(data=BODY)) + conn.send(h11.EndOfMessage()))
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return
    async def handle(stream):
        try:
            await serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass
    trio.run(trio.serve_tcp, handle, int(sys.argv[1]))
''' % BODY)

HTTPTOOLS_ECHO = textwrap.dedent('''
    import sys, trio, httptools
    BODY = %r.encode()
    ANSWER = (b"HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: %%d\\r\\n\\r\\n"
              %% len(BODY)) + BODY
    class Protocol:
        def __init__(self):
            self.done = 0
        def on_message_complete(self):
            self.done += 1
    async def serve(stream):
        protocol = Protocol()
        parser = httptools.HttpRequestParser(protocol)
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            parser.feed_data(data)
            if protocol.done:
                await stream.send_all(ANSWER * protocol.done)
                protocol.done = 0
    async def handle(stream):
        try:
            await serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, httptools.HttpParserError):
            pass
    trio.run(trio.serve_tcp, handle, int(sys.argv[1]))
''' % BODY)

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
    mrtr.http.run_http(server, "127.0.0.1", int(sys.argv[1]), workers=int(sys.argv[2]))
''')

SDK_SERVER = textwrap.dedent('''
    import sys
    import uvicorn
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
    server = MCPServer("bench-sdk")
    @server.tool()
    async def echo(text: str) -> str:
        return text
    @server.tool()
    async def ask(plan: str, ctx: Context):
        answer = (ctx.input_responses or {}).get("elicit-1")
        if answer is None:
            return InputRequiredResult(input_requests={"elicit-1": ElicitRequest(params=ElicitRequestFormParams(
                message="Your email?", requested_schema={"type": "object", "properties": {
                    "email": {"type": "string", "format": "email"}}, "required": ["email"]}))}, request_state="asked")
        return f"{answer.content['email']}:{plan}"
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
''')

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


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


def _lua_headers(headers: dict[str, str]) -> str:
    return "\n".join(f'wrk.headers["{key}"] = {json.dumps(value)}' for key, value in headers.items())


def plain_script(body: dict, name: str | None) -> str:
    """A wrk script sending one fixed POST."""
    headers = dict(HEADERS, **({"Mcp-Name": name} if name else {}))
    return f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps(body))}\n{_lua_headers(headers)}\n'


def conversation_script() -> str:
    """A wrk script that holds whole one-question conversations and checks each final result.

    A token from an ``input_required`` answer goes into a queue; the next request takes
    a token when there is one (the final round) and starts a conversation otherwise.
    Any connection may carry any round: the protocol keeps no state between rounds.
    """
    first = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "ask", "arguments": {"plan": "pro"}, "_meta": META}}
    retry_prefix = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "ask", "arguments": {"plan": "pro"}, "_meta": META,
        "inputResponses": {"elicit-1": {"action": "accept", "content": {"email": "a@b.io"}}}}})[:-2]
    headers = dict(HEADERS, **{"Mcp-Name": "ask"})
    return textwrap.dedent('''
        local first = %s
        local retry_prefix = %s
        local tokens = {}
        local head, tail = 1, 0
        completed = 0
        failed = 0
        wrk.method = "POST"
        %s
        function request()
            if head <= tail then
                local token = tokens[head]
                tokens[head] = nil
                head = head + 1
                return wrk.format(nil, nil, nil, retry_prefix .. ', "requestState": "' .. token .. '"}}')
            end
            return wrk.format(nil, nil, nil, first)
        end
        function response(status, headers, body)
            local token = string.match(body, '"requestState":"([^"]+)"')
            if token then
                tail = tail + 1
                tokens[tail] = token
            elseif string.find(body, "a@b.io:pro", 1, true) then
                completed = completed + 1
            else
                failed = failed + 1
            end
        end
        local threads = {}
        function setup(thread)
            table.insert(threads, thread)
        end
        function done(summary, latency, requests)
            local c, f = 0, 0
            for _, thread in ipairs(threads) do
                c = c + thread:get("completed")
                f = f + thread:get("failed")
            end
            io.write(string.format("conversations: %%d failed: %%d\\n", c, f))
        end
    ''') % (json.dumps(json.dumps(first)), json.dumps(retry_prefix),
            _lua_headers(headers).replace("\n", "\n        "))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(port: int, script: str, seconds: int, connections: int, pids: list[int]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = sum(cpu_seconds(pid) for pid in pids)
    started = time.monotonic()
    try:
        finished = subprocess.run(
            ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "-s", handle.name,
             f"http://127.0.0.1:{port}/mcp"],
            capture_output=True, text=True,
        )
        if finished.returncode:
            raise RuntimeError(f"wrk failed ({finished.returncode}):\n{finished.stdout}\n{finished.stderr}")
        output = finished.stdout
    finally:
        os.unlink(handle.name)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = sum(cpu_seconds(pid) for pid in pids) - server_before
    if "Non-2xx" in output or "Socket errors" in output:
        raise RuntimeError(f"errors:\n{output}")
    result = {"wrk_cpu": ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / wall,
              "server_cpu": server_cpu / wall}
    for line in output.splitlines():
        if line.startswith("Requests/sec:"):
            result["rate"] = float(line.split()[1])
        elif line.startswith("conversations:"):
            parts = line.split()
            if int(parts[3]):
                raise RuntimeError(f"{parts[3]} conversations ended with a wrong result")
            result["rate"] = int(parts[1]) / seconds
    if "rate" not in result:
        raise RuntimeError(output)
    return result


def sdk_python() -> str:
    """The python of ``.cache/interop-venv`` with the official SDK (created and filled on first use)."""
    venv = ROOT / ".cache" / "interop-venv"
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import mcp, uvicorn"], capture_output=True).returncode if python.exists() \
            else True:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
                        str(ROOT / "tests" / "interop" / "requirements.txt")], check=True)
    return str(python)


def start(code: str, *args: str, python: str = sys.executable,
          path: str | None = None) -> tuple[subprocess.Popen[bytes], int, list[int]]:
    port = free_port()
    if path:  # import mrtr from that checkout, ahead of the installed one
        code = f"import sys; sys.path.insert(0, {path!r})\n" + code
    process = subprocess.Popen([python, "-c", code, str(port), *args], cwd=path or ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    time.sleep(0.5)  # forked workers bind a moment after the first
    pids = [process.pid]
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    if children.exists():
        pids += [int(pid) for pid in children.read_text().split()]
    return process, port, pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", action="store_true", help="also run mrtr tools/call with workers=2")
    parser.add_argument("--sdk", action="store_true", help="also run the official SDK's server")
    parser.add_argument("--before", metavar="PATH", help="also run the mrtr of the checkout at PATH")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "ok"}, "_meta": META}}
    servers = {"h11": start(H11_ECHO), "httptools": start(HTTPTOOLS_ECHO), "mrtr": start(APP, "1")}
    cases = [
        ("h11 echo", "h11", plain_script({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, None)),
        ("httptools echo", "httptools", plain_script({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, None)),
        ("mrtr tools/call", "mrtr", plain_script(call, "echo")),
        ("mrtr one-question (conversations/s)", "mrtr", conversation_script()),
    ]
    if args.workers:
        servers["mrtr2"] = start(APP, "2")
        cases.append(("mrtr tools/call, workers=2", "mrtr2", plain_script(call, "echo")))
    if args.before:
        servers["before"] = start(APP, "1", path=str(Path(args.before).resolve()))
        cases.append(("before: tools/call", "before", plain_script(call, "echo")))
        cases.append(("before: one-question (conversations/s)", "before", conversation_script()))
    if args.sdk:
        servers["sdk"] = start(SDK_SERVER, python=sdk_python())
        cases.append(("SDK tools/call", "sdk", plain_script(call, "echo")))
        cases.append(("SDK one-question (conversations/s)", "sdk", conversation_script()))
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in cases}
    try:
        for round_number in range(args.rounds):
            for name, server, script in cases:
                _, port, pids = servers[server]
                results[name].append(run_wrk(port, script, args.seconds, args.connections, pids))
            print(f"round {round_number + 1}: " + ", ".join(
                f"{name} {results[name][-1]['rate']:.0f}" for name, _, _ in cases), file=sys.stderr)
    finally:
        for process, _, _ in servers.values():
            process.terminate()
            process.wait()

    def ratios(name: str, base: str) -> list[float]:
        return [a["rate"] / b["rate"] for a, b in zip(results[name], results[base])]

    width = max(map(len, results))
    print(f"{'case':<{width}}  {'median/s':>9}  {'vs h11 echo':>11}  {'vs httptools echo':>17}  "
          f"{'wrk cpu':>7}  {'server cpu':>10}")
    for name in results:
        rate = statistics.median(r["rate"] for r in results[name])
        wrk_cpu = statistics.median(r["wrk_cpu"] for r in results[name])
        server_cpu = statistics.median(r["server_cpu"] for r in results[name])
        print(f"{name:<{width}}  {rate:9.0f}  {statistics.median(ratios(name, 'h11 echo')):10.2f}x  "
              f"{statistics.median(ratios(name, 'httptools echo')):16.2f}x  {wrk_cpu:6.0%}  {server_cpu:9.0%}")
    pairs = []
    if args.before:
        pairs += [("mrtr tools/call", "before: tools/call"),
                  ("mrtr one-question (conversations/s)", "before: one-question (conversations/s)")]
    if args.sdk:
        pairs += [("mrtr tools/call", "SDK tools/call"),
                  ("mrtr one-question (conversations/s)", "SDK one-question (conversations/s)")]
    if pairs:
        for mine, theirs in pairs:
            print(f"{mine} / {theirs}: {statistics.median(ratios(mine, theirs)):.2f}x (median of per-round ratios)")
    print(json.dumps({name: [round(r["rate"]) for r in rows] for name, rows in results.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
