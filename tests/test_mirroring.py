"""mrtr.core.mirroring: the one set of rules for body values mirrored in HTTP headers.

The client encodes with it, the server's HTTP checks decode and compare with it, the
registry and the client check ``x-mcp-header`` annotations with it, and the CLI's curl
example is built with it. The cases at the end are where the copies it replaced
disagreed.
"""

from __future__ import annotations

import base64
from typing import Annotated

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.core.errors import HeaderMismatch
from mrtr.core.mirroring import (
    MAX_SAFE_INTEGER,
    InvalidHeaderSchema,
    decode_value,
    encode_value,
    is_token,
    matches,
    mirrored_parameters,
)
from mrtr.server import Header, Server


def tool(properties: dict, **schema: object) -> dict:
    return {"name": "t", "inputSchema": {"type": "object", "properties": properties, **schema}}


# -- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value, sent", [
    # the spec's encoding examples (streamable-http.mdx, "Value Encoding")
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    # type conversion: decimal integers, lowercase booleans
    (42, "42"), (-7, "-7"), (True, "true"), (False, "false"),
    # an empty string has no plain form a header could carry
    ("", "=?base64??="),
    ("tab\there", "=?base64?dGFiCWhlcmU=?="),
])
def test_values_are_sent_as_the_spec_shows(value, sent):
    assert encode_value(value) == sent
    assert matches(decode_value(sent, "Mcp-Param-X"), value)


@given(st.text())
def test_any_text_survives_the_trip(text):
    sent = encode_value(text)
    assert decode_value(sent, "Mcp-Param-X") == text
    assert matches(decode_value(sent, "Mcp-Param-X"), text)
    if not sent.startswith("=?base64?"):
        assert sent == text  # plain text travels untouched


@given(st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | st.booleans())
def test_integers_and_booleans_survive_the_trip(value):
    sent = encode_value(value)
    assert not sent.startswith("=?base64?")
    assert matches(decode_value(sent, "Mcp-Param-X"), value)


@given(st.text(min_size=1))
def test_a_raw_value_with_control_or_non_ascii_characters_is_refused(text):
    raw = "a" + text + "z"
    legal = all(ch == "\t" or 0x20 <= ord(ch) <= 0x7E for ch in raw)
    if legal:
        assert decode_value(raw, "Mcp-Param-X") == raw
    else:
        with pytest.raises(HeaderMismatch, match="invalid characters"):
            decode_value(raw, "Mcp-Param-X")


@pytest.mark.parametrize("raw", ["=?base64?SGVsbG8?=", "=?base64?SGVs bG8=?=", "=?base64?/w==?="])
def test_a_marked_value_must_be_strict_base64_of_utf8(raw):
    with pytest.raises(HeaderMismatch, match="not valid =\\?base64"):
        decode_value(raw, "Mcp-Name")


@pytest.mark.parametrize("header, body, same", [
    ("7", 7, True), ("007", 7, True), ("+7", 7, True), ("7.0", 7, True), ("7e0", 7, True),
    ("0x7", 7, False), ("seven", 7, False), ("True", True, False), ("true", True, True),
    ("Region", "region", False),
])
def test_numbers_compare_numerically_and_text_exactly(header, body, same):
    assert matches(header, body) is same


# -- x-mcp-header annotations ----------------------------------------------------------------


def test_annotations_are_found_along_properties():
    found = mirrored_parameters(tool({
        "region": {"type": "string", "x-mcp-header": "Region"},
        "options": {"type": "object", "properties": {"fast": {"type": "boolean", "x-mcp-header": "Fast"}}},
        "note": {"type": "string", "default": {"x-mcp-header": "data, not an annotation"}},
    }))
    assert found == {"Region": ("region",), "Fast": ("options", "fast")}


@pytest.mark.parametrize("schema", [
    tool({"a": {"type": "number", "x-mcp-header": "A"}}),
    tool({"a": {"type": ["string", "null"], "x-mcp-header": "A"}}),
    tool({"a": {"type": "string", "x-mcp-header": "has space"}}),
    tool({"a": {"type": "string", "x-mcp-header": ""}}),
    tool({"a": {"type": "string", "x-mcp-header": 7}}),
    tool({"a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "integer", "x-mcp-header": "dup"}}),
    # statically reachable through properties alone, or the tool is invalid
    tool({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}),
    tool({"a": {"oneOf": [{"type": "string", "x-mcp-header": "A"}]}}),
    tool({"a": {"$ref": "#/$defs/A"}}, **{"$defs": {"A": {"type": "string", "x-mcp-header": "A"}}}),
    tool({}, **{"x-mcp-header": "Root"}),
])
def test_annotations_that_break_a_rule_make_the_tool_invalid(schema):
    with pytest.raises(InvalidHeaderSchema):
        mirrored_parameters(schema)


def test_the_server_publishes_only_annotations_clients_accept():
    server = Server("h", secret=b"k" * 32)

    @server.tool
    def routed(region: Annotated[str, Header("Region")], count: Annotated[int, Header("Count")] = 1) -> str:
        return region

    (definition,) = server.tool_definitions()
    assert mirrored_parameters(definition) == {"Region": ("region",), "Count": ("count",)}
    assert server.header_parameters("routed") == {"region": "region", "count": "count"}
    with pytest.raises(TypeError, match="used twice"):
        @server.tool
        def twice(a: Annotated[str, Header("X")], b: Annotated[str, Header("x")]) -> str:
            return a


# -- where the copies disagreed --------------------------------------------------------------


def test_a_header_name_with_a_trailing_newline_is_not_a_token():
    # The registry's pattern ended in "$", which also matches before a final newline.
    assert is_token("Region") and not is_token("Region\n") and not is_token("")
    with pytest.raises(ValueError, match="HTTP token"):
        Header("Region\n")


def test_a_raw_value_with_a_trailing_newline_is_refused():
    # The server's pattern ended in "$" too, and took "us-west1\n" for a plain value.
    with pytest.raises(HeaderMismatch, match="invalid characters"):
        decode_value("us-west1\n", "Mcp-Param-Region")


def test_an_annotation_under_items_is_not_ignored():
    # The client skipped it and called the tool; the spec makes such a tool invalid.
    with pytest.raises(InvalidHeaderSchema, match="properties alone"):
        mirrored_parameters(tool({"list": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}}))


def test_the_base64_form_is_base64_of_utf8():
    sent = encode_value("Zürich")
    assert base64.b64decode(sent[len("=?base64?"):-len("?=")]).decode("utf-8") == "Zürich"
