"""Streamable HTTP (MCP 2026-07-28) for an MCP server, two ways.

- :func:`serve_http` (inside trio; :func:`mrtr.transports.http.native.serve`) and :func:`run_http`
  (blocking, with workers; :func:`mrtr.transports.http.workers.run`), named like
  :func:`mrtr.stdio.serve_stdio` and :func:`mrtr.stdio.run_stdio`: the native server, trio for the sockets and httptools for HTTP/1.1. It is the fast path
  and owns everything a production listener needs: keep-alive, size limits, read and
  idle timeouts, a connection cap, graceful shutdown on SIGINT/SIGTERM, and
  ``workers=N`` processes sharing the port with ``SO_REUSEPORT``.
- :func:`asgi_app` / :class:`ASGIApp` (:mod:`mrtr.transports.http.asgi`): an ASGI 3 application
  for embedding the server in an existing ASGI host that runs under trio (hypercorn's
  trio worker, quart-trio). The host owns the sockets, limits and shutdown.

Both hand each request to one function, :func:`mrtr.transports.http.exchange.exchange`, which
applies the transport rules (endpoint path, ``Origin``, method, media types, the
``Mcp-*`` header checks), dispatches to the server, answers JSON or an SSE stream, and
cancels the handler when the client goes away. So both front ends answer the same
request with the same status, headers and body. Both take one
:class:`ExchangeConfig`; the native server's :class:`ServerConfig` embeds it. See
``docs/http.md``.
"""

from .asgi import ASGIApp, asgi_app
from .config import ExchangeConfig, ServerConfig
from .exchange import exchange
from .messages import HttpRequest, Responder
from .native import serve as serve_http
from .workers import run as run_http

__all__ = [
    "ASGIApp",
    "ExchangeConfig",
    "HttpRequest",
    "Responder",
    "ServerConfig",
    "asgi_app",
    "exchange",
    "run_http",
    "serve_http",
]
