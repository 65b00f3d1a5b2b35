"""Validation of JSON against the official MCP 2025-11-25 ``schema.json``, for tests of the legacy era.

The twin of ``tests/wire_schema.py`` for the other era, on the same
:class:`~tests.wire_schema.SchemaFile` (one cached validator per ``$defs`` name,
references resolved). The schema is ``tests/schemas/mcp-2025-11-25/schema.json``.

:func:`validate_legacy_message` checks what a 2025 client sends and what it is answered.
:func:`validate_server_message` checks a message a server sends to a 2025 client,
including what the schema leaves open: a result carries no member only the modern era
defines (``resultType``, ``ttlMs``, ``cacheScope``, the server-info ``_meta``), and an
error never uses a code only the modern era defines (``-32020`` to ``-32022``).
"""

from __future__ import annotations

from typing import Any

from .wire_schema import _NOTIFICATION_DEFS as MODERN_NOTIFICATION_DEFS
from .wire_schema import SCHEMAS_DIR, SchemaFile, _fail

__all__ = ["SCHEMA_PATH", "RESULT_DEFS", "validator", "validate", "is_valid", "validate_server_message",
           "validate_legacy_message"]

SCHEMA_PATH = SCHEMAS_DIR / "mcp-2025-11-25" / "schema.json"
"""The official 2025-11-25 JSON Schema (draft 2020-12, definitions under ``$defs``)."""

RESULT_DEFS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "completion/complete": "CompleteResult",
}
"""The ``$defs`` name of the result of each method a legacy session serves."""

_BASE_URI = "urn:mcp:schema:2025-11-25"

_REQUEST_DEFS = {
    "elicitation/create": "ElicitRequest",
    "sampling/createMessage": "CreateMessageRequest",
    "roots/list": "ListRootsRequest",
    "ping": "PingRequest",
}

# The modern era's, but its listen acknowledgement, and the URL elicitation's completion.
_NOTIFICATION_DEFS = {**{method: name for method, name in MODERN_NOTIFICATION_DEFS.items()
                         if method != "notifications/subscriptions/acknowledged"},
                      "notifications/elicitation/complete": "ElicitationCompleteNotification"}

_MODERN_RESULT_MEMBERS = ("resultType", "ttlMs", "cacheScope")
_MODERN_CODES = (-32020, -32021, -32022)


_SCHEMA = SchemaFile(SCHEMA_PATH, _BASE_URI)


validator = _SCHEMA.validator
validate = _SCHEMA.validate
is_valid = _SCHEMA.is_valid


def validate_server_message(msg: Any, result_def: str | None = None) -> None:
    """Validate one message a server sends to a 2025 client; raise ``jsonschema.ValidationError``.

    * a result: ``JSONRPCResultResponse``, ``result`` against ``result_def`` when given,
      and no modern-only member;
    * an error: ``JSONRPCErrorResponse``, with no modern-only code;
    * a request (the server asking the client): ``JSONRPCRequest`` and ``ServerRequest``,
      plus its own ``$def``;
    * a notification: ``JSONRPCNotification`` and ``ServerNotification``, plus its own ``$def``.
    """
    if not isinstance(msg, dict):
        _fail(f"a JSON-RPC message must be an object, got {type(msg).__name__}")
    if "result" in msg:
        validate(msg, "JSONRPCResultResponse")
        result = msg["result"]
        for member in _MODERN_RESULT_MEMBERS:
            if member in result:
                _fail(f"a 2025 result has no {member}: {result!r}"[:300])
        if isinstance(result.get("_meta"), dict) and "io.modelcontextprotocol/serverInfo" in result["_meta"]:
            _fail("a 2025 result carries no io.modelcontextprotocol/serverInfo")
        if result_def is not None:
            validate(result, result_def)
        return
    if "error" in msg:
        validate(msg, "JSONRPCErrorResponse")
        if msg["error"]["code"] in _MODERN_CODES:
            _fail(f"error code {msg['error']['code']} belongs to the modern era: {msg!r}"[:300])
        return
    if "method" in msg and "id" in msg:
        validate(msg, "JSONRPCRequest")
        validate(msg, "ServerRequest")
        specific = _REQUEST_DEFS.get(msg["method"])
        if specific is None:
            _fail(f"a server sends no {msg['method']} request to a 2025 client")
        validate(msg, specific)
        return
    if "method" in msg:
        validate(msg, "JSONRPCNotification")
        validate(msg, "ServerNotification")
        specific = _NOTIFICATION_DEFS.get(msg["method"])
        if specific is None:
            _fail(f"a server sends no {msg['method']} notification to a 2025 client")
        validate(msg, specific)
        return
    _fail("not a JSON-RPC response, request or notification")


_CLIENT_DEFS = {
    "initialize": "InitializeRequest", "ping": "PingRequest", "tools/list": "ListToolsRequest",
    "tools/call": "CallToolRequest", "prompts/list": "ListPromptsRequest", "prompts/get": "GetPromptRequest",
    "resources/list": "ListResourcesRequest", "resources/templates/list": "ListResourceTemplatesRequest",
    "resources/read": "ReadResourceRequest", "completion/complete": "CompleteRequest",
    "resources/subscribe": "SubscribeRequest", "resources/unsubscribe": "UnsubscribeRequest",
    "logging/setLevel": "SetLevelRequest", "notifications/initialized": "InitializedNotification",
    "notifications/cancelled": "CancelledNotification",
}
_ANSWER_DEFS = {"elicitation/create": "ElicitResult", "sampling/createMessage": "CreateMessageResult",
                "roots/list": "ListRootsResult", "ping": "EmptyResult"}


def validate_legacy_message(message: dict[str, Any], answering: str | None = None) -> None:
    """Validate a 2025 client's traffic: what it sends (a request, a notification, the answer to a
    server's request ``answering`` names) and the results it gets (the method they answer in
    ``answering``); a server's own requests and notifications go to :func:`validate_server_message`."""
    method = message.get("method")
    if method in _CLIENT_DEFS:
        validate(message, "JSONRPCRequest" if "id" in message else "JSONRPCNotification")
        validate(message, _CLIENT_DEFS[method])
    elif method is not None:
        validate_server_message(message)
    elif "error" in message:
        validate(message, "JSONRPCErrorResponse")
    else:
        validate(message, "JSONRPCResultResponse")
        definition = _ANSWER_DEFS.get(answering or "") or RESULT_DEFS.get(answering or "")
        if definition is not None:
            validate(message["result"], definition)
