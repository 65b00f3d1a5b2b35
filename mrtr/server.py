"""An MCP 2026-07-28 server: a registry of tools, prompts and resources, and stateless dispatch.

:class:`Server` knows nothing about sockets. A transport parses a JSON-RPC message with
:func:`parse_message` and hands requests to :meth:`Server.handle`, which returns the
response message as a dict. Request-scoped notifications (progress, log messages) go
to the ``notify`` callable the transport passes in.

Every request stands alone: its ``_meta`` must carry the protocol version and the
client's capabilities, and nothing is remembered between requests. The three methods
that may ask the user for input (``tools/call``, ``prompts/get``, ``resources/read``)
run through the wire carrier (:mod:`mrtr.engine`).
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import logging
import os
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from . import wire
from .context import LOG_LEVELS, Context, Notify
from .engine import Engine
from .jsonrpc import RunSync, error_response, result_response
from .errors import (
    HandlerError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    UnsupportedProtocolVersion,
)
from .replay import Completed, handler_spec
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

# -- handler registration ------------------------------------------------------------------


class Header:
    """Mark a tool parameter to be mirrored in an ``Mcp-Param-<name>`` HTTP header.

    ``region: Annotated[str, Header("Region")]`` adds ``"x-mcp-header": "Region"`` to the
    parameter's schema; HTTP clients must then send ``Mcp-Param-Region`` with its value.
    Only string, integer and boolean parameters can be mirrored.
    """

    __slots__ = ("name",)

    _TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not self._TOKEN.match(name):
            raise ValueError(f"x-mcp-header name must be a non-empty HTTP token, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"Header({self.name!r})"


@dataclass
class RequestInfo:
    """What the principal callable sees of a request: method, params and HTTP headers (if any)."""

    method: str
    params: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Tool:
    name: str
    fn: Any
    arguments_type: Any
    parameter_names: tuple[str, ...]
    definition: dict[str, Any]
    headers: dict[str, str]  # header name (lowercase) -> parameter name
    structured: bool


@dataclass
class _Prompt:
    name: str
    fn: Any
    parameter_names: tuple[str, ...]
    required: tuple[str, ...]
    definition: dict[str, Any]


@dataclass
class _Resource:
    uri: str
    fn: Any
    definition: dict[str, Any]
    mime_type: str | None


@dataclass
class _Template:
    pattern: re.Pattern[str]
    fn: Any
    definition: dict[str, Any]
    mime_type: str | None


def _first_paragraph(doc: str | None) -> str | None:
    if not doc:
        return None
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ").strip() or None


def _describe(definition: dict[str, Any], fn: Any, title: str | None, description: str | None,
              mime_type: str | None = None) -> dict[str, Any]:
    """Add the optional display members; the description defaults to the docstring's first paragraph."""
    for key, value in (("title", title), ("description", description or _first_paragraph(fn.__doc__)),
                       ("mimeType", mime_type)):
        if value:
            definition[key] = value
    return definition


def _signature_parameters(fn: Any) -> list[inspect.Parameter]:
    spec = handler_spec(fn)
    parameters = list(inspect.signature(fn).parameters.values())
    if spec.wants_ctx:
        parameters = parameters[1:]
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"handler {spec.name}: parameter {parameter.name!r} must be a plain named parameter")
    return parameters


def _strip_header(annotation: Any) -> tuple[Any, str | None]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        headers = [extra for extra in extras if isinstance(extra, Header)]
        others = [extra for extra in extras if not isinstance(extra, Header)]
        if headers:
            stripped = typing.Annotated[(base, *others)] if others else base  # type: ignore[valid-type]
            return stripped, headers[0].name
    return annotation, None


def _inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Turn msgspec's ``{"$ref": ..., "$defs": ...}`` into an object schema at the root."""
    ref = schema.get("$ref")
    defs = dict(schema.get("$defs", {}))
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/"):]
        root = dict(defs.pop(name))
        if defs:
            root["$defs"] = defs
        root.pop("title", None)
        return root
    return schema


def _arguments_struct(owner: str, parameters: list[inspect.Parameter], hints: Mapping[str, Any]) -> tuple[Any, dict[str, str]]:
    """A Struct that decodes a tool's arguments, and its ``x-mcp-header`` names by parameter."""
    fields: list[tuple[Any, ...]] = []
    headers: dict[str, str] = {}
    for parameter in parameters:
        annotation, header = _strip_header(hints.get(parameter.name, Any))
        if header is not None:
            base = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
            if base not in (str, int, bool):
                raise TypeError(
                    f"{owner}: x-mcp-header is allowed only on str, int and bool parameters, not {parameter.name!r}"
                )
            if any(header.lower() == other.lower() for other in headers.values()):
                raise TypeError(f"{owner}: x-mcp-header {header!r} is used twice")
            headers[parameter.name] = header
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, annotation))
        else:
            fields.append((parameter.name, annotation, parameter.default))
    struct = msgspec.defstruct(f"{owner}Arguments", fields, kw_only=True)
    return struct, headers


def _tool_input_schema(struct: Any, headers: Mapping[str, str]) -> dict[str, Any]:
    schema = _inline_schema(msgspec.json.schema(struct))
    properties = schema.setdefault("properties", {})
    for parameter, header in headers.items():
        properties[parameter] = {**properties[parameter], "x-mcp-header": header}
    return schema


def _is_structured_type(hint: Any) -> bool:
    """Whether a return annotation describes an object worth an ``outputSchema``."""
    if isinstance(hint, type):
        return issubclass(hint, msgspec.Struct) or dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)
    return typing.get_origin(hint) is dict


def _type_hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolvable forward references: fail at registration, not at call
        raise TypeError(f"cannot resolve the type hints of {getattr(fn, '__qualname__', fn)!r}: {exc}") from exc


def _compile_template(template: str) -> re.Pattern[str]:
    pattern = ""
    position = 0
    for match in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template):
        pattern += re.escape(template[position:match.start()])
        pattern += f"(?P<{match.group(1)}>[^/]+)"
        position = match.end()
    pattern += re.escape(template[position:])
    return re.compile(f"^{pattern}$")


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

PrincipalSource = Callable[[RequestInfo], "str | None | Awaitable[str | None]"]


class Server:
    """An MCP server: register handlers with the decorators, serve it with a transport.

    ``secret``/``codec`` and ``ttl`` configure the sealed ``requestState`` token (by
    default from ``MRTR_SECRET`` and ``MRTR_TTL``, or an ephemeral key with a warning).
    ``principal`` is a callable given a :class:`RequestInfo` that returns the
    authenticated principal (or ``None``); tokens are bound to it. ``answers`` selects
    the answer policy, ``"strict"`` or ``"lenient"`` (see ``docs/security.md``).
    ``sync_handlers="thread"`` runs sync handlers (plain functions and sync generators)
    in a worker thread, so blocking code in them does not stall other requests; the
    default ``"inline"`` runs them on the event loop, which is faster for handlers that
    do not block. A handler that raises is logged with its traceback; the client sees
    the exception's message, or only a generic one with ``mask_errors=True``.
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
        mask_errors: bool = False,
    ) -> None:
        self.name = name
        self.mask_errors = mask_errors
        self.version = version
        self.instructions = instructions
        self.server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            self.server_info["title"] = title
        self._codec_args = (secret, codec, ttl)
        self._engine: Engine | None = None
        self._answers = answers
        if answers not in ("strict", "lenient"):
            raise ValueError(f'answers must be "strict" or "lenient", got {answers!r}')
        if sync_handlers not in ("inline", "thread"):
            raise ValueError(f'sync_handlers must be "inline" or "thread", got {sync_handlers!r}')
        self.sync_handlers = sync_handlers
        self.principal = principal
        self.page_size = page_size
        self.list_ttl_ms = list_ttl_ms
        self.cache_scope = cache_scope
        self._tools: dict[str, _Tool] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._resources: dict[str, _Resource] = {}
        self._templates: list[_Template] = []
        self._completion: Any = None
        self._methods: dict[str, Callable[..., Awaitable[Any]]] = {
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
        """The wire carrier, built on first use so an unused server never warns about keys."""
        if self._engine is None:
            secret, codec, ttl = self._codec_args
            if codec is None:
                extra: dict[str, Any] = {} if ttl is None else {"ttl": ttl}
                if secret is None:
                    codec = RequestStateCodec.from_env(**extra)
                elif isinstance(secret, (bytes, bytearray)):
                    codec = RequestStateCodec([bytes(secret)], **extra)
                elif isinstance(secret, list):
                    codec = RequestStateCodec(secret, **extra)
                else:
                    codec = RequestStateCodec.from_env({"MRTR_SECRET": secret}, **extra)
            self._engine = Engine(codec, answers=self._answers)
        return self._engine

    @property
    def key_ready(self) -> bool:
        """Whether the ``requestState`` key ring is settled: given in code, set in
        ``MRTR_SECRET``, or already built. Forked workers share a settled key ring; an
        unsettled one would become a different ephemeral key in every process."""
        secret, codec, _ = self._codec_args
        return (
            self._engine is not None
            or secret is not None
            or codec is not None
            or bool(os.environ.get("MRTR_SECRET", "").strip())
        )

    @property
    def answers(self) -> str:
        """The answer policy: ``"strict"`` or ``"lenient"``."""
        return self._answers

    # -- decorators --------------------------------------------------------------------

    def tool(
        self,
        fn: Any = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> Any:
        """Register a tool. Usable bare (``@server.tool``) or with options.

        The name defaults to the function's, the description to its docstring's first
        paragraph; ``inputSchema`` comes from the parameter type hints (and
        ``outputSchema`` from a Struct, dataclass or TypedDict return type). Arguments are
        decoded and validated with those hints before the handler runs.

        ``input_schema`` publishes a hand-written JSON Schema instead (for keywords type
        hints cannot express: ``if``/``then``/``else``, ``allOf``, ``$anchor``...). It is
        advertised as given; arguments are still decoded with the parameter type hints.
        """

        def register(fn: Any) -> Any:
            tool_name = name or fn.__name__
            hints = _type_hints(fn)
            parameters = _signature_parameters(fn)
            struct, headers = _arguments_struct(_camel_owner(tool_name), parameters, hints)
            definition = _describe({"name": tool_name}, fn, title, description)
            if input_schema is not None:
                if input_schema.get("type") != "object":
                    raise ValueError(f"tool {tool_name}: input_schema must be an object schema (type: object)")
                definition["inputSchema"] = dict(input_schema)
            else:
                definition["inputSchema"] = _tool_input_schema(struct, headers)
            returns = hints.get("return", inspect.Parameter.empty)
            structured = _is_structured_type(returns)
            if structured:
                definition["outputSchema"] = _inline_schema(msgspec.json.schema(returns))
                if definition["outputSchema"].get("type") != "object":
                    definition.pop("outputSchema")
                    structured = False
            if annotations:
                definition["annotations"] = dict(annotations)
            if meta:
                definition["_meta"] = dict(meta)
            if tool_name in self._tools:
                raise ValueError(f"a tool named {tool_name!r} is already registered")
            self._tools[tool_name] = _Tool(
                tool_name, fn, struct, tuple(p.name for p in parameters), definition,
                {header.lower(): parameter for parameter, header in headers.items()}, structured,
            )
            return fn

        return register(fn) if fn is not None else register

    def prompt(
        self, fn: Any = None, *, name: str | None = None, title: str | None = None, description: str | None = None
    ) -> Any:
        """Register a prompt; its parameters (strings) become the prompt's arguments."""

        def register(fn: Any) -> Any:
            prompt_name = name or fn.__name__
            hints = _type_hints(fn)
            parameters = _signature_parameters(fn)
            arguments = []
            required = []
            for parameter in parameters:
                argument: dict[str, Any] = {"name": parameter.name}
                meta = _meta_of(hints.get(parameter.name))
                if meta is not None and meta.description:
                    argument["description"] = meta.description
                if parameter.default is inspect.Parameter.empty:
                    argument["required"] = True
                    required.append(parameter.name)
                arguments.append(argument)
            definition = _describe({"name": prompt_name}, fn, title, description)
            if arguments:
                definition["arguments"] = arguments
            if prompt_name in self._prompts:
                raise ValueError(f"a prompt named {prompt_name!r} is already registered")
            self._prompts[prompt_name] = _Prompt(
                prompt_name, fn, tuple(p.name for p in parameters), tuple(required), definition
            )
            return fn

        return register(fn) if fn is not None else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[Any], Any]:
        """Register a static resource at ``uri``; the handler returns its text or bytes."""

        def register(fn: Any) -> Any:
            definition = _describe({"uri": uri, "name": name or fn.__name__}, fn, title, description, mime_type)
            if uri in self._resources:
                raise ValueError(f"a resource at {uri!r} is already registered")
            self._resources[uri] = _Resource(uri, fn, definition, mime_type)
            return fn

        return register

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[Any], Any]:
        """Register a resource template such as ``"notes://{id}/text"``.

        The handler receives each ``{variable}`` as a keyword argument (a single path
        segment).
        """

        def register(fn: Any) -> Any:
            definition = _describe({"uriTemplate": uri_template, "name": name or fn.__name__}, fn, title,
                                   description, mime_type)
            self._templates.append(_Template(_compile_template(uri_template), fn, definition, mime_type))
            return fn

        return register

    def completion(self, fn: Any) -> Any:
        """Register the provider for ``completion/complete``.

        It is called as ``fn(ref, argument, context)`` with the request's ``ref`` and
        ``argument`` objects and ``context`` (or ``None``), and returns a list of values
        or a ``{"values", "total", "hasMore"}`` dict; it may be async.
        """
        self._completion = fn
        return fn

    def asgi(self, **options: Any) -> Any:
        """An ASGI application serving this server at ``/mcp`` (see :mod:`mrtr.http.asgi`)."""
        from .http.asgi import ASGIApp

        return ASGIApp(self, **options)

    # -- introspection for transports -------------------------------------------------

    def serves(self, method: str) -> bool:
        """Whether a request for ``method`` is dispatched (rather than answered ``-32601``)."""
        return method in self._methods and self._offers(method)

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The ``Tool`` objects ``tools/list`` reports, in registration order."""
        return [dict(tool.definition) for tool in self._tools.values()]

    def prompt_definitions(self) -> list[dict[str, Any]]:
        """The ``Prompt`` objects ``prompts/list`` reports, in registration order."""
        return [dict(prompt.definition) for prompt in self._prompts.values()]

    def resource_definitions(self) -> list[dict[str, Any]]:
        """The ``Resource`` and then the ``ResourceTemplate`` objects the server lists."""
        return [dict(resource.definition) for resource in self._resources.values()] + \
            [dict(template.definition) for template in self._templates]

    def header_parameters(self, tool_name: str) -> dict[str, str]:
        """For a tool, the ``Mcp-Param-*`` header names (lowercase) mapped to parameter names."""
        tool = self._tools.get(tool_name)
        return dict(tool.headers) if tool else {}

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, derived from what is registered."""
        capabilities: dict[str, Any] = {}
        if self._tools:
            capabilities["tools"] = {}
        if self._prompts:
            capabilities["prompts"] = {}
        if self._resources or self._templates:
            capabilities["resources"] = {}
        if self._completion is not None:
            capabilities["completions"] = {}
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

    def _offers(self, method: str) -> bool:
        family = method.split("/", 1)[0]
        if family == "tools":
            return bool(self._tools)
        if family == "prompts":
            return bool(self._prompts)
        if family == "resources":
            return bool(self._resources or self._templates)
        if family == "completion":
            return self._completion is not None
        return True

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
        result["resultType"] = "complete"
        result["ttlMs"] = self.list_ttl_ms if ttl_ms is None else ttl_ms
        result["cacheScope"] = self.cache_scope
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
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams('tools/call needs a string "name"')
        tool = self._tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name}")
        raw = params.get("arguments")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"Invalid arguments for tool {name}: arguments must be an object")
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
            text = self._handler_failed(request.method, name, error) or "The tool failed with an internal error."
            return {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": True}
        if not isinstance(outcome, Completed):
            return msgspec.to_builtins(outcome)
        return _tool_result(outcome.result, tool.structured)

    async def _get_prompt(self, request: _Request) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams('prompts/get needs a string "name"')
        prompt = self._prompts.get(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name}")
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
        return _prompt_result(outcome.result, prompt.definition.get("description"))

    async def _read_resource(self, request: _Request) -> dict[str, Any]:
        params = request.params
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams('resources/read needs a string "uri"')
        resource = self._resources.get(uri)
        arguments: dict[str, Any] = {}
        if resource is not None:
            fn, mime_type = resource.fn, resource.mime_type
        else:
            for template in self._templates:
                match = template.pattern.match(uri)
                if match:
                    fn, mime_type = template.fn, template.mime_type
                    arguments = match.groupdict()
                    break
            else:
                raise InvalidParams(f"Resource not found: {uri}", data={"uri": uri})
        principal = await self._principal(request)
        ctx = self._context(request, arguments, principal, uri)
        outcome = await self._run_protocol_handler(request, fn, arguments, ctx)
        if not isinstance(outcome, Completed):
            return msgspec.to_builtins(outcome)
        return self._cacheable(_resource_result(outcome.result, uri, mime_type), ttl_ms=0)

    async def _execute(self, request: _Request, fn: Any, arguments: Mapping[str, Any], ctx: Context) -> Any:
        return await self.engine.execute(request.method, request.params, fn, arguments, ctx, run_sync=request.run_sync)

    async def _run_protocol_handler(self, request: _Request, fn: Any, arguments: Mapping[str, Any],
                                    ctx: Context) -> Any:
        try:
            return await self._execute(request, fn, arguments, ctx)
        except HandlerError as error:
            text = self._handler_failed(request.method, ctx.target, error)
            raise InternalError(f"Internal error: {text}" if text else "Internal error") from None

    def _handler_failed(self, method: str, target: Any, error: HandlerError) -> str | None:
        """Log a failed handler with its traceback; the text the client may see (``None`` when masked)."""
        where = f" at {error.location}" if error.location else ""
        log.error("%s %r failed%s: %s", method, target, where, error.message, exc_info=error.__cause__)
        return None if self.mask_errors else error.message

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
            log.error("completion/complete failed", exc_info=exc)
            raise InternalError("Internal error" if self.mask_errors else f"Internal error: completion failed: {exc}") from exc
        completion = dict(values) if isinstance(values, dict) else {"values": list(values or [])}
        completion["values"] = [str(value) for value in completion.get("values", [])][:100]
        return {"resultType": "complete", "completion": completion}


def _camel_owner(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Tool"


def _meta_of(annotation: Any) -> msgspec.Meta | None:
    if typing.get_origin(annotation) is typing.Annotated:
        for extra in typing.get_args(annotation)[1:]:
            if isinstance(extra, msgspec.Meta):
                return extra
    return None


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


# -- result shaping --------------------------------------------------------------------------


def _tool_result(value: Any, structured: bool) -> dict[str, Any]:
    if isinstance(value, wire.CallToolResult):
        result = msgspec.to_builtins(value)
    elif isinstance(value, dict) and "content" in value and isinstance(value["content"], list) and not structured:
        result = dict(value)
    elif value is None:
        result = {"content": []}
    elif isinstance(value, str):
        result = {"content": [{"type": "text", "text": value}]}
    elif isinstance(value, list) and value and all(isinstance(item, dict) and "type" in item for item in value):
        result = {"content": list(value)}
    else:
        data = msgspec.to_builtins(value)
        result = {"content": [{"type": "text", "text": msgspec.json.encode(data).decode()}]}
        if isinstance(data, dict):
            result["structuredContent"] = data
    result["resultType"] = "complete"
    return result


def _prompt_message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, msgspec.Struct):
        return msgspec.to_builtins(item)
    if isinstance(item, dict) and "role" in item:
        return item
    raise TypeError(f"a prompt message must be a str, a PromptMessage or a {{role, content}} dict, got {item!r}")


def _prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    if isinstance(value, wire.GetPromptResult):
        result = msgspec.to_builtins(value)
    elif isinstance(value, dict) and "messages" in value:
        result = dict(value)
    elif isinstance(value, (list, tuple)):
        result = {"messages": [_prompt_message(item) for item in value]}
    else:
        result = {"messages": [_prompt_message(value)]}
    if description and "description" not in result:
        result["description"] = description
    result["resultType"] = "complete"
    return result


def _resource_contents(item: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(item, str):
        contents: dict[str, Any] = {"uri": uri, "text": item}
    elif isinstance(item, (bytes, bytearray)):
        contents = {"uri": uri, "blob": base64.b64encode(bytes(item)).decode("ascii")}
    elif isinstance(item, msgspec.Struct):
        return msgspec.to_builtins(item)
    elif isinstance(item, dict) and ("text" in item or "blob" in item):
        return {"uri": uri, **item}
    else:
        raise TypeError(f"a resource handler must return str, bytes or resource contents, got {type(item).__name__}")
    if mime_type:
        contents["mimeType"] = mime_type
    return contents


def _resource_result(value: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(value, wire.ReadResourceResult):
        return msgspec.to_builtins(value)
    if isinstance(value, dict) and "contents" in value:
        return dict(value)
    if isinstance(value, (list, tuple)):
        return {"contents": [_resource_contents(item, uri, mime_type) for item in value]}
    return {"contents": [_resource_contents(value, uri, mime_type)]}
