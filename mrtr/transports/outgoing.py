"""What every transport writes for a request, one rule each: notifications, the response, the access record.

Streamable HTTP and stdio frame messages differently (SSE events or JSON, lines), but
what goes into the frames is decided here, once:

- **Notifications.** A request's notification sink (:class:`NotificationSink`) encodes
  each notification with the shared encoder as it is sent. One that JSON cannot hold (a
  ``ctx.log("info", object())``) is dropped and logged on the server, never raised into
  the handler: a log line or a progress report cannot turn a call that succeeded into
  an error. Once the response is out the sink is closed and later notifications are
  ignored. Past the transport's backlog they are dropped, with one warning per request.
- **The response.** :func:`encode_response` encodes the dispatcher's
  :class:`~mrtr.core.jsonrpc.Response`; one that JSON cannot hold (a tool returned an
  object in its content) becomes one ``-32603`` error, ``"Internal error: the result
  could not be encoded"``, and the failure is logged with its traceback.
- **The access record.** :func:`encode_response` notes on the request's
  :class:`~mrtr.transports.logs.AccessRecord` what was sent: the fallback error when the
  response could not be encoded, not the result that was lost; and the fields the
  request's middleware added to its line (``Response.notes``).
- **Headers.** :func:`encode_response` gives the response's HTTP headers (an error's
  ``Retry-After``) as bytes beside its status; the HTTP exchange sends them, stdio has none.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from ..core.errors import InternalError
from ..core.jsonrpc import Response, notification
from ..core.jsonrpc import encode as _encode_json
from .logs import AccessRecord

__all__ = ["Encoded", "NotificationSink", "UNENCODABLE", "encode_notification", "encode_response"]

log = logging.getLogger("mrtr")

UNENCODABLE = "Internal error: the result could not be encoded"
"""The ``-32603`` message sent in place of a response JSON cannot hold."""

# What JSON encoding raises for a value it cannot hold (msgspec.EncodeError is a ValueError).
_ENCODE_ERRORS = (TypeError, ValueError, OverflowError)


def encode_notification(method: str, params: dict[str, Any]) -> bytes | None:
    """The JSON bytes of a notification, or ``None`` (logged) when JSON cannot hold its params."""
    try:
        return _encode_json(notification(method, params))
    except _ENCODE_ERRORS as exc:
        log.warning("dropping a %s notification that cannot be encoded: %s", method, exc)
        return None


class Encoded(NamedTuple):
    """A response as it goes out: its JSON bytes, the status and the headers a transport with statuses sends."""

    body: bytes
    status: int
    headers: tuple[tuple[bytes, bytes], ...] = ()


def encode_response(response: Response, record: AccessRecord | None = None) -> Encoded:
    """The bytes of ``response``, or of the one ``-32603`` that replaces it when JSON cannot hold it.

    ``record``, when given, notes what was sent, with the fields the request's middleware
    added to its line (``response.notes``). The response's headers (an error's
    ``Retry-After``) go out as bytes, for the transports that have headers.
    """
    message = response.message
    try:
        body = _encode_json(message)
    except _ENCODE_ERRORS:
        log.exception("cannot encode the response to %r", message.get("id"))
        response = Response.refusing(message.get("id"), InternalError(UNENCODABLE), response.notes)
        message = response.message
        body = _encode_json(message)
    headers = response.headers
    if headers:
        encoded = Encoded(body, response.status, tuple((name.encode("latin-1"), value.encode("latin-1"))
                                                       for name, value in headers))
    else:
        encoded = Encoded(body, response.status)
    if record is not None:
        record.response(message)
        if response.notes:
            record.note(response.notes)
    return encoded


class NotificationSink:
    """A request's ``notify``: encodes each notification and hands its bytes to the transport.

    Subclasses say where the bytes go (:meth:`deliver`) and when the transport's backlog
    is full (:meth:`full`). The sink drops what cannot be encoded, what comes after
    :meth:`close` and, while the backlog is full, everything (logged once).
    """

    __slots__ = ("closed", "dropped")

    def __init__(self) -> None:
        self.closed = False
        self.dropped = 0

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        if self.closed:
            return  # the response is out (or the request was cancelled): notifications stop
        data = encode_notification(method, params)
        if data is None:
            return
        if self.full():
            self.dropped += 1
            if self.dropped == 1:
                log.warning("the client reads notifications too slowly; dropping %s notifications", method)
            return
        self.deliver(data)

    def close(self) -> None:
        """Stop: every later notification is ignored."""
        self.closed = True

    def full(self) -> bool:
        """Whether the transport holds as many unwritten notifications as it will."""
        raise NotImplementedError

    def deliver(self, data: bytes) -> None:
        """Queue one encoded notification to be written; must not block."""
        raise NotImplementedError
