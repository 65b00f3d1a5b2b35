"""The MCP server: the catalogue of tools, prompts and resources, and its two eras.

:class:`Server` knows no transport: a transport parses a message and hands it to
:meth:`Server.respond` (the :class:`~mrtr.core.jsonrpc.Dispatcher` protocol, lifecycle
included). :mod:`~mrtr.server.dispatch` holds the server class, the shell: configuration,
lifecycle, capabilities. :mod:`~mrtr.server.registry` holds the decorators, argument
structs and schemas, which fill the :mod:`~mrtr.server.catalog`: the entries and every
rule both eras apply to them (lookups, scopes, arguments, paging, the principal, the
handler's ``ctx``, failures, completion). :mod:`~mrtr.server.modern` serves the 2026-07-28
era and :mod:`~mrtr.server.legacy` the 2025 era (``initialize``, the 2025 utilities,
results and errors per version) over :mod:`~mrtr.server.sessions` (the sessions and the
registry that bounds them); both see the server as a :class:`~mrtr.server.shell.Shell`.
:mod:`~mrtr.server.results` shapes handler values into results; :mod:`~mrtr.server.lifespan`
holds ``@server.lifespan``; :mod:`~mrtr.server.subscriptions` holds ``subscriptions/listen``
and the fan-out of ``notify_*``.
"""

from .dispatch import SUPPORTED_VERSIONS, RequestInfo, Server
from .registry import Header

__all__ = ["SUPPORTED_VERSIONS", "Header", "RequestInfo", "Server"]
