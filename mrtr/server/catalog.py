"""The catalogue: what a server offers, and the rules both eras apply to it, each written once.

A :class:`Catalog` holds the registered tools, prompts, resources, resource templates and
the completion provider (:mod:`mrtr.server.registry`'s decorators put them here), and
answers what the modern era (:mod:`mrtr.server.modern`) and the legacy era
(:mod:`mrtr.server.legacy`) both need to know of a request:

- what is offered (:meth:`Catalog.offered`), and each listing, filtered for the caller
  and paged (:meth:`Catalog.listing`);
- the target a request names, looked up once: a tool with the scope rule applied
  (:meth:`Catalog.tool`) and its arguments decoded into the handler's types
  (:meth:`Catalog.tool_arguments`), a prompt and its arguments (:meth:`Catalog.prompt`), a
  resource or template and its variables (:meth:`Catalog.resource`, which needs a string
  ``uri`` and raises :class:`ResourceNotFound`, each era giving it its own code);
- who is asking (:meth:`Catalog.principal`, :meth:`Catalog.allows`);
- the handler's ``ctx`` (:meth:`Catalog.context`, with the ``progressToken`` rule);
- a failing handler as what the client may see (:meth:`Catalog.failure`: a tool's error
  result, or the ``-32603`` of a prompt or resource), logged once with a reference;
- ``completion/complete`` (:meth:`Catalog.complete`).

Neither era imports the other or the :class:`~mrtr.server.Server`; the server builds the
catalogue, configures it and hands it to both.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..core import models
from ..core.context import Context
from ..core.errors import HandlerError, InternalError, InvalidParams, InvalidRequest, ProtocolError
from ..core.jsonrpc import Notify
from .pipeline import CallNext, Component, Incoming, InnerFailure, Middleware, middleware_failure, uses_store
from .pipeline import run as run_pipeline

__all__ = ["Catalog", "MountedCatalog", "PromptEntry", "RequestInfo", "ResourceEntry", "ResourceNotFound",
           "TemplateEntry", "ToolEntry", "PrincipalSource", "checked_progress_token", "described", "mounted_definition",
           "mounted_name", "mounted_uri", "token_principal", "unmounted_name", "unmounted_uri"]

log = logging.getLogger("mrtr")


@dataclass
class RequestInfo:
    """What the principal callable sees of a request: method, params and HTTP headers (if any)."""

    method: str
    params: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


PrincipalSource = Callable[[RequestInfo], "str | None | Awaitable[str | None]"]
"""A server's ``principal=``: who a request comes from, or ``None``."""


@dataclass
class ToolEntry:
    """A registered tool: its handler, argument decoder, published definition and header mirrors."""

    name: str
    fn: Any
    arguments_type: Any  # None: the handler takes the arguments as the client sent them (a forwarded tool)
    parameter_names: tuple[str, ...]
    definition: dict[str, Any]
    headers: dict[str, str]  # header name (lowercase) -> parameter name
    structured: bool
    check_arguments: Callable[[Mapping[str, Any]], None] | None = None  # a hand-written inputSchema
    scopes: tuple[str, ...] = ()  # OAuth scopes a caller needs on a protected server
    task: str | None = None  # "optional" or "required": may run as a task (the tasks extension)
    models: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # parameter -> pydantic model it is
    once: bool = False  # the round that completes a conversation runs at most once per token
    thread: bool = False  # its sync code runs in a worker thread, whatever the server's sync_handlers


@dataclass
class PromptEntry:
    """A registered prompt: its handler, parameter names, required arguments and definition."""

    name: str
    fn: Any
    parameter_names: tuple[str, ...]
    required: tuple[str, ...]
    definition: dict[str, Any]
    once: bool = False
    thread: bool = False


@dataclass
class ResourceEntry:
    """A static resource at one uri."""

    uri: str
    fn: Any
    definition: dict[str, Any]
    mime_type: str | None
    once: bool = False
    thread: bool = False


@dataclass
class TemplateEntry:
    """A resource template: the compiled pattern its uris match."""

    pattern: re.Pattern[str]
    fn: Any
    definition: dict[str, Any]
    mime_type: str | None
    once: bool = False
    thread: bool = False


class ResourceNotFound(InvalidParams):
    """No resource or template serves the uri a request names; ``data.uri`` says which.

    ``-32602`` in the modern era; the legacy era answers it with its own ``-32002``
    (:func:`mrtr.server.legacy.legacy_error`).
    """

    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}", data={"uri": uri})
        self.uri = uri


# The listings, by method: the member a page holds its items under.
_LISTED = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
           "resources/templates/list": "resourceTemplates"}

# What a failed handler is called in the message a masked client reads.
_KIND_OF = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}


def token_principal(auth: Any) -> str | None:
    """The principal of a server without a principal source: the verified token's, else none."""
    return None if auth is None else auth.principal  # type: ignore[no-any-return]


def checked_progress_token(value: Any) -> str | int | None:
    """A request's ``_meta.progressToken``: a string, an integer or absent; ``-32602`` for anything else."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise InvalidParams("progressToken must be a string or an integer")
    return value  # type: ignore[no-any-return]


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any) -> int:
    """The offset an opaque cursor names (0 for none); ``-32602`` for one this server did not issue."""
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


class Catalog:
    """The entries a server offers and the rules both eras apply to them (see the module).

    The entries are the registry's (``tools``, ``prompts`` and ``resources`` by name or
    uri, ``templates`` in registration order, ``completion`` the provider or ``None``);
    ``middleware`` the stages every request of either era goes through, outermost first
    (:mod:`mrtr.server.pipeline`); ``mounts`` the catalogues of the servers mounted in this
    one, by namespace (see :meth:`route`); ``unlisted`` what serves a uri no resource or
    template matches (never listed: a proxy's forwarded read, :mod:`mrtr.bridge`), or ``None``
    (such a uri is not found); the rest is set by the server that holds the catalogue: ``auth`` (the
    ``mrtr.auth.ResourceServer`` of a protected server), ``principal_source``,
    ``mask_errors``, ``page_size`` and ``lifespan`` (what ``ctx.lifespan`` reads: an object
    with a ``value``).
    """

    def __init__(self) -> None:
        self.tools: dict[str, ToolEntry] = {}
        self.prompts: dict[str, PromptEntry] = {}
        self.resources: dict[str, ResourceEntry] = {}
        self.templates: list[TemplateEntry] = []
        self.completion: Any = None
        self.unlisted: ResourceEntry | None = None
        self.middleware: list[Middleware] = []
        self.mounts: dict[str, Catalog] = {}
        self.auth: Any = None
        self.principal_source: PrincipalSource | None = None
        self.mask_errors = True
        self.page_size = 100
        self.lifespan: Any = None

    # -- what is offered ---------------------------------------------------------------

    def offered(self, family: str) -> bool:
        """Whether a method family is offered: ``tools``, ``prompts``, ``resources``, ``completion`` or ``tasks``.

        A family is offered, and its capability advertised, only while something of its
        kind is registered: both eras and the capabilities read this one rule.
        """
        if family == "tools":
            own = bool(self.tools)
        elif family == "prompts":
            own = bool(self.prompts)
        elif family == "resources":
            own = bool(self.resources or self.templates or self.unlisted)
        elif family == "completion":
            own = self.completion is not None
        elif family == "tasks":
            own = any(tool.task for tool in self.tools.values())
        else:
            raise ValueError(f"no method family {family!r}")
        return own or any(child.offered(family) for child in self.mounts.values())

    @property
    def has_task_tools(self) -> bool:
        """Whether any tool may run as a task, here or in a mounted server (the server then needs a task store)."""
        return self.offered("tasks")

    @property
    def has_once_handlers(self) -> bool:
        """Whether any handler was declared ``once=True``, here or in a mounted server (rounds go to the store)."""
        entries: list[Any] = [*self.tools.values(), *self.prompts.values(), *self.resources.values(),
                              *self.templates]
        return any(entry.once for entry in entries) or any(child.has_once_handlers for child in self.mounts.values())

    @property
    def stored_middleware(self) -> list[Any]:
        """The middleware keeping state in the server's store (a ``RateLimit``), here and in mounted servers.

        The server hands its store to each while it runs (:func:`~mrtr.server.pipeline.uses_store`).
        """
        stored = [stage for stage in self.middleware if uses_store(stage)]
        for child in self.mounts.values():
            stored += child.stored_middleware
        return stored

    def items(self, method: str, auth: Any) -> list[dict[str, Any]]:
        """This catalogue's own entries a list method shows this caller (mounted servers' come from their eras).

        ``tools/list`` leaves out the tools whose scopes ``auth`` lacks: a tool a caller may
        not call is not listed to it.
        """
        if method == "tools/list":
            return [tool.definition for tool in self.tools.values() if self.allows(auth, tool.scopes)]
        if method == "prompts/list":
            return [prompt.definition for prompt in self.prompts.values()]
        if method == "resources/list":
            return [resource.definition for resource in self.resources.values()]
        return [template.definition for template in self.templates]

    def page(self, method: str, params: Mapping[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
        """The page of ``items`` a list request's ``params.cursor`` asks for, under the method's member.

        Every listing pages alike in both eras: ``page_size`` items, and a ``nextCursor``
        while more follow; ``-32602`` for a cursor this server did not issue.
        """
        offset = _decode_cursor(params.get("cursor"))
        if offset > len(items):
            raise InvalidParams("Invalid cursor")
        page = items[offset:offset + self.page_size]
        result: dict[str, Any] = {_LISTED[method]: page}
        if offset + self.page_size < len(items):
            result["nextCursor"] = _encode_cursor(offset + self.page_size)
        return result

    def tool_scopes(self, name: Any) -> tuple[str, ...]:
        """The scopes calling tool ``name`` needs beyond the server-wide ones (none for an unknown tool)."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is not None:
            return tool.scopes
        routed = self.route("tools/call", {"name": name})
        return self.mounts[routed[0]].tool_scopes(routed[1]["name"]) if routed is not None else ()

    def resource_entry(self, uri: str) -> tuple[ResourceEntry | TemplateEntry, dict[str, Any]] | None:
        """The registration serving ``uri`` and its template variables, or ``None``.

        A static resource wins over templates; templates are tried in registration order,
        then the mounted servers; :attr:`unlisted` serves what none of them does.
        """
        resource = self.resources.get(uri)
        if resource is not None:
            return resource, {}
        for template in self.templates:
            match = template.pattern.match(uri)
            if match:
                return template, match.groupdict()
        routed = self.route("resources/read", {"uri": uri})
        if routed is not None:
            return self.mounts[routed[0]].resource_entry(routed[1]["uri"])
        return (self.unlisted, {}) if self.unlisted is not None else None

    # -- mounted servers -----------------------------------------------------------------

    def route(self, method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The mounted server a request is for, and its params as that server reads them; ``None`` for this one.

        ``tools/call`` and ``prompts/get`` name ``<namespace>_<name>``, ``resources/read`` a
        uri with the namespace after its scheme (:func:`mounted_uri`), ``completion/complete``
        a prompt or a template of a mounted server. A name of this catalogue's own is never
        routed, and neither is one no mounted server has (the caller answers it unknown,
        by the name the client used).
        """
        if not self.mounts:
            return None
        if method == "tools/call" or method == "prompts/get":
            name = params.get("name")
            own = self.tools if method == "tools/call" else self.prompts
            if not isinstance(name, str) or name in own:
                return None
            for namespace, child in self.mounts.items():
                inner = unmounted_name(namespace, name)
                if inner is not None and child.has(method, inner):
                    return namespace, {**params, "name": inner}
            return None
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str) or self.resources.get(uri) is not None \
                    or any(template.pattern.match(uri) for template in self.templates):
                return None
            for namespace, child in self.mounts.items():
                inner = unmounted_uri(namespace, uri)
                if inner is not None and child.resource_entry(inner) is not None:
                    return namespace, {**params, "uri": inner}
            return None
        if method == "completion/complete":
            ref = params.get("ref")
            if not isinstance(ref, dict):
                return None
            if ref.get("type") == "ref/prompt":
                routed = self.route("prompts/get", {"name": ref.get("name")})
                return None if routed is None else (routed[0], {**params, "ref": {**ref, "name": routed[1]["name"]}})
            uri = ref.get("uri")
            for namespace in self.mounts:
                inner = unmounted_uri(namespace, uri) if isinstance(uri, str) else None
                if inner is not None:
                    return namespace, {**params, "ref": {**ref, "uri": inner}}
        return None

    def has(self, method: str, name: str) -> bool:
        """Whether a ``tools/call`` or ``prompts/get`` of ``name`` reaches an entry here or in a mounted server."""
        own = self.tools if method == "tools/call" else self.prompts
        return name in own or self.route(method, {"name": name}) is not None

    def clashes(self) -> list[str]:
        """Each name or uri that both this catalogue and a mounted server's would list, named by both."""
        found = []
        for namespace, child in self.mounts.items():
            for kind, own, theirs in (("tool", self.tools, child.tools), ("prompt", self.prompts, child.prompts)):
                for name, entry in theirs.items():
                    full = mounted_name(namespace, name)
                    if full in own:
                        found.append(f"{kind} {full!r}: registered here by {described(own[full].fn)} and in the "
                                     f"server mounted as {namespace!r} as {name!r} by {described(entry.fn)}")
            for uri, resource in child.resources.items():
                full = mounted_uri(namespace, uri)
                if full in self.resources:
                    found.append(f"resource {full!r}: registered here by {described(self.resources[full].fn)} and in "
                                 f"the server mounted as {namespace!r} as {uri!r} by {described(resource.fn)}")
        return found

    # -- the target a request names ----------------------------------------------------

    def component(self, method: str, params: Mapping[str, Any]) -> Component | None:
        """What a request names as registered (:attr:`~mrtr.server.pipeline.Incoming.component`), or ``None``.

        Looked up without the checks of the methods below: a name nothing is registered
        under, or params of the wrong shape, give ``None``, and the method refuses them.
        """
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
            entries: Mapping[str, Any] = self.tools if method == "tools/call" else self.prompts
            entry = entries.get(name) if isinstance(name, str) else None
            if entry is None:
                return None
            kind = "tool" if method == "tools/call" else "prompt"
            return Component(kind, name, entry.definition)  # type: ignore[arg-type]
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            found = self.resource_entry(uri) if isinstance(uri, str) else None
            if found is None:
                return None
            served = found[0]
            if isinstance(served, ResourceEntry):
                # An unlisted uri (a proxy's) is a resource by its uri, with nothing listed of it.
                return Component("resource", uri, served.definition or {"uri": uri})  # type: ignore[arg-type]
            return Component("template", served.definition["uriTemplate"], served.definition)
        if method == "completion/complete":
            ref = params.get("ref")
            if not isinstance(ref, Mapping):
                return None
            if ref.get("type") == "ref/prompt":
                return self.component("prompts/get", {"name": ref.get("name")})
            uri = ref.get("uri")
            for template in self.templates:  # a ref/resource names the template by its uriTemplate
                if isinstance(uri, str) and template.definition.get("uriTemplate") == uri:
                    return Component("template", uri, template.definition)
        return None

    def tool(self, params: Mapping[str, Any], auth: Any) -> tuple[str, ToolEntry]:
        """The tool a ``tools/call`` names, which this caller may call.

        ``-32602`` for a missing or unknown name; ``Forbidden`` (``-32600``) when the
        caller's token lacks the tool's scopes (the HTTP transports answer 403 before
        dispatch; this guards every other caller).
        """
        name, tool = _named(params, self.tools, "tools/call", "tool")
        if tool.scopes and not self.allows(auth, tool.scopes):
            raise InvalidRequest(f"Forbidden: tool {name} needs the scopes {' '.join(tool.scopes)}")
        return name, tool

    def tool_arguments(self, tool: ToolEntry, raw: Any) -> dict[str, Any]:
        """A call's ``arguments`` decoded into the handler's parameters (``-32602`` for arguments it refuses)."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"Invalid arguments for tool {tool.name}: arguments must be an object")
        if tool.check_arguments is not None:
            tool.check_arguments(raw)
        if tool.arguments_type is None:  # a forwarded tool (mrtr.bridge): the server it forwards to decodes them
            return dict(raw)
        try:
            decoded = msgspec.convert(raw, tool.arguments_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid arguments for tool {tool.name}: {exc}") from None
        # The Struct's fields are the handler's parameters, in order (registry._arguments_struct).
        arguments: dict[str, Any] = msgspec.structs.asdict(decoded)
        if not tool.models:
            return arguments
        for field_name, model in tool.models.items():
            if arguments[field_name] is not None:
                arguments[field_name] = models.validate(
                    model, arguments[field_name], f"Invalid arguments for tool {tool.name}: `{field_name}`")
        return arguments

    def prompt(self, params: Mapping[str, Any]) -> tuple[str, PromptEntry, dict[str, Any]]:
        """The prompt a ``prompts/get`` names and the arguments its handler gets: ``-32602`` for bad ones."""
        name, prompt = _named(params, self.prompts, "prompts/get", "prompt")
        raw = params.get("arguments") or {}
        if not isinstance(raw, dict) or not all(isinstance(value, str) for value in raw.values()):
            raise InvalidParams(f"Invalid arguments for prompt {name}: arguments must map names to strings")
        missing = [argument for argument in prompt.required if argument not in raw]
        if missing:
            raise InvalidParams(f"Invalid arguments for prompt {name}: missing required argument {missing[0]!r}")
        return name, prompt, {key: value for key, value in raw.items() if key in prompt.parameter_names}

    def resource(self, params: Mapping[str, Any], method: str = "resources/read"
                 ) -> tuple[str, ResourceEntry | TemplateEntry, dict[str, Any]]:
        """The uri a ``resources/read`` (or ``resources/subscribe``) names, what serves it, and its variables.

        ``-32602`` without a string ``uri``; :class:`ResourceNotFound` when nothing serves it.
        """
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams(f'{method} needs a string "uri"')
        found = self.resource_entry(uri)
        if found is None:
            raise ResourceNotFound(uri)
        entry, arguments = found
        return uri, entry, arguments

    # -- who is asking -----------------------------------------------------------------

    def principal(self, method: str, params: Mapping[str, Any], headers: Mapping[str, str],
                  auth: Any) -> Awaitable[str | None]:
        """Who a request comes from: the principal source's answer, or the verified token's principal."""
        return self._principal(method, params, headers, auth)

    async def _principal(self, method: str, params: Mapping[str, Any], headers: Mapping[str, str],
                         auth: Any) -> str | None:
        if self.principal_source is None:
            return token_principal(auth)
        value = self.principal_source(RequestInfo(method, params, headers))
        if inspect.isawaitable(value):
            value = await value
        if value is not None and not isinstance(value, str):
            raise TypeError(f"the principal source must return a str or None, got {type(value).__name__}")
        return value

    def allows(self, auth: Any, scopes: tuple[str, ...]) -> bool:
        """Whether the caller's verified token grants ``scopes`` (always, on a server without ``auth=``)."""
        if self.auth is None or not scopes:
            return True
        return auth is not None and bool(self.auth.satisfies(auth, scopes))

    # -- the handler's ctx ---------------------------------------------------------------

    def context(self, arguments: Mapping[str, Any], principal: str | None, capabilities: Mapping[str, Any],
                client_info: Mapping[str, Any] | None, method: str, target: str, request_id: Any,
                progress_token: str | int | None, log_level: str | None, notify: Notify | None,
                auth: Any) -> Context:
        """The ``ctx`` a handler gets, from what either era knows of the request.

        ``progress_token`` went through :func:`checked_progress_token`; ``capabilities``
        are the client's, from the request (modern) or the session (legacy).
        """
        return Context.of_request(arguments, principal, capabilities, client_info, method, target, request_id,
                                  progress_token, log_level, notify, auth, self.lifespan.value)

    # -- a failing handler ---------------------------------------------------------------

    def failure(self, method: str, target: Any, error: HandlerError) -> str:
        """Log a failed handler with its traceback and a reference; the text the client may see.

        Everything when errors are not masked; a :class:`~mrtr.core.errors.PublicError`'s
        message always; otherwise a generic sentence naming the target and the reference
        the log line carries, so an operator can find the traceback a user reports.
        """
        reference = secrets.token_hex(4)
        where = f" at {error.location}" if error.location else ""
        log.error("%s %r failed%s [reference %s]: %s", method, target, where, reference, error.message,
                  exc_info=error.__cause__)
        if error.public or not self.mask_errors:
            return error.message
        kind = _KIND_OF.get(method)
        failed = f"{kind} {target}" if kind is not None else method
        return f"{failed} failed with an internal error (reference {reference}; the server's log has the details)"

    def tool_error(self, name: str, error: HandlerError) -> dict[str, Any]:
        """A failing tool's result: the error as tool output, so the model can see it (as much as may be shown)."""
        text = self.failure("tools/call", name, error)
        return {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": True}

    def internal_error(self, method: str, target: Any, error: HandlerError) -> InternalError:
        """A failed prompt or resource handler as its ``-32603`` (they have no error result), in both eras."""
        text = self.failure(method, target, error)
        return InternalError(text if error.public else f"Internal error: {text}")

    def shown(self, error: ProtocolError) -> ProtocolError:
        """``error`` as this server shows it to clients: :meth:`~mrtr.core.errors.ProtocolError.masked` when masking.

        The runtime's own diagnostics (a replay mismatch) keep their code, data and
        contract, and leave out the handler's files, source lines and values.
        """
        if not self.mask_errors:
            return error
        masked = error.masked()
        if masked is not error:
            # The client gets the brief form; whoever runs the server needs the whole diagnostic.
            log.warning("%s (the client was sent this without the handler's files and lines)", error.message)
        return masked

    # -- middleware ----------------------------------------------------------------------

    async def through_middleware(self, view: Incoming, method: CallNext) -> Any:
        """``view`` through this catalogue's middleware, then ``method``; its result, or the failure's.

        What the method raises comes out as it was raised; a middleware's own failure is told
        as a handler's (:func:`~mrtr.server.pipeline.middleware_failure`): a tool's error
        result, or the ``-32603`` of anything else.
        """
        try:
            return await run_pipeline(self.middleware, view, method)
        except InnerFailure as failure:
            raise failure.cause from failure.cause.__cause__  # as the method raised it, its cause kept
        except ProtocolError:
            raise
        except Exception as error:
            failed = middleware_failure(error)
            if view.method == "tools/call":
                return self.tool_error(view.name or "", failed)
            raise self.internal_error(view.method, view.name, failed) from None

    # -- completion ----------------------------------------------------------------------

    async def complete(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``{"completion": ...}`` a ``completion/complete`` with ``params`` answers, in both eras."""
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams('completion/complete needs "ref" and "argument" objects')
        if ref.get("type") == "ref/prompt" and ref.get("name") not in self.prompts:
            raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        try:
            values = self.completion(ref, argument, params.get("context"))
            if inspect.isawaitable(values):
                values = await values
        except ProtocolError:
            raise
        except Exception as exc:
            reference = secrets.token_hex(4)
            log.error("completion/complete failed [reference %s]", reference, exc_info=exc)
            raise InternalError(f"Internal error: completion failed (reference {reference})" if self.mask_errors
                                else f"Internal error: completion failed: {exc}") from exc
        completion = dict(values) if isinstance(values, dict) else {"values": list(values or [])}
        completion["values"] = [str(value) for value in completion.get("values", [])][:100]
        return {"completion": completion}


def _named(params: Mapping[str, Any], entries: Mapping[str, Any], method: str, kind: str) -> tuple[str, Any]:
    """The entry a request names in ``params.name``: -32602 for a missing or unknown name."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams(f'{method} needs a string "name"')
    entry = entries.get(name)
    if entry is None:
        raise InvalidParams(f"Unknown {kind}: {name}")
    return name, entry


def mounted_name(namespace: str, name: str) -> str:
    """A mounted server's tool or prompt as its parent lists it: ``<namespace>_<name>``."""
    return f"{namespace}_{name}"


def unmounted_name(namespace: str, name: str) -> str | None:
    """The mounted server's own name for ``name`` (see :func:`mounted_name`), or ``None`` for another namespace."""
    prefix = namespace + "_"
    return name[len(prefix):] if name.startswith(prefix) and len(name) > len(prefix) else None


def mounted_uri(namespace: str, uri: str) -> str:
    """A mounted server's resource uri (or template) as its parent lists it: the namespace after the scheme.

    ``weather://forecast`` becomes ``weather://billing/forecast`` and ``file:///etc/app`` becomes
    ``file://billing//etc/app``; a uri without ``://`` (``urn:isbn:1``) gets it after its
    first colon (``urn:billing/isbn:1``). :func:`unmounted_uri` undoes it exactly.
    """
    scheme, sep, rest = uri.partition("://")
    if sep:
        return f"{scheme}://{namespace}/{rest}"
    scheme, sep, rest = uri.partition(":")
    return f"{scheme}:{namespace}/{rest}" if sep else f"{namespace}/{uri}"


def unmounted_uri(namespace: str, uri: str) -> str | None:
    """The mounted server's own uri for ``uri`` (see :func:`mounted_uri`), or ``None`` for another namespace."""
    marker = f"{namespace}/"
    scheme, sep, rest = uri.partition("://")
    if sep:
        return f"{scheme}://{rest[len(marker):]}" if rest.startswith(marker) else None
    scheme, sep, rest = uri.partition(":")
    if sep:
        return f"{scheme}:{rest[len(marker):]}" if rest.startswith(marker) else None
    return uri[len(marker):] if uri.startswith(marker) else None


def mounted_definition(namespace: str, method: str, definition: Mapping[str, Any]) -> dict[str, Any]:
    """A mounted server's listed tool, prompt, resource or template as its parent lists it (renamed)."""
    shown = dict(definition)
    if method in ("tools/list", "prompts/list"):
        shown["name"] = mounted_name(namespace, shown["name"])
    elif method == "resources/list":
        shown["uri"] = mounted_uri(namespace, shown["uri"])
    else:
        shown["uriTemplate"] = mounted_uri(namespace, shown["uriTemplate"])
    meta = shown.get("_meta")
    if isinstance(meta, dict):  # an interface a tool links to (MCP Apps) moves with the tool's resources
        meta = dict(meta)
        ui = meta.get("ui")
        if isinstance(ui, dict) and isinstance(ui.get("resourceUri"), str):
            meta["ui"] = {**ui, "resourceUri": mounted_uri(namespace, ui["resourceUri"])}
        if isinstance(meta.get("ui/resourceUri"), str):
            meta["ui/resourceUri"] = mounted_uri(namespace, meta["ui/resourceUri"])
        shown["_meta"] = meta
    return shown


def described(fn: Any) -> str:
    """A handler as a message names it: its qualified name and where it is defined."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    name = getattr(fn, "__qualname__", repr(fn))
    return name if code is None else f"{name} ({code.co_filename}:{code.co_firstlineno})"


class MountedCatalog(Catalog):
    """A mounted server's catalogue as its parent serves it: the child's entries and middleware, the parent's rules.

    The entries, the middleware and the lifespan are the child's, live (what is registered
    on it later shows); who may call what (``auth``, ``principal_source``), how failures
    show (``mask_errors``) and how listings page (``page_size``) are the parent's, which
    serves the requests.
    """

    _child: Catalog
    _parent: Catalog

    def __init__(self, child: Catalog, parent: Catalog) -> None:  # noqa: D107 - no Catalog.__init__: all delegated
        self._child = child._child if isinstance(child, MountedCatalog) else child
        self._parent = parent  # the catalogue of the server that serves: its rules hold all the way down
        self._nested: dict[str, Catalog] = {}

    @property
    def mounts(self) -> dict[str, Catalog]:  # type: ignore[override]
        """The child's own mounts, each under the serving server's rules too."""
        inner = self._child.mounts
        if self._nested.keys() != inner.keys():
            self._nested = {namespace: MountedCatalog(child, self._parent) for namespace, child in inner.items()}
        return self._nested

    tools = property(lambda self: self._child.tools)
    prompts = property(lambda self: self._child.prompts)
    resources = property(lambda self: self._child.resources)
    templates = property(lambda self: self._child.templates)
    completion = property(lambda self: self._child.completion)
    unlisted = property(lambda self: self._child.unlisted)
    middleware = property(lambda self: self._child.middleware)
    lifespan = property(lambda self: self._child.lifespan)
    auth = property(lambda self: self._parent.auth)
    principal_source = property(lambda self: self._parent.principal_source)
    mask_errors = property(lambda self: self._parent.mask_errors)
    page_size = property(lambda self: self._parent.page_size)
