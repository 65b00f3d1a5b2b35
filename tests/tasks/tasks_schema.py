"""Validation against the tasks extension's JSON Schema (``tests/schemas/mcp-ext-tasks/schema.json``)."""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ..wire_schema import SCHEMAS_DIR

__all__ = ["validate_task"]

_URI = "urn:mcp:ext:tasks"


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS_DIR / "mcp-ext-tasks" / "schema.json").read_text())
    registry: Registry[Any] = Registry().with_resource(_URI, DRAFT202012.create_resource(schema))
    return Draft202012Validator({"$ref": f"{_URI}#/$defs/{name}"}, registry=registry)


def validate_task(name: str, instance: Any) -> Any:
    """Raise ``jsonschema.ValidationError`` unless ``instance`` is a valid ``$defs/<name>``; return it."""
    _validator(name).validate(instance)
    return instance
