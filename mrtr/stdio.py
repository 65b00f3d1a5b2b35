"""stdio for an MCP server: the documented import path of :mod:`mrtr.transports.stdio`."""

from .transports.stdio import (
    DEFAULT_GRACE_PERIOD,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_NOTIFICATION_BUFFER,
    run_stdio,
    serve_stdio,
)

__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_NOTIFICATION_BUFFER",
    "run_stdio",
    "serve_stdio",
]
