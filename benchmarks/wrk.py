"""wrk as a second load generator: plain request rates, and one-question conversations.

wrk (Debian: ``apt-get install wrk``) costs far less per request than any Python
client, so the suite runs it next to :mod:`benchmarks.loadgen` on the one-question
flow: when both report about the same conversation rate for a server, the Python
generator was not what limited it. wrk is optional: without it these rows are
skipped, and the run says so.

The conversation script follows ``requestState``: an ``input_required`` answer's
token and question key go into a queue; the next request takes a token when there is
one (the final round) and starts a conversation otherwise, so any connection may carry
any round (the protocol keeps no state between rounds). Every final result is checked
for the fixed answer; conversations ending otherwise are counted and fail the run.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
import textwrap
import time
from typing import Any

from .common import cpu_seconds

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


def available() -> bool:
    """Whether wrk is on the PATH."""
    return shutil.which("wrk") is not None


def _lua_headers(headers: dict[str, str]) -> str:
    return "\n".join(f'wrk.headers["{key}"] = {json.dumps(value)}' for key, value in headers.items())


def plain_script(body: dict[str, Any], name: str | None) -> str:
    """A wrk script sending one fixed POST."""
    headers = dict(HEADERS, **({"Mcp-Name": name} if name else {}))
    return f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps(body))}\n{_lua_headers(headers)}\n'


def conversation_script(tool: str = "ask", questions: int = 1, *, check: bool = True) -> str:
    """A wrk script that holds whole conversations of ``tool`` and checks each final result.

    Every question is answered ``a@b.io`` under whatever key the server asked with
    (mrtr's ``elicit-N``, the SDK's resolver name), so the final text must be that answer
    ``questions`` times and the plan. With ``check`` off (the floors' fixed bytes) any
    complete answer counts.
    """
    first = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": tool, "arguments": {"plan": "pro"}, "_meta": META}}
    retry_prefix = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": tool, "arguments": {"plan": "pro"}, "_meta": META}})[:-2]
    answer = '{"action": "accept", "content": {"email": "a@b.io"}}'
    expected = ",".join(["a@b.io"] * questions) + ":pro"
    headers = dict(HEADERS, **{"Mcp-Name": tool})
    return textwrap.dedent('''
        local first = %s
        local retry_prefix = %s
        local answer = %s
        local expected = %s
        local check = %s
        local tokens, keys = {}, {}
        local head, tail = 1, 0
        completed = 0
        failed = 0
        wrk.method = "POST"
        %s
        function request()
            if head <= tail then
                local token, key = tokens[head], keys[head]
                tokens[head], keys[head] = nil, nil
                head = head + 1
                return wrk.format(nil, nil, nil, retry_prefix .. ', "inputResponses": {"' .. key .. '": '
                                  .. answer .. '}, "requestState": "' .. token .. '"}}')
            end
            return wrk.format(nil, nil, nil, first)
        end
        function response(status, headers, body)
            local token = string.match(body, '"requestState":"([^"]+)"')
            if token then
                tail = tail + 1
                tokens[tail] = token
                keys[tail] = string.match(body, '"inputRequests":{"([^"]+)"')
            elseif status == 200 and (not check or string.find(body, '"' .. expected .. '"', 1, true)) then
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
    ''') % (json.dumps(json.dumps(first)), json.dumps(retry_prefix), json.dumps(answer), json.dumps(expected),
            "true" if check else "false", _lua_headers(headers).replace("\n", "\n        "))


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    for unit in ("us", "ms", "s", "m"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * _UNITS[unit]
    raise ValueError(text)


def run(port: int, script: str, seconds: float, connections: int, pids: list[int]) -> dict[str, float]:
    """One wrk run: its rate (conversations/s for a conversation script), wrk's and the server's CPU."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = cpu_seconds(pids)
    started = time.monotonic()
    try:
        finished = subprocess.run(
            ["wrk", "-t", "1", "-c", str(connections), "-d", f"{max(1, round(seconds))}s", "--latency", "-s",
             handle.name, f"http://127.0.0.1:{port}/mcp"],
            capture_output=True, text=True, check=False,
        )
    finally:
        os.unlink(handle.name)
    output = finished.stdout
    if finished.returncode != 0:
        # Recorded, not raised: one broken turn must not lose the rest of the run.
        problem = (finished.stderr.strip() or output.strip()).splitlines()[-3:]
        return {"errors": 1, "failure": " / ".join(problem), "per_second": 0.0, "completed": 0, "failed": 0,
                "server_cpu_s": 0.0, "wrk_cpu_share": 0.0, "server_cpu_share": 0.0}
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = cpu_seconds(pids) - server_before
    result: dict[str, Any] = {
        # Counted, not raised: a timeout under a busy machine is noise, not a broken suite.
        "errors": 0, "server_cpu_s": server_cpu,
        "wrk_cpu_share": ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / wall,
        "server_cpu_share": server_cpu / wall,
    }
    duration = max(1, round(seconds))
    for line in output.splitlines():
        if line.strip().startswith("Socket errors:"):
            result["errors"] += sum(int(part.strip(",")) for part in line.split()[3::2])
        elif line.strip().startswith("Non-2xx or 3xx responses:"):
            result["errors"] += int(line.split()[-1])
        elif line.strip().startswith(("50.000%", "50%")) or line.strip().startswith("99%"):
            percent, value = line.split()[:2]
            result["p50_request_ms" if percent.startswith("50") else "p99_request_ms"] = _ms(value)
        elif line.startswith("Requests/sec:"):
            result["per_second"] = float(line.split()[1])
        elif line.startswith("conversations:"):
            parts = line.split()
            result["failed"] = int(parts[3])
            result["completed"] = int(parts[1])
            result["per_second"] = int(parts[1]) / duration
    if "per_second" not in result:
        raise RuntimeError(output)
    return result
