"""The official Python SDK (``mcp`` 2.3.0) as a benchmark peer. Runs in its own virtualenv.

This file imports nothing from mrtr or from the rest of the suite: it is started with
the python of ``.cache/interop-venv`` (see :func:`benchmarks.common.sdk_python`).

- ``sdk_peer.py inproc``: a command loop on stdin/stdout (one JSON object a line) that
  times one round of a ``Resolve``-based tool in process, through the SDK's own
  single-request entry (``serve_one``: the request-state boundary unseals, the
  resolvers re-run, the state is sealed again), without HTTP.
- ``sdk_peer.py serve PORT``: ``MCPServer``'s Streamable HTTP app (stateless, JSON
  answers) under uvicorn, access lines off, with the ``ask`` (one question) and ``ask3``
  (three questions in sequence) tools of the HTTP flows; ``serve-defaults PORT``: the
  same under uvicorn as it starts by default (log level info, an access line per request).
- ``sdk_peer.py serve-middleware PORT N``: ``serve`` with N pass-through middleware in
  ``MCPServer.middleware`` (``async def mw(ctx, call_next): return await call_next(ctx)``),
  for the middleware part's comparison;
- ``sdk_peer.py stdio``: the same server over stdio (``MCPServer.run("stdio")``), what a host
  starts per session; the cold-start part times it from its start to its first answer.
- ``sdk_peer.py serve-stateful PORT``: the same app as the SDK serves 2025-era clients by
  default (stateful sessions, SSE answers), where ``ask_live`` asks its question with
  ``ctx.elicit`` while the call waits (access lines off).

The tools ask the same questions as the mrtr handlers of the suite: a form with one
``email`` string. The SDK seals its state with AES-256-GCM, as mrtr does.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity

PROTOCOL = "2026-07-28"
CAPS = {"elicitation": {"form": {}}}
META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": CAPS}


class Email(BaseModel):
    """The one-field form every question of the suite asks."""

    email: str


server = MCPServer("bench", request_state_security=RequestStateSecurity(keys=[b"s" * 32]))


# -- the HTTP flows -----------------------------------------------------------------------

@server.tool()
async def echo(text: str) -> str:
    """No question: the plain request of the request-rate table."""
    return text


async def ask_email() -> Email | Elicit[Email]:
    return Elicit("Your email?", Email)


@server.tool()
async def ask(plan: str, email: Annotated[Email, Resolve(ask_email)]) -> str:
    """One question, then the answer echoed with the argument."""
    return f"{email.email}:{plan}"


async def ask_first() -> Email | Elicit[Email]:
    return Elicit("Question 1?", Email)


async def ask_second(first: Annotated[Email, Resolve(ask_first)]) -> Email | Elicit[Email]:
    return Elicit("Question 2?", Email)


async def ask_third(second: Annotated[Email, Resolve(ask_second)]) -> Email | Elicit[Email]:
    return Elicit("Question 3?", Email)


@server.tool()
async def ask3(plan: str, first: Annotated[Email, Resolve(ask_first)], second: Annotated[Email, Resolve(ask_second)],
               third: Annotated[Email, Resolve(ask_third)]) -> str:
    """Three questions, one per round (each resolver depends on the one before)."""
    return f"{first.email},{second.email},{third.email}:{plan}"


@server.tool()
async def ask_live(plan: str, ctx: Context) -> str:
    """One question asked live, in a 2025 session: the 2025 flow of the sessions part."""
    answer = await ctx.elicit("Your email?", Email)
    if answer.action != "accept":
        return f"{answer.action}:{plan}"
    return f"{answer.data.email}:{plan}"


# -- the in-process rounds: k answered questions, then one more asked ---------------------

def _chain_tool(k: int) -> str:
    """Register ``chain_k``: k independent questions (one round), then a last one that needs them all.

    Its second round carries k answers: the boundary unseals, validates them, re-runs the
    k resolvers, runs the last resolver, which asks, and seals k recorded outcomes.
    """
    name = f"chain_{k}"
    source = [f"async def q{k}_{i}() -> Email | Elicit[Email]:\n    return Elicit('Question {i}?', Email)\n"
              for i in range(k)]
    deps = ", ".join(f"a{i}: Annotated[Email, Resolve(q{k}_{i})]" for i in range(k))
    source.append(f"async def last_{k}({deps}) -> Email | Elicit[Email]:\n    return Elicit('Last question?', Email)\n")
    source.append(f"async def {name}(last: Annotated[Email, Resolve(last_{k})]) -> str:\n    return last.email\n")
    scope: dict[str, Any] = {"Email": Email, "Elicit": Elicit, "Resolve": Resolve, "Annotated": Annotated}
    exec("\n".join(source), scope)  # noqa: S102 - generated resolvers need distinct qualnames
    server.tool()(scope[name])
    return name


def _serve_one_factory():
    import anyio
    from mcp.server._streamable_http_modern import _SingleExchangeDispatchContext
    from mcp.server.connection import Connection
    from mcp.server.runner import serve_one
    from mcp.shared.message import ServerMessageMetadata
    from mcp.shared.transport_context import TransportContext

    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's own in-memory transport does the same
    transport = TransportContext(kind="streamable-http", can_send_request=False)

    async def call(params: dict[str, Any]) -> dict[str, Any]:
        connection = Connection.from_envelope(PROTOCOL, None, CAPS)
        dctx = _SingleExchangeDispatchContext(transport=transport, request_id=1,
                                              message_metadata=ServerMessageMetadata(request_context=None))
        result = await serve_one(lowlevel, dctx, "tools/call", params, connection=connection, lifespan_state=None)
        return result if isinstance(result, dict) else result.model_dump(by_alias=True, exclude_none=True)

    return anyio, call


def inproc() -> None:
    anyio, call = _serve_one_factory()
    rounds: dict[int, dict[str, Any]] = {}

    async def prepare(k: int) -> dict[str, Any]:
        name = _chain_tool(k)
        first = await call({"name": name, "arguments": {}, "_meta": META})
        assert first["resultType"] == "input_required" and len(first["inputRequests"]) == k, first
        answers = {key: {"action": "accept", "content": {"email": f"user{i}@example.com"}}
                   for i, key in enumerate(first["inputRequests"])}
        params = {"name": name, "arguments": {}, "_meta": META, "requestState": first["requestState"],
                  "inputResponses": answers}
        second = await call(params)
        assert second["resultType"] == "input_required" and len(second["inputRequests"]) == 1, second
        rounds[k] = params
        return {"token_chars": len(second["requestState"])}

    async def batch(k: int, n: int) -> float:
        params = rounds[k]
        start = time.thread_time()
        for _ in range(n):
            await call(params)
        return (time.thread_time() - start) / n

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "prepare":
            reply: Any = anyio.run(prepare, command["k"])
        elif command["cmd"] == "run":
            reply = {"seconds": anyio.run(batch, command["k"], command["n"])}
        else:
            break
        print(json.dumps(reply), flush=True)


def serve(port: int, *, defaults: bool = False, stateful: bool = False) -> None:
    """Under uvicorn, access lines off; ``defaults``: uvicorn as it starts by default (info, access
    lines on); ``stateful``: the SDK's defaults for 2025 clients, with room for every session the
    benchmark opens."""
    import uvicorn

    if stateful:
        app = server.streamable_http_app(max_sessions=100_000)
    else:
        app = server.streamable_http_app(json_response=True, stateless_http=True)
    if defaults:
        uvicorn.run(app, host="127.0.0.1", port=port)
    else:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def with_middleware(stages: int) -> None:
    """Append ``stages`` pass-through middleware to the server's chain (inside the SDK's own)."""
    for _ in range(stages):
        async def passing(ctx: Any, call_next: Any) -> Any:
            return await call_next(ctx)

        server.middleware.append(passing)


if __name__ == "__main__":
    if sys.argv[1] == "inproc":
        inproc()
    elif sys.argv[1] == "serve-middleware":
        with_middleware(int(sys.argv[3]))
        serve(int(sys.argv[2]))
    elif sys.argv[1] == "stdio":
        server.run("stdio")
    elif sys.argv[1] == "serve-defaults":
        serve(int(sys.argv[2]), defaults=True)
    else:
        serve(int(sys.argv[2]), stateful=sys.argv[1] == "serve-stateful")
