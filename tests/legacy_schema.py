"""Validation against the 2025-11-25 ``schema.json``: what a client sends to, and receives from, a legacy server.

:func:`validate_legacy_message` picks the ``$defs`` entry a message must match from its
method (a request or notification) or from the method it answers (a result), the way
:func:`tests.wire_schema.validate_message` does for 2026-07-28.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from .wire_schema import SHARED_DIR

__all__ = ["validate_legacy", "validate_legacy_message", "LEGACY_REQUEST_DEFS", "LEGACY_RESULT_DEFS"]

_URI = "urn:mcp:schema:2025-11-25"

LEGACY_REQUEST_DEFS = {
    "initialize": "InitializeRequest", "ping": "PingRequest", "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest", "prompts/list": "ListPromptsRequest", "prompts/get": "GetPromptRequest",
    "resources/list": "ListResourcesRequest", "resources/templates/list": "ListResourceTemplatesRequest",
    "resources/read": "ReadResourceRequest", "completion/complete": "CompleteRequest",
    "logging/setLevel": "SetLevelRequest", "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest", "roots/list": "ListRootsRequest",
    "notifications/initialized": "InitializedNotification", "notifications/cancelled": "CancelledNotification",
    "notifications/progress": "ProgressNotification", "notifications/message": "LoggingMessageNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
}
"""The ``$defs`` name of each request and notification the tests see."""

LEGACY_RESULT_DEFS = {
    "initialize": "InitializeResult", "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult", "prompts/get": "GetPromptResult", "resources/list": "ListResourcesResult",
    "resources/read": "ReadResourceResult", "resources/templates/list": "ListResourceTemplatesResult",
    "completion/complete": "CompleteResult", "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult", "roots/list": "ListRootsResult",
}
"""The ``$defs`` name of each method's result."""


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads((SHARED_DIR / "mcp-2025-11-25" / "schema.json").read_text(encoding="utf-8"))


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(_URI, DRAFT202012.create_resource(_schema()))
    return Draft202012Validator({"$ref": f"{_URI}#/$defs/{name}"}, registry=registry)


def validate_legacy(instance: Any, name: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``instance`` is a valid 2025-11-25 ``$defs/<name>``."""
    _validator(name).validate(instance)


def validate_legacy_message(message: dict[str, Any], answering: str | None = None) -> None:
    """Validate a request, notification or response; ``answering`` names the method a result answers."""
    method = message.get("method")
    if method is not None:
        validate_legacy(message, "JSONRPCRequest" if "id" in message else "JSONRPCNotification")
        if method in LEGACY_REQUEST_DEFS:
            validate_legacy(message, LEGACY_REQUEST_DEFS[method])
        return
    if "error" in message:
        validate_legacy(message, "JSONRPCErrorResponse")
        return
    validate_legacy(message, "JSONRPCResultResponse")
    if answering in LEGACY_RESULT_DEFS:
        validate_legacy(message["result"], LEGACY_RESULT_DEFS[answering])
