"""An MCP 2026-07-28 server: a registry of tools, prompts and resources, and stateless dispatch.

:class:`Server` knows nothing about sockets. A transport parses a JSON-RPC message with
:func:`mrtr.jsonrpc.parse_message` and hands requests to :meth:`Server.handle`, which returns the
response message as a dict. Request-scoped notifications (progress, log messages) go
to the ``notify`` callable the transport passes in.

Every request stands alone: its ``_meta`` must carry the protocol version and the
client's capabilities, and nothing is remembered between requests. The three methods
that may ask the user for input (``tools/call``, ``prompts/get``, ``resources/read``)
run through the wire carrier (:mod:`mrtr.engine`).
"""

from __future__ import annotations

import base64
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import msgspec

from . import wire
from .carrier import Carrier
from .context import LOG_LEVELS, Context
from .engine import Engine
from .jsonrpc import Notify, RunSync, error_response, result_response
from .errors import (
    HandlerError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from .registry import Header, Registry
from .replay import Completed
from .results import prompt_result, resource_result, tool_result
from .state import RequestStateCodec

__all__ = [
    "SUPPORTED_VERSIONS",
    "Header",
    "RequestInfo",
    "Server",
]

log = logging.getLogger("mrtr")

SUPPORTED_VERSIONS: tuple[str, ...] = (wire.PROTOCOL_VERSION,)
META_PROTOCOL_VERSION = wire.META_PROTOCOL_VERSION
META_CLIENT_CAPABILITIES = wire.META_CLIENT_CAPABILITIES
META_CLIENT_INFO = wire.META_CLIENT_INFO
META_LOG_LEVEL = wire.META_LOG_LEVEL
META_SERVER_INFO = wire.META_SERVER_INFO


@dataclass
class RequestInfo:
    """What the principal callable sees of a request: method, params and HTTP headers (if any)."""

    method: str
    params: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


# -- cursors -------------------------------------------------------------------------------


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            if text.startswith("o") and text[1:].isdigit():
                return int(text[1:])
        except (ValueError, UnicodeDecodeError):
            pass
    raise InvalidParams("Invalid cursor")


# -- the server ----------------------------------------------------------------------------

_Entry = TypeVar("_Entry")

PrincipalSource = Callable[[RequestInfo], "str | None | Awaitable[str | None]"]

# A method family is offered, and its capability advertised, only while something of
# its kind is registered: one table for both, so they never disagree.
_OFFERED_BY_FAMILY: dict[str, tuple[str, Callable[[Registry], bool]]] = {
    "tools": ("tools", lambda registry: bool(registry._tools)),
    "prompts": ("prompts", lambda registry: bool(registry._prompts)),
    "resources": ("resources", lambda registry: bool(registry._resources or registry._templates)),
    "completion": ("completions", lambda registry: registry._completion is not None),
}


class Server(Registry):
    """An MCP server: register handlers with the decorators, serve it with a transport.

    ``secret``/``codec`` and ``ttl`` configure the sealed ``requestState`` token (see
    :meth:`mrtr.state.RequestStateCodec.configure`: by default from ``MRTR_SECRET`` and
    ``MRTR_TTL``, or an ephemeral key with a warning). ``principal`` is a callable given
    a :class:`RequestInfo` that returns the authenticated principal (or ``None``);
    tokens are bound to it. ``answers`` selects the answer policy, ``"strict"`` or
    ``"lenient"`` (see ``docs/security.md``). ``sync_handlers="thread"`` runs sync
    handlers (plain functions and sync generators) through the ``run_sync`` the
    transport passes (a worker thread), so blocking code in them does not stall other
    requests; the default ``"inline"`` runs them on the event loop, which is faster for
    handlers that do not block.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        secret: str | bytes | list[bytes] | None = None,
        codec: RequestStateCodec | None = None,
        ttl: float | None = None,
        principal: PrincipalSource | None = None,
        answers: Literal["strict", "lenient"] = "strict",
        sync_handlers: Literal["inline", "thread"] = "inline",
        page_size: int = 100,
        list_ttl_ms: int = 60_000,
        cache_scope: Literal["public", "private"] = "public",
    ) -> None:
        super().__init__()
        if answers not in ("strict", "lenient"):
            raise ValueError(f'answers must be "strict" or "lenient", got {answers!r}')
        if sync_handlers not in ("inline", "thread"):
            raise ValueError(f'sync_handlers must be "inline" or "thread", got {sync_handlers!r}')
        if codec is not None and (secret is not None or ttl is not None):
            raise ValueError("give either codec or secret/ttl, not both")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self._codec_args = (secret, codec, ttl)
        self._engine: Engine | None = None
        self._answers = answers
        self.sync_handlers = sync_handlers
        self.principal = principal
        self.page_size = page_size
        self.list_ttl_ms = list_ttl_ms
        self.cache_scope = cache_scope
        self._methods: dict[str, Callable[[_Request], Awaitable[dict[str, Any]]]] = {
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "completion/complete": self._complete,
        }

    # -- configuration ---------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The wire carrier, built on first use so an unused server never warns about keys.

        A transport that forks workers builds it before forking, so every worker seals
        and opens tokens with the very same key ring.
        """
        if self._engine is None:
            secret, codec, ttl = self._codec_args
            self._engine = Engine(codec or RequestStateCodec.configure(secret, ttl=ttl), answers=self._answers)
        return self._engine

    @property
    def answers(self) -> str:
        """The answer policy: ``"strict"`` or ``"lenient"``."""
        return self._answers

    # -- what is offered -------------------------------------------------------------

    def serves(self, method: str) -> bool:
        """Whether a request for ``method`` is dispatched (rather than answered ``-32601``)."""
        if method not in self._methods:
            return False
        offered = _OFFERED_BY_FAMILY.get(method.split("/", 1)[0])
        return offered is None or offered[1](self)

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, derived from what is registered."""
        capabilities: dict[str, Any] = {name: {} for name, offered in _OFFERED_BY_FAMILY.values() if offered(self)}
        capabilities["logging"] = {}
        return capabilities

    # -- dispatch ------------------------------------------------------------------------

    async def handle(
        self,
        message: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        notify: Notify | None = None,
        run_sync: RunSync | None = None,
    ) -> dict[str, Any]:
        """Serve one parsed JSON-RPC request and return its response message.

        ``headers`` are the transport's request headers (for the principal source),
        ``notify`` receives the request's notifications, and ``run_sync`` runs a sync
        handler away from the event loop when the server was built with
        ``sync_handlers="thread"`` (``notify`` must then accept calls from that thread;
        see :mod:`mrtr.transport`). Without ``run_sync`` every handler runs inline.
        Protocol errors become error responses; an unexpected failure becomes
        ``-32603`` (logged with its traceback, never sent to the client).
        """
        request_id: Any = message.get("id")
        try:
            result = await self._dispatch(message, headers or {}, notify, run_sync)
        except ProtocolError as error:
            return error_response(request_id, error)
        except Exception:
            log.exception("unexpected failure serving %s", message.get("method"))
            return error_response(request_id, InternalError("Internal error"))
        return result_response(request_id, result)

    async def _dispatch(self, message: Mapping[str, Any], headers: Mapping[str, str], notify: Notify | None,
                        run_sync: RunSync | None) -> Any:
        method = message["method"]
        # Unknown and removed methods (initialize, ping, ...) are -32601 whatever their params.
        if not self.serves(method):
            raise MethodNotFound(f"Method not found: {method}")
        handler = self._methods[method]
        params = message.get("params")
        if params is None:
            params = {}
        envelope = _read_envelope(params)
        if self.sync_handlers == "inline":
            run_sync = None
        request = _Request(method, params, envelope, headers, notify, message.get("id"), run_sync)
        result = await handler(request)
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {META_SERVER_INFO: self.server_info}
        elif META_SERVER_INFO not in meta:
            result["_meta"] = {**meta, META_SERVER_INFO: self.server_info}
        return result

    async def _principal(self, request: _Request) -> str | None:
        if self.principal is None:
            return None
        value = self.principal(RequestInfo(request.method, request.params, request.headers))
        if inspect.isawaitable(value):
            value = await value
        if value is not None and not isinstance(value, str):
            raise TypeError(f"the principal source must return a str or None, got {type(value).__name__}")
        return value

    def _context(self, request: _Request, arguments: Mapping[str, Any], principal: str | None, target: str) -> Context:
        envelope = request.envelope
        return Context(
            arguments,
            principal=principal,
            client_capabilities=envelope.capabilities,
            client_info=envelope.client_info,
            method=request.method,
            target=target,
            request_id=request.id,
            progress_token=envelope.progress_token,
            log_level=envelope.log_level,
            notify=request.notify,
        )

    def _cacheable(self, result: dict[str, Any], ttl_ms: int | None = None) -> dict[str, Any]:
        """Mark a result cacheable; hints a handler set on its own result win (a private resource stays private)."""
        result["resultType"] = "complete"
        result.setdefault("ttlMs", self.list_ttl_ms if ttl_ms is None else ttl_ms)
        result.setdefault("cacheScope", self.cache_scope)
        return result

    # -- methods ------------------------------------------------------------------------

    async def _discover(self, request: _Request) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return self._cacheable(result)

    def _page(self, request: _Request, items: list[dict[str, Any]], member: str) -> dict[str, Any]:
        offset = _decode_cursor(request.params.get("cursor"))
        if offset > len(items):
            raise InvalidParams("Invalid cursor")
        page = items[offset:offset + self.page_size]
        result: dict[str, Any] = {member: page}
        if offset + self.page_size < len(items):
            result["nextCursor"] = _encode_cursor(offset + self.page_size)
        return self._cacheable(result)

    async def _list_tools(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [tool.definition for tool in self._tools.values()], "tools")

    async def _list_prompts(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [prompt.definition for prompt in self._prompts.values()], "prompts")

    async def _list_resources(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [resource.definition for resource in self._resources.values()], "resources")

    async def _list_templates(self, request: _Request) -> dict[str, Any]:
        return self._page(request, [template.definition for template in self._templates], "resourceTemplates")

    async def _call_tool(self, request: _Request) -> dict[str, Any]:
        params = request.params
        name, tool = _named(params, self._tools, "tools/call", "tool")
        raw = params.get("arguments")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"Invalid arguments for tool {name}: arguments must be an object")
        if tool.check_arguments is not None:
            tool.check_arguments(raw)
        try:
            decoded = msgspec.convert(raw, tool.arguments_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid arguments for tool {name}: {exc}") from None
        arguments = {field_name: getattr(decoded, field_name) for field_name in tool.parameter_names}
        principal = await self._principal(request)
        ctx = self._context(request, arguments, principal, name)
        try:
            outcome = await self._execute(request, tool.fn, arguments, ctx)
        except HandlerError as error:
            return {"resultType": "complete", "content": [{"type": "text", "text": error.message}], "isError": True}
        if not isinstance(outcome, Completed):
            return msgspec.to_builtins(outcome)
        return tool_result(outcome.result, tool.structured)

    async def _get_prompt(self, request: _Request) -> dict[str, Any]:
        params = request.params
        name, prompt = _named(params, self._prompts, "prompts/get", "prompt")
        raw = params.get("arguments") or {}
        if not isinstance(raw, dict) or not all(isinstance(value, str) for value in raw.values()):
            raise InvalidParams(f"Invalid arguments for prompt {name}: arguments must map names to strings")
        missing = [argument for argument in prompt.required if argument not in raw]
        if missing:
            raise InvalidParams(f"Invalid arguments for prompt {name}: missing required argument {missing[0]!r}")
        arguments = {key: value for key, value in raw.items() if key in prompt.parameter_names}
        principal = await self._principal(request)
        ctx = self._context(request, arguments, principal, name)
        outcome = await self._run_protocol_handler(request, prompt.fn, arguments, ctx)
        if not isinstance(outcome, Completed):
            return msgspec.to_builtins(outcome)
        return prompt_result(outcome.result, prompt.definition.get("description"))

    async def _read_resource(self, request: _Request) -> dict[str, Any]:
        params = request.params
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams('resources/read needs a string "uri"')
        found = self.find_resource(uri)
        if found is None:
            raise InvalidParams(f"Resource not found: {uri}", data={"uri": uri})
        fn, mime_type, arguments = found
        principal = await self._principal(request)
        ctx = self._context(request, arguments, principal, uri)
        outcome = await self._run_protocol_handler(request, fn, arguments, ctx)
        if not isinstance(outcome, Completed):
            return msgspec.to_builtins(outcome)
        return self._cacheable(resource_result(outcome.result, uri, mime_type), ttl_ms=0)

    def carrier_for(self, method: str, params: Mapping[str, Any]) -> Carrier:
        """The carrier that holds this request's ledger: the wire carrier (:attr:`engine`)."""
        return self.engine

    async def _execute(self, request: _Request, fn: Any, arguments: Mapping[str, Any], ctx: Context) -> Any:
        carrier = self.carrier_for(request.method, request.params)
        return await carrier.execute(request.method, request.params, fn, arguments, ctx, run_sync=request.run_sync)

    async def _run_protocol_handler(self, request: _Request, fn: Any, arguments: Mapping[str, Any],
                                    ctx: Context) -> Any:
        try:
            return await self._execute(request, fn, arguments, ctx)
        except HandlerError as error:
            log.warning("%s handler failed: %s", request.method, error.message, exc_info=error.__cause__)
            raise InternalError(f"Internal error: {error.message}") from None

    async def _complete(self, request: _Request) -> dict[str, Any]:
        params = request.params
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams('completion/complete needs "ref" and "argument" objects')
        if ref.get("type") == "ref/prompt" and ref.get("name") not in self._prompts:
            raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        try:
            values = self._completion(ref, argument, params.get("context"))
            if inspect.isawaitable(values):
                values = await values
        except ProtocolError:
            raise
        except Exception as exc:
            raise InternalError(f"Internal error: completion failed: {exc}") from exc
        completion = dict(values) if isinstance(values, dict) else {"values": list(values or [])}
        completion["values"] = [str(value) for value in completion.get("values", [])][:100]
        return {"resultType": "complete", "completion": completion}


def _named(params: Mapping[str, Any], entries: Mapping[str, _Entry], method: str, kind: str) -> tuple[str, _Entry]:
    """The entry a request names in ``params.name``: -32602 for a missing or unknown name."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams(f'{method} needs a string "name"')
    entry = entries.get(name)
    if entry is None:
        raise InvalidParams(f"Unknown {kind}: {name}")
    return name, entry


# -- requests ----------------------------------------------------------------------------


@dataclass
class _Envelope:
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


@dataclass
class _Request:
    method: str
    params: Mapping[str, Any]
    envelope: _Envelope
    headers: Mapping[str, str]
    notify: Notify | None
    id: Any
    run_sync: RunSync | None


def _read_envelope(params: Mapping[str, Any]) -> _Envelope:
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("Missing required _meta: every request must carry io.modelcontextprotocol/protocolVersion "
                            "and io.modelcontextprotocol/clientCapabilities")
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise InvalidParams(f"Missing required _meta key: {META_PROTOCOL_VERSION}")
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Missing required _meta key: {META_CLIENT_CAPABILITIES}")
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not (
        isinstance(client_info, dict) and isinstance(client_info.get("name"), str) and isinstance(client_info.get("version"), str)
    ):
        raise InvalidParams(f"Malformed _meta key {META_CLIENT_INFO}: it needs string name and version")
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidParams(f"Invalid _meta {META_LOG_LEVEL} {log_level!r}; expected one of {', '.join(LOG_LEVELS)}")
    progress_token = meta.get("progressToken")
    if progress_token is not None and (isinstance(progress_token, bool) or not isinstance(progress_token, (str, int))):
        raise InvalidParams("progressToken must be a string or an integer")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedProtocolVersion(version, list(SUPPORTED_VERSIONS))
    return _Envelope(version, capabilities, client_info, log_level, progress_token)


