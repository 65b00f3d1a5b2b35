"""MCP Apps on the server: interfaces as ``ui://`` resources, tools linked to them, the extension advertised.

What the registry's ``server.ui_resource(...)`` and ``@server.tool(ui=..., visibility=...)``
do, in one place (the names and shapes both sides read are :mod:`mrtr.core.apps`):

- :func:`register_ui_resource` registers the HTML as an ordinary static resource with the
  MIME type ``text/html;profile=mcp-app`` and puts the same ``_meta.ui`` object
  (:class:`Csp`, permissions, domain, border preference) on its listing entry and on its
  content item: the extension's drafts let hosts read either, and real hosts do read one
  or the other. A URI outside ``ui://``, an invalid CSP entry, an unknown permission or
  an empty document is refused here, at registration;
- :func:`link_tool` writes a tool's link: ``_meta.ui.resourceUri`` and the flat
  ``_meta["ui/resourceUri"]``, with the same value (the official package writes both,
  and Claude has been seen to need the flat one), and ``_meta.ui.visibility`` when given;
- :func:`check_ui_links` refuses a link to a resource that is not registered, or is not
  an interface: at registration when the resource came first, else when the server starts
  (``Server.running()``), since a module may register its tools before its resources;
- :func:`advertise_ui` adds the extension to the server's capabilities
  (``Server.capabilities()``, which both eras read) whenever something of it is registered.

Visibility is advisory: it tells hosts whom to show a tool to, and a host's bridge
forwards an app's ``tools/call`` like any other. An app-only tool is dispatched and
authorized (``scopes``) exactly like every tool.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..carriers.contract import TASKS_EXTENSION
from ..core.apps import (PERMISSIONS, RESOURCE_URI_META_KEY, UI_EXTENSION, UI_MIME_TYPE, UI_SCHEME, VISIBILITIES,
                         ResourceCsp, UiResourceMeta, tool_ui)

if TYPE_CHECKING:
    from .catalog import Catalog

__all__ = ["Csp", "advertise_ui", "check_ui_links", "link_tool", "register_ui_resource", "session_extensions"]

_ORIGIN = re.compile(
    r"^(?P<scheme>https?|wss?)://"
    r"(?P<host>(?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
    r"|\[[0-9a-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)
_MAX_DOMAIN = 253


def _origin(entry: Any, field: str) -> str:
    """One CSP list entry as a host may use it: an origin, a ``*.`` wildcard allowed as its first label."""
    if not isinstance(entry, str):
        raise TypeError(f"Csp({field}=...): each entry is an origin string, got {type(entry).__name__} {entry!r}")
    origin = entry.strip().lower()
    if origin.endswith("/") and origin.count("/") == 3:
        origin = origin[:-1]  # "https://api.example.com/" is the origin written with its root path
    found = _ORIGIN.match(origin)
    problem = None
    if found is None:
        problem = ("it is not an origin (scheme://host[:port], the scheme http, https, ws or wss); hosts build "
                   "the policy from origins alone, so keywords ('self', *), schemes alone (https:, data:) and paths "
                   "are refused")
    elif found["port"] is not None and not 0 < int(found["port"]) < 65536:
        problem = "its port is not between 1 and 65535"
    elif found["host"].startswith("*.") and found["host"].count(".") < 2:
        problem = "a wildcard must stand before a registrable domain (https://*.example.com)"
    if problem is not None:
        raise ValueError(f"Csp({field}=...): {entry!r}: {problem}")
    return origin


def _origins(values: Any, field: str) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"Csp({field}=...) takes a list of origins, not one string: {field}=[{values!r}]")
    if not isinstance(values, Iterable):
        raise TypeError(f"Csp({field}=...) takes a list of origins, got {type(values).__name__}")
    return tuple(dict.fromkeys(_origin(value, field) for value in values))


@dataclass(frozen=True, init=False)
class Csp:
    """The origins an interface may reach, by what for: the ``csp`` of ``server.ui_resource(...)``.

    Each argument is a list of origins (``"https://api.example.com"``, a port allowed, a
    wildcard as the first label: ``"https://*.example.com"``); the host builds the frame's
    Content-Security-Policy from them and allows nothing else. ``connect``: ``fetch``,
    XHR and WebSocket (``connect-src``); ``resources``: scripts, styles, images, fonts and
    media (``script-src`` and its siblings); ``frames``: nested frames (``frame-src``);
    ``base_uri``: the document's ``<base>`` (``base-uri``). Anything else (a keyword such
    as ``'self'`` or ``*``, a scheme alone, a path) is refused with a ``ValueError``, as a
    host would refuse it; an interface that inlines its scripts and styles needs no
    ``Csp`` at all.
    """

    connect: tuple[str, ...]
    """Origins for ``fetch``, XHR and WebSocket (``connectDomains``)."""
    resources: tuple[str, ...]
    """Origins for scripts, styles, images, fonts and media (``resourceDomains``)."""
    frames: tuple[str, ...]
    """Origins for nested frames (``frameDomains``)."""
    base_uri: tuple[str, ...]
    """Origins the document's base URI may name (``baseUriDomains``)."""

    def __init__(self, *, connect: Iterable[str] = (), resources: Iterable[str] = (), frames: Iterable[str] = (),
                 base_uri: Iterable[str] = ()) -> None:
        object.__setattr__(self, "connect", _origins(connect, "connect"))
        object.__setattr__(self, "resources", _origins(resources, "resources"))
        object.__setattr__(self, "frames", _origins(frames, "frames"))
        object.__setattr__(self, "base_uri", _origins(base_uri, "base_uri"))

    def to_wire(self) -> ResourceCsp:
        """The ``_meta.ui.csp`` object (its empty lists left out)."""
        return ResourceCsp(list(self.connect), list(self.resources), list(self.frames), list(self.base_uri))


def _ui_uri(uri: Any, what: str) -> str:
    if not isinstance(uri, str) or not uri.startswith(UI_SCHEME) or len(uri) == len(UI_SCHEME):
        raise ValueError(f"{what}: an interface lives at a {UI_SCHEME} URI (\"{UI_SCHEME}my-app/view.html\"), "
                         f"got {uri!r}")
    if any(character.isspace() or ord(character) < 0x20 for character in uri) or "{" in uri:
        raise ValueError(f"{what}: {uri!r} is not a URI of one resource (no spaces, control characters or "
                         "{template} parts)")
    return uri


def _permissions(permissions: Any) -> dict[str, dict[str, Any]] | None:
    if permissions is None:
        return None
    if isinstance(permissions, str) or not isinstance(permissions, Iterable):
        raise TypeError(f"ui_resource(permissions=...) takes a list of names from {', '.join(PERMISSIONS)}, "
                        f"got {permissions!r}")
    names = list(dict.fromkeys(permissions))
    unknown = [name for name in names if name not in PERMISSIONS]
    if unknown:
        raise ValueError(f"ui_resource(permissions=...): unknown permission {unknown[0]!r}; the extension defines "
                         f"{', '.join(PERMISSIONS)}")
    return {name: {} for name in names} or None


def _domain(domain: Any) -> str | None:
    if domain is None:
        return None
    if not isinstance(domain, str) or not domain or len(domain) > _MAX_DOMAIN or \
            any(character.isspace() or ord(character) < 0x20 or character in "\"';," for character in domain):
        raise ValueError(f"ui_resource(domain=...): {domain!r} is not a domain a host could use (a non-empty name "
                         f"of at most {_MAX_DOMAIN} characters, without spaces, quotes, commas or semicolons)")
    return domain


def _document(uri: str, html: Any, path: Any) -> str:
    if (html is None) == (path is None):
        raise TypeError(f"ui_resource({uri!r}) takes the interface as html=\"<!doctype html>...\" or as "
                        "path=\"view.html\" (a file), exactly one of them")
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"ui_resource({uri!r}, path=...) takes a file path, got {type(path).__name__}")
        try:
            html = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"ui_resource({uri!r}): cannot read the interface from {os.fspath(path)!r}: {exc}"
                             ) from None
    if not isinstance(html, str):
        raise TypeError(f"ui_resource({uri!r}, html=...) takes the HTML document as a str, got {type(html).__name__}")
    if not html.strip():
        raise ValueError(f"ui_resource({uri!r}): the interface is an empty document")
    return html


def register_ui_resource(resource: Callable[..., Callable[[Any], Any]], catalog: Catalog, uri: str, *,
                         html: str | None = None, path: str | os.PathLike[str] | None = None, csp: Csp | None = None,
                         permissions: Iterable[str] | None = None, domain: str | None = None, prefers_border: bool | None = None, name: str | None = None,
                         title: str | None = None, description: str | None = None) -> None:
    """Register an interface at ``uri`` with the registry's ``resource`` decorator into ``catalog``
    (see ``Registry.ui_resource``); every argument is checked here."""
    uri = _ui_uri(uri, "ui_resource")
    document = _document(uri, html, path)
    if csp is not None and not isinstance(csp, Csp):
        raise TypeError(f"ui_resource({uri!r}, csp=...) takes a mrtr.Csp(connect=..., resources=..., ...), got "
                        f"{type(csp).__name__}")
    if prefers_border is not None and not isinstance(prefers_border, bool):
        raise TypeError(f"ui_resource({uri!r}, prefers_border=...) takes True, False or None, got {prefers_border!r}")
    meta = UiResourceMeta(csp=csp.to_wire() if csp is not None and csp != Csp() else None,
                          permissions=_permissions(permissions), domain=_domain(domain),
                          prefers_border=prefers_border)
    ui = msgspec.to_builtins(meta)

    def interface() -> dict[str, Any]:
        item: dict[str, Any] = {"mimeType": UI_MIME_TYPE, "text": document}
        if ui:  # the content item carries _meta.ui too, a fresh copy each read
            item["_meta"] = {"ui": msgspec.to_builtins(meta)}
        return item

    interface.__qualname__ = interface.__name__ = f"ui_resource({uri!r})"
    resource(uri, name=name or uri, title=title, description=description, mime_type=UI_MIME_TYPE)(interface)
    if ui:
        catalog.resources[uri].definition["_meta"] = {"ui": ui}


def link_tool(catalog: Catalog, tool: str, definition: MutableMapping[str, Any], ui: Any, visibility: Any) -> None:
    """Write the link of tool ``tool`` into its ``definition``'s ``_meta`` (``ui=``, ``visibility=``); check both."""
    meta = definition.get("_meta") or {}
    taken = [key for key in ("ui", RESOURCE_URI_META_KEY) if key in meta]
    if taken:
        raise ValueError(f"tool {tool}: meta={{{taken[0]!r}: ...}} and ui=/visibility= both say what the tool "
                         "links to; give ui= and visibility= alone (mrtr writes both keys hosts read)")
    link: dict[str, Any] = {}
    if ui is not None:
        link["resourceUri"] = _ui_uri(ui, f"tool {tool}: ui=")
    if visibility is not None:
        if isinstance(visibility, str) or not isinstance(visibility, Iterable):
            raise TypeError(f"tool {tool}: visibility= takes a list such as (\"app\",), got {visibility!r}")
        chosen = list(dict.fromkeys(visibility))
        if not chosen or any(item not in VISIBILITIES for item in chosen):
            raise ValueError(f"tool {tool}: visibility= names who may see and call the tool, one or both of "
                             f"{', '.join(map(repr, VISIBILITIES))}; got {visibility!r}")
        link["visibility"] = chosen
    definition["_meta"] = {**meta, "ui": link,
                           **({RESOURCE_URI_META_KEY: link["resourceUri"]} if "resourceUri" in link else {})}
    if "resourceUri" in link:
        problem = _link_problem(catalog, tool, link["resourceUri"])
        if problem is not None and problem is not _UNREGISTERED:
            raise ValueError(problem)


_UNREGISTERED = "unregistered"  # not yet: a module may register its tools before its resources


def _link_problem(catalog: Catalog, tool: str, uri: str) -> str | None:
    found = catalog.resource_entry(uri)
    if found is None:
        return _UNREGISTERED
    if found[0].mime_type != UI_MIME_TYPE:
        return (f"tool {tool} links to {uri!r}, whose MIME type is {found[0].mime_type!r}, not {UI_MIME_TYPE!r}; "
                "register it with server.ui_resource")
    return None


def check_ui_links(catalog: Catalog) -> None:
    """Refuse (``ValueError``) a tool linked to a resource that is not registered or is not an interface.

    ``Server.running()`` calls it before serving; a link to a resource registered before
    the tool was checked at the tool's registration already.
    """
    problems = []
    for name, entry in catalog.tools.items():
        link = tool_ui(entry.definition)
        if link is None or link.resource_uri is None:
            continue
        problem = _link_problem(catalog, name, link.resource_uri)
        if problem is _UNREGISTERED:
            problem = (f"tool {name} links to the interface {link.resource_uri!r}, which no resource serves; "
                       f"register it with server.ui_resource({link.resource_uri!r}, html=...)")
        if problem is not None:
            problems.append(problem)
    if problems:
        raise ValueError("; ".join(problems))


def offers_ui(catalog: Catalog) -> bool:
    """Whether anything of the extension is registered, here or in a mounted server: an interface, or a tool
    with a link or a visibility."""
    interfaces = any(resource.mime_type == UI_MIME_TYPE for resource in catalog.resources.values()) or \
        any(template.mime_type == UI_MIME_TYPE for template in catalog.templates)
    return interfaces or any(tool_ui(tool.definition) is not None for tool in catalog.tools.values()) \
        or any(offers_ui(child) for child in catalog.mounts.values())


def advertise_ui(catalog: Catalog, capabilities: MutableMapping[str, Any]) -> None:
    """Add the extension to server ``capabilities`` when the catalogue offers any of it (both eras read them)."""
    if offers_ui(catalog):
        extensions = capabilities.get("extensions")
        capabilities["extensions"] = {**(extensions if isinstance(extensions, Mapping) else {}), UI_EXTENSION: {}}


def session_extensions(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The extensions of the server's ``capabilities`` a 2025 session is told of: all but tasks, which is modern."""
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, Mapping):
        return {}
    return {name: settings for name, settings in extensions.items() if name != TASKS_EXTENSION}
