"""One HTTP exchange on the MCP endpoint, shared by the native server and the ASGI adapter.

A front end turns the bytes it reads into an :class:`HttpRequest` (method, path,
headers, the whole body) and hands it to :func:`exchange` together with a
:class:`Responder`, the four-method sink that writes the answer back. Everything the
Streamable HTTP transport decides (status codes, header checks, JSON or SSE,
cancellation) happens here, once, so both front ends answer byte for byte alike.

The rules, in order (see ``docs/http.md``):

1. the path must be the endpoint, else ``404``;
2. a present ``Origin`` must be allowed (localhost or the allow-list), else ``403``;
   from here on every response to an allowed ``Origin`` carries
   ``Access-Control-Allow-Origin: <that origin>`` and ``Vary: Origin`` (CORS);
3. an ``OPTIONS`` with an (allowed) ``Origin`` and ``Access-Control-Request-Method: POST``
   is a CORS preflight, answered ``204`` (see :func:`_preflight`); any other method but
   ``POST`` gets ``405`` with ``Allow: POST``;
4. ``Content-Type: application/json`` else ``415``; ``Accept`` listing both
   ``application/json`` and ``text/event-stream`` else ``406``;
5. the body must parse as one JSON-RPC message: ``-32700``/``-32600`` with ``400``;
6. a notification is accepted with ``202`` and no body;
7. ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` must be
   present and agree with the body, else ``400`` with ``-32020``;
8. the request is dispatched; the answer is ``application/json`` unless the handler
   sends a notification first, in which case it becomes a ``text/event-stream``
   that carries the notifications and ends with the response.

A client that goes away cancels the dispatch (rule 9): pass ``disconnected``, an
async callable that returns when the client is gone, and :func:`exchange` runs it
beside the request and cancels the handler when it returns.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol
from urllib.parse import urlsplit

import trio

from ..errors import (
    HeaderMismatch,
    InvalidRequest,
    ParseError,
    ProtocolError,
    status_for_code,
)
from ..jsonrpc import Dispatcher, error_response, parse_message
from ..jsonrpc import encode as _encode_json
from ..transport import run_in_thread, thread_safe
from ..wire import META_PROTOCOL_VERSION

__all__ = [
    "ClientGone",
    "ExchangeConfig",
    "HttpRequest",
    "Responder",
    "exchange",
]

log = logging.getLogger("mrtr.http")

Header = tuple[bytes, bytes]

_JSON = b"application/json"
_SSE = b"text/event-stream"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Methods whose target is mirrored in Mcp-Name, and the params member it mirrors.
_NAME_MEMBER = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}
_BASE64_PREFIX = "=?base64?"
_BASE64_SUFFIX = "?="
_VISIBLE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$")
_NUMBER = re.compile(r"^[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,4})?$")
# CORS: the request headers a browser client may send (lowercase), besides Mcp-Param-*.
_CORS_REQUEST_HEADERS = frozenset({
    "content-type", "accept", "authorization", "mcp-protocol-version", "mcp-method", "mcp-name",
})
_CORS_PARAM_PREFIX = "mcp-param-"
_CORS_MAX_AGE = b"600"  # seconds a browser may cache a preflight (Chromium caps it at 7200)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")  # an RFC 9110 field name, lowercased


class ClientGone(Exception):
    """Raised by a :class:`Responder` when the client can no longer be written to."""


class Responder(Protocol):
    """Where an exchange writes its answer. Front ends implement it; it stays this thin.

    Either :meth:`respond` once (a complete response with a known body), or
    :meth:`start` once, :meth:`send` any number of times and :meth:`end` once (a
    streamed body). Every method raises :class:`ClientGone` when the peer is gone.
    """

    async def respond(self, status: int, headers: list[Header], body: bytes) -> None: ...

    async def start(self, status: int, headers: list[Header]) -> None: ...

    async def send(self, chunk: bytes) -> None: ...

    async def end(self) -> None: ...


@dataclass
class HttpRequest:
    """An HTTP request as the exchange needs it: the body is already read in full.

    ``path`` holds no query string; ``headers`` are ``(name, value)`` byte pairs as h11
    and ASGI give them (names are compared case-insensitively).
    """

    method: str
    path: str
    headers: list[Header]
    body: bytes = b""


@dataclass(frozen=True)
class ExchangeConfig:
    """The options both front ends share.

    ``path``: the MCP endpoint. ``allowed_origins``: origins accepted besides localhost
    ones; each is a full origin (``"https://app.example.com"``, port optional), a bare
    host (``"app.example.com"``: any scheme and port), or ``"*"`` to accept every origin.
    An accepted origin also gets CORS headers naming it (never the literal ``*``).
    ``sse_keepalive``: seconds between ``:`` comment lines on a quiet SSE stream
    (``None`` disables them). ``notification_buffer``: notifications queued per request
    before further ones are dropped (handler code never blocks on a slow client).
    """

    path: str = "/mcp"
    allowed_origins: tuple[str, ...] = ()
    sse_keepalive: float | None = 15.0
    notification_buffer: int = 10_000
    _any_origin: bool = field(init=False, repr=False, compare=False, default=False)
    _origins: frozenset[tuple[str, str, int]] = field(init=False, repr=False, compare=False, default=frozenset())
    _hosts: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', got {self.path!r}")
        if isinstance(self.allowed_origins, str):
            object.__setattr__(self, "allowed_origins", (self.allowed_origins,))
        origins = tuple(self.allowed_origins or ())
        object.__setattr__(self, "allowed_origins", origins)
        exact: set[tuple[str, str, int]] = set()
        hosts: set[str] = set()
        any_origin = False
        for entry in origins:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"allowed_origins entries must be non-empty strings, got {entry!r}")
            entry = entry.strip()
            if entry == "*":
                any_origin = True
            elif "://" in entry:
                key = _origin_key(entry)
                if key is None:
                    raise ValueError(f"allowed_origins: {entry!r} is not an http(s) origin")
                exact.add(key)
            else:
                hosts.add(entry.lower().strip("[]"))
        object.__setattr__(self, "_any_origin", any_origin)
        object.__setattr__(self, "_origins", frozenset(exact))
        object.__setattr__(self, "_hosts", frozenset(hosts))
        if self.sse_keepalive is not None and not self.sse_keepalive > 0:
            raise ValueError(f"sse_keepalive must be positive or None, got {self.sse_keepalive!r}")
        if not isinstance(self.notification_buffer, int) or self.notification_buffer < 1:
            raise ValueError(f"notification_buffer must be a positive integer, got {self.notification_buffer!r}")

    def origin_allowed(self, origin: str) -> bool:
        """Whether a request carrying ``Origin: origin`` may proceed."""
        if self._any_origin:
            return True
        key = _origin_key(origin)
        if key is None:
            return False
        scheme, host, port = key
        return host in _LOCAL_HOSTS or host in self._hosts or key in self._origins


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) origin, or ``None`` when it is not one."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


# -- headers -------------------------------------------------------------------------------


class _Headers:
    """The request headers by lowercase name; repeated fields are kept apart."""

    __slots__ = ("_fields",)

    def __init__(self, raw: Iterable[Header]) -> None:
        fields: dict[str, list[str]] = {}
        for name, value in raw:
            key = (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
            text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            fields.setdefault(key, []).append(text.strip(" \t"))
        self._fields = fields

    def get(self, name: str) -> str | None:
        """All values of a field joined with ``", "`` (RFC 9110 list semantics), or ``None``."""
        values = self._fields.get(name)
        return None if values is None else ", ".join(values)

    def mcp(self, name: str, display: str) -> str | None:
        """One MCP header's value; a repeated MCP header is malformed (-32020)."""
        values = self._fields.get(name)
        if values is None:
            return None
        if len(values) > 1:
            raise HeaderMismatch(f"Header mismatch: {display} header appears more than once")
        return values[0]

    def as_mapping(self) -> dict[str, str]:
        return {name: ", ".join(values) for name, values in self._fields.items()}


def _media_types(value: str) -> list[tuple[str, float]]:
    """The media ranges of an ``Accept``-style list, lowercased, each with its q value."""
    ranges = []
    for item in value.split(","):
        kind, *parameters = item.split(";")
        kind = kind.strip().lower()
        if not kind:
            continue
        quality = 1.0
        for parameter in parameters:
            key, _, raw = parameter.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(raw.strip())
                except ValueError:
                    quality = 0.0
        ranges.append((kind, quality))
    return ranges


def _accepts(ranges: list[tuple[str, float]], media: str) -> bool:
    major = media.split("/", 1)[0]
    return any(q > 0 and kind in (media, f"{major}/*", "*/*") for kind, q in ranges)


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _quote(text: str) -> str:
    if len(text) > 120:
        text = text[:117] + "..."
    return "'" + text + "'"


def _decode_value(value: str, display: str) -> str:
    """A header value as the body would hold it: the ``=?base64?...?=`` form decoded.

    Raises ``HeaderMismatch`` for characters outside visible ASCII (such values must
    travel Base64-encoded) and for a sentinel whose payload is not Base64 of UTF-8.
    """
    if not _VISIBLE.match(value):
        raise HeaderMismatch(
            f"Header mismatch: {display} header value has invalid characters; "
            "values that are not visible ASCII must be sent as =?base64?...?="
        )
    sentinel = value.startswith(_BASE64_PREFIX) and value.endswith(_BASE64_SUFFIX)
    if sentinel and len(value) >= len(_BASE64_PREFIX) + len(_BASE64_SUFFIX):
        payload = value[len(_BASE64_PREFIX):-len(_BASE64_SUFFIX)]
        try:
            # strict: the alphabet only, and the padding the encoding calls for (SEP-2243's test table)
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise HeaderMismatch(
                f"Header mismatch: {display} header value is not valid =?base64?...?= encoding") from None
    return value


def _matches(header: str, body: Any) -> bool:
    """Whether a decoded header value mirrors a body value (strings exactly, numbers numerically)."""
    if isinstance(body, bool):
        return header == ("true" if body else "false")
    if isinstance(body, (int, float)):
        if not _NUMBER.match(header):
            return False
        try:
            return Decimal(header) == Decimal(body)
        except (InvalidOperation, ValueError, OverflowError):
            return False
    return header == body


def _render(body: Any) -> str:
    if isinstance(body, bool):
        return "true" if body else "false"
    return str(body)


def _param_display(header: str) -> str:
    return "Mcp-Param-" + "-".join(part[:1].upper() + part[1:] for part in header.split("-"))


def check_headers(server: Dispatcher, message: Mapping[str, Any], headers: _Headers) -> None:
    """Raise ``HeaderMismatch`` unless the MCP request headers are present and mirror the body.

    Methods the server does not implement skip the checks: they are answered 404 with
    -32601 whatever they carry, like the core answers them whatever their params.
    """
    method = message["method"]
    if not server.serves(method):
        return
    params = message.get("params") or {}

    version = headers.mcp("mcp-protocol-version", "MCP-Protocol-Version")
    if version is None:
        raise HeaderMismatch("Header mismatch: missing required MCP-Protocol-Version header")
    meta = params.get("_meta")
    body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if isinstance(body_version, str) and version != body_version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header value {_quote(version)} "
            f"does not match body value {_quote(body_version)}"
        )

    method_header = headers.mcp("mcp-method", "Mcp-Method")
    if method_header is None:
        raise HeaderMismatch("Header mismatch: missing required Mcp-Method header")
    if method_header != method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header value {_quote(method_header)} "
            f"does not match body value {_quote(method)}"
        )

    member = _NAME_MEMBER.get(method)
    if member is None:
        return
    target = params.get(member)
    name_header = headers.mcp("mcp-name", "Mcp-Name")
    if isinstance(target, str):
        if name_header is None:
            raise HeaderMismatch(f"Header mismatch: missing required Mcp-Name header for {method}")
        decoded = _decode_value(name_header, "Mcp-Name")
        if decoded != target:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name header value {_quote(decoded)} does not match body value {_quote(target)}"
            )
    if method != "tools/call" or not isinstance(target, str):
        return
    mirrored = server.header_parameters(target)
    if not mirrored:
        return
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return  # the server answers -32602 for arguments that are not an object
    arguments = arguments or {}
    for header, parameter in mirrored.items():
        display = _param_display(header)
        raw = headers.mcp("mcp-param-" + header, display)
        value = arguments.get(parameter)
        if value is None:
            if raw is not None:
                raise HeaderMismatch(
                    f"Header mismatch: {display} header is present but argument {parameter!r} is absent from the body"
                )
            continue
        if not isinstance(value, (str, int, float, bool)):
            continue  # not a mirrorable value: argument validation answers -32602
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: missing required {display} header for argument {parameter!r}")
        decoded = _decode_value(raw, display)
        if not _matches(decoded, value):
            raise HeaderMismatch(
                f"Header mismatch: {display} header value {_quote(decoded)} "
                f"does not match body value {_quote(_render(value))}"
            )


# -- responses ------------------------------------------------------------------------------


def _error_body(error: ProtocolError, request_id: Any = None) -> bytes:
    return _encode_json(error_response(request_id, error))


def _json_headers(body: bytes, extra: Iterable[Header] = ()) -> list[Header]:
    return [(b"content-type", _JSON), (b"content-length", str(len(body)).encode("ascii")), *extra]


_SSE_HEADERS: list[Header] = [
    (b"content-type", _SSE),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class _Tracked:
    """Remembers whether anything was written, so a failure knows if it may still answer.

    ``cors`` holds the CORS headers of an allowed ``Origin`` once rule 2 passed; they
    are appended to whatever goes out next (JSON, SSE, 202, errors, even a 500).
    """

    __slots__ = ("cors", "inner", "started")

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.started = False
        self.cors: list[Header] = []

    async def respond(self, status: int, headers: list[Header], body: bytes) -> None:
        self.started = True
        await self.inner.respond(status, [*headers, *self.cors], body)

    async def start(self, status: int, headers: list[Header]) -> None:
        self.started = True
        await self.inner.start(status, [*headers, *self.cors])

    async def send(self, chunk: bytes) -> None:
        await self.inner.send(chunk)

    async def end(self) -> None:
        await self.inner.end()


def _cors_headers(origin: str) -> list[Header]:
    """The headers every response to an allowed ``Origin`` carries: the origin itself, never ``*``."""
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def _cors_request_headers(requested: str | None) -> tuple[list[str], list[str]]:
    """``Access-Control-Request-Headers`` split into the names a client may send and the rest.

    Both lists are lowercased, deduplicated and in the order requested. Allowed: the
    headers of :data:`_CORS_REQUEST_HEADERS` and ``Mcp-Param-{Name}`` for any token name.
    """
    allowed: list[str] = []
    refused: list[str] = []
    for item in (requested or "").split(","):
        name = item.strip(" \t").lower()
        if not name or name in allowed or name in refused:
            continue
        permitted = name in _CORS_REQUEST_HEADERS or (
            name.startswith(_CORS_PARAM_PREFIX) and len(name) > len(_CORS_PARAM_PREFIX) and bool(_TOKEN.match(name)))
        (allowed if permitted else refused).append(name)
    return allowed, refused


async def _preflight(out: _Tracked, origin: str, headers: _Headers) -> None:
    """Answer a CORS preflight from an allowed origin for a ``POST``: ``204``, no body.

    ``Access-Control-Allow-Headers`` echoes the requested headers a client may send and
    leaves the others out (the header is omitted when none is left); the browser then
    refuses the actual request itself, naming the header. ``Allow-Origin`` and ``Vary``
    come from ``out.cors``.
    """
    allowed, refused = _cors_request_headers(headers.get("access-control-request-headers"))
    if refused:
        log.info("CORS preflight from %r asked for request headers the endpoint does not allow: %s",
                 origin, ", ".join(refused))
    answer: list[Header] = [(b"access-control-allow-methods", b"POST")]
    if allowed:
        answer.append((b"access-control-allow-headers", ", ".join(allowed).encode("ascii")))
    answer.append((b"access-control-max-age", _CORS_MAX_AGE))
    await out.respond(204, answer, b"")


async def _reject(out: _Tracked, status: int, error: ProtocolError, request_id: Any = None,
                  extra: Iterable[Header] = ()) -> None:
    body = _error_body(error, request_id)
    await out.respond(status, _json_headers(body, extra), body)


class _Final:
    __slots__ = ("body", "status")

    def __init__(self, body: bytes, status: int) -> None:
        self.body = body
        self.status = status


def _encode_response(response: dict[str, Any]) -> _Final:
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    status = status_for_code(code) if isinstance(code, int) else 200
    try:
        return _Final(_encode_json(response), status)
    except (TypeError, ValueError, OverflowError):
        log.exception("cannot encode the response to %r", response.get("id"))
        fallback = {"jsonrpc": "2.0", "id": response.get("id"),
                    "error": {"code": -32603, "message": "Internal error: the result could not be encoded"}}
        return _Final(_encode_json(fallback), 200)


async def _dispatch_and_stream(server: Dispatcher, message: dict[str, Any], headers: _Headers, out: _Tracked,
                               config: ExchangeConfig) -> bool:
    send_channel, receive_channel = trio.open_memory_channel[Any](config.notification_buffer)
    dropped = 0

    def notify(method: str, params: dict[str, Any]) -> None:
        nonlocal dropped
        try:
            encoded = _encode_json({"jsonrpc": "2.0", "method": method, "params": params})
        except (TypeError, ValueError, OverflowError) as exc:
            log.warning("dropping a %s notification that cannot be encoded: %s", method, exc)
            return
        try:
            send_channel.send_nowait(encoded)
        except trio.WouldBlock:
            dropped += 1
            if dropped == 1:
                log.warning("the client reads notifications too slowly; dropping %s notifications", method)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # the response is already out: notifications must stop after completion

    async def dispatch() -> None:
        async with send_channel:
            response = await server.handle(message, headers=headers.as_mapping(), notify=thread_safe(notify),
                                           run_sync=run_in_thread)
            await send_channel.send(_encode_response(response))

    # Strict exception groups: ClientGone is caught inside the nursery and re-raised
    # outside it, so callers see the plain exception.
    gone = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatch)
        try:
            await _stream(receive_channel, out, config)
        except ClientGone:
            gone = True
            nursery.cancel_scope.cancel()
    receive_channel.close()
    if gone:
        raise ClientGone()
    return True


async def _stream(receive_channel: trio.MemoryReceiveChannel[Any], out: _Tracked, config: ExchangeConfig) -> None:
    first = await receive_channel.receive()
    if isinstance(first, _Final):
        await out.respond(first.status, _json_headers(first.body), first.body)
        return
    await out.start(200, list(_SSE_HEADERS))
    await out.send(b"data: " + first + b"\n\n")
    keepalive = config.sse_keepalive
    while True:
        item: Any = None
        if keepalive is None:
            item = await receive_channel.receive()
        else:
            with trio.move_on_after(keepalive):
                item = await receive_channel.receive()
        if item is None:
            await out.send(b": keep-alive\n\n")
        elif isinstance(item, _Final):
            await out.send(b"data: " + item.body + b"\n\n")
            await out.end()
            return
        else:
            await out.send(b"data: " + item + b"\n\n")


async def _exchange(server: Dispatcher, request: HttpRequest, out: _Tracked, config: ExchangeConfig) -> bool:
    if request.path != config.path:
        body = b"Not Found\n"
        await out.respond(404, [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode("ascii"))], body)
        return True
    headers = _Headers(request.headers)
    origin = headers.get("origin")
    if origin is not None:
        if not config.origin_allowed(origin):
            log.info("refused a request from origin %r", origin)
            await _reject(out, 403, InvalidRequest("Forbidden: origin not allowed"))
            return True
        out.cors = _cors_headers(origin)
    if request.method != "POST":
        if request.method == "OPTIONS" and origin is not None \
                and headers.get("access-control-request-method") == "POST":
            await _preflight(out, origin, headers)
            return True
        await _reject(out, 405, InvalidRequest(f"Method Not Allowed: {request.method}; the MCP endpoint takes POST"),
                      extra=[(b"allow", b"POST")])
        return True
    if not _is_json(headers.get("content-type")):
        await _reject(out, 415, InvalidRequest("Unsupported Media Type: Content-Type must be application/json"))
        return True
    ranges = _media_types(headers.get("accept") or "")
    if not (_accepts(ranges, "application/json") and _accepts(ranges, "text/event-stream")):
        await _reject(out, 406, InvalidRequest(
            "Not Acceptable: Accept must list both application/json and text/event-stream"))
        return True
    try:
        message = parse_message(request.body)
    except ParseError as error:
        await _reject(out, 400, error)
        return True
    except InvalidRequest as error:
        await _reject(out, 400, error, error.request_id)
        return True
    if "id" not in message:
        await out.respond(202, [(b"content-length", b"0")], b"")
        return True
    try:
        check_headers(server, message, headers)
    except HeaderMismatch as error:
        await _reject(out, error.status_hint, error, message["id"])
        return True
    return await _dispatch_and_stream(server, message, headers, out, config)


async def exchange(
    server: Dispatcher,
    request: HttpRequest,
    responder: Responder,
    *,
    config: ExchangeConfig,
    disconnected: Callable[[], Awaitable[Any]] | None = None,
) -> bool:
    """Answer one HTTP request on the MCP endpoint; return whether the answer went out whole.

    ``disconnected``, when given, is awaited beside the exchange and must return when
    the client goes away; the dispatch is then cancelled and nothing more is written.
    Unexpected failures are logged; a ``500`` goes out only if nothing was written yet.
    """
    out = _Tracked(responder)
    if disconnected is None:
        return await _guarded(server, request, out, config)
    completed = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await disconnected()
            log.debug("client went away during %s %s; cancelling", request.method, request.path)
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            completed = await _guarded(server, request, out, config)
        finally:
            nursery.cancel_scope.cancel()
    return completed


async def _guarded(server: Dispatcher, request: HttpRequest, out: _Tracked, config: ExchangeConfig) -> bool:
    try:
        return await _exchange(server, request, out, config)
    except ClientGone:
        log.debug("client went away while %s %s was answered", request.method, request.path)
        return False
    except Exception:
        log.exception("unexpected failure in the HTTP exchange for %s %s", request.method, request.path)
        if not out.started:
            body = b"Internal Server Error\n"
            try:
                await out.respond(500, [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(body)).encode("ascii"))], body)
            except ClientGone:
                pass
        return False
