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
"""

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

__version__ = "0.1.0"

__all__ = [
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
    "Sample",
    "Server",
    "Step",
]
