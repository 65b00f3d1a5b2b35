"""The registry: what a server offers, and the schemas and argument types derived from it.

Registering a handler does all the work that can be done before a request arrives: the
tool's ``inputSchema`` from its type hints (or a hand-written schema), the msgspec
Struct that decodes its arguments, its ``outputSchema``, the ``x-mcp-header``
parameters mirrored in ``Mcp-Param-*`` headers, a resource template's pattern. The
dispatch (:mod:`mrtr.server`) then only looks entries up.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ..core import models
from ..core.docstrings import first_paragraph
from ..core.errors import InvalidParams
from ..core.mirroring import InvalidHeaderSchema, is_token, mirrored_parameters
from ..core.handlers import CONTEXT_NAMES, handler_spec
from ..core.versions import set_handler_version
from .apps import Csp, link_tool, register_ui_resource
from .catalog import Catalog, PromptEntry, ResourceEntry, TemplateEntry, ToolEntry, described
from .pipeline import checked_middleware

__all__ = ["Header", "PromptEntry", "Registry", "ResourceEntry", "TemplateEntry", "ToolEntry"]


class Header:
    """Mark a tool parameter to be mirrored in an ``Mcp-Param-<name>`` HTTP header.

    ``region: Annotated[str, Header("Region")]`` adds ``"x-mcp-header": "Region"`` to the
    parameter's schema; HTTP clients must then send ``Mcp-Param-Region`` with its value.
    Only parameters whose schema type is string, integer or boolean can be mirrored.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not is_token(name):
            raise ValueError(f"x-mcp-header name must be a non-empty HTTP token, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"Header({self.name!r})"




_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 scope-token


def _scopes(scopes: Sequence[str]) -> tuple[str, ...]:
    if isinstance(scopes, str):
        raise TypeError("scopes must be a list of scope names, not one string")
    for scope in scopes:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.match(scope):
            raise ValueError(f"not an OAuth scope token: {scope!r}")
    return tuple(dict.fromkeys(scopes))


def _versioned(kind: str, fn: Any, version: str | None, once: Any) -> None:
    """Check the ``once`` and ``version`` options every decorator takes; record the version."""
    if not isinstance(once, bool):
        raise TypeError(f"@server.{kind}: once must be True or False, got {once!r}")
    if version is not None:
        set_handler_version(fn, version)


def _describe(definition: dict[str, Any], fn: Any, title: str | None, description: str | None,
              mime_type: str | None = None) -> dict[str, Any]:
    """Add the optional display members; the description defaults to the docstring's first paragraph.

    As plain text: a docstring's reStructuredText markup means nothing to a client or a
    model (:mod:`mrtr.core.docstrings`). A description given explicitly is published as given.
    """
    for key, value in (("title", title), ("description", description or first_paragraph(fn.__doc__)),
                       ("mimeType", mime_type)):
        if value:
            definition[key] = value
    return definition


def _handler_callable(kind: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"@server.{kind} decorates a function, got {type(fn).__name__} {fn!r}")


def _thread_choice(kind: str, fn: Any, thread: Any) -> bool:
    """``thread=True`` is for sync code: an async handler already gives the loop back at each ``await``."""
    if not isinstance(thread, bool):
        raise TypeError(f"@server.{kind}(thread=...) takes True or False, got {thread!r}")
    if thread and handler_spec(fn).is_async:
        raise TypeError(f"@server.{kind}(thread=True) runs sync code in a worker thread, but "
                        f"{handler_spec(fn).name}{_where(fn)} is async: it already gives the event loop back at "
                        "each await; drop thread=True")
    return thread


def _where(fn: Any) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return "" if code is None else f" ({code.co_filename}:{code.co_firstlineno})"


def _signature_parameters(fn: Any) -> list[inspect.Parameter]:
    spec = handler_spec(fn)
    parameters = [p for p in inspect.signature(fn).parameters.values() if p.name != spec.ctx_name]
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"handler {spec.name}{_where(fn)}: parameter {parameter.name!r} must be a plain named parameter")
        if parameter.name in CONTEXT_NAMES:
            raise TypeError(
                f"handler {spec.name}{_where(fn)}: parameter {parameter.name!r} looks like the request context but "
                f"would become a client-supplied argument ({_annotation_text(parameter)}); annotate it "
                "`mrtr.Context` to receive the context (any name works then), or rename it"
            )
    return parameters


def _annotation_text(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return "it is not the first parameter"
    return f"annotated {getattr(annotation, '__qualname__', annotation)}"


def _check_parameter_schemas(owner: str, fn: Any, parameters: list[inspect.Parameter], hints: Mapping[str, Any]) -> None:
    """Refuse a tool parameter whose type gives the client no usable schema."""
    for parameter in parameters:
        if parameter.name not in hints:
            raise TypeError(
                f"tool {owner}{_where(fn)}: parameter {parameter.name!r} has no type annotation, so its inputSchema "
                f"would accept anything; annotate it (`{parameter.name}: str`, an int, a Struct...), or annotate it "
                "`mrtr.Context` if it is meant to receive the request context"
            )
        annotation, _ = _strip_header(hints[parameter.name])
        model = _model_of(annotation)
        try:
            if model is not None:
                models.json_schema(model)
            else:
                msgspec.json.schema(annotation)
        except (TypeError, ValueError, ImportError) as exc:
            raise TypeError(
                f"tool {owner}{_where(fn)}: parameter {parameter.name!r} has no JSON Schema ({exc}); use types msgspec "
                "can describe (str, int, float, bool, lists, dicts, Literal, Enum, Struct, dataclass, TypedDict, "
                "pydantic model), "
                "or annotate it `mrtr.Context` if it is meant to receive the request context"
            ) from None


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


def _model_of(annotation: Any) -> Any:
    """The pydantic model a parameter is (``Model`` or ``Model | None``), else ``None``."""
    if models.is_model(annotation):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1 and models.is_model(members[0]):
            return members[0]
    return None


def _arguments_struct(owner: str, parameters: list[inspect.Parameter], hints: Mapping[str, Any]) -> tuple[Any, dict[str, str]]:
    """A Struct that decodes a tool's arguments, and its ``x-mcp-header`` names by parameter.

    A parameter that is a pydantic model arrives as an object here and is validated by
    pydantic afterwards (:attr:`ToolEntry.models`).
    """
    fields: list[tuple[Any, ...]] = []
    headers: dict[str, str] = {}
    for parameter in parameters:
        annotation, header = _strip_header(hints.get(parameter.name, Any))
        model = _model_of(annotation)
        if model is not None:
            annotation = dict[str, Any] if annotation is model else dict[str, Any] | None
        if header is not None:
            headers[parameter.name] = header
        if parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, annotation))
        else:
            fields.append((parameter.name, annotation, parameter.default))
    struct = msgspec.defstruct(f"{owner}Arguments", fields, kw_only=True)
    return struct, headers


def _merge_defs(owner: str, schema: dict[str, Any], defs: Mapping[str, Any]) -> None:
    known = schema.setdefault("$defs", {})
    for name, definition in defs.items():
        if name in known and known[name] != definition:
            raise TypeError(f"{owner}: two different types named {name!r} in its inputSchema; rename one")
        known[name] = definition


def _tool_input_schema(owner: str, struct: Any, headers: Mapping[str, str],
                       model_parameters: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``inputSchema`` for a tool's arguments, and its mirrored headers (lowercase) by parameter.

    The annotations are checked by the rules every HTTP client applies to the published
    schema, so the server never publishes a tool that clients must leave out. A pydantic
    model parameter gets pydantic's own schema, its definitions beside msgspec's.
    """
    schema = _inline_schema(msgspec.json.schema(struct))
    properties = schema.setdefault("properties", {})
    for parameter, model in (model_parameters or {}).items():
        published = dict(models.json_schema(model))
        _merge_defs(owner, schema, published.pop("$defs", {}))
        if "default" in properties[parameter]:
            published["default"] = properties[parameter]["default"]
        if parameter not in schema.get("required", ()):
            published = {"anyOf": [published, {"type": "null"}], **({"default": published.pop("default")}
                                                                       if "default" in published else {})}
        properties[parameter] = published
    if not schema.get("$defs"):
        schema.pop("$defs", None)
    for parameter, header in headers.items():
        properties[parameter] = {**properties[parameter], "x-mcp-header": header}
    try:
        mirrored = mirrored_parameters({"inputSchema": schema})
    except InvalidHeaderSchema as exc:
        raise TypeError(f"{owner}: {exc}") from None
    return schema, {header.lower(): path[0] for header, path in mirrored.items()}


def _is_structured_type(hint: Any) -> bool:
    """Whether a return annotation describes an object worth an ``outputSchema``."""
    if isinstance(hint, type):
        return (issubclass(hint, msgspec.Struct) or dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)
                or models.is_model(hint))
    return typing.get_origin(hint) is dict


def _output_schema(owner: str, fn: Any, hint: Any) -> dict[str, Any]:
    """The ``outputSchema`` of a tool's return type, refused at registration when there is none."""
    try:
        if models.is_model(hint):
            return _inline_schema(models.json_schema(hint, mode="serialization"))
        return _inline_schema(msgspec.json.schema(hint))
    except (TypeError, ValueError, ImportError) as exc:
        raise TypeError(
            f"tool {owner}{_where(fn)}: its return type {getattr(hint, '__qualname__', hint)} has no JSON Schema "
            f"({exc}); return types msgspec or pydantic can describe (a Struct, dataclass, TypedDict or pydantic "
            "model of str, int, float, bool, lists, dicts, Literal, Enum...), or drop the return annotation"
        ) from None


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



def _camel_owner(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "Tool"


def _meta_of(annotation: Any) -> msgspec.Meta | None:
    if typing.get_origin(annotation) is typing.Annotated:
        for extra in typing.get_args(annotation)[1:]:
            if isinstance(extra, msgspec.Meta):
                return extra
    return None



def _schema_check(tool_name: str, schema: dict[str, Any]) -> Callable[[Mapping[str, Any]], None]:
    """A validator for a hand-written ``inputSchema``, raising -32602 with the first violation."""
    # Imported here: only servers with hand-written schemas pay for jsonschema's import.
    import jsonschema
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"tool {tool_name}: input_schema is not a valid JSON Schema: {exc.message}") from None
    validator = cls(schema)

    def check(arguments: Mapping[str, Any]) -> None:
        if validator.is_valid(arguments):  # the common case; collecting errors costs more
            return
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path)
            raise InvalidParams(f"Invalid arguments for tool {tool_name}: {where + ': ' if where else ''}{error.message}")

    return check


def _twice(kind: str, what: str, first: Any, again: Any, fix: str) -> str:
    """A second registration under a name already taken: both functions, where each is, and the fix."""
    def named(fn: Any) -> str:
        return f"{getattr(fn, '__qualname__', fn)!s}{_where(fn) or ' (location unknown)'}"

    return (f"a {kind} {what} is already registered, by {named(first)}; {named(again)} registers it again. "
            f"Give one of them another name ({fix}), or remove one")


def _given_name(kind: str, given: str, name: str | None) -> str:
    if name is not None and name != given:
        raise TypeError(f"@server.{kind}({given!r}, name={name!r}) names the {kind} twice")
    if not given:
        raise ValueError(f"@server.{kind}: the name must not be empty")
    return given


def _resource_uri(kind: str, uri: Any, example: str) -> None:
    if callable(uri):
        raise TypeError(
            f"@server.{kind} needs the uri it serves, as in {example}; it was applied to "
            f"{getattr(uri, '__qualname__', uri)!r}{_where(uri)} directly, which registers nothing"
        )
    if not isinstance(uri, str) or ":" not in uri:
        raise ValueError(f"@server.{kind} needs an absolute uri with a scheme, as in {example}; got {uri!r}")


def _not_mounted(catalog: Catalog, method: str, name: str, fn: Any) -> None:
    """Refuse a name a mounted server already lists here (its registration named with this one's)."""
    routed = catalog.route(method, {"uri" if method == "resources/read" else "name": name})
    if routed is not None:
        namespace, params = routed
        kind = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "resource"}[method]
        raise ValueError(f"{kind} {name!r} of {described(fn)} is already listed here by the server mounted as "
                         f"{namespace!r} (its {kind} {params.get('name') or params.get('uri')!r}); choose another name")


class Registry:
    """The tools, prompts, resources, resource templates and completion provider of a server.

    :class:`mrtr.Server` is a registry with dispatch on top; the decorators below are
    how handlers get into it.
    """

    def __init__(self) -> None:
        self.catalog = Catalog()
        """Where the registered entries live, with the rules both eras apply to them."""

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
        scopes: Sequence[str] = (),
        task: str | None = None,
        once: bool = False,
        version: str | None = None,
        thread: bool = False,
        ui: str | None = None,
        visibility: Sequence[str] | None = None,
    ) -> Any:
        """Register a tool. Usable bare (``@server.tool``) or with options.

        The name defaults to the function's, the description to its docstring's first
        paragraph; ``inputSchema`` comes from the parameter type hints (and
        ``outputSchema`` from a Struct, dataclass or TypedDict return type). Arguments are
        decoded and validated with those hints before the handler runs.

        ``input_schema`` publishes a hand-written JSON Schema instead (for keywords type
        hints cannot express: ``if``/``then``/``else``, ``allOf``, ``$anchor``...). It is
        advertised as given and enforced: arguments are validated against it (JSON
        Schema 2020-12 unless the schema names another dialect in ``$schema``) and then
        decoded with the parameter type hints, so both must agree. An invalid schema is
        refused at registration.

        ``scopes`` are the OAuth scopes a caller's token must grant to see and call the
        tool on a server protected with ``auth=`` (see ``docs/auth.md``); without
        ``auth=`` they are not checked.

        ``task="optional"`` lets a client that declares the tasks extension get the call
        as a task (``CreateTaskResult``) while others get the result on the call;
        ``task="required"`` refuses clients without the extension (``-32021``). See
        ``docs/tasks.md``.

        ``once=True`` runs the round that completes a conversation at most once per
        ``requestState``: its result is recorded in the server's store, and a retry of it
        (on any worker or node sharing the store) gets that result without the handler
        running again. A first call without a token has nothing to name it and runs each
        time. ``version`` names the handler's version in the tokens and tasks it records
        (by default a digest of its code), which a replay mismatch after a deploy reports.
        See ``docs/handlers.md`` (the idempotency contract).

        ``thread=True`` runs this sync handler in a worker thread (as
        ``Server(sync_handlers="thread")`` runs them all), so blocking code in it (a
        database call, a service request) does not stall the other requests; see
        ``docs/server.md``.

        ``ui`` links the tool to its interface, a ``ui://`` resource registered with
        :meth:`ui_resource` (MCP Apps); ``visibility`` says who may see and call it,
        ``("model", "app")`` by default, ``("app",)`` for a tool only its interface calls.
        Visibility is advice to hosts, not a permission: see ``docs/apps.md``.
        """
        tool_scopes = _scopes(scopes)
        if task not in (None, "optional", "required"):
            raise ValueError(f'task must be "optional" or "required", got {task!r}')

        if isinstance(fn, str):  # @server.tool("name")
            fn, name = None, _given_name("tool", fn, name)

        def register(fn: Any) -> Any:
            _handler_callable("tool", fn)
            _versioned("tool", fn, version, once)
            in_thread = _thread_choice("tool", fn, thread)
            tool_name = name or fn.__name__
            hints = _type_hints(fn)
            parameters = _signature_parameters(fn)
            _check_parameter_schemas(tool_name, fn, parameters, hints)
            struct, headers = _arguments_struct(_camel_owner(tool_name), parameters, hints)
            model_parameters = {p.name: model for p in parameters
                                if (model := _model_of(_strip_header(hints[p.name])[0])) is not None}
            definition = _describe({"name": tool_name}, fn, title, description)
            generated, mirrored = _tool_input_schema(_camel_owner(tool_name), struct, headers, model_parameters)
            if input_schema is not None:
                if input_schema.get("type") != "object":
                    raise ValueError(f"tool {tool_name}: input_schema must be an object schema (type: object)")
                definition["inputSchema"] = dict(input_schema)
                check_arguments = _schema_check(tool_name, definition["inputSchema"])
            else:
                check_arguments = None
                definition["inputSchema"] = generated
            returns = hints.get("return", inspect.Parameter.empty)
            structured = _is_structured_type(returns)
            if structured:
                definition["outputSchema"] = _output_schema(tool_name, fn, returns)
                if definition["outputSchema"].get("type") != "object":
                    definition.pop("outputSchema")
                    structured = False
            if annotations:
                definition["annotations"] = dict(annotations)
            if meta:
                definition["_meta"] = dict(meta)
            if ui is not None or visibility is not None:
                link_tool(self.catalog, tool_name, definition, ui, visibility)
            if task is not None:
                # The 2026 schema has no member for it; the 2025 one's Tool.execution says it,
                # and clients (mrtr list) read it there to tell a task tool before calling it.
                definition["execution"] = {"taskSupport": task}
            if tool_name in self.catalog.tools:
                raise ValueError(_twice("tool", f"named {tool_name!r}", self.catalog.tools[tool_name].fn, fn,
                                        "@server.tool(name=...)"))
            _not_mounted(self.catalog, "tools/call", tool_name, fn)
            self.catalog.tools[tool_name] = ToolEntry(
                tool_name, fn, struct, tuple(p.name for p in parameters), definition,
                mirrored, structured, check_arguments,
                tool_scopes,
                task,
                model_parameters,
                once,
                in_thread,
            )
            return fn

        return register(fn) if fn is not None else register

    def prompt(
        self, fn: Any = None, *, name: str | None = None, title: str | None = None, description: str | None = None,
        once: bool = False, version: str | None = None, thread: bool = False,
    ) -> Any:
        """Register a prompt; its parameters (strings) become the prompt's arguments.

        Usable bare (``@server.prompt``), with the name (``@server.prompt("review")``) or
        with options. ``once`` and ``version`` are as for :meth:`tool`; ``thread=True`` runs it in a
        worker thread (see :meth:`tool`).
        """
        if isinstance(fn, str):  # @server.prompt("name")
            fn, name = None, _given_name("prompt", fn, name)

        def register(fn: Any) -> Any:
            _handler_callable("prompt", fn)
            _versioned("prompt", fn, version, once)
            in_thread = _thread_choice("prompt", fn, thread)
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
            if prompt_name in self.catalog.prompts:
                raise ValueError(_twice("prompt", f"named {prompt_name!r}", self.catalog.prompts[prompt_name].fn, fn,
                                        "@server.prompt(name=...)"))
            _not_mounted(self.catalog, "prompts/get", prompt_name, fn)
            self.catalog.prompts[prompt_name] = PromptEntry(
                prompt_name, fn, tuple(p.name for p in parameters), tuple(required), definition, once, in_thread
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
        once: bool = False,
        version: str | None = None,
        thread: bool = False,
    ) -> Callable[[Any], Any]:
        """Register a static resource at ``uri``; the handler returns its text or bytes.

        ``once`` and ``version`` are as for :meth:`tool`; ``thread=True`` runs it in a worker thread.
        """
        _resource_uri("resource", uri, '@server.resource("notes://welcome")')
        if "{" in uri:
            raise ValueError(
                f"@server.resource({uri!r}) looks like a uri template; register it with @server.resource_template"
            )

        def register(fn: Any) -> Any:
            _handler_callable("resource", fn)
            in_thread = _thread_choice("resource", fn, thread)
            _versioned("resource", fn, version, once)
            definition = _describe({"uri": uri, "name": name or fn.__name__}, fn, title, description, mime_type)
            if uri in self.catalog.resources:
                raise ValueError(_twice("resource", f"at {uri!r}", self.catalog.resources[uri].fn, fn, "another uri"))
            _not_mounted(self.catalog, "resources/read", uri, fn)
            self.catalog.resources[uri] = ResourceEntry(uri, fn, definition, mime_type, once, in_thread)
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
        once: bool = False,
        version: str | None = None,
        thread: bool = False,
    ) -> Callable[[Any], Any]:
        """Register a resource template such as ``"notes://{id}/text"``.

        The handler receives each ``{variable}`` as a keyword argument (a single path
        segment). ``once`` and ``version`` are as for :meth:`tool`; ``thread=True`` runs it in a worker
        thread.
        """
        _resource_uri("resource_template", uri_template, '@server.resource_template("notes://{id}/text")')

        def register(fn: Any) -> Any:
            _handler_callable("resource_template", fn)
            in_thread = _thread_choice("resource_template", fn, thread)
            _versioned("resource_template", fn, version, once)
            definition = _describe({"uriTemplate": uri_template, "name": name or fn.__name__}, fn, title,
                                   description, mime_type)
            self.catalog.templates.append(TemplateEntry(_compile_template(uri_template), fn, definition, mime_type, once,
                                                 in_thread))
            return fn

        return register

    def middleware(self, middleware: Any) -> Any:
        """Register a middleware: ``async def mw(request, call_next)``, or an object whose ``__call__`` is that.

        Usable as a decorator (``@server.middleware``) or a call (``server.middleware(RateLimit(...))``);
        returns what it was given. Every request of either era goes through the middleware
        once, the first registered outermost (see :mod:`mrtr.server.pipeline` and
        ``docs/server.md``). Raises ``TypeError`` for anything that cannot be a stage.
        """
        self.catalog.middleware.append(checked_middleware(middleware))
        return middleware

    def ui_resource(self, uri: str, *, html: str | None = None, path: str | os.PathLike[str] | None = None,
                    csp: Csp | None = None, permissions: Sequence[str] | None = None, domain: str | None = None,
                    prefers_border: bool | None = None, name: str | None = None, title: str | None = None,
                    description: str | None = None) -> None:
        """Register an interface (MCP Apps): the HTML document a host renders for the tools linked to ``uri``.

        ``uri`` is a ``ui://`` URI; the document is ``html`` (a str) or the UTF-8 file at
        ``path``, read now. It is served with the MIME type ``text/html;profile=mcp-app``
        and listed under ``name`` (default: the URI). ``csp`` (a :class:`~mrtr.server.apps.Csp`)
        names the origins it may reach, ``permissions`` the sandbox permissions it asks
        for (``camera``, ``microphone``, ``geolocation``, ``clipboardWrite``), ``domain``
        a dedicated origin in the host's format, ``prefers_border`` whether it wants the
        host's border; all of them travel as ``_meta.ui`` on its listing entry and on its
        content. Anything invalid is refused here. See ``docs/apps.md``.
        """
        register_ui_resource(self.resource, self.catalog, uri, html=html, path=path, csp=csp, permissions=permissions, domain=domain,
                             prefers_border=prefers_border, name=name, title=title, description=description)

    def completion(self, fn: Any) -> Any:
        """Register the provider for ``completion/complete``.

        It is called as ``fn(ref, argument, context)`` with the request's ``ref`` and
        ``argument`` objects and ``context`` (or ``None``), and returns a list of values
        or a ``{"values", "total", "hasMore"}`` dict; it may be async.
        """
        self.catalog.completion = fn
        return fn

    # -- lookups -------------------------------------------------------------------------

    @property
    def has_task_tools(self) -> bool:
        """Whether any tool may run as a task (the server then needs a task store)."""
        return self.catalog.has_task_tools

    @property
    def has_once_handlers(self) -> bool:
        """Whether any handler was declared ``once=True`` (the server then records rounds in its store)."""
        return self.catalog.has_once_handlers

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The ``Tool`` objects ``tools/list`` reports, in registration order."""
        return [dict(tool.definition) for tool in self.catalog.tools.values()]

    def prompt_definitions(self) -> list[dict[str, Any]]:
        """The ``Prompt`` objects ``prompts/list`` reports, in registration order."""
        return [dict(prompt.definition) for prompt in self.catalog.prompts.values()]

    def resource_definitions(self) -> list[dict[str, Any]]:
        """The ``Resource`` and then the ``ResourceTemplate`` objects the server lists."""
        return [dict(resource.definition) for resource in self.catalog.resources.values()] + \
            [dict(template.definition) for template in self.catalog.templates]

    def tool_scopes(self, name: Any) -> tuple[str, ...]:
        """The scopes calling tool ``name`` needs beyond the server-wide ones (none for an unknown tool)."""
        return self.catalog.tool_scopes(name)

    def header_parameters(self, tool_name: str) -> dict[str, str]:
        """For a tool, the ``Mcp-Param-*`` header names (lowercase) mapped to parameter names."""
        tool = self.catalog.tools.get(tool_name)
        return dict(tool.headers) if tool else {}

    def find_resource(self, uri: str) -> tuple[Any, str | None, dict[str, Any]] | None:
        """The handler, MIME type and template variables serving ``uri``, or ``None``.

        A static resource wins over templates; templates are tried in registration order.
        """
        found = self.resource_entry(uri)
        if found is None:
            return None
        entry, variables = found
        return entry.fn, entry.mime_type, variables

    def resource_entry(self, uri: str) -> tuple[ResourceEntry | TemplateEntry, dict[str, Any]] | None:
        """The registration serving ``uri`` and its template variables, or ``None`` (see :meth:`find_resource`)."""
        return self.catalog.resource_entry(uri)
