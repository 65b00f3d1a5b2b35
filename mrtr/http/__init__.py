"""Streamable HTTP (MCP 2026-07-28) for an :class:`mrtr.server.Server`, two ways.

- :func:`serve` / :func:`run` (:mod:`mrtr.http.server`): the native server, trio for
  the sockets and h11 for HTTP/1.1. It is the fast path and owns everything a
  production listener needs: keep-alive, size limits, read and idle timeouts, a
  connection cap, graceful shutdown on SIGINT/SIGTERM, and ``workers=N`` processes
  sharing the port with ``SO_REUSEPORT``.
- :class:`ASGIApp` (:mod:`mrtr.http.asgi`): an ASGI 3 application for embedding the
  server in an existing ASGI host that runs under trio (hypercorn's trio worker,
  quart-trio). The host owns the sockets, limits and shutdown.

Both hand each request to one function, :func:`mrtr.http.exchange.exchange`, which
applies the transport rules (endpoint path, ``Origin``, method, media types, the
``Mcp-*`` header checks), dispatches to the server, answers JSON or an SSE stream, and
cancels the handler when the client goes away. So both front ends answer the same
request with the same status, headers and body. See ``docs/http.md``.
"""

from .asgi import ASGIApp
from .exchange import ExchangeConfig, HttpRequest, Responder, exchange
from .server import ServerConfig, run, serve

__all__ = ["ASGIApp", "ExchangeConfig", "HttpRequest", "Responder", "ServerConfig", "exchange", "run", "serve"]
