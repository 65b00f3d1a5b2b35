"""Errors as data.

Every error the runtime raises on purpose is a :class:`ProtocolError`: it carries the
JSON-RPC ``code``, a human ``message``, optional ``data`` and the HTTP status a
transport should answer with (``status_hint``, the way h11's ``ProtocolError`` carries
``error_status_hint``). The core raises them; the transports only render them.

Failures of handler code are kept apart in :class:`HandlerError`: a tool turns them
into an ``isError`` result, prompts and resources into ``-32603``. What of them a client
sees is the server's choice: by default only the message of a :class:`PublicError` the
author raised on purpose, and of the runtime's own refusals only their typed error and
contract (:meth:`ProtocolError.masked`), never file paths or source lines.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "ProtocolError",
    "AnswerRefused",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "HeaderMismatch",
    "MissingRequiredClientCapability",
    "UnsupportedProtocolVersion",
    "ReplayMismatch",
    "InvalidRequestState",
    "ExpiredRequestState",
    "STATE_EXPIRED",
    "STATE_UNREADABLE",
    "RATE_LIMITED",
    "LEGACY_RATE_LIMITED",
    "RateLimited",
    "HandlerError",
    "PublicError",
    "EphemeralKeyWarning",
    "status_for_code",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
RATE_LIMITED = -31429
"""A request refused for rate (:class:`RateLimited`) in the modern era: outside the range JSON-RPC reserves,
as MCP 2026-07-28 asks of codes it does not define (HTTP 429 says the same to whatever sits between)."""
LEGACY_RATE_LIMITED = -32000
"""The same refusal in a 2025-era session: the implementation-defined server error its peers answer it with."""

_STATUS_BY_CODE = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def status_for_code(code: int) -> int:
    """The HTTP status for a JSON-RPC error code on Streamable HTTP.

    The spec fixes 400 for -32602 (missing ``_meta``), -32020, -32021 and -32022 and
    404 for an unknown method; parse and shape errors get 400 as well. Everything
    else, -32603 included, travels with 200: the spec assigns it no status.
    """
    return _STATUS_BY_CODE.get(code, 200)


class ProtocolError(Exception):
    """A JSON-RPC error with its code, message, optional data and HTTP status hint.

    ``request_id`` is the id of the request the error answers, when the layer that
    raised it could read one (framing errors raised before dispatch set it, so the
    transport's error response keeps the id).
    """

    code: ClassVar[int] = INTERNAL_ERROR
    headers: tuple[tuple[str, str], ...] = ()
    """HTTP response headers a transport with headers sends beside the error (``Retry-After``...)."""

    def __init__(self, message: str, *, data: Any = None, code: int | None = None,
                 request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.request_id = request_id
        if code is not None:
            self.code = code  # type: ignore[misc]

    @property
    def status_hint(self) -> int:
        """The HTTP status a transport should send this error with."""
        return status_for_code(self.code)

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def masked(self) -> ProtocolError:
        """This error as a client may see it from a server that masks errors.

        Most errors say nothing but what the request did wrong and are their own masked
        form; a diagnostic that names the handler's files and source lines
        (:class:`ReplayMismatch`) gives a copy without them.
        """
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(ProtocolError):
    """The body is not valid JSON (-32700)."""

    code = PARSE_ERROR


class InvalidRequest(ProtocolError):
    """The body is JSON but not a valid JSON-RPC request (-32600)."""

    code = INVALID_REQUEST


class MethodNotFound(ProtocolError):
    """Unknown, removed or unadvertised method (-32601, HTTP 404)."""

    code = METHOD_NOT_FOUND


class InvalidParams(ProtocolError):
    """Invalid method parameters (-32602, HTTP 400)."""

    code = INVALID_PARAMS


class AnswerRefused(InvalidParams):
    """An answer the handler reached does not fit the request it answers (-32602, HTTP 400).

    Raised by the replay for an accepted form answer that its schema, or the Struct or
    model asked with, refuses. ``key`` is the answer's wire key, ``ordinal`` its 1-based
    ledger position, ``request`` what was asked: a carrier that stored the answer (a task)
    asks again instead of failing.
    """

    def __init__(self, message: str, *, key: str, ordinal: int, request: Any, data: Any = None) -> None:
        super().__init__(message, data=data)
        self.key = key
        self.ordinal = ordinal
        self.request = request


class InternalError(ProtocolError):
    """An unexpected failure (-32603)."""

    code = INTERNAL_ERROR


class HeaderMismatch(ProtocolError):
    """HTTP headers missing, malformed, or disagreeing with the body (-32020, HTTP 400)."""

    code = HEADER_MISMATCH


class MissingRequiredClientCapability(ProtocolError):
    """The request needs a client capability the client did not declare (-32021, HTTP 400).

    ``data.requiredCapabilities`` is a ``ClientCapabilities`` object naming what is missing.
    """

    code = MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        super().__init__(message, data={"requiredCapabilities": required})
        self.required = required


class UnsupportedProtocolVersion(ProtocolError):
    """The requested protocol version is not supported (-32022, HTTP 400)."""

    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: Any, supported: list[str]) -> None:
        super().__init__(
            f"Unsupported protocol version {requested!r}; supported: {', '.join(supported)}",
            data={"supported": list(supported), "requested": requested},
        )


class ReplayMismatch(InvalidParams):
    """A replayed handler asked something other than what its ledger recorded (-32602).

    The handler broke the idempotency contract: the Nth request or Step reached during
    a replay must be the same as in the execution that recorded it. ``message`` is the
    whole diagnostic (the handler's file and line, what changed and why); ``brief`` the
    part a client of a server that masks errors sees: the position, the names of what
    changed and the contract.
    """

    def __init__(self, message: str, *, data: Any = None, brief: str | None = None) -> None:
        super().__init__(message, data=data)
        self.brief = brief

    def masked(self) -> ProtocolError:
        """A copy whose message is :attr:`brief`: no paths, source lines or values the handler computed."""
        if self.brief is None or self.brief == self.message:
            return self
        return ReplayMismatch(self.brief, data=self.data, brief=self.brief)


STATE_UNREADABLE = "requestState-unreadable"
"""``data.reason`` of a token no key of the server's ring opens: tampered, or sealed under a key it lost."""

STATE_EXPIRED = "requestState-expired"
"""``data.reason`` of a token older than its time-to-live."""


class InvalidRequestState(InvalidParams):
    """A ``requestState`` token that cannot be trusted (-32602).

    ``data.reason`` says why in a word a client can act on (:data:`STATE_UNREADABLE`,
    :data:`STATE_EXPIRED`) where one applies; the message says it in words.
    """


class ExpiredRequestState(InvalidRequestState):
    """A ``requestState`` token older than its time-to-live (-32602, ``data.reason`` :data:`STATE_EXPIRED`)."""


class RateLimited(ProtocolError):
    """Too many requests: refused for rate, ``retry_after`` seconds before one would be admitted (HTTP 429).

    ``data.retryAfter`` carries the seconds in both eras; on HTTP the response is
    ``429 Too Many Requests`` with ``Retry-After`` (whole seconds, rounded up). Its code is
    :data:`RATE_LIMITED`; a 2025-era session gets :data:`LEGACY_RATE_LIMITED`
    (:func:`mrtr.server.legacy.legacy_error`), with status 200 as every error of that era.
    """

    code = RATE_LIMITED

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        wait = max(0.001, math.ceil(float(retry_after) * 1000) / 1000)  # milliseconds, never 0: "now" was refused
        super().__init__(message or f"Too many requests: rate limited; retry after {wait:g} s",
                         data={"retryAfter": wait})
        self.retry_after = wait
        self.headers = (("retry-after", str(max(1, math.ceil(wait)))),)

    @property
    def status_hint(self) -> int:
        """429: the client is asked to slow down, not told its request was wrong."""
        return 429


class HandlerError(Exception):
    """Handler code failed, or broke a rule of the handler model.

    ``__cause__`` holds the original exception when handler code raised one;
    ``location`` is ``"file:line"`` of the handler frame involved, when known.
    ``public`` is true when the handler raised a :class:`PublicError`: its message is
    meant for the caller and reaches the client even from a server that masks errors.
    """

    def __init__(self, message: str, *, location: str | None = None, public: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.public = public


class PublicError(Exception):
    """Raise it in a handler to tell the caller why the call failed, in words meant for them.

    ``raise PublicError("No expense 42 in your account")``: a tool answers with an
    ``isError`` result carrying exactly that message, a prompt or resource with a
    ``-32603`` error carrying it. Any other exception a handler raises is masked by
    default: the client sees a generic message naming the tool and a short reference
    that the server's log prints beside the full traceback. So put in the message only
    what the caller may read: never a path, a query, a URL with credentials.
    """

    def __init__(self, message: str) -> None:
        if not isinstance(message, str) or not message:
            raise TypeError(f"PublicError needs the message for the caller, a non-empty str, got {message!r}")
        super().__init__(message)
        self.message = message


class EphemeralKeyWarning(UserWarning):
    """No ``MRTR_SECRET`` was configured, so tokens are sealed with a throwaway key.

    Defined here rather than beside the codec so a transport can filter it without
    loading the codec (and its cryptography) just to name the warning.
    """
