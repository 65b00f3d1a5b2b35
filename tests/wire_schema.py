"""Validation of JSON against the official MCP 2026-07-28 ``schema.json``, for tests.

One ``Draft202012Validator`` per ``$defs`` name, built on first use and cached. The schema is
registered in a ``referencing.Registry`` under a fixed URI, so its internal ``#/$defs/...``
references resolve.

The schemas are the official files, copied unchanged into ``tests/schemas/`` (its README
names the source revision of each); nothing here reads outside the checkout.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

__all__ = [
    "SCHEMAS_DIR",
    "SchemaFile",
    "SCHEMA_DIR",
    "SCHEMA_PATH",
    "EXAMPLES_DIR",
    "schema",
    "def_names",
    "validator",
    "validate",
    "is_valid",
    "validate_message",
    "RESULT_DEFS",
]

SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"
"""``tests/schemas/``: the official schemas and examples, one folder per revision or extension."""

RESULT_DEFS = {
    "tools/call": "CallToolResult",
    "prompts/get": "GetPromptResult",
    "resources/read": "ReadResourceResult",
    "tools/list": "ListToolsResult",
    "prompts/list": "ListPromptsResult",
    "resources/list": "ListResourcesResult",
    "server/discover": "DiscoverResult",
}
"""The ``$defs`` name of the final result of each method, for ``validate_message(..., result_def=...)``."""

SCHEMA_DIR = SCHEMAS_DIR / "mcp-2026-07-28"
"""The folder of the 2026-07-28 schema and its examples."""

SCHEMA_PATH = SCHEMA_DIR / "schema.json"
"""The official JSON Schema (draft 2020-12, definitions under ``$defs``)."""

EXAMPLES_DIR = SCHEMA_DIR / "examples"
"""``examples/<TypeName>/*.json``: each file is valid against ``$defs/<TypeName>``."""

_BASE_URI = "urn:mcp:schema:2026-07-28"

# Notifications whose method names a specific $def.
_NOTIFICATION_DEFS = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/cancelled": "CancelledNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
}

# Error codes whose full response envelope has its own $def.
_ERROR_RESPONSE_DEFS = {
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}

# Error codes whose error object has its own $def.
_ERROR_OBJECT_DEFS = {
    -32700: "ParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
}


class SchemaFile:
    """One official ``schema.json``: its ``$defs`` and one cached validator per name, references resolved."""

    def __init__(self, path: Path, base_uri: str) -> None:
        self.path = path
        self.base_uri = base_uri

    @functools.cached_property
    def schema(self) -> dict[str, Any]:
        """The parsed file."""
        with self.path.open(encoding="utf-8") as f:
            return json.load(f)  # type: ignore[no-any-return]

    @functools.cached_property
    def _registry(self) -> Registry:
        return Registry().with_resource(self.base_uri, DRAFT202012.create_resource(self.schema))

    @functools.cache  # noqa: B019 - one instance per schema file, alive for the whole run
    def validator(self, def_name: str) -> Draft202012Validator:
        """The cached validator for ``$defs/<def_name>``; KeyError for an unknown name."""
        if def_name not in self.schema["$defs"]:
            raise KeyError(f"{self.path} has no $defs/{def_name}")
        return Draft202012Validator({"$ref": f"{self.base_uri}#/$defs/{def_name}"}, registry=self._registry)

    def validate(self, instance: Any, def_name: str) -> None:
        """Raise ``jsonschema.ValidationError`` unless ``instance`` is valid for ``def_name``."""
        self.validator(def_name).validate(instance)

    def is_valid(self, instance: Any, def_name: str) -> bool:
        """Whether ``instance`` is valid for ``$defs/<def_name>``."""
        return self.validator(def_name).is_valid(instance)


_SCHEMA = SchemaFile(SCHEMA_PATH, _BASE_URI)


def schema() -> dict[str, Any]:
    """The parsed schema.json."""
    return _SCHEMA.schema


def def_names() -> list[str]:
    """All ``$defs`` names, sorted."""
    return sorted(schema()["$defs"])


def validator(def_name: str) -> Draft202012Validator:
    """The cached validator for ``$defs/<def_name>``; KeyError for an unknown name."""
    return _SCHEMA.validator(def_name)


validate = _SCHEMA.validate
is_valid = _SCHEMA.is_valid


def _fail(message: str) -> None:
    raise jsonschema.ValidationError(message)


def validate_message(msg: dict[str, Any], result_def: str | None = None) -> None:
    """Validate a JSON-RPC message a server sends, including rules schema.json leaves out.

    * result response: ``JSONRPCResultResponse``, then ``result`` against ``result_def`` when
      given; every result must carry ``resultType``; an InputRequiredResult (by ``result_def``
      or by ``resultType``) must say ``"input_required"`` and carry ``inputRequests`` or
      ``requestState``, and a ``result_def`` naming a final result rejects ``input_required``;
    * error response: ``JSONRPCErrorResponse``, plus the specific error $def for known codes;
    * notification: ``JSONRPCNotification``, plus the specific $def for known methods.

    A server never sends requests, so a message with both ``method`` and ``id`` is rejected.
    Raises ``jsonschema.ValidationError``.
    """
    if not isinstance(msg, dict):
        _fail(f"a JSON-RPC message must be an object, got {type(msg).__name__}")

    if "result" in msg:
        validate(msg, "JSONRPCResultResponse")
        result = msg["result"]
        if "resultType" not in result:
            _fail("result has no resultType")
        is_input_required = (
            result_def == "InputRequiredResult" or result["resultType"] == "input_required"
        )
        if is_input_required:
            if result_def not in (None, "InputRequiredResult"):
                _fail(f"expected a final {result_def}, got resultType 'input_required'")
            if result["resultType"] != "input_required":
                _fail(
                    "InputRequiredResult must have resultType 'input_required', "
                    f"got {result['resultType']!r}"
                )
            if "inputRequests" not in result and "requestState" not in result:
                _fail("InputRequiredResult needs at least one of inputRequests, requestState")
            validate(result, "InputRequiredResult")
        elif result_def is not None:
            validate(result, result_def)
        return

    if "error" in msg:
        validate(msg, "JSONRPCErrorResponse")
        code = msg["error"]["code"]
        if code in _ERROR_RESPONSE_DEFS:
            validate(msg, _ERROR_RESPONSE_DEFS[code])
        elif code in _ERROR_OBJECT_DEFS:
            validate(msg["error"], _ERROR_OBJECT_DEFS[code])
        return

    if "method" in msg:
        if "id" in msg:
            _fail("servers must not send JSON-RPC requests")
        validate(msg, "JSONRPCNotification")
        specific = _NOTIFICATION_DEFS.get(msg["method"])
        if specific is not None:
            validate(msg, specific)
        return

    _fail("not a JSON-RPC response or notification: no result, error or method")
