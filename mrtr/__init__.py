"""mrtr: MCP servers whose handlers ask the user mid-execution, written as plain generators.

A handler yields what it needs (:class:`Elicit`, :class:`ElicitURL`, :class:`Sample`,
:class:`ListRoots`, a group of them, or a memoized :class:`Step`); the runtime answers
from the ledger of recorded answers or pauses the conversation with an
``InputRequiredResult``. On each retry the handler runs again from the top and the
recorded answers are fed back by ordinal. Register handlers on a :class:`Server` and
serve it with :mod:`mrtr.http` or :mod:`mrtr.stdio`. See ``docs/handlers.md`` and
``docs/server.md``.

This namespace holds what handler and server authors use. The machinery has its own
modules: the replay core (:mod:`mrtr.replay`), the sealed token (:mod:`mrtr.state`),
wire types (:mod:`mrtr.wire`, always used module-qualified, e.g. ``wire.ElicitResult``
for the message, while :class:`ElicitResult` here is what a handler receives),
JSON-RPC framing (:mod:`mrtr.jsonrpc`) and the test helpers (:mod:`mrtr.testing`).

:class:`Client` is the other side: it calls a server (a URL, a server object in
process, or a subprocess), answers its questions with :func:`accept`, :func:`decline`
and :func:`cancel`, and retries. It is imported on first use. See ``docs/client.md``.
"""

from typing import TYPE_CHECKING, Any

from .answers import accept, cancel, decline
from .context import Context
from .effects import Elicit, ElicitResult, ElicitURL, ListRoots, Request, Sample, Step
from .errors import (
    HandlerError,
    InvalidParams,
    MissingRequiredClientCapability,
    ProtocolError,
    ReplayMismatch,
)
from .registry import Header
from .schema import Form
from .server import RequestInfo, Server

if TYPE_CHECKING:
    from .client import Client, ClientError, RoundLimitExceeded

__version__ = "0.1.0"

# The client pulls in trio and, for URLs, httpx: load it on first use, not on ``import mrtr``.
_CLIENT_NAMES = frozenset({"Client", "ClientError", "RoundLimitExceeded"})


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'mrtr' has no attribute {name!r}")


__all__ = [
    "Client",
    "ClientError",
    "Context",
    "Elicit",
    "ElicitResult",
    "ElicitURL",
    "Form",
    "HandlerError",
    "Header",
    "InvalidParams",
    "ListRoots",
    "MissingRequiredClientCapability",
    "ProtocolError",
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
]
