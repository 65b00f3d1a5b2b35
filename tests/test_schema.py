"""Tests for mrtr.core.schema: the flat elicitation form builder, Struct derivation, validation."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from typing import Annotated, Any, Literal, Optional

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import Meta

from mrtr.core.errors import INVALID_PARAMS, InvalidParams
from mrtr.core.schema import Form, RequestedSchema, requested_schema

from . import wire_schema
from .conftest import examples

EXAMPLES = wire_schema.EXAMPLES_DIR

# One validator per $defs name of the official schema (tests/schemas/), as everywhere else in the tests.
official = wire_schema.validator


def assert_official(schema: dict[str, Any]) -> None:
    """The requestedSchema and each of its properties pass the official JSON Schema."""
    official("ElicitRequestFormParams").validate({"message": "m", "requestedSchema": schema})
    for prop in schema["properties"].values():
        official("PrimitiveSchemaDefinition").validate(prop)


def test_official_validator_is_wired():
    # Guards the other tests: a validator that accepts everything proves nothing.
    assert official("PrimitiveSchemaDefinition").is_valid({"type": "string"})
    assert not official("PrimitiveSchemaDefinition").is_valid({"type": "object"})
    assert not official("ElicitRequestFormParams").is_valid(
        {"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}}}
    )


def prop_of(form: Form, name: str = "f") -> dict[str, Any]:
    return form.to_schema()["properties"][name]


# ------------------------------------------------------------------------ fixtures


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    MEDIUM = 2
    HIGH = 3


# --------------------------------------------------------------- Form JSON output

FORM_CASES: list[tuple[str, Form, dict[str, Any]]] = [
    ("string-minimal", Form().string("f"), {"type": "string"}),
    (
        "string-full",
        Form().string(
            "f",
            title="Email",
            description="Where we write",
            min_length=3,
            max_length=50,
            format="email",
            default="user@example.com",
        ),
        {
            "type": "string",
            "title": "Email",
            "description": "Where we write",
            "minLength": 3,
            "maxLength": 50,
            "format": "email",
            "default": "user@example.com",
        },
    ),
    ("string-uri", Form().string("f", format="uri"), {"type": "string", "format": "uri"}),
    ("string-date", Form().string("f", format="date"), {"type": "string", "format": "date"}),
    (
        "string-date-time",
        Form().string("f", format="date-time", default="2024-01-02T03:04:05Z"),
        {"type": "string", "format": "date-time", "default": "2024-01-02T03:04:05Z"},
    ),
    ("integer-minimal", Form().integer("f"), {"type": "integer"}),
    (
        "integer-full",
        Form().integer("f", title="Age", description="Years", minimum=0, maximum=150, default=30),
        {"type": "integer", "title": "Age", "description": "Years", "minimum": 0, "maximum": 150, "default": 30},
    ),
    (
        "number-full",
        Form().number("f", title="Score", minimum=0.0, maximum=100.0, default=95.5),
        {"type": "number", "title": "Score", "minimum": 0.0, "maximum": 100.0, "default": 95.5},
    ),
    ("boolean-minimal", Form().boolean("f"), {"type": "boolean"}),
    (
        "boolean-full",
        Form().boolean("f", title="Agree", description="Do you?", default=False),
        {"type": "boolean", "title": "Agree", "description": "Do you?", "default": False},
    ),
    (
        "choice-untitled",
        Form().choice("f", ["Red", "Green", "Blue"], title="Color", default="Red"),
        {"type": "string", "title": "Color", "enum": ["Red", "Green", "Blue"], "default": "Red"},
    ),
    (
        "choice-titled-sequence",
        Form().choice("f", ["#F00", "#0F0"], titles=["Red", "Green"], description="Pick"),
        {
            "type": "string",
            "description": "Pick",
            "oneOf": [{"const": "#F00", "title": "Red"}, {"const": "#0F0", "title": "Green"}],
        },
    ),
    (
        "choice-titled-mapping",
        Form().choice("f", ["a", "b"], titles={"b": "Bee", "a": "Ay"}, default="b"),
        {
            "type": "string",
            "oneOf": [{"const": "a", "title": "Ay"}, {"const": "b", "title": "Bee"}],
            "default": "b",
        },
    ),
    (
        "choice-enum",
        Form().choice("f", Color, default=Color.GREEN),
        {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
    ),
    (
        "choice-int-enum-uses-names",
        Form().choice("f", Level, titles={Level.LOW: "Low", Level.MEDIUM: "Medium", Level.HIGH: "High"}),
        {
            "type": "string",
            "oneOf": [
                {"const": "LOW", "title": "Low"},
                {"const": "MEDIUM", "title": "Medium"},
                {"const": "HIGH", "title": "High"},
            ],
        },
    ),
    (
        "choices-untitled",
        Form().choices("f", ["Red", "Green", "Blue"], title="Colors", min_items=1, max_items=2, default=["Red"]),
        {
            "type": "array",
            "title": "Colors",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["Red", "Green", "Blue"]},
            "default": ["Red"],
        },
    ),
    (
        "choices-titled",
        Form().choices("f", ["r", "g"], titles=["Red", "Green"], description="Some", default=["g", "r"]),
        {
            "type": "array",
            "description": "Some",
            "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "default": ["g", "r"],
        },
    ),
    (
        "choices-enum",
        Form().choices("f", Level, default=[Level.HIGH]),
        {"type": "array", "items": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]}, "default": ["HIGH"]},
    ),
]


@pytest.mark.parametrize(("form", "expected"), [c[1:] for c in FORM_CASES], ids=[c[0] for c in FORM_CASES])
def test_form_property_json(form, expected):
    schema = form.to_schema()
    assert schema == {"type": "object", "properties": {"f": expected}, "required": ["f"]}
    assert_official(schema)


def test_form_order_required_and_optional():
    form = (
        Form()
        .string("name")
        .integer("age", optional=True)
        .boolean("ok")
        .choice("c", ["x"], optional=True)
        .choices("m", ["y"])
    )
    schema = form.to_schema()
    assert list(schema["properties"]) == ["name", "age", "ok", "c", "m"]
    assert schema["required"] == ["name", "ok", "m"]
    assert all("required" not in prop for prop in schema["properties"].values())
    assert_official(schema)


def test_all_optional_omits_required():
    schema = Form().string("a", optional=True).number("b", optional=True).to_schema()
    assert schema == {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}
    assert_official(schema)


def test_empty_form():
    assert Form().to_schema() == {"type": "object", "properties": {}}
    assert_official(Form().to_schema())


def test_methods_chain_on_the_same_form():
    form = Form()
    assert form.string("a") is form
    assert form.integer("b") is form
    assert form.number("c") is form
    assert form.boolean("d") is form
    assert form.choice("e", ["x"]) is form
    assert form.choices("f", ["x"]) is form
    assert len(form) == 6


def test_to_schema_returns_a_copy():
    form = Form().choice("c", ["a", "b"])
    form.to_schema()["properties"]["c"]["enum"].append("evil")
    assert prop_of(form, "c") == {"type": "string", "enum": ["a", "b"]}


def test_enum_default_by_wire_value_and_member_sequence():
    form = Form().choice("f", [Color.RED, "plain"], default="red")
    assert prop_of(form) == {"type": "string", "enum": ["red", "plain"], "default": "red"}


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Form().string("dup").integer("dup"), "'dup'"),
        (lambda: Form().string("f", format="phone"), "format"),
        (lambda: Form().string("f", min_length=5, max_length=2), "min_length"),
        (lambda: Form().string("f", min_length=-1), "min_length"),
        (lambda: Form().string("f", max_length=True), "max_length"),
        (lambda: Form().string("f", default=5), "default"),
        (lambda: Form().string("f", min_length=3, default="ab"), "default"),
        (lambda: Form().string("f", format="email", default="nope"), "default"),
        (lambda: Form().string("f", title=3), "title"),
        (lambda: Form().string("f", description=["x"]), "description"),
        (lambda: Form().string(""), "name"),
        (lambda: Form().integer("f", minimum=10, maximum=1), "minimum"),
        (lambda: Form().integer("f", default=True), "default"),
        (lambda: Form().integer("f", default=1.5), "default"),
        (lambda: Form().integer("f", default="3"), "default"),
        (lambda: Form().integer("f", minimum=5, default=4), "default"),
        (lambda: Form().integer("f", minimum=float("nan")), "minimum"),
        (lambda: Form().number("f", maximum=False), "maximum"),
        (lambda: Form().number("f", default="1"), "default"),
        (lambda: Form().boolean("f", default=1), "default"),
        (lambda: Form().choice("f", []), "option"),
        (lambda: Form().choice("f", "abc"), "options"),
        (lambda: Form().choice("f", [1, 2]), "option"),
        (lambda: Form().choice("f", ["a", "a"]), "'a'"),
        (lambda: Form().choice("f", ["a", "b"], default="c"), "default"),
        (lambda: Form().choice("f", ["a", "b"], titles=["A"]), "titles"),
        (lambda: Form().choice("f", ["a", "b"], titles={"a": "A"}), "title"),
        (lambda: Form().choice("f", ["a"], titles={"a": "A", "z": "Z"}), "'z'"),
        (lambda: Form().choice("f", ["a"], titles=[3]), "title"),
        (lambda: Form().choices("f", ["a", "b"], min_items=2, max_items=1), "min_items"),
        (lambda: Form().choices("f", ["a", "b"], min_items=3), "min_items"),
        (lambda: Form().choices("f", ["a", "b"], max_items=-1), "max_items"),
        (lambda: Form().choices("f", ["a", "b"], default="a"), "default"),
        (lambda: Form().choices("f", ["a", "b"], default=["c"]), "default"),
        (lambda: Form().choices("f", ["a", "b"], default=["a", "a"]), "default"),
        (lambda: Form().choices("f", ["a", "b"], min_items=1, default=[]), "default"),
    ],
)
def test_builder_rejects_wrong_arguments(build, fragment):
    with pytest.raises(ValueError) as info:
        build()
    message = str(info.value)
    assert fragment in message
    # Every complaint names the property it is about (the empty name is itself the problem).
    assert "'f'" in message or "'dup'" in message or "name must be" in message


def test_duplicate_property_names_it():
    with pytest.raises(ValueError, match="duplicate property 'email'"):
        Form().string("email").string("email")


# ----------------------------------------------------------- official examples

PROPERTY_EXAMPLE_DIRS = [
    "StringSchema",
    "NumberSchema",
    "BooleanSchema",
    "UntitledSingleSelectEnumSchema",
    "TitledSingleSelectEnumSchema",
    "UntitledMultiSelectEnumSchema",
    "TitledMultiSelectEnumSchema",
]
PROPERTY_EXAMPLES = sorted(p for d in PROPERTY_EXAMPLE_DIRS for p in (EXAMPLES / d).glob("*.json"))
FORM_EXAMPLES = sorted((EXAMPLES / "ElicitRequestFormParams").glob("*.json"))


def test_examples_are_present():
    assert {p.parent.name for p in PROPERTY_EXAMPLES} == set(PROPERTY_EXAMPLE_DIRS)
    assert len(FORM_EXAMPLES) >= 2


@pytest.mark.parametrize("path", PROPERTY_EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_property_example_round_trips(path):
    example = json.loads(path.read_text())
    schema = {"type": "object", "properties": {"field": example}, "required": ["field"]}
    assert Form.from_schema(schema).to_schema() == schema
    assert_official(schema)


@pytest.mark.parametrize("path", FORM_EXAMPLES, ids=lambda p: p.name)
def test_form_example_round_trips(path):
    schema = json.loads(path.read_text())["requestedSchema"]
    assert Form.from_schema(schema).to_schema() == schema


def test_from_schema_keeps_property_order_and_drops_dollar_schema():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"z": {"type": "boolean"}, "a": {"type": "string"}},
        "required": ["a"],
    }
    out = Form.from_schema(schema).to_schema()
    assert list(out["properties"]) == ["z", "a"]
    assert out == {"type": "object", "properties": schema["properties"], "required": ["a"]}


def test_from_schema_accepts_typed_titled_multi_select_items():
    # mocapi and others add "type": "string" next to anyOf; the official example omits it.
    schema = {
        "type": "object",
        "properties": {
            "m": {"type": "array", "items": {"type": "string", "anyOf": [{"const": "a", "title": "A"}]}}
        },
    }
    assert prop_of(Form.from_schema(schema), "m") == {
        "type": "array",
        "items": {"anyOf": [{"const": "a", "title": "A"}]},
    }


def test_legacy_enum_names_are_read_back_as_written():
    # A proxy relays an upstream's form as that server wrote it: the legacy shape stays legacy.
    legacy = {
        "type": "string",
        "title": "Size",
        "enum": ["s", "m", "l"],
        "enumNames": ["Small", "Medium", "Large"],
        "default": "m",
    }
    official("LegacyTitledEnumSchema").validate(legacy)
    form = Form.from_schema({"type": "object", "properties": {"size": legacy}})
    assert prop_of(form, "size") == legacy
    official("LegacyTitledEnumSchema").validate(prop_of(form, "size"))
    rs = requested_schema(form)
    assert rs.validate({"size": "l"}) == {"size": "l"}
    with pytest.raises(InvalidParams, match='"size"'):
        rs.validate({"size": "Large"})


def test_legacy_enum_names_length_mismatch():
    with pytest.raises(ValueError, match="'size'"):
        Form.from_schema(
            {"type": "object", "properties": {"size": {"type": "string", "enum": ["s", "m"], "enumNames": ["S"]}}}
        )


@pytest.mark.parametrize(
    ("prop", "fragment"),
    [
        ({"type": "object", "properties": {"x": {"type": "string"}}}, "nested objects"),
        ({"type": "array", "items": {"type": "string"}}, "multi-select"),
        ({"type": "array", "items": {"type": "integer", "enum": [1]}}, "strings"),
        ({"type": "array", "items": {"type": "object"}}, "multi-select"),
        ({"type": "array"}, "multi-select"),
        ({"type": "null"}, "unsupported type"),
        ({"type": ["string", "null"]}, "unsupported type"),
        ({}, "unsupported type"),
        ({"type": "string", "pattern": "^a"}, "pattern"),
        ({"type": "number", "exclusiveMinimum": 0}, "exclusiveMinimum"),
        ({"type": "string", "oneOf": [{"const": "a", "title": "A", "x": 1}]}, "const"),
        ({"type": "string", "oneOf": "a"}, "oneOf"),
        ({"type": "string", "enum": "abc"}, "enum"),
        ({"type": "string", "format": "ipv4"}, "format"),
        ({"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": "a"}, "default"),
        ("string", "object"),
    ],
)
def test_from_schema_rejects_outside_vocabulary(prop, fragment):
    with pytest.raises(ValueError) as info:
        Form.from_schema({"type": "object", "properties": {"weird": prop}})
    assert "'weird'" in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}, "additionalProperties": False},
        {"type": "array", "properties": {}},
        {"properties": {}},
        {"type": "object"},
        {"type": "object", "properties": {}, "required": ["ghost"]},
        {"type": "object", "properties": {}, "required": "ghost"},
        ["not", "a", "schema"],
    ],
)
def test_from_schema_rejects_bad_top_level(schema):
    with pytest.raises(ValueError):
        Form.from_schema(schema)


# ------------------------------------------------------------------ Struct derivation


class Everything(msgspec.Struct, rename="camel"):
    full_name: Annotated[str, Meta(title="Name", description="As on your ID", min_length=1, max_length=80)]
    age: Annotated[int, Meta(ge=18, le=120)]
    score: Annotated[float, Meta(ge=0.0, le=1.0)]
    subscribed: bool
    plan: Literal["pro", "free", "team"]
    color: Color
    level: Level
    tags: Annotated[list[Literal["b", "a"]], Meta(min_length=1, max_length=2)]
    colors: set[Color]
    levels: frozenset[Level]
    more: tuple[Color, ...]
    birthday: dt.date
    meeting: dt.datetime
    nickname: str | None
    middle: Optional[str] = None
    count: int = 3
    ratio: float = 0.5
    verbose: bool = False
    favorite: Color = Color.BLUE
    tier: Literal["gold", "silver"] | None = "silver"
    picks: set[Level] = msgspec.field(default_factory=lambda: {Level.HIGH, Level.LOW})
    since: dt.date = dt.date(2020, 2, 29)


EVERYTHING_SCHEMA = {
    "type": "object",
    "properties": {
        "fullName": {
            "type": "string",
            "title": "Name",
            "description": "As on your ID",
            "minLength": 1,
            "maxLength": 80,
        },
        "age": {"type": "integer", "minimum": 18, "maximum": 120},
        "score": {"type": "number", "minimum": 0.0, "maximum": 1.0},
        "subscribed": {"type": "boolean"},
        "plan": {"type": "string", "enum": ["pro", "free", "team"]},
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "level": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["b", "a"]}},
        "colors": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}},
        "levels": {"type": "array", "items": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]}},
        "more": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}},
        "birthday": {"type": "string", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
        "nickname": {"type": "string"},
        "middle": {"type": "string"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": "number", "default": 0.5},
        "verbose": {"type": "boolean", "default": False},
        "favorite": {"type": "string", "enum": ["red", "green", "blue"], "default": "blue"},
        "tier": {"type": "string", "enum": ["gold", "silver"], "default": "silver"},
        "picks": {"type": "array", "items": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]}, "default": ["LOW", "HIGH"]},
        "since": {"type": "string", "format": "date", "default": "2020-02-29"},
    },
    "required": [
        "fullName",
        "age",
        "score",
        "subscribed",
        "plan",
        "color",
        "level",
        "tags",
        "colors",
        "levels",
        "more",
        "birthday",
        "meeting",
    ],
}


def test_struct_derivation_every_supported_type():
    rs = requested_schema(Everything)
    assert rs.schema == EVERYTHING_SCHEMA
    assert list(rs.schema["properties"]) == list(EVERYTHING_SCHEMA["properties"])
    assert rs.struct_type is Everything
    assert_official(rs.schema)


def test_struct_schema_equals_the_same_form_built_by_hand():
    class Contact(msgspec.Struct):
        email: Annotated[str, Meta(title="Email")]
        age: int | None = None

    by_hand = Form().string("email", title="Email").integer("age", optional=True)
    assert requested_schema(Contact).canonical == requested_schema(by_hand).canonical
    assert requested_schema(Contact).digest == requested_schema(by_hand).digest
    assert requested_schema(Contact) != requested_schema(by_hand)  # different struct_type


def test_struct_exclusive_integer_bounds_become_inclusive():
    class Bounded(msgspec.Struct):
        n: Annotated[int, Meta(gt=0, lt=10)]

    assert requested_schema(Bounded).schema["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": 9}


def test_struct_rename_explicit_mapping():
    class Renamed(msgspec.Struct, rename={"user_id": "id"}):
        user_id: str
        other_field: int

    assert list(requested_schema(Renamed).schema["properties"]) == ["id", "other_field"]


class Address(msgspec.Struct):
    street: str


class Profile(msgspec.Struct):
    name: str
    address: Address


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        (Address, "nested objects"),
        (dict[str, str], "nested objects"),
        (list[str], "lists of string choices"),
        (list[int], "lists of string choices"),
        (list[Optional[Color]], "lists of string choices"),
        (Any, "Any"),
        (int | str, "unions"),
        (Literal[1, 2], "string literals"),
        (tuple[str, str], "cannot be asked for"),
        (dt.time, "cannot be asked for"),
        (bytes, "cannot be asked for"),
        (Annotated[str, Meta(pattern="^a")], "pattern"),
        (Annotated[float, Meta(gt=0)], "gt"),
        (Annotated[int, Meta(multiple_of=2)], "multiple_of"),
    ],
)
def test_struct_unsupported_field_types(annotation, fragment):
    cls = msgspec.defstruct("Bad", [("ok", str), ("field", annotation)])
    with pytest.raises(TypeError) as info:
        requested_schema(cls)
    assert "Bad.field" in str(info.value)
    assert fragment in str(info.value)


def test_struct_nested_message_names_struct_and_field():
    with pytest.raises(TypeError) as info:
        requested_schema(Profile)
    assert str(info.value) == (
        "Profile.address: nested objects cannot be asked for in an elicitation form "
        "(the 2026-07-28 schema is flat)"
    )


def test_struct_default_violating_its_own_constraint():
    class Wrong(msgspec.Struct):
        name: Annotated[str, Meta(min_length=3)] = "x"

    with pytest.raises(TypeError, match="Wrong.name"):
        requested_schema(Wrong)


def test_array_like_struct_refused():
    class Row(msgspec.Struct, array_like=True):
        a: str

    with pytest.raises(TypeError, match="array_like"):
        requested_schema(Row)


# -------------------------------------------------------------------- validate()


def rejects(rs: RequestedSchema, content: object, field: str | None) -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        rs.validate(content)
    assert info.value.code == INVALID_PARAMS == -32602
    if field is not None:
        assert f'"{field}"' in info.value.message
    return info.value


VALIDATE_CASES = [
    # (id, form, good values, bad values)
    ("string", Form().string("f"), ["", "x", "ünïcode"], [1, None, True, ["x"], {"a": "b"}]),
    ("min-length", Form().string("f", min_length=2), ["ab", "abc"], ["a", ""]),
    ("max-length", Form().string("f", max_length=2), ["", "ab"], ["abc"]),
    (
        "email",
        Form().string("f", format="email"),
        ["a@b.co", "first.last+tag@sub.example.org"],
        ["plain", "a@b", "@b.co", "a@@b.co", "a b@c.de", "a@b.", "a@.b", "a@b@c.de"],
    ),
    (
        "uri",
        Form().string("f", format="uri"),
        ["https://example.com/x?y=1", "mailto:a@b.c", "urn:isbn:123", "a+b.c-d:x"],
        ["example.com", "/relative", "1http://x", "http://exa mple.com", "", ":nope"],
    ),
    (
        "date",
        Form().string("f", format="date"),
        ["2024-01-02", "2024-02-29"],
        ["2023-02-29", "2024-1-2", "20240102", "2024-W01-1", "2024-01-02T00:00:00", "2024-13-01", "2024-01-02\n"],
    ),
    (
        "date-time",
        Form().string("f", format="date-time"),
        [
            "2024-01-02T03:04:05Z",
            "2024-01-02T03:04:05.123456789+01:00",
            "2024-01-02 03:04:05-05:30",
            "2024-01-02t03:04:05z",
            "2024-01-02T03:04",
            "2024-01-02T03:04:05",
        ],
        ["2024-01-02", "03:04:05", "2024-01-02T25:00:00Z", "2024-01-02X03:04:05", "2024-01-02T03Z", "24-01-02T03:04"],
    ),
    ("integer", Form().integer("f"), [0, -5, 3.0, -(2**63), 2**64 - 1],
     [True, False, 3.5, "3", None, float("nan"), [1], 10**30, -(2**63) - 1, 2**64, 1e308]),
    ("minimum", Form().integer("f", minimum=18), [18, 19], [17, -1]),
    ("maximum", Form().number("f", maximum=1.5), [1.5, 1, -3], [1.6, 2]),
    ("number", Form().number("f"), [0, 1.5, -2, 10**20], [True, "1.5", float("inf"), float("nan"), None]),
    ("boolean", Form().boolean("f"), [True, False], [0, 1, "true", None]),
    ("enum", Form().choice("f", ["a", "b"]), ["a", "b"], ["c", "A", 1, None, ["a"]]),
    ("oneOf", Form().choice("f", ["x", "y"], titles=["X", "Y"]), ["x"], ["X", "z"]),
    (
        "multi",
        Form().choices("f", ["a", "b", "c"]),
        [[], ["a"], ["c", "a"], ["a", "b", "c"]],
        ["a", ["d"], ["a", "a"], [1], [None], None, ("a",), {"a": 1}],
    ),
    ("multi-titled", Form().choices("f", ["a", "b"], titles=["A", "B"]), [["b"]], [["A"]]),
    ("min-items", Form().choices("f", ["a", "b", "c"], min_items=2), [["a", "b"]], [[], ["a"]]),
    ("max-items", Form().choices("f", ["a", "b", "c"], max_items=1), [[], ["a"]], [["a", "b"]]),
]


@pytest.mark.parametrize(("form", "good", "bad"), [c[1:] for c in VALIDATE_CASES], ids=[c[0] for c in VALIDATE_CASES])
def test_validate_good_and_bad(form, good, bad):
    rs = requested_schema(form)
    for value in good:
        content = {"f": value}
        read = rs.validate(content)
        # What the handler reads is the content itself, but for an integer field's 3.0: a copy holding the int 3.
        turned = type(value) is float and rs.schema["properties"]["f"]["type"] == "integer"
        assert read == content and (read is not content) == turned
    for value in bad:
        rejects(rs, {"f": value}, "f")


def test_validate_messages_are_specific():
    rs = requested_schema(
        Form()
        .integer("age", minimum=18)
        .string("email", format="email")
        .choice("c", ["a", "b"])
        .choices("m", ["x"], max_items=1)
        .string("s", min_length=2)
    )
    ok = {"age": 20, "email": "a@b.co", "c": "a", "m": ["x"], "s": "ab"}
    assert rejects(rs, {**ok, "age": "abc"}, "age").message == (
        'Elicitation answer field "age": expected an integer, got "abc"'
    )
    assert rejects(rs, {**ok, "age": 17}, "age").message.endswith("expected at least 18, got 17")
    assert "email address" in rejects(rs, {**ok, "email": "nope"}, "email").message
    assert 'one of "a", "b"' in rejects(rs, {**ok, "c": "z"}, "c").message
    assert "more than once" in rejects(rs, {**ok, "m": ["x", "x"]}, "m").message
    assert "at least 2 characters" in rejects(rs, {**ok, "s": "a"}, "s").message


def test_integral_float_is_kept():
    rs = requested_schema(Form().integer("n"))
    content = {"n": 3.0}
    assert rs.validate(content) == {"n": 3.0}
    assert type(content["n"]) is float


def test_validate_missing_required_field():
    rs = requested_schema(Form().string("name").string("email").integer("age", optional=True))
    error = rejects(rs, {"email": "x"}, "name")
    assert "missing" in error.message
    rejects(rs, {"name": "x"}, "email")
    assert rs.validate({"name": "x", "email": "y"}) == {"name": "x", "email": "y"}


def test_validate_absent_content():
    rs = requested_schema(Form().string("first").string("second"))
    assert "missing" in rejects(rs, None, "first").message
    assert requested_schema(Form().string("a", optional=True)).validate(None) == {}
    assert requested_schema(Form()).validate(None) == {}


@pytest.mark.parametrize("content", [[], "x", 3, ["name"], True])
def test_validate_content_must_be_an_object(content):
    rejects(requested_schema(Form().string("name", optional=True)), content, None)


def test_validate_unknown_fields_are_named():
    rs = requested_schema(Form().string("name"))
    error = rejects(rs, {"name": "x", "extra": 1, "other": "y"}, "extra")
    assert '"other"' in error.message


def test_validate_bool_is_not_a_number():
    rs = requested_schema(Form().integer("i", optional=True).number("n", optional=True))
    rejects(rs, {"i": True}, "i")
    rejects(rs, {"n": False}, "n")


def test_validate_struct_derived_schema():
    rs = requested_schema(Everything)
    good = {
        "fullName": "Ada",
        "age": 36,
        "score": 0.5,
        "subscribed": True,
        "plan": "team",
        "color": "red",
        "level": "HIGH",
        "tags": ["a"],
        "colors": ["green", "red"],
        "levels": [],
        "more": ["blue"],
        "birthday": "1815-12-10",
        "meeting": "2024-01-02T10:30",
    }
    assert rs.validate(good) is good
    rejects(rs, {**good, "age": 17}, "age")
    rejects(rs, {**good, "level": "3"}, "level")
    rejects(rs, {**good, "tags": ["a", "b", "a"]}, "tags")
    rejects(rs, {**good, "fullName": ""}, "fullName")
    rejects(rs, {**good, "full_name": "x"}, "full_name")


# ---------------------------------------------------------------------- convert()


def test_convert_to_struct():
    rs = requested_schema(Everything)
    content = rs.validate(
        {
            "fullName": "Ada",
            "age": 36.0,
            "score": 1,
            "subscribed": False,
            "plan": "pro",
            "color": "green",
            "level": "MEDIUM",
            "tags": ["b", "a"],
            "colors": ["blue", "red"],
            "levels": ["LOW", "HIGH"],
            "more": ["red"],
            "birthday": "2024-02-29",
            "meeting": "2024-01-02T10:30",
            "picks": ["MEDIUM"],
        }
    )
    value = rs.convert(content)
    assert value == Everything(
        full_name="Ada",
        age=36,
        score=1.0,
        subscribed=False,
        plan="pro",
        color=Color.GREEN,
        level=Level.MEDIUM,
        tags=["b", "a"],
        colors={Color.BLUE, Color.RED},
        levels=frozenset({Level.LOW, Level.HIGH}),
        more=(Color.RED,),
        birthday=dt.date(2024, 2, 29),
        meeting=dt.datetime(2024, 1, 2, 10, 30),
        nickname=None,
        picks={Level.MEDIUM},
    )
    assert type(value.age) is int
    assert isinstance(value.colors, set)
    assert isinstance(value.levels, frozenset)
    assert value.favorite is Color.BLUE
    assert value.since == dt.date(2020, 2, 29)


def test_convert_date_time_with_offset():
    class When(msgspec.Struct):
        at: dt.datetime

    rs = requested_schema(When)
    assert rs.convert(rs.validate({"at": "2024-01-02T03:04:05Z"})).at == dt.datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc
    )


def test_convert_form_returns_the_dict():
    rs = requested_schema(Form().string("a"))
    content = {"a": "x"}
    assert rs.convert(content) is content
    assert rs.convert(None) == {}


def test_convert_failure_is_invalid_params():
    class Strict(msgspec.Struct):
        day: dt.date

    with pytest.raises(InvalidParams, match="Strict") as info:
        requested_schema(Strict).convert({"day": "not a date"})
    assert info.value.code == INVALID_PARAMS


# --------------------------------------------------------------------- compilation


def test_struct_cache_identity():
    class Cached(msgspec.Struct):
        a: str

    assert requested_schema(Cached) is requested_schema(Cached)


def test_form_compiles_once_and_recompiles_after_change():
    form = Form().string("a")
    first = requested_schema(form)
    assert requested_schema(form) is first
    form.integer("b")
    second = requested_schema(form)
    assert second is not first
    assert list(second.schema["properties"]) == ["a", "b"]
    assert list(first.schema["properties"]) == ["a"]
    assert requested_schema(form) is second
    rejects(second, {"a": "x"}, "b")


def test_requested_schema_passes_compiled_through():
    rs = requested_schema(Form().string("a"))
    assert requested_schema(rs) is rs


@pytest.mark.parametrize("spec", [{"type": "object", "properties": {}}, Profile, int, None, "Form", Address(street="x")])
def test_requested_schema_rejects_other_things(spec):
    with pytest.raises(TypeError):
        requested_schema(spec)


def test_canonical_and_digest():
    import hashlib

    rs = requested_schema(Form().string("b", title="B").integer("a"))
    assert rs.canonical == (
        b'{"properties":{"a":{"type":"integer"},"b":{"title":"B","type":"string"}},'
        b'"required":["b","a"],"type":"object"}'
    )
    assert rs.digest == hashlib.sha256(rs.canonical).digest()
    assert rs.struct_type is None


def test_raw_schema_constructor_matches_form():
    form = Form().string("s", format="date").choices("m", ["a", "b"], titles=["A", "B"])
    rs = RequestedSchema(form.to_schema())
    assert rs == requested_schema(form)
    assert hash(rs) == hash(requested_schema(form))


def test_requested_schema_is_immutable():
    rs = requested_schema(Form().string("a"))
    with pytest.raises(AttributeError):
        rs.schema = {}  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del rs.digest
    with pytest.raises(AttributeError):
        rs.anything = 1  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- hypothesis

names = st.text(min_size=1, max_size=8)
plain_text = st.text(max_size=12)
titles_or_none = st.none() | plain_text
bounds = st.integers(min_value=-1000, max_value=1000)
finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def string_specs(draw):
    low = draw(st.none() | st.integers(0, 5))
    high = draw(st.none() | st.integers(low or 0, 10))
    fmt = draw(st.none() | st.sampled_from(["email", "uri", "date", "date-time"]))
    default = None
    if fmt is None and draw(st.booleans()):
        default = draw(st.text(min_size=low or 0, max_size=high if high is not None else 12))
    elif fmt is not None and draw(st.booleans()) and (low or 0) <= 10 and (high is None or high >= 20):
        default = {
            "email": "a@b.co",
            "uri": "https://x.io",
            "date": "2024-01-02",
            "date-time": "2024-01-02T03:04:05Z",
        }[fmt]
    return ("string", {"min_length": low, "max_length": high, "format": fmt, "default": default})


@st.composite
def numeric_specs(draw):
    kind = draw(st.sampled_from(["integer", "number"]))
    values = bounds if kind == "integer" else (bounds | finite)
    low = draw(st.none() | values)
    high = draw(st.none() | values)
    if low is not None and high is not None and low > high:
        low, high = high, low
    default = None
    if draw(st.booleans()):
        lo = math.ceil(low) if low is not None else -5000
        hi = math.floor(high) if high is not None else 5000
        if lo <= hi:
            default = draw(st.integers(lo, hi))
    return (kind, {"minimum": low, "maximum": high, "default": default})


@st.composite
def choice_specs(draw, multi: bool):
    options = draw(st.lists(plain_text, min_size=1, max_size=5, unique=True))
    titled = draw(st.sampled_from(["none", "list", "map"]))
    titles: object = None
    if titled == "list":
        titles = draw(st.lists(plain_text, min_size=len(options), max_size=len(options)))
    elif titled == "map":
        titles = {o: draw(plain_text) for o in reversed(options)}
    if not multi:
        default = draw(st.none() | st.sampled_from(options))
        return ("choice", {"options": options, "titles": titles, "default": default})
    low = draw(st.none() | st.integers(0, len(options)))
    high = draw(st.none() | st.integers(low or 0, len(options) + 2))
    default = None
    if draw(st.booleans()):
        size = draw(st.integers(low or 0, min(high if high is not None else len(options), len(options))))
        default = draw(st.permutations(options))[:size]
    return (
        "choices",
        {"options": options, "titles": titles, "min_items": low, "max_items": high, "default": default},
    )


property_specs = st.tuples(
    names,
    st.one_of(
        string_specs(),
        numeric_specs(),
        st.tuples(st.just("boolean"), st.fixed_dictionaries({"default": st.none() | st.booleans()})),
        choice_specs(multi=False),
        choice_specs(multi=True),
    ),
    titles_or_none,
    titles_or_none,
    st.booleans(),
)


@st.composite
def forms(draw):
    specs = draw(st.lists(property_specs, max_size=6, unique_by=lambda spec: spec[0]))
    form = Form()
    for name, (kind, kwargs), title, description, optional in specs:
        kwargs = dict(kwargs)
        if kind in ("choice", "choices"):
            options = kwargs.pop("options")
            getattr(form, kind)(name, options, title=title, description=description, optional=optional, **kwargs)
        else:
            getattr(form, kind)(name, title=title, description=description, optional=optional, **kwargs)
    return form


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=10,
)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(forms())
def test_random_forms_round_trip(form):
    schema = form.to_schema()
    assert Form.from_schema(schema).to_schema() == schema
    assert RequestedSchema(schema) == requested_schema(form)
    assert_official(schema)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_content_only_raises_invalid_params(data):
    form = data.draw(forms())
    rs = requested_schema(form)
    field_names = list(form.to_schema()["properties"]) + ["other"]
    content = data.draw(
        json_values
        | st.dictionaries(st.sampled_from(field_names), json_values, max_size=len(field_names))
        | st.fixed_dictionaries({name: json_values for name in field_names[:-1]})
    )
    try:
        result = rs.validate(content)
    except InvalidParams as error:
        assert error.code == INVALID_PARAMS
    else:
        assert result is content or (content is None and result == {})
        rs.convert(result)
