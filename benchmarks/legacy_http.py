"""Part 8: 2025-era sessions over Streamable HTTP, against the official SDK's stateful server.

A 2025 client's one-question conversation is a session: ``initialize``,
``notifications/initialized``, ``tools/call`` (its answer an SSE stream that carries
the server's ``elicitation/create`` first), the answer as a ``POST`` of its own on a
second connection (``202``), the result at the end of the stream, ``DELETE``. Servers,
each in its own process, started before the first measurement and taken in turns:

- ``mrtr native, 1 worker`` and ``mrtr native, 2 workers`` (a request whose connection
  reached the other worker is forwarded to the session's owner): ``python -m
  benchmarks.legacy_http serve PORT WORKERS``, the flows' server of :mod:`benchmarks.apps`
  with room for every session and connection the part opens from one address;
- ``SDK MCPServer stateful (uvicorn)``: ``mcp==2.3.0`` as it serves 2025 clients by
  default (sessions, SSE answers), its ``ask_live`` tool asking with ``ctx.elicit``
  (:mod:`benchmarks.sdk_peer`, ``serve-stateful``); skipped, and said so, without its
  virtualenv.

The client (:class:`Flow`) speaks raw HTTP/1.1 on two keep-alive connections per
conversation slot; every conversation answers with an email of its own and its result
must be exactly that email and its plan, or it counts as misrouted. Reported:
conversations per second (median of the turns, and as a ratio to the SDK measured in
the same turns), p50/p99 of a whole conversation.

Memory: the resident set (``VmRSS``) of each one-process server before and after
holding N sessions opened and left idle, then N calls waiting at their question (the
stream open, the question unanswered), each divided by N; the SDK's, measured the same
way in the same run, is the baseline. Nothing here is asserted.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from typing import Any

import msgspec
import trio

from . import loadgen
from .common import (ROOT, children, clean_env, cpu_seconds, free_port, log, rss_kib, sdk_missing, sdk_python, stop, turn_order,
                     wait_for_port)

_decode = msgspec.json.decode
_encode = msgspec.json.encode
VERSION = "2025-11-25"
SDK = "SDK MCPServer stateful (uvicorn)"
SERVERS = {"mrtr native, 1 worker": "1", "mrtr native, 2 workers": "2", SDK: None}
TOOLS = {SDK: "ask_live"}  # the mrtr servers' ``ask`` serves both eras as it is
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
                         "clientInfo": {"name": "bench", "version": "1.0"}}}


Failure = loadgen.Failure
"""A conversation that did not complete as the 2025 transport says it should."""


class _Connection(loadgen.Connection):
    """One keep-alive HTTP/1.1 connection: requests as bytes, answers JSON, empty, or SSE read event by event."""

    def __init__(self, stream: trio.SocketStream, port: int) -> None:
        super().__init__(stream, "127.0.0.1", port)
        self.host = f"127.0.0.1:{port}".encode()
        self.chunks_left = 0  # of the SSE body being read: bytes of the current chunk
        self.events = bytearray()

    async def send(self, method: bytes, body: bytes | None, session: str | None, accept: bytes) -> None:
        head = [method + b" /mcp HTTP/1.1\r\nHost: " + self.host + b"\r\nAccept: " + accept + b"\r\n"]
        if session is not None:
            head.append(b"Mcp-Session-Id: " + session.encode() + b"\r\nMCP-Protocol-Version: " + VERSION.encode()
                        + b"\r\n")
        if body is not None:
            head.append(b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n")
        else:
            head.append(b"Content-Length: 0\r\n")
        await self.stream.send_all(b"".join(head) + b"\r\n" + (body or b""))

    async def read_head(self) -> tuple[int, dict[bytes, bytes]]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            await self._fill()
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        del self.buffer[:end + 4]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return int(lines[0][9:12]), headers

    async def body(self, headers: dict[bytes, bytes]) -> bytes:
        """A whole body with ``Content-Length`` (an SSE body is read with :meth:`event`)."""
        length = int(headers.get(b"content-length", b"0"))
        while len(self.buffer) < length:
            await self._fill()
        payload = bytes(self.buffer[:length])
        del self.buffer[:length]
        return payload

    async def _chunk(self) -> bool:
        """Move the next chunk of a chunked body into ``events``; ``False`` at its end."""
        chunk = await self.next_chunk()
        self.events += chunk.replace(b"\r\n", b"\n")
        return bool(chunk)

    async def event(self) -> dict[str, Any] | None:
        """The next JSON-RPC message of the SSE body being read (priming and comments skipped); ``None`` at its end."""
        while True:
            end = self.events.find(b"\n\n")
            if end >= 0:
                block = bytes(self.events[:end])
                del self.events[:end + 2]
                data = b"\n".join(line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:"))
                if data.strip():
                    return _decode(data)  # type: ignore[no-any-return]
                continue
            if not await self._chunk():
                return None


async def _open(port: int) -> _Connection:
    return _Connection(await trio.open_tcp_stream("127.0.0.1", port), port)


class Flow:
    """One conversation slot: two connections (calls and their streams; answers, notifications, DELETE)."""

    def __init__(self, port: int, tool: str) -> None:
        self.port = port
        self.tool = tool
        self.calls: _Connection | None = None
        self.side: _Connection | None = None

    async def connect(self) -> None:
        self.calls, self.side = await _open(self.port), await _open(self.port)

    async def close(self) -> None:
        for connection in (self.calls, self.side):
            if connection is not None:
                await connection.stream.aclose()
        self.calls = self.side = None

    async def _post(self, connection: _Connection, message: Any, session: str | None) -> tuple[int, Any, Any]:
        """POST ``message``; the status, the headers, and the JSON body (``None`` when empty or a stream)."""
        await connection.send(b"POST", _encode(message), session, b"application/json, text/event-stream")
        status, headers = await connection.read_head()
        if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            return status, headers, None
        payload = await connection.body(headers)
        if payload and not headers.get(b"content-type", b"").startswith(b"application/json"):
            raise Failure(f"HTTP {status}: {payload[:200]!r}")
        return status, headers, _decode(payload) if payload else None

    async def _result(self, connection: _Connection, headers: Any, body: Any) -> dict[str, Any]:
        if body is not None:
            return body  # type: ignore[no-any-return]
        found = None
        while (message := await connection.event()) is not None:
            found = message
        if found is None:
            raise Failure("a stream ended with no message")
        return found

    async def open_session(self) -> str:
        """``initialize`` and ``notifications/initialized``; the session id."""
        assert self.calls is not None and self.side is not None
        status, headers, body = await self._post(self.calls, INITIALIZE, None)
        if status != 200 or b"mcp-session-id" not in headers:
            raise Failure(f"initialize: HTTP {status}")
        result = await self._result(self.calls, headers, body)
        if "result" not in result:
            raise Failure(f"initialize: {result}")
        session = headers[b"mcp-session-id"].decode()
        status, _, _ = await self._post(self.side, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        if status != 202:
            raise Failure(f"notifications/initialized: HTTP {status}")
        return session

    async def ask(self, session: str, plan: str) -> tuple[dict[str, Any], str]:
        """Start the call; its question (the stream left open on ``calls``) and the email to answer."""
        assert self.calls is not None
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": self.tool,
                                                                              "arguments": {"plan": plan}}}
        await self.calls.send(b"POST", _encode(call), session, b"application/json, text/event-stream")
        status, headers = await self.calls.read_head()
        if status != 200 or not headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            raise Failure(f"tools/call: HTTP {status}, {headers.get(b'content-type')!r}")
        question = await self.calls.event()
        if question is None or question.get("method") != "elicitation/create":
            raise Failure(f"tools/call: expected a question, got {question}")
        return question, f"{plan}@example.com"

    async def conversation(self, number: int) -> bool:
        """One whole session; ``True`` when its result is its own answer."""
        assert self.side is not None and self.calls is not None
        session = await self.open_session()
        plan = f"p{number}"
        question, email = await self.ask(session, plan)
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"email": email}}}
        status, _, _ = await self._post(self.side, answer, session)
        if status != 202:
            raise Failure(f"answer: HTTP {status}")
        final = await self._result(self.calls, None, None)
        if "result" not in final:
            raise Failure(f"tools/call: {final}")
        await self.delete(session)
        return bool(final["result"]["content"][0]["text"] == f"{email}:{plan}")

    async def delete(self, session: str) -> None:
        """End ``session`` (``DELETE``, on the side connection)."""
        assert self.side is not None
        await self.side.send(b"DELETE", None, session, b"application/json, text/event-stream")
        status, headers = await self.side.read_head()
        await self.side.body(headers)
        if status not in (200, 204):
            raise Failure(f"DELETE: HTTP {status}")


async def load(port: int, tool: str, *, concurrency: int, seconds: float) -> dict[str, Any]:
    """Conversations on ``concurrency`` slots for ``seconds``: counts, rate, latency percentiles."""
    counter = errors = misrouted = 0
    first_errors: list[str] = []
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def slot() -> None:
        nonlocal counter, errors, misrouted
        flow = Flow(port, tool)
        while time.monotonic() < deadline:
            number = counter
            counter += 1
            start = time.perf_counter()
            try:
                if flow.calls is None:
                    await flow.connect()
                ok = await flow.conversation(number)
            except (Failure, OSError, trio.BrokenResourceError, KeyError, ValueError, msgspec.DecodeError) as exc:
                errors += 1
                if len(first_errors) < 5:
                    first_errors.append(f"{type(exc).__name__}: {exc}")
                await flow.close()
            else:
                latencies.append(time.perf_counter() - start)
                misrouted += not ok
        await flow.close()

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(slot)
    elapsed = time.perf_counter() - started
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {"conversations": counter, "completed": len(latencies), "errors": errors, "misrouted": misrouted,
            "first_errors": first_errors, "per_second": len(latencies) / elapsed, "p50_ms": percentile(0.5),
            "p99_ms": percentile(0.99)}


# -- memory: idle sessions and waiting calls ------------------------------------------------

async def _settled_rss(pids: list[int]) -> int:
    """The RSS of ``pids``, summed, once it stops moving (the server finished what the last requests started)."""
    last = sum(rss_kib(pid) for pid in pids)
    for _ in range(50):
        await trio.sleep(0.1)
        now = sum(rss_kib(pid) for pid in pids)
        if now == last:
            return now
        last = now
    return last


async def memory(port: int, pid: int | list[int], tool: str, sessions: int, waiting: int, *,
                 release: bool = False) -> dict[str, Any]:
    """Bytes of RSS per idle session and per call waiting at its question, in the server ``pid``.

    ``pid`` may list a server's workers (their RSS summed: each session lives in the worker
    its ``initialize`` reached). With ``release`` every session opened here is deleted
    afterwards (the waiting calls' handlers closed with them), so a server that goes on
    serving (the soak) carries none of them on.
    """
    pids = pid if isinstance(pid, list) else [pid]
    warm = Flow(port, tool)  # imports, caches and first-use allocations before the baseline
    await warm.connect()
    for number in range(20):
        await warm.conversation(number)
    await warm.close()
    base = await _settled_rss(pids)
    opener = Flow(port, tool)
    await opener.connect()
    opened = [await opener.open_session() for _ in range(sessions)]
    idle = await _settled_rss(pids)
    held: list[tuple[Flow, str]] = []
    for number in range(waiting):
        flow = Flow(port, tool)
        await flow.connect()
        session = await flow.open_session()
        await flow.ask(session, f"m{number}")
        assert flow.side is not None
        await flow.side.stream.aclose()  # the stream stays open; the other connection is not needed
        flow.side = None
        held.append((flow, session))
    # The waiting calls' own sessions and stream connections are in this figure too: a 2025
    # client's waiting call always has both.
    asked = await _settled_rss(pids)
    if release:
        for session in opened + [session for _, session in held]:
            await opener.delete(session)
    for flow, _ in held:
        await flow.close()
    await opener.close()
    return {"sessions": sessions, "waiting": waiting,
            "idle_session_bytes": (idle - base) * 1024 / sessions,
            "waiting_call_bytes": (asked - idle) * 1024 / waiting,
            "rss_base_mib": base / 1024}


# -- the servers ------------------------------------------------------------------------------

def serve(port: int, workers: int) -> None:
    """The flows' mrtr server, with room for every session the part opens from one address."""
    from mrtr.http import run_http
    from mrtr.server.sessions import DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SUSPENDED, SessionRegistry

    from .apps import make_server

    # One address opens every session and waits in every call: the whole process's share is its.
    server = make_server(sessions=SessionRegistry(max_per_client=DEFAULT_MAX_SESSIONS,
                                                  max_suspended_per_client=DEFAULT_MAX_SUSPENDED))
    # Every waiting call holds its stream's connection, all from one address: room for them.
    run_http(server, "127.0.0.1", port, workers=workers, max_connections=4_000, max_connections_per_client=None)


def _measured(server: _Running, turn: Any) -> dict[str, Any]:
    """One turn of load, with the CPU the server (and its workers) and this load generator used in it."""
    pids = [server.process.pid, *children(server.process.pid)]
    before, mine = cpu_seconds(pids), resource.getrusage(resource.RUSAGE_SELF)
    result: dict[str, Any] = trio.run(turn)
    after = resource.getrusage(resource.RUSAGE_SELF)
    result["server_cpu_s"] = cpu_seconds(pids) - before
    result["client_cpu_s"] = (after.ru_utime - mine.ru_utime) + (after.ru_stime - mine.ru_stime)
    return result


def _cpu_per_conversation(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Server and load-generator CPU per completed conversation over a server's turns, in µs.

    The rate is what the goal reads; these say what limited it: a load generator on the
    same cores that spends more per conversation than the server holds the server's rate
    down, and the server CPU ratio is then the fairer comparison of the two servers.
    """
    completed = max(sum(s["completed"] for s in samples), 1)
    return {"server_cpu_us_per_conversation": sum(s["server_cpu_s"] for s in samples) / completed * 1e6,
            "client_cpu_us_per_conversation": sum(s["client_cpu_s"] for s in samples) / completed * 1e6}


class _Running:
    def __init__(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        import subprocess

        self.name = name
        self.port = free_port()
        self.process = subprocess.Popen([*command, str(self.port), *([] if name == SDK else [SERVERS[name] or "1"])],
                                        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready(self) -> None:
        wait_for_port(self.port, self.process)


def run(*, quick: bool, install_sdk: bool) -> dict[str, Any]:
    """Part 8's results."""
    pairs, seconds, concurrency = (2, 0.5, 8) if quick else (5, 3.0, 8)
    sessions, waiting = (200, 50) if quick else (2_000, 500)
    running: dict[str, _Running] = {}
    skipped: dict[str, str] = {}
    for name in SERVERS:
        if name == SDK:
            python = sdk_python(install=install_sdk)
            if python is None:
                skipped[name] = sdk_missing(install_sdk)
                log(f"part 8: SKIPPED {name}: {skipped[name]}")
                continue
            running[name] = _Running(name, [str(python), str(ROOT / "benchmarks" / "sdk_peer.py"), "serve-stateful"],
                                     clean_env())
        else:
            running[name] = _Running(name, [sys.executable, "-m", "benchmarks.legacy_http", "serve"])
    flows: dict[str, Any] = {}
    rss: dict[str, Any] = {}
    try:
        for server in running.values():
            server.ready()
        for name, server in running.items():  # warm up
            trio.run(lambda: load(server.port, TOOLS.get(name, "ask"), concurrency=concurrency,
                                  seconds=0.3 if quick else 1.0))
        turns: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
        for turn in range(pairs):
            log(f"part 8: 2025 sessions, turn {turn + 1}/{pairs}")
            for name in turn_order(list(running), turn):
                port, tool = running[name].port, TOOLS.get(name, "ask")
                turns[name].append(_measured(running[name], lambda: load(port, tool, concurrency=concurrency,
                                                                         seconds=seconds)))
        for name, samples in turns.items():
            flows[name] = {"per_second": statistics.median(s["per_second"] for s in samples),
                           "per_second_turns": [s["per_second"] for s in samples],
                           "p50_ms": statistics.median(s["p50_ms"] for s in samples),
                           "p99_ms": statistics.median(s["p99_ms"] for s in samples),
                           "conversations": sum(s["conversations"] for s in samples),
                           "errors": sum(s["errors"] for s in samples),
                           "misrouted": sum(s["misrouted"] for s in samples),
                           "first_errors": [e for s in samples for e in s["first_errors"]][:3],
                           **_cpu_per_conversation(samples)}
        for name in ("mrtr native, 1 worker", SDK):
            if name in running:
                log(f"part 8: memory of {name}")
                server = running[name]
                rss[name] = trio.run(lambda: memory(server.port, server.process.pid, TOOLS.get(name, "ask"),
                                                    sessions, waiting))
    finally:
        for server in running.values():
            stop(server.process)
    sdk = flows.get(SDK, {}).get("per_second")
    sdk_cpu = flows.get(SDK, {}).get("server_cpu_us_per_conversation")
    for row in flows.values():
        row["vs_sdk"] = row["per_second"] / sdk if sdk else None
        row["vs_sdk_cpu"] = sdk_cpu / row["server_cpu_us_per_conversation"] if sdk_cpu else None
    base = rss.get(SDK)
    for row in rss.values():
        row["idle_vs_sdk"] = row["idle_session_bytes"] / base["idle_session_bytes"] if base else None
        row["waiting_vs_sdk"] = row["waiting_call_bytes"] / base["waiting_call_bytes"] if base else None
    return {"pairs": pairs, "seconds": seconds, "concurrency": concurrency, "flows": flows, "rss": rss,
            "skipped": skipped}


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]))
