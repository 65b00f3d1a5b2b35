"""mrtr: MCP servers whose handlers ask the user mid-execution, written as plain generators.

A handler yields what it needs (:class:`Elicit`, :class:`ElicitURL`, :class:`Sample`,
:class:`ListRoots`, a group of them, a memoized :class:`Step`, or a version gate,
:class:`Patched`); the runtime answers
from the ledger of recorded answers or pauses the conversation with an
``InputRequiredResult``. On each retry the handler runs again from the top and the
recorded answers are fed back by ordinal. Register handlers on a :class:`Server` and
serve it with :mod:`mrtr.http` or :mod:`mrtr.stdio`. See ``docs/handlers.md`` and
``docs/server.md``.

This namespace holds what handler and server authors use. The machinery has its own
modules: the replay core (:mod:`mrtr.core.replay`), the sealed token (:mod:`mrtr.core.codec`),
wire types (:mod:`mrtr.core.wire`, always used module-qualified, e.g. ``wire.ElicitResult``
for the message, while :class:`ElicitResult` here is what a handler receives),
JSON-RPC framing (:mod:`mrtr.core.jsonrpc`) and the test helpers (:mod:`mrtr.testing`).

:class:`Client` is the other side: it calls a server (a URL, a server object in
process, or a subprocess), answers its questions with :func:`accept`, :func:`decline`
and :func:`cancel`, and retries. It is imported on first use. See ``docs/client.md``.
:func:`proxy` is both at once: a server whose catalogue is another server's, of either
era (``docs/proxy.md``).
"""

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .core.answers import accept, cancel, decline
from .core.context import Context
from .core.effects import Elicit, ElicitResult, ElicitURL, ListRoots, Patched, Request, Sample, Step
from .core.errors import (HandlerError, InvalidParams, MissingRequiredClientCapability, ProtocolError, PublicError,
                          ReplayMismatch)
from .core.schema import Form

if TYPE_CHECKING:
    from .bridge import proxy
    from .client import Client, ClientError, RoundLimitExceeded
    from .server import Header, RequestInfo, Server
    from .server.apps import Csp


# Loaded on first use, not on ``import mrtr``: the client pulls in trio and, for URLs, httpx;
# the server pulls in the token codec and cryptography. So a program that only uses the
# client (``import mrtr.client``, which imports this package first) never loads a server.
_CLIENT_NAMES = frozenset({"Client", "ClientError", "RoundLimitExceeded"})
_SERVER_NAMES = frozenset({"Header", "RequestInfo", "Server"})
_APPS_NAMES = frozenset({"Csp"})  # MCP Apps, on the server side (docs/apps.md)
_BRIDGE_NAMES = frozenset({"proxy"})  # the proxy: a server and a client at once (docs/proxy.md)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    if name in _SERVER_NAMES:
        from . import server

        return getattr(server, name)
    if name in _APPS_NAMES:
        from .server import apps

        return getattr(apps, name)
    if name in _BRIDGE_NAMES:
        from . import bridge

        return getattr(bridge, name)
    raise AttributeError(f"module 'mrtr' has no attribute {name!r}")


__all__ = [
    "Client",
    "ClientError",
    "Context",
    "Csp",
    "Elicit",
    "ElicitResult",
    "ElicitURL",
    "Form",
    "HandlerError",
    "Header",
    "InvalidParams",
    "ListRoots",
    "MissingRequiredClientCapability",
    "Patched",
    "ProtocolError",
    "PublicError",
    "ReplayMismatch",
    "Request",
    "RequestInfo",
    "RoundLimitExceeded",
    "Sample",
    "Server",
    "Step",
    "accept",
    "cancel",
    "decline",
    "proxy",
]
