"""Validation against the MCP Apps extension's ``schema.json`` (``@modelcontextprotocol/ext-apps``), for tests.

The twin of ``tests/wire_schema.py`` for the extension: one cached validator per ``$defs``
name of ``tests/schemas/mcp-ext-apps/schema.json``, the schema the package ships (its README
row names the version). What mrtr writes into ``_meta`` is checked here: a tool's
``_meta.ui`` against ``McpUiToolMeta``, a resource's against ``McpUiResourceMeta``, a
client's declaration against ``McpUiClientCapabilities``.
"""

from __future__ import annotations

from typing import Any

from .wire_schema import SCHEMAS_DIR, SchemaFile, _fail

__all__ = ["SCHEMA_PATH", "validate", "is_valid", "validate_tool", "validate_resource_meta"]

SCHEMA_PATH = SCHEMAS_DIR / "mcp-ext-apps" / "schema.json"
"""The ext-apps package's JSON Schema (draft 2020-12, definitions under ``$defs``)."""

_SCHEMA = SchemaFile(SCHEMA_PATH, "urn:mcp:ext-apps")

validate = _SCHEMA.validate
is_valid = _SCHEMA.is_valid


def validate_tool(tool: dict[str, Any]) -> str | None:
    """Check a listed tool's link as hosts read it; return its ``ui://`` URI (``None`` when it has none).

    ``_meta.ui`` against ``McpUiToolMeta``; the flat ``_meta["ui/resourceUri"]`` present
    exactly when ``resourceUri`` is, with the same value.
    """
    meta = tool.get("_meta") or {}
    ui = meta.get("ui")
    if ui is None:
        if "ui/resourceUri" in meta:
            _fail(f"tool {tool['name']}: a flat ui/resourceUri without _meta.ui")
        return None
    validate(ui, "McpUiToolMeta")
    if meta.get("ui/resourceUri") != ui.get("resourceUri"):
        _fail(f"tool {tool['name']}: _meta.ui.resourceUri {ui.get('resourceUri')!r} and the flat "
              f"ui/resourceUri {meta.get('ui/resourceUri')!r} differ")
    return ui.get("resourceUri")  # type: ignore[no-any-return]


def validate_resource_meta(item: dict[str, Any]) -> dict[str, Any] | None:
    """Check ``_meta.ui`` of a resource's listing entry or content item against ``McpUiResourceMeta``; return it."""
    ui = (item.get("_meta") or {}).get("ui")
    if ui is not None:
        validate(ui, "McpUiResourceMeta")
    return ui  # type: ignore[no-any-return]
