"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension): the names and shapes both sides read.

A tool may come with an HTML interface that the host renders in a sandboxed frame. Nothing
new travels on the MCP wire but ``_meta`` members, the ``ui://`` scheme, one MIME type and
the extension's entry in the capabilities:

- a client that renders apps declares ``extensions["io.modelcontextprotocol/ui"] =
  {"mimeTypes": ["text/html;profile=mcp-app"]}`` (:func:`ui_declaration`); in the modern
  era on every request, in the legacy one in ``initialize``. :func:`declares_ui` is the
  one reading of it (the extension's settings must list that MIME type, as the official
  Python SDK reads it);
- a tool names its interface in ``_meta.ui.resourceUri`` and, for hosts that still read
  it, the older flat ``_meta["ui/resourceUri"]``, with the same value; ``_meta.ui.visibility``
  says who may see and call it (``"model"``, ``"app"``). :func:`tool_ui` reads both,
  leniently: a malformed link is no link;
- the interface is a resource at a ``ui://`` URI whose content has the MIME type
  ``text/html;profile=mcp-app``, with ``_meta.ui`` (:class:`UiResourceMeta`: the content
  security policy's domains, the permissions, a dedicated domain, a border preference) on
  its listing entry and on its content items.

The server writes these (:mod:`mrtr.server.apps`), the client reads them
(:mod:`mrtr.client.apps`); this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

__all__ = [
    "UI_EXTENSION",
    "UI_MIME_TYPE",
    "UI_SCHEME",
    "RESOURCE_URI_META_KEY",
    "VISIBILITIES",
    "PERMISSIONS",
    "ToolUi",
    "ResourceCsp",
    "UiResourceMeta",
    "ui_declaration",
    "declares_ui",
    "is_ui_uri",
    "tool_ui",
    "ui_resource_meta",
]

UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
"""The extension's id, under ``extensions`` in the client's and the server's capabilities."""

UI_MIME_TYPE: Final = "text/html;profile=mcp-app"
"""The MIME type of an interface's HTML (the extension's drafts once said ``text/html+mcp``; no host needs it)."""

UI_SCHEME: Final = "ui://"
"""What the URI of every interface starts with."""

RESOURCE_URI_META_KEY: Final = "ui/resourceUri"
"""The older, flat tool ``_meta`` key naming the interface; hosts are told to read it beside ``_meta.ui``."""

VISIBILITIES: Final = ("model", "app")
"""Who may see and call a tool: the model (the agent), the app (its interface); both by default."""

PERMISSIONS: Final = ("camera", "microphone", "geolocation", "clipboardWrite")
"""The sandbox permissions an interface may ask the host for, as ``_meta.ui.permissions`` names them."""


class ToolUi(msgspec.Struct, frozen=True):
    """What a tool's ``_meta`` links to it: its interface (a ``ui://`` URI, or ``None``) and who may call it."""

    resource_uri: str | None
    """The ``ui://`` URI of the tool's interface, or ``None`` for a tool that has none (an app-only helper)."""
    visibility: tuple[str, ...] = VISIBILITIES
    """``"model"`` and/or ``"app"``; both when the tool does not say."""


class ResourceCsp(msgspec.Struct, rename="camel", omit_defaults=True):
    """``_meta.ui.csp``: the origins an interface may reach, by what it reaches them for."""

    connect_domains: list[str] = msgspec.field(default_factory=list)
    """``connect-src``: ``fetch``, XHR, WebSocket."""
    resource_domains: list[str] = msgspec.field(default_factory=list)
    """``script-src``, ``style-src``, ``img-src``, ``font-src``, ``media-src``."""
    frame_domains: list[str] = msgspec.field(default_factory=list)
    """``frame-src``: nested frames (none by default)."""
    base_uri_domains: list[str] = msgspec.field(default_factory=list)
    """``base-uri`` (the document's own origin by default)."""


class UiResourceMeta(msgspec.Struct, rename="camel", omit_defaults=True):
    """``_meta.ui`` of an interface's resource: what the host needs to sandbox and frame it."""

    csp: ResourceCsp | None = None
    """The origins the interface may reach; ``None``: none (the host's restrictive default)."""
    permissions: dict[str, dict[str, Any]] | None = None
    """The sandbox permissions asked for (keys from :data:`PERMISSIONS`, each ``{}``)."""
    domain: str | None = None
    """A dedicated origin for the frame, in the host's own format."""
    prefers_border: bool | None = None
    """Whether the interface wants the host's border around it; ``None``: the host decides."""


def ui_declaration() -> dict[str, Any]:
    """The settings a client that renders apps declares under ``extensions["io.modelcontextprotocol/ui"]``."""
    return {"mimeTypes": [UI_MIME_TYPE]}


def declares_ui(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether client ``capabilities`` declare the extension with a ``mimeTypes`` list naming :data:`UI_MIME_TYPE`.

    Bare ``{}`` settings do not count: the extension makes ``mimeTypes`` required, and a
    client that lists other types only renders none of ours.
    """
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    settings = extensions.get(UI_EXTENSION) if isinstance(extensions, Mapping) else None
    types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(types, list) and UI_MIME_TYPE in types


def is_ui_uri(value: Any) -> bool:
    """Whether ``value`` is a string of the ``ui://`` scheme with something after it."""
    return isinstance(value, str) and value.startswith(UI_SCHEME) and len(value) > len(UI_SCHEME)


def tool_ui(tool: Mapping[str, Any]) -> ToolUi | None:
    """What a listed ``Tool`` links to, from its ``_meta``; ``None`` when it names neither interface nor visibility.

    ``_meta.ui.resourceUri`` first, the flat ``_meta["ui/resourceUri"]`` when that is
    missing or not a ``ui://`` URI; a visibility list with nothing but ``"model"`` and
    ``"app"`` in it, else the default (both).
    """
    meta = tool.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    nested = meta.get("ui")
    nested = nested if isinstance(nested, Mapping) else {}
    uri = nested.get("resourceUri")
    if not is_ui_uri(uri):
        uri = meta.get(RESOURCE_URI_META_KEY)
        if not is_ui_uri(uri):
            uri = None
    listed = nested.get("visibility")
    visibility = VISIBILITIES
    if isinstance(listed, list) and listed and all(item in VISIBILITIES for item in listed):
        visibility = tuple(dict.fromkeys(listed))
    if uri is None and "visibility" not in nested:
        return None
    return ToolUi(uri, visibility)


def ui_resource_meta(item: Mapping[str, Any]) -> UiResourceMeta | None:
    """``_meta.ui`` of a resource's listing entry or content item, or ``None`` when it has none or it is malformed."""
    meta = item.get("_meta")
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    if not isinstance(ui, Mapping):
        return None
    try:
        return msgspec.convert(ui, UiResourceMeta)
    except msgspec.ValidationError:
        return None
