"""mrtr: MCP handlers that ask the user mid-execution, written as plain generators.

A handler yields what it needs (:class:`Elicit`, :class:`Sample`, :class:`ListRoots`,
a group of them, or a memoized :class:`Step`); the runtime answers from the ledger of
recorded answers or pauses the conversation with an ``InputRequiredResult``. On each
retry the handler runs again from the top and the recorded answers are fed back by
ordinal. See ``docs/handlers.md``.
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
from .replay import Completed, InputRequired, replay, replay_async
from .schema import Form

__version__ = "0.1.0"

__all__ = [
    "Completed",
    "Context",
    "Elicit",
    "ElicitResult",
    "ElicitURL",
    "Form",
    "HandlerError",
    "InputRequired",
    "InvalidParams",
    "ListRoots",
    "MissingRequiredClientCapability",
    "ProtocolError",
    "ReplayMismatch",
    "Request",
    "Sample",
    "Step",
    "replay",
    "replay_async",
]
