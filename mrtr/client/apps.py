"""MCP Apps on the client: what a tool links to, and its interface read as a host reads it.

``mrtr.Client(..., ui=True)`` declares the extension (:func:`mrtr.core.apps.ui_declaration`)
in both eras, so a server's ``ctx.supports_ui`` is true for its calls. Whether or not it
declares it, the client can read an interface: :meth:`mrtr.Client.list_tools` returns
:class:`ToolInfo` dicts, whose :attr:`~ToolInfo.ui` names a tool's interface, and
:meth:`mrtr.Client.read_ui` reads it with ``resources/read`` (:func:`read_ui`), checks its
MIME type and returns a :class:`UiResource`: the HTML and its ``_meta.ui``, taken from the
content item and, when that has none, from the resource's listing entry (the rule the
extension gives hosts).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.apps import UI_MIME_TYPE, VISIBILITIES, UiResourceMeta, tool_ui, ui_resource_meta
from ..core.errors import INVALID_PARAMS, INVALID_REQUEST
from .errors import ClientError

class AppClient(Protocol):
    """What reading an interface needs of a client (:class:`mrtr.Client` is one)."""

    deadline: float | None
    """The client's deadline for one exchange."""

    def listed_tool(self, name: str) -> dict[str, Any] | None:
        """A tool as the client's last listing gave it."""

    def list_tools(self) -> Awaitable[list[Any]]:
        """``tools/list``, every page."""

    def list_resources(self) -> Awaitable[list[dict[str, Any]]]:
        """``resources/list``, every page."""

    def read_resource(self, uri: str, *, deadline: Any = ...) -> Awaitable[Any]:
        """``resources/read`` of ``uri``."""

__all__ = ["AppClient", "ToolInfo", "UiResource", "interface_note", "read_ui", "ui_traits"]


class ToolInfo(dict[str, Any]):
    """A ``Tool`` as ``tools/list`` gave it (a dict in wire shape), with what MCP Apps links to it."""

    @property
    def name(self) -> str:
        """The tool's name."""
        return str(self["name"])

    @property
    def ui(self) -> str | None:
        """The ``ui://`` URI of the tool's interface, or ``None`` when it has none.

        From ``_meta.ui.resourceUri``, else the older flat ``_meta["ui/resourceUri"]``.
        """
        link = tool_ui(self)
        return link.resource_uri if link is not None else None

    @property
    def visibility(self) -> tuple[str, ...]:
        """Who may see and call the tool: ``"model"`` and/or ``"app"`` (both when it does not say)."""
        link = tool_ui(self)
        return link.visibility if link is not None else VISIBILITIES


@dataclass(frozen=True)
class UiResource:
    """An interface as :meth:`mrtr.Client.read_ui` read it."""

    uri: str
    """Its ``ui://`` URI."""
    html: str
    """The HTML document."""
    meta: UiResourceMeta
    """Its ``_meta.ui`` (CSP domains, permissions, domain, border preference); empty when the server gave none."""
    raw: dict[str, Any] = field(repr=False)
    """The ``resources/read`` result as received."""


def ui_traits(tool: Mapping[str, Any]) -> list[str]:
    """What ``mrtr list`` says of a tool's interface and visibility, beside its name (nothing for a plain tool)."""
    link = tool_ui(tool)
    if link is None:
        return []
    traits = [f"interface {link.resource_uri}"] if link.resource_uri is not None else []
    if link.visibility == ("app",):
        traits.append("called by its interface only")
    elif link.visibility == ("model",):
        traits.append("hidden from interfaces")
    return traits


async def read_ui(client: AppClient, tool: str | Mapping[str, Any], *, deadline: Any) -> UiResource:
    """The interface of ``tool`` (a name, or a tool as listed), read through ``client``; see :meth:`Client.read_ui`."""
    entry: Mapping[str, Any]
    if isinstance(tool, str):
        listed = {item["name"]: item for item in await client.list_tools()}
        if tool not in listed:
            raise ClientError(INVALID_PARAMS, f"the server has no tool {tool!r}")
        entry = listed[tool]
    else:
        entry = tool
    link = tool_ui(entry)
    name = entry.get("name")
    if link is None or link.resource_uri is None:
        raise ClientError(INVALID_PARAMS, f"tool {name!r} has no interface (its _meta names no ui:// resource)")
    uri = link.resource_uri
    result = await client.read_resource(uri, deadline=deadline)
    items = [item for item in result.contents if item.get("uri") == uri] or result.contents[:1]
    if not items:
        raise ClientError(INVALID_REQUEST, f"the server read {uri} as no contents at all")
    item = items[0]
    if item.get("mimeType") != UI_MIME_TYPE:
        raise ClientError(INVALID_REQUEST, f"{uri} is not an MCP App interface: its MIME type is "
                                           f"{item.get('mimeType')!r}, not {UI_MIME_TYPE!r}")
    html = _text_of(uri, item)
    meta = ui_resource_meta(item)
    if meta is None:  # the content item wins; the listing entry is the fallback hosts use
        listing = [entry for entry in await client.list_resources() if entry.get("uri") == uri]
        meta = ui_resource_meta(listing[0]) if listing else None
    return UiResource(uri, html, meta if meta is not None else UiResourceMeta(), result.raw)


def _text_of(uri: str, item: Mapping[str, Any]) -> str:
    text = item.get("text")
    if isinstance(text, str):
        return text
    blob = item.get("blob")
    try:
        return base64.b64decode(blob, validate=True).decode("utf-8")  # type: ignore[arg-type]
    except (TypeError, ValueError, binascii.Error, UnicodeDecodeError):
        raise ClientError(INVALID_REQUEST, f"{uri}: the interface is neither text nor UTF-8 HTML in base64") from None


async def interface_note(client: AppClient, tool: str, save_ui: str | None) -> tuple[str, str | None] | None:
    """What ``mrtr call`` says of a tool's interface after calling it, and the HTML to write to ``save_ui``.

    ``None`` for a tool without an interface (``mrtr call`` refused ``--save-ui`` for it
    before calling). Without ``save_ui`` the note says how to get the interface; with it,
    the interface is read and the note says where it goes.
    """
    listed = client.listed_tool(tool)
    uri = ToolInfo(listed).ui if listed is not None else None
    if uri is None:
        return None
    if save_ui is None:
        return f"{tool} has an interface ({uri}) that a host renders; --save-ui PATH writes it to a file", None
    interface = await read_ui(client, listed, deadline=client.deadline)  # type: ignore[arg-type]
    return f"wrote the interface {uri} of {tool} to {save_ui}", interface.html
