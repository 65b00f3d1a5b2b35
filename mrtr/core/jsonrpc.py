"""JSON-RPC 2.0 framing: reading and writing the messages a server and its clients exchange.

This module is sans-IO and sits in the core. It turns bytes into a request or
response dict and back, and it holds the two JSON encodings the package uses:

- :func:`encode`, the one encoder every transport writes messages with;
- :func:`canonical`, JSON with sorted keys, which fingerprints, argument digests and
  schema digests hash. One function, so a token minted by one module can never be
  checked against bytes another module produced differently.

It also declares :class:`Dispatcher`, the small interface transports depend on
instead of the server class: anything that can say which methods it serves, which
``Mcp-Param-*`` headers a tool mirrors, turn one request into one response, and be
run by a transport (its lifecycle: what it keeps running while served, its key ring
built before the first request, the :class:`Broadcast` hub its listen streams use).
A dispatcher that also serves the legacy era (2025-era sessions opened by
``initialize``) offers it as :attr:`Dispatcher.legacy`, a :class:`SessionDispatcher`.

The rule for ids: a request's ``id`` is a string or an integer. An error that cannot
be tied to a request (unreadable JSON, an id of the wrong type) is sent without an
``id`` member, because the MCP schema makes ``id`` optional on error responses and
does not allow ``null``. :func:`error_response` applies that rule, so no transport
has to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from .errors import InvalidRequest, ParseError, ProtocolError
from .peer import Peer

__all__ = [
    "JSONRPC_VERSION",
    "Broadcast",
    "Dispatcher",
    "Listener",
    "NodeLink",
    "Notify",
    "RequestId",
    "Response",
    "RunSync",
    "SessionDispatcher",
    "canonical",
    "decode_json",
    "encode",
    "is_request",
    "error_response",
    "notification",
    "parse_message",
    "parse_response",
    "request",
    "result_response",
]

JSONRPC_VERSION: Final = "2.0"
"""The value of every envelope's ``jsonrpc`` member; every module that writes or checks one reads it here."""

RequestId = str | int
"""A JSON-RPC request id as MCP allows it: a string or an integer (never null, never a bool)."""

Notify = Callable[[str, dict[str, Any]], None]
"""A sink for request-scoped notifications: ``notify(method, params)``."""

RunSync = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking callable away from the event loop and returns its result.

Transports pass one to :meth:`Dispatcher.handle`; a server configured to run sync
handlers in threads uses it, and the ``notify`` passed beside it must then accept
calls from that thread as well.
"""

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_canonical_encoder = msgspec.json.Encoder(order="sorted")


def encode(message: Any) -> bytes:
    """A message (or any JSON value) as compact JSON bytes, with the shared encoder.

    Raises :class:`TypeError` or :class:`msgspec.EncodeError` for values JSON cannot hold.
    """
    return _encoder.encode(message)


def canonical(value: Any) -> bytes:
    """The canonical JSON bytes of ``value``: compact, object keys sorted.

    What fingerprints and digests hash. A value JSON cannot hold (an arbitrary Python
    object passed as a Step argument, say) still needs a stable identity within a
    process, so it falls back to its ``repr``.
    """
    try:
        return _canonical_encoder.encode(value)
    except (TypeError, msgspec.EncodeError):
        return repr(value).encode()


def decode_json(data: bytes | str, *, problem: str = "Parse error: Invalid JSON") -> Any:
    """Any JSON value ``data`` holds, read by the one depth-safe rule of every parser of the package.

    Raises :class:`~mrtr.core.errors.ParseError` with ``problem`` for bytes that are not
    UTF-8 JSON, and for JSON nested deeper than the decoder's recursion allows: tens of
    thousands of brackets are input that is not accepted, never a ``RecursionError``
    surfacing wherever the document was read (a transport, the client, the OAuth client).
    """
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise ParseError(problem) from None


_ABSENT: Any = object()


def _valid_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def parse_message(data: bytes | str) -> dict[str, Any]:
    """Parse one JSON-RPC message sent to a server: a request, a notification or a response.

    Returns the message dict: a request has ``id`` and ``method``; a notification has
    ``method`` and no ``id``; a response (a client answering a request no server of this
    protocol sends) has ``id`` and ``result`` or ``error`` and no ``method``: see
    :func:`is_request`. Responses are never answered, so a transport accepts and drops
    them (Streamable HTTP: ``202``). Raises :class:`~mrtr.core.errors.ParseError` (-32700) for
    anything that is not JSON and :class:`~mrtr.core.errors.InvalidRequest` (-32600) for
    JSON that is not a single valid request; the latter carries the message's ``id`` as
    :attr:`~mrtr.core.errors.ProtocolError.request_id` when it could be read, so the error
    response can keep it. Batches and responses are not valid input for a server.
    """
    message = decode_json(data)
    if message.__class__ is not dict:  # the decoder makes plain dicts
        raise InvalidRequest("Invalid Request: expected a single JSON-RPC request object")
    # The usual message, a well-formed request or notification, passes in one test of each member
    # (the order of the full checks below only decides which problem a malformed one is told about).
    method = message.get("method")
    if method.__class__ is str and method and message.get("jsonrpc") == JSONRPC_VERSION:
        params = message.get("params")
        request_id = message.get("id", _ABSENT)
        if (params is None or params.__class__ is dict) and (
                request_id is _ABSENT or request_id.__class__ is str or request_id.__class__ is int):
            return message
    request_id = message.get("id")
    if "method" not in message and "id" in message and message.get("jsonrpc") == JSONRPC_VERSION \
            and ("result" in message) != ("error" in message) and (request_id is None or _valid_id(request_id)):
        # A response: JSON-RPC says it gets no answer, not even an error; its id is null when the peer
        # could not read the id of the request it answers (and answering that could loop between two peers).
        return message
    if "id" in message and not _valid_id(request_id):
        raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
    problem = None
    if message.get("jsonrpc") != JSONRPC_VERSION:
        problem = f'"jsonrpc" must be "{JSONRPC_VERSION}"'
    elif not isinstance(message.get("method"), str) or not message["method"]:
        problem = '"method" must be a non-empty string'
    elif message.get("params") is not None and not isinstance(message.get("params"), dict):
        problem = '"params" must be an object'
    if problem is not None:
        raise InvalidRequest(f"Invalid Request: {problem}", request_id=request_id)
    return message


def is_request(message: Mapping[str, Any]) -> bool:
    """Whether a message from :func:`parse_message` is a request (it has an ``id`` and a ``method``)."""
    return "id" in message and "method" in message


def parse_response(data: bytes | str, *, requests: bool = False) -> dict[str, Any]:
    """Parse one message a server sent: a response (``result`` or ``error``) or a notification.

    With ``requests`` (a legacy session, where servers send requests of their own) a
    request (``id`` and ``method``) is accepted too. Raises :class:`~mrtr.core.errors.ParseError` for bytes that are not JSON and
    :class:`~mrtr.core.errors.InvalidRequest` for JSON that is neither a response nor a
    notification (a response needs exactly one of ``result`` and ``error``, and an
    ``error`` needs an integer ``code`` and a string ``message``; only an error may have
    a null ``id``).
    """
    message = decode_json(data, problem="Parse error: the server sent invalid JSON")
    if not isinstance(message, dict) or message.get("jsonrpc") != JSONRPC_VERSION:
        raise InvalidRequest("Invalid response: expected a JSON-RPC 2.0 object")
    if "method" in message:
        if not isinstance(message["method"], str) or ("id" in message and not requests):
            raise InvalidRequest("Invalid response: servers send no requests on this protocol")
        if "id" in message and not _valid_id(message["id"]):
            raise InvalidRequest('Invalid request: "id" must be a string or an integer')
        if message.get("params") is not None and not isinstance(message["params"], dict):
            raise InvalidRequest('Invalid response: notification "params" must be an object')
        return message
    if ("result" in message) == ("error" in message):
        raise InvalidRequest('Invalid response: exactly one of "result" and "error" is required')
    # An error answering a request the server could not read carries a null id (JSON-RPC 2.0, 5).
    if "id" in message and not _valid_id(message["id"]) and not (message["id"] is None and "error" in message):
        raise InvalidRequest('Invalid response: "id" must be a string or an integer')
    if "result" in message:
        if "id" not in message:
            raise InvalidRequest('Invalid response: a result needs an "id"')
        if not isinstance(message["result"], dict):
            raise InvalidRequest('Invalid response: "result" must be an object')
        return message
    error = message["error"]
    code = error.get("code") if isinstance(error, dict) else None
    if not (isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str)):
        raise InvalidRequest('Invalid response: "error" needs an integer "code" and a string "message"')
    return message


def request(request_id: RequestId, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC request message."""
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification message (no ``id``, no response)."""
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_response(request_id: RequestId, result: Any) -> dict[str, Any]:
    """A JSON-RPC result response."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: ProtocolError) -> dict[str, Any]:
    """A JSON-RPC error response; without a readable request id the ``id`` member is left out."""
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION}
    if request_id is not None:
        message["id"] = request_id
    message["error"] = error.to_error_object()
    return message


class Response(NamedTuple):
    """A response message and the HTTP status a transport that has statuses sends it with.

    ``status`` is 200 for a result and the error's own
    :attr:`~mrtr.core.errors.ProtocolError.status_hint` for an error, so a transport
    renders the status the error was raised with instead of deriving one from its code;
    ``headers`` are the error's own HTTP headers (``Retry-After`` of a
    :class:`~mrtr.core.errors.RateLimited`), which a transport with headers sends beside
    it. ``notes`` are fields the request's middleware added to its access line
    (:meth:`mrtr.server.pipeline.Incoming.note`), or ``None``.
    """

    message: dict[str, Any]
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    notes: Mapping[str, Any] | None = None

    @classmethod
    def refusing(cls, request_id: RequestId | None, error: ProtocolError,
                 notes: Mapping[str, Any] | None = None) -> Response:
        """The :func:`error_response` for ``error``, with its status hint and headers (and ``notes``)."""
        return cls(error_response(request_id, error), error.status_hint, error.headers, notes or None)


class Listener(Protocol):
    """One ``subscriptions/listen`` stream's queue: ``(method, params)`` pairs until it ends."""

    def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The notifications published after the listener was registered, in order."""
        ...

    def close(self) -> None:
        """Unregister: nothing more is queued for this stream."""
        ...


class Broadcast(Protocol):
    """Server-wide notifications, fanned out to listen streams: what a transport gives its dispatcher.

    ``mrtr.transports.shared.Hub`` implements it on trio; the server imports no event loop.
    """

    def publish(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification for every listener; callable from any thread."""
        ...

    def listen(self, until: float | None = None) -> Listener:
        """A new listener, registered at once; its iteration ends at ``until`` (epoch seconds) when given."""
        ...

    def interrupt(self) -> None:
        """End every listener registered now (notifications were lost); new ones may register."""
        ...


class Dispatcher(Protocol):
    """What a transport needs of a server. :class:`mrtr.Server` implements it.

    A transport parses a message with :func:`parse_message`, answers notifications
    itself, checks transport-level rules with :meth:`serves` and
    :meth:`header_parameters`, and hands each request to :meth:`respond`; an
    in-process caller that needs no status uses :meth:`handle`.

    Its lifecycle, as a transport runs it: :meth:`settle_key` before anything else
    (before forking workers), then, around serving, :meth:`listen_through` with the
    transport's hub and ``async with`` :meth:`running`.
    """

    def serves(self, method: str) -> bool:
        """Whether requests for ``method`` are dispatched (rather than answered -32601)."""
        ...

    def header_parameters(self, tool_name: str) -> Mapping[str, str]:
        """For a tool, its ``Mcp-Param-*`` header names (lowercase) mapped to parameter names."""
        ...

    @property
    def auth(self) -> Any:
        """The resource-server configuration (``mrtr.auth.ResourceServer``) of a protected server, else ``None``."""
        ...

    async def required_scopes(self, message: Mapping[str, Any], *, headers: Mapping[str, str] | None = None,
                              auth: Any = None) -> Sequence[str]:
        """The OAuth scopes serving ``message`` needs beyond the server-wide ones.

        Asked by a transport of a protected server before dispatch, with what it would
        pass to :meth:`handle`, so a lacking scope is answered 403 before any byte of
        the response. Async because some scopes live with stored state (a task's are
        those of the tool that created it).
        """
        ...

    async def handle(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
        client: str | None = None,
    ) -> dict[str, Any]:
        """Serve one parsed request and return its response message (never raises a ProtocolError).

        ``auth`` is the caller's verified token (``mrtr.auth.AccessToken``) when the
        transport authenticated the request; ``client`` the transport's name for the peer
        (its remote address on HTTP, ``"stdio:<pid>"`` on stdio, the serving process's id),
        when it has one.
        """
        ...

    async def respond(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
        auth: Any = None,
        client: str | None = None,
    ) -> Response:
        """:meth:`handle`, with the status hint (and headers) of the answer: what transports call."""
        ...

    def running(self) -> AbstractAsyncContextManager[Any]:
        """What the dispatcher keeps running while a transport serves it (its lifespan, its task
        carrier), entered around serving; nested and concurrent entries share the first one."""
        ...

    def settle_key(self, *, alone: bool = False) -> None:
        """Build the key ring now, before the first request (and before a transport forks workers).

        ``alone``: this process is the only one its client reaches (stdio).
        """
        ...

    def listen_through(self, hub: Broadcast) -> Callable[[], None]:
        """Let listen streams use ``hub`` while the transport serves; returns what detaches it."""
        ...

    @property
    def legacy(self) -> SessionDispatcher | None:
        """The legacy era (sessions opened by ``initialize``), or ``None`` when only the modern era is served.

        Without it a transport answers every message as today: ``initialize`` reaches
        :meth:`respond`, which refuses it naming the versions served.
        """
        ...


class NodeLink(Protocol):
    """How the nodes serving the same 2025-era sessions reach each other (over their shared store).

    ``node_id`` names this node (decimal digits, fresh at each start). Messages are an
    envelope ``kind`` and a JSON body; a node hands each kind to the handler it
    registered (:meth:`handle`) and drops the others.
    """

    node_id: str

    def handle(self, kind: str, handler: Callable[[Any], None]) -> None:
        """Give the bodies of messages of ``kind`` to ``handler``, on the event loop."""
        ...

    def send_all(self, kind: str, body: Any) -> None:
        """Send a message to every node, this one included; never waits."""
        ...

    async def send_to(self, node_id: str, kind: str, body: Any) -> bool:
        """Send a message to one node; whether it can have heard it (``False``: that node is gone)."""
        ...


class SessionDispatcher(Protocol):
    """The legacy era of a dispatcher (MCP 2025-11-25, 2025-06-18, 2025-03-26), as a transport drives it.

    A legacy client opens a session with ``initialize`` and names it in every later
    message. The transport tells the era of each message (:func:`mrtr.core.eras.era_of`;
    stdio pins it by the first request) and keeps what is its own per session: where
    notifications unrelated to any request go (the ``outlet`` given at
    :meth:`initialize`, callable from any thread), the server-to-client requests
    awaiting answers, the requests in flight (a ``notifications/cancelled`` cancels one:
    the transport cancels its task, and sends no response). Per request it gives a
    :class:`~mrtr.core.peer.Peer` that reaches the client, and a ``notify`` for that
    request's notifications. Everything else (the session, its bounds, what it
    negotiated, how results and errors look in its version) is the dispatcher's.

    Every method takes the request's ``headers`` and verified ``auth`` as
    :meth:`Dispatcher.respond` does: a session is found only by the principal that
    opened it (a principal source asked for a lookup outside a request, by
    :meth:`version_of` or :meth:`close`, sees the method ``""``). JSON-RPC errors of this era go with status 200 (a transport with
    statuses keeps 4xx for its own faults); :class:`Response` says so.
    """

    async def initialize(self, message: Mapping[str, Any], *, outlet: Notify, headers: Mapping[str, str] | None = None,
                         auth: Any = None, client: str | None = None, lasting: bool = False,
                         on_end: Callable[[str], None] | None = None) -> tuple[Response, str | None]:
        """Serve ``initialize``: its response, and the id of the session it opened (``None`` when refused).

        ``client`` names the client for the per-client bound when no principal does (a
        remote address); ``lasting`` marks a session the transport holds for its whole
        connection (it never expires); ``on_end(reason)`` is called once when the
        session ends for any reason (closed, expired, ended to make room).
        """
        ...

    async def version_of(self, session_id: str, *, headers: Mapping[str, str] | None = None,
                         auth: Any = None) -> str | None:
        """The negotiated version of a live session this caller opened; ``None`` for any other id."""
        ...

    async def respond(self, session_id: str | None, message: Mapping[str, Any], *, peer: Peer,
                      headers: Mapping[str, str] | None = None, notify: Notify | None = None,
                      run_sync: RunSync | None = None, auth: Any = None,
                      journal: Any = None) -> Response:
        """Serve one request of session ``session_id`` (``None`` before ``initialize``: only ``ping`` is served).

        ``journal`` (a :class:`mrtr.core.calls.CallJournal`; typed loosely because that module
        reads the ledger, which sits above the framing) records a call in the shared store as it goes (:attr:`calls`), or
        resumes one adopted from a process that stopped (its ``resumed`` set).
        """
        ...

    async def notification(self, session_id: str | None, message: Mapping[str, Any], *,
                           headers: Mapping[str, str] | None = None, auth: Any = None) -> None:
        """Take one client notification of the session (``notifications/initialized``, ...); never raises."""
        ...

    async def close(self, session_id: str, *, headers: Mapping[str, str] | None = None, auth: Any = None) -> bool:
        """End a session this caller opened; whether it was live."""
        ...

    @property
    def owner(self) -> str:
        """Who the session ids minted here name as their owner: this process, among several workers."""
        ...

    def serve_as(self, owner: str) -> None:
        """Mint session ids naming ``owner`` from now on (a worker process calls it once, after the fork)."""
        ...

    def owner_of(self, session_id: str) -> str | None:
        """The owner a session id names, or ``None`` for an id this dispatcher never minted the like of."""
        ...

    @property
    def nodes(self) -> NodeLink | None:
        """The other nodes serving the same sessions (sessions in a shared store), or ``None``: this process alone.

        With it, any node serves any request of a session, and what a transport holds
        of one (calls in flight, streams, questions waiting for answers) stays where it
        is: the transport reaches the node holding it through this link.
        """
        ...

    @property
    def calls(self) -> Any:
        """The calls recorded in a shared store (so another process can adopt them), or ``None``: calls live and
        die with their process. A :class:`mrtr.core.calls.RecordedCalls`, typed loosely as ``journal`` is."""
        ...

    def mark(self, text: str) -> str:
        """A mark of ``text`` only a holder of the server's key makes (Base64URL, no padding).

        For what a transport hands a client in the clear and must later know it made (the
        SSE event ids of a session's calls): every node with the same ``MRTR_SECRET``
        makes the same mark, a client cannot make one.
        """
        ...

    def marked(self, text: str, mark: str) -> bool:
        """Whether ``mark`` is :meth:`mark` of ``text``."""
        ...

    def attach(self, session_id: str, *, outlet: Notify, on_end: Callable[[str], None],
               on_ready: Callable[[], None]) -> None:
        """Hold a session another node opened (found by :meth:`version_of`) as if opened here.

        ``outlet`` and ``on_end`` as for :meth:`initialize`; ``on_ready()`` is called once
        ``notifications/initialized`` has arrived, on whichever node.
        """
        ...
