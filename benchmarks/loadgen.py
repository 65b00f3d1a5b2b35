"""A conversation load generator: whole MRTR flows over keep-alive HTTP/1.1, checked.

Each connection runs conversations one after another: the first ``tools/call``, then
a retry per ``input_required`` that echoes the ``requestState`` and answers every
``inputRequests`` key with an email unique to that conversation and question, until
the result is ``complete``. The final text must be exactly what that conversation's
own answers make; anything else counts as misrouted (an answer delivered to another
conversation), and any HTTP or JSON-RPC failure as an error.

It is written for low client cost (requests built as bytes, responses cut by
``Content-Length``, msgspec for JSON) and reports its own CPU time next to the
conversation rate, so a run can show that the client was not the bottleneck.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import Any

import msgspec
import trio

_decode = msgspec.json.decode
_encode = msgspec.json.encode
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


class Failure(Exception):
    """A conversation that did not complete: bad status, JSON-RPC error, or a broken answer."""


class Connection:
    __slots__ = ("stream", "buffer", "head")

    def __init__(self, stream: trio.SocketStream, host: str, port: int) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n").encode()

    async def call(self, name: str, params: dict[str, Any], method: str = "tools/call") -> dict[str, Any]:
        """One request; ``name`` goes in ``Mcp-Name`` (the tool, or the task id of ``tasks/*``)."""
        body = _encode({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        await self.stream.send_all(self.head + b"Mcp-Method: " + method.encode() + b"\r\nMcp-Name: "
                                   + name.encode() + b"\r\nContent-Length: "
                                   + str(len(body)).encode() + b"\r\n\r\n" + body)
        status, payload = await self._response()
        if status != 200:
            raise Failure(f"HTTP {status}: {payload[:200]!r}")
        message = _decode(payload)
        if "error" in message:
            raise Failure(f"JSON-RPC error {message['error']}")
        return message["result"]

    async def _fill(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise Failure("connection closed by the server")
        self.buffer += data

    async def _response(self) -> tuple[int, bytes]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            await self._fill()
        head = bytes(self.buffer[:end]).lower()
        del self.buffer[:end + 4]
        status = int(head[9:12])
        length = None
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value:
                chunked = True
        if chunked:
            return status, await self._chunked()
        if length is None:
            raise Failure("response without Content-Length")
        while len(self.buffer) < length:
            await self._fill()
        payload = bytes(self.buffer[:length])
        del self.buffer[:length]
        return status, payload

    async def _chunked(self) -> bytes:
        out = bytearray()
        while chunk := await self.next_chunk():
            out += chunk
        return bytes(out)

    async def next_chunk(self) -> bytes:
        """The next chunk of a chunked body; empty at its end."""
        while (end := self.buffer.find(b"\r\n")) < 0:
            await self._fill()
        size = int(bytes(self.buffer[:end]).split(b";")[0], 16)
        del self.buffer[:end + 2]
        while len(self.buffer) < size + 2:
            await self._fill()
        chunk = bytes(self.buffer[:size])
        del self.buffer[:size + 2]
        return chunk


async def _conversation(conn: Connection, tool: str, number: int, check: bool) -> bool:
    """One whole flow; True when its result is its own answers, False when misrouted."""
    plan = f"p{number}"
    params: dict[str, Any] = {"name": tool, "arguments": {"plan": plan}, "_meta": META}
    emails: list[str] = []
    for _ in range(16):
        result = await conn.call(tool, params)
        kind = result.get("resultType", "complete")
        if kind == "complete":
            if result.get("isError"):
                raise Failure(f"tool error: {result.get('content')}")
            if not check:
                return True
            text = result["content"][0]["text"]
            return text == f"{','.join(emails)}:{plan}"
        if kind != "input_required":
            raise Failure(f"unexpected resultType {kind!r}")
        email = f"c{number}q{len(emails)}@example.com"
        emails.append(email)
        responses = {key: {"action": "accept", "content": {"email": email}} for key in result["inputRequests"]}
        params = {"name": tool, "arguments": {"plan": plan}, "_meta": META,
                  "requestState": result["requestState"], "inputResponses": responses}
    raise Failure("more than 16 rounds")


async def load(port: int, tool: str, *, concurrency: int, conversations: int | None = None,
               seconds: float | None = None, check: bool = True,
               milestones: dict[int, Callable[[], Any]] | None = None) -> dict[str, Any]:
    """Run flows of ``tool`` on ``concurrency`` connections until a count or a duration.

    ``milestones`` maps a number of finished conversations to a callback run when the
    count is reached (the soak samples memory there). Returns counts, the rate, latency
    percentiles (whole conversation, ms) and the client's CPU seconds.
    """
    if conversations is None and seconds is None:
        raise ValueError("give conversations or seconds")
    counter = 0
    done = 0
    errors = 0
    misrouted = 0
    first_errors: list[str] = []
    latencies: list[float] = []
    pending = dict(milestones or {})
    deadline = None if seconds is None else time.monotonic() + seconds

    async def worker() -> None:
        nonlocal counter, done, errors, misrouted
        conn: Connection | None = None
        while True:
            if conversations is not None and counter >= conversations:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            number = counter
            counter += 1
            start = time.perf_counter()
            try:
                if conn is None:
                    conn = Connection(await trio.open_tcp_stream("127.0.0.1", port), "127.0.0.1", port)
                ok = await _conversation(conn, tool, number, check)
            except (Failure, OSError, trio.BrokenResourceError, KeyError, ValueError, msgspec.DecodeError) as exc:
                errors += 1
                if len(first_errors) < 5:
                    first_errors.append(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    await conn.stream.aclose()
                conn = None
            else:
                latencies.append(time.perf_counter() - start)
                if not ok:
                    misrouted += 1
            done += 1
            callback = pending.pop(done, None)
            if callback is not None:
                callback()
        if conn is not None:
            await conn.stream.aclose()

    usage = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {
        "conversations": done, "completed": len(latencies), "errors": errors, "misrouted": misrouted,
        "first_errors": first_errors, "seconds": elapsed, "per_second": len(latencies) / elapsed,
        "p50_ms": percentile(0.50), "p99_ms": percentile(0.99),
        "client_cpu_s": (after.ru_utime + after.ru_stime) - (usage.ru_utime + usage.ru_stime),
    }


def run(port: int, tool: str, **options: Any) -> dict[str, Any]:
    """:func:`load` under its own trio loop."""
    return trio.run(lambda: load(port, tool, **options))
