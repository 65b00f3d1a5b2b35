"""The servers of the HTTP parts, each started in its own process by the suite.

``python -m benchmarks.apps KIND PORT [WORKERS]`` with KIND one of:

- ``native``: the mrtr server under its native HTTP transport (``mrtr.http.run_http``);
- ``asgi``: the mrtr ASGI app under hypercorn's trio worker;
- ``tasks``: ``native`` plus a task tool, with the task store URL as a fourth argument;
- ``middleware``: ``native`` with N pass-through middleware registered, N the fourth argument
  (``async def mw(request, call_next): return await call_next(request)``, each its own stage);
- ``floor-h11`` / ``floor-httptools``: the transport floors, a bare trio server on each
  parser that answers the flows with fixed bytes (no MCP, no JSON parsing, no token):
  a first round gets a fixed ``input_required`` with ``requestState`` ``"r1"``, a retry
  carrying ``"rN"`` gets ``"rN+1"`` until the flow's last round, which gets a fixed
  ``complete`` (and any request that is not for ``ask``/``ask3`` gets that ``complete``
  at once). What any server on that parser and trio cannot beat.

The official SDK's server is :mod:`benchmarks.sdk_peer` (its own virtualenv).

Tools, the same in every server: ``echo(text)`` returns its argument (no question);
``ask(plan)`` asks one question (a form with one
``email``) and returns ``"{email}:{plan}"``; ``ask3(plan)`` asks three, one per round,
and returns ``"{e1},{e2},{e3}:{plan}"``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

from mrtr import Elicit, Form, Server
from mrtr.core.jsonrpc import Response, encode

FORM = Form().string("email", format="email")
SECRET = b"b" * 32


def make_server(kind: type[Server] = Server, **options: Any) -> Server:
    """The mrtr server with the flows' two tools (``options`` go to :class:`~mrtr.Server`)."""
    server = kind("bench", secret=SECRET, **options)

    @server.tool
    def echo(text: str) -> str:
        """No question: the plain request of the request-rate table."""
        return text

    @server.tool
    def ask(plan: str):
        """One question."""
        reply = yield Elicit("Your email?", FORM)
        return f"{reply.content['email']}:{plan}"

    @server.tool
    def ask3(plan: str):
        """Three questions, one per round."""
        emails = []
        for i in range(3):
            reply = yield Elicit(f"Question {i + 1}?", FORM)
            emails.append(reply.content["email"])
        return f"{','.join(emails)}:{plan}"

    return server


class TableAnswered(Server):
    """The flows' server with its ``tools/call`` answers taken from a table: a measuring device, not a server.

    The first call with given params runs through the server and its answer (a result,
    complete or ``input_required``) is kept for :data:`TABLE_SECONDS`; a later call with the
    same params in that time gets it under its own id, with no dispatch, handler, result,
    token or replay. A load whose requests repeat (wrk's scripts: one plan, one answer)
    then measures everything around the MCP layer: the connection loop, llhttp, the header
    rules, the exchange, the encoder and the access line, which is the most a per-tool
    plan confined to the MCP layer could give. The entries expire well inside the token's
    lifetime, so a kept ``input_required`` never hands out a token that has run out.
    """

    _table: dict[bytes, tuple[float, Any]]

    async def respond(self, message: Any, **options: Any) -> Any:
        """The kept answer to a repeated ``tools/call`` under this call's id; anything else, the server's."""
        if message.get("method") != "tools/call":
            return await super().respond(message, **options)
        table = self.__dict__.setdefault("_table", {})
        key = encode(message.get("params"))
        now = time.monotonic()
        kept = table.get(key)
        if kept is not None and now - kept[0] < TABLE_SECONDS:
            return Response({"jsonrpc": "2.0", "id": message["id"], "result": kept[1]})
        response = await super().respond(message, **options)
        if response.status == 200 and isinstance(response.message.get("result"), dict):
            if len(table) >= TABLE_SIZE:
                table.clear()
            table[key] = (now, response.message["result"])
        return response


TABLE_SECONDS = 10.0
"""How long :class:`TableAnswered` keeps an answer (a token it hands out again must still be valid)."""

TABLE_SIZE = 10_000
"""Answers :class:`TableAnswered` keeps at most (a load of unique requests empties it, never grows it)."""


def __getattr__(name: str) -> Server:
    # ``mrtr serve benchmarks.apps:server``: the flows' server as a user starts it (built on first use,
    # so the other kinds of this module never build one they do not serve); ``:table_answered`` the
    # same server with its calls answered from a table (:class:`TableAnswered`).
    if name in ("server", "table_answered"):
        built = globals()[name] = make_server(TableAnswered if name == "table_answered" else Server)
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def with_middleware(server: Server, stages: int) -> Server:
    """``server`` with ``stages`` trivial middleware registered: each passes the request on and returns the result."""
    for _ in range(stages):
        async def passing(request: Any, call_next: Any) -> Any:
            return await call_next(request)

        server.middleware(passing)
    return server


def make_task_server() -> Server:
    """The flows' server plus ``review``, a task tool: a Step, then two questions asked through the task."""
    from mrtr import Step

    server = make_server()

    @server.tool(task="required")
    def review(plan: str):
        """Starts as a task at its Step, then asks two approvals through tasks/update."""
        ticket = yield Step(_ticket, plan)
        first = yield Elicit(f"First approval for {ticket}?", FORM)
        second = yield Elicit(f"Second approval for {ticket}?", FORM)
        return f"{first.content['email']},{second.content['email']}:{plan}"

    return server


def _ticket(plan: str) -> str:
    return f"T-{plan}"


# -- the floors: fixed bytes, parser and event loop only ------------------------------------

_STATE = re.compile(rb'"requestState":\s*"r(\d)"')
_ASK3 = b'"ask3"'


_COMPLETE = (b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],'
             b'"isError":false,"resultType":"complete"}}')


def _floor_body(request: bytes) -> bytes:
    if b'"ask' not in request:
        return _COMPLETE
    found = _STATE.search(request)
    step = int(found.group(1)) if found else 0
    last = 3 if _ASK3 in request else 1
    if step >= last:
        return _COMPLETE
    return (b'{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{"elicit":{"method":"elicitation/create",'
            b'"params":{"mode":"form","message":"Your email?","requestedSchema":{"type":"object","properties":'
            b'{"email":{"type":"string","format":"email"}},"required":["email"]}}}},"requestState":"r'
            + str(step + 1).encode() + b'","resultType":"input_required"}}')


def _response(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _floor_h11(stream) -> None:
    import h11

    conn = h11.Connection(h11.SERVER)
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return
            conn.receive_data(data)
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            answer = _floor_body(bytes(body))
            body.clear()
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=[
                ("content-type", "application/json"), ("content-length", str(len(answer)))])))
            await stream.send_all(conn.send(h11.Data(data=answer)) + conn.send(h11.EndOfMessage()))
            conn.start_next_cycle()
        elif isinstance(event, h11.ConnectionClosed):
            return


async def _floor_httptools(stream) -> None:
    import httptools

    class Protocol:
        def __init__(self) -> None:
            self.body = bytearray()
            self.done: list[bytes] = []

        def on_body(self, data: bytes) -> None:
            self.body += data

        def on_message_complete(self) -> None:
            self.done.append(bytes(self.body))
            self.body.clear()

    protocol = Protocol()
    parser = httptools.HttpRequestParser(protocol)
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        parser.feed_data(data)
        if protocol.done:
            out = b"".join(_response(_floor_body(body)) for body in protocol.done)
            protocol.done.clear()
            await stream.send_all(out)


def _run_http():
    """The native transport's blocking entry point (``run`` in checkouts before the rename, for --before)."""
    import mrtr.http

    return getattr(mrtr.http, "run_http", None) or mrtr.http.run


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if kind == "native":
        import logging

        logging.basicConfig(level=logging.WARNING)
        _run_http()(make_server(), "127.0.0.1", port, workers=workers)
    elif kind == "tasks":
        import logging

        logging.basicConfig(level=logging.WARNING)
        # The store goes through the environment, which every checkout reads (--before included).
        os.environ["MRTR_TASKS"] = sys.argv[4]
        _run_http()(make_task_server(), "127.0.0.1", port, workers=workers)
    elif kind == "middleware":
        import logging

        logging.basicConfig(level=logging.WARNING)
        _run_http()(with_middleware(make_server(), int(sys.argv[4])), "127.0.0.1", port, workers=workers)
    elif kind == "asgi":
        import trio
        from hypercorn.config import Config
        from hypercorn.trio import serve

        from mrtr.http import asgi_app

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.accesslog = None
        config.errorlog = None
        trio.run(serve, asgi_app(make_server()), config)
    elif kind in ("floor-h11", "floor-httptools"):
        import trio

        handler = _floor_h11 if kind == "floor-h11" else _floor_httptools

        async def connection(stream) -> None:
            # A client that resets or sends garbage ends its own connection, never the server
            # (wrk resets every connection at the end of a run).
            try:
                await handler(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, ValueError):
                pass
            except Exception as exc:  # h11.ProtocolError, httptools.HttpParserError
                if type(exc).__module__.split(".")[0] not in ("h11", "httptools"):
                    raise
            finally:
                await trio.aclose_forcefully(stream)

        trio.run(trio.serve_tcp, connection, port)
    else:
        raise SystemExit(f"unknown server kind {kind!r}")


if __name__ == "__main__":
    main()
