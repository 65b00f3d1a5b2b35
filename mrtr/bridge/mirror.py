"""The proxy's catalogue: the upstream's tools, prompts, resources, templates and completion, as entries.

:class:`Mirror` reads the upstream's listings through the proxy's client (every page)
and puts one entry per item in the proxy server's :class:`~mrtr.server.catalog.Catalog`,
each running the forwarding handler (:mod:`mrtr.bridge.forwarded`). An entry keeps
the upstream's definition as it was listed (schemas, annotations, ``outputSchema``,
``_meta``, titles, icons), so the downstream sees the upstream's catalogue; a tool the
upstream may (or must) run as a task may (or must) run as one here too, the downstream's
task driving the upstream's. The catalogue is read
when a client connects and a family again when the upstream says its list changed;
the downstream clients are then told, in their era.

A uri no listed resource or template matches is forwarded too, when the upstream serves
resources at all (the catalogue's ``unlisted`` entry): servers serve resources they do not
list, and one registered since the last listing is served before the upstream says so.
The upstream's "not found" reaches the client in its own era (``-32602`` modern,
``-32002`` in a 2025 session, ``data.uri`` either way).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..client.client import Client
from ..client.errors import ClientError
from ..core.errors import METHOD_NOT_FOUND
from ..core.mirroring import InvalidHeaderSchema, mirrored_parameters
from ..server.catalog import PromptEntry, ResourceEntry, TemplateEntry, ToolEntry
from ..server.dispatch import Server

__all__ = ["Mirror", "template_pattern"]

log = logging.getLogger("mrtr.bridge")

_FAMILIES = ("tools", "prompts", "resources")


def template_pattern(uri_template: str) -> re.Pattern[str]:
    """A pattern matching every uri ``uri_template`` (RFC 6570) can expand to: each expression matches any text."""
    parts = re.split(r"(\{[^{}]*\})", uri_template)
    body = "".join(".*?" if part.startswith("{") and part.endswith("}") else re.escape(part) for part in parts)
    return re.compile(f"(?s){body}\\Z")


def _tool_entry(definition: Mapping[str, Any], handler: Any) -> ToolEntry:
    shown = dict(definition)
    execution = shown.get("execution")
    task = execution.get("taskSupport") if isinstance(execution, Mapping) else None
    if task not in ("optional", "required"):
        task = None  # as the upstream: a task here exactly when it may be one there
    try:
        headers = {header.lower(): path[0] for header, path in mirrored_parameters(shown).items()}
    except InvalidHeaderSchema as error:
        log.warning("the upstream's tool %r has x-mcp-header annotations clients must refuse (%s); forwarded "
                    "without them", shown.get("name"), error)
        headers = {}
    return ToolEntry(str(shown["name"]), handler, None, (), shown, headers, False, task=task)


def _prompt_entry(definition: Mapping[str, Any], handler: Any) -> PromptEntry:
    arguments = [argument for argument in definition.get("arguments") or [] if isinstance(argument, Mapping)]
    names = tuple(str(argument.get("name")) for argument in arguments)
    required = tuple(str(argument.get("name")) for argument in arguments if argument.get("required"))
    return PromptEntry(str(definition["name"]), handler, names, required, dict(definition))


class Mirror:
    """Fills ``server``'s catalogue from the upstream's listings, every entry running ``handler``.

    ``request(method, params)`` sends one request upstream (``completion/complete`` goes
    through it, whichever client is open then).
    """

    def __init__(self, server: Server, handler: Any,
                 request: Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]) -> None:
        self.server = server
        self.handler = handler
        self.request = request
        self.offered: dict[str, Any] = {}

    async def read(self, client: Client) -> None:
        """Read every family the upstream offers (and its instructions) into the catalogue."""
        discovered = await client.discover()
        capabilities = discovered.get("capabilities")
        self.offered = dict(capabilities) if isinstance(capabilities, Mapping) else {}
        instructions = discovered.get("instructions")
        self.server.instructions = instructions if isinstance(instructions, str) else None
        for family in _FAMILIES:
            await self.read_family(client, family)
        self.server.catalog.completion = self._complete if "completions" in self.offered else None

    async def read_family(self, client: Client, family: str) -> None:
        """Read one family (``tools``, ``prompts`` or ``resources``, templates with it) into the catalogue.

        A family the upstream advertises but answers ``-32601`` for is read as empty (with a
        warning): what it does serve is still served.
        """
        try:
            await self._read_family(client, family)
        except ClientError as error:
            if error.code != METHOD_NOT_FOUND:
                raise
            log.warning("the upstream advertises %s but does not list them (%s); serving none", family,
                        error.message)
            self.offered.pop(family, None)  # until the next read of the whole catalogue
            await self._read_family(client, family)

    async def _read_family(self, client: Client, family: str) -> None:
        catalog = self.server.catalog
        offered = family in self.offered
        if family == "tools":
            tools = await client.list_tools() if offered else []
            fresh = {str(tool["name"]): _tool_entry(tool, self.handler) for tool in tools}
            catalog.tools.clear()
            catalog.tools.update(fresh)
        elif family == "prompts":
            prompts = await client.list_prompts() if offered else []
            listed = {str(prompt["name"]): _prompt_entry(prompt, self.handler) for prompt in prompts}
            catalog.prompts.clear()
            catalog.prompts.update(listed)
        else:
            resources = await client.list_resources() if offered else []
            templates = await client.list_resource_templates() if offered else []
            catalog.resources.clear()
            catalog.resources.update({
                str(item["uri"]): ResourceEntry(str(item["uri"]), self.handler, dict(item), item.get("mimeType"))
                for item in resources})
            catalog.templates[:] = [
                TemplateEntry(template_pattern(str(item["uriTemplate"])), self.handler, dict(item), item.get("mimeType"))
                for item in templates]
            # Any other uri is the upstream's to serve or refuse: listed nowhere, forwarded as read.
            catalog.unlisted = ResourceEntry("", self.handler, {}, None) if offered else None

    async def changed(self, client: Client, family: str) -> None:
        """The upstream said ``family``'s list changed: read it again and tell the downstream clients."""
        if family not in _FAMILIES:
            return
        await self.read_family(client, family)
        notify = {"tools": self.server.notify_tools_changed, "prompts": self.server.notify_prompts_changed,
                  "resources": self.server.notify_resources_changed}[family]
        notify()

    async def _complete(self, ref: Any, argument: Any, context: Any) -> Any:
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context is not None:
            params["context"] = context
        result = await self.request("completion/complete", params)
        completion = result.get("completion")
        return completion if isinstance(completion, dict) else {"values": []}
