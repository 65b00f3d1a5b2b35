"""Streamable HTTP for an MCP server: the documented import path of :mod:`mrtr.transports.http`.

``from mrtr.http import serve_http, run_http, asgi_app`` keeps working; the modules
themselves live in :mod:`mrtr.transports.http`.
"""

from ..transports.http import (
    ASGIApp,
    ExchangeConfig,
    HttpRequest,
    Responder,
    ServerConfig,
    asgi_app,
    exchange,
    run_http,
    serve_http,
)

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
