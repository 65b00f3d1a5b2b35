"""The MCP server: the registry of tools, prompts and resources, and dispatch.

:class:`Server` knows no transport: a transport parses a message and hands it to
:meth:`Server.respond` (the :class:`~mrtr.core.jsonrpc.Dispatcher` protocol, lifecycle
included). :mod:`~mrtr.server.registry` holds the decorators, argument structs and
schemas; :mod:`~mrtr.server.results` shapes handler values into results;
:mod:`~mrtr.server.lifespan` holds ``@server.lifespan``; :mod:`~mrtr.server.subscriptions`
holds ``subscriptions/listen`` and the fan-out of ``notify_*``;
:mod:`~mrtr.server.dispatch` holds the server class with the envelope rules and
capabilities. The legacy (2025) era is :mod:`~mrtr.server.legacy` (``initialize``, the
2025 utilities, results and errors per version) over :mod:`~mrtr.server.sessions`
(the sessions and the registry that bounds them).
"""

from .dispatch import SUPPORTED_VERSIONS, RequestInfo, Server
from .registry import Header

__all__ = ["SUPPORTED_VERSIONS", "Header", "RequestInfo", "Server"]
