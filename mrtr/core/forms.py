"""A form: built, compiled into the ``requestedSchema`` sent, and an answer checked against it.

The chainable :class:`Form` builder (or :meth:`Form.from_schema`, reading a raw
``requestedSchema``) describes one flat object; :func:`compiled` turns it into a
:class:`RequestedSchema`: the exact JSON sent on the wire, its canonical bytes and digest
(what replay fingerprints compare), and the validator that checks an accepted answer
against exactly what was asked (:meth:`RequestedSchema.validate`) and hands the handler
what it reads (:meth:`RequestedSchema.convert`). Each property's check is a rule of
:mod:`mrtr.core.checks`; a form derived from a type is :mod:`mrtr.core.derive`'s.
:func:`schema_changes` says which properties changed between two forms this process saw.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import math
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self, TypedDict

import msgspec

from .checks import STRING_FORMATS, Check, boolean_check, choice_check, choices_check, number_check, render, string_check
from .errors import InvalidParams
from .jsonrpc import canonical as _canonical

__all__ = ["Form", "FormTypeError", "RequestedSchema", "Hook", "Common", "compiled", "schema_changes", "wire_value",
           "wire_option"]


class FormTypeError(TypeError):
    """A type given as an elicitation form has a field the flat form vocabulary cannot express.

    The message names the type and the field (``Shipping.weight: gt, lt and multiple_of
    cannot be expressed...``); the replay core adds the handler and the line of its
    ``yield`` when a handler asked with it.
    """


Hook = Callable[[Any], Any]


class Common(TypedDict):
    """The keyword arguments every :class:`Form` property method shares.

    Values read from a raw schema or a Struct's metadata are not checked here:
    :meth:`Form._add` rejects a title or description that is not a string.
    """

    title: str | None
    description: str | None
    optional: bool


def _need_text(name: str, what: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"property {name!r}: {what} must be a string, got {value!r}")


def _need_count(name: str, what: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"property {name!r}: {what} must be a non-negative integer, got {value!r}")


def _need_bound(name: str, what: str, value: object) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise ValueError(f"property {name!r}: {what} must be a finite number, got {value!r}")


def _need_order(name: str, low_name: str, low: Any, high_name: str, high: Any) -> None:
    if low is not None and high is not None and low > high:
        raise ValueError(
            f"property {name!r}: {low_name} {low!r} is greater than {high_name} {high!r}"
        )


def wire_value(member: enum.Enum) -> str:
    """The string an Enum member travels as: its value when that is a str, else its name."""
    value = member.value
    return value if isinstance(value, str) else member.name


def _option_values(name: str, options: object) -> tuple[str, ...]:
    if isinstance(options, type) and issubclass(options, enum.Enum):
        values = [wire_value(member) for member in options]
    elif isinstance(options, (str, bytes, Mapping)) or not isinstance(options, Iterable):
        raise ValueError(
            f"property {name!r}: options must be a sequence of strings or an Enum class, "
            f"got {options!r}"
        )
    else:
        values = []
        for option in options:
            if isinstance(option, enum.Enum):
                values.append(wire_value(option))
            elif isinstance(option, str):
                values.append(option)
            else:
                raise ValueError(f"property {name!r}: option {option!r} is not a string")
    if not values:
        raise ValueError(f"property {name!r}: at least one option is required")
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"property {name!r}: option {value!r} appears more than once")
        seen.add(value)
    return tuple(values)


def _option_titles(name: str, values: tuple[str, ...], titles: object) -> tuple[str, ...] | None:
    if titles is None:
        return None
    if isinstance(titles, Mapping):
        by_value: dict[str, object] = {}
        for key, title in titles.items():
            wire = wire_value(key) if isinstance(key, enum.Enum) else key
            if wire not in values:
                raise ValueError(f"property {name!r}: title given for unknown option {key!r}")
            by_value[wire] = title
        missing = [value for value in values if value not in by_value]
        if missing:
            raise ValueError(f"property {name!r}: no title for option(s) {missing!r}")
        result = tuple(by_value[value] for value in values)
    elif isinstance(titles, (str, bytes)) or not isinstance(titles, Iterable):
        raise ValueError(
            f"property {name!r}: titles must be a sequence or a mapping, got {titles!r}"
        )
    else:
        result = tuple(titles)
        if len(result) != len(values):
            raise ValueError(
                f"property {name!r}: {len(result)} titles for {len(values)} options"
            )
    for title in result:
        if not isinstance(title, str):
            raise ValueError(f"property {name!r}: title {title!r} is not a string")
    return typing.cast("tuple[str, ...]", result)


def wire_option(value: object) -> object:
    """An option as it travels: an ``Enum`` member as :func:`wire_value`, anything else as it is."""
    return wire_value(value) if isinstance(value, enum.Enum) else value


class _Prop:
    __slots__ = ("json", "check", "required")

    def __init__(self, json: dict[str, Any], check: Check, required: bool) -> None:
        self.json = json
        self.check = check
        self.required = required


def _base(kind: str, title: str | None, description: str | None) -> dict[str, Any]:
    json: dict[str, Any] = {"type": kind}
    if title is not None:
        json["title"] = title
    if description is not None:
        json["description"] = description
    return json


class Form:
    """A chainable builder for a flat elicitation form.

    Each method adds one property and returns the same form, so a form reads as one
    expression::

        Form().string("name", title="Your name").integer("age", minimum=0, optional=True)

    Properties keep the order they were added in. Every property is required unless
    ``optional=True``. Adding a name twice, or arguments that cannot describe a usable
    field (a minimum above the maximum, a default the field itself would reject, an
    unknown string format...), raises ``ValueError`` naming the property.
    """

    __slots__ = ("_props", "_compiled")

    def __init__(self) -> None:
        self._props: dict[str, _Prop] = {}
        # The compiled form, kept here so that asking the same unchanged form again
        # costs one attribute read; any change to the form drops it.
        self._compiled: RequestedSchema | None = None

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}:{prop.json['type']}{'' if prop.required else '?'}"
            for name, prop in self._props.items()
        )
        return f"Form({fields})"

    def __len__(self) -> int:
        """The number of properties."""
        return len(self._props)

    def _add(
        self,
        name: str,
        json: dict[str, Any],
        check: Check,
        default: object,
        optional: bool,
    ) -> Self:
        if not isinstance(name, str) or not name:
            raise ValueError(f"property name must be a non-empty string, got {name!r}")
        if name in self._props:
            raise ValueError(f"duplicate property {name!r}")
        _need_text(name, "title", json.get("title"))
        _need_text(name, "description", json.get("description"))
        if default is not None:
            problem = check(default)
            if problem is not None:
                raise ValueError(f"property {name!r}: invalid default: {problem}")
            json["default"] = copy.copy(default)
        self._props[name] = _Prop(json, check, not optional)
        self._compiled = None
        return self

    def string(
        self,
        name: str,
        *,
        title: str | None = None,
        description: str | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        format: str | None = None,  # noqa: A002 - the JSON Schema keyword
        default: str | None = None,
        optional: bool = False,
    ) -> Self:
        """Add a text field; ``format`` is one of ``email``, ``uri``, ``date``, ``date-time``."""
        _need_count(name, "min_length", min_length)
        _need_count(name, "max_length", max_length)
        _need_order(name, "min_length", min_length, "max_length", max_length)
        if format is not None and format not in STRING_FORMATS:
            raise ValueError(
                f"property {name!r}: format must be one of {sorted(STRING_FORMATS)}, got {format!r}"
            )
        json = _base("string", title, description)
        if min_length is not None:
            json["minLength"] = min_length
        if max_length is not None:
            json["maxLength"] = max_length
        if format is not None:
            json["format"] = format
        check = string_check(min_length, max_length, format)
        return self._add(name, json, check, default, optional)

    def _numeric(
        self,
        kind: str,
        name: str,
        title: str | None,
        description: str | None,
        minimum: float | None,
        maximum: float | None,
        default: float | None,
        optional: bool,
    ) -> Self:
        _need_bound(name, "minimum", minimum)
        _need_bound(name, "maximum", maximum)
        _need_order(name, "minimum", minimum, "maximum", maximum)
        json = _base(kind, title, description)
        if minimum is not None:
            json["minimum"] = minimum
        if maximum is not None:
            json["maximum"] = maximum
        check = number_check(kind == "integer", minimum, maximum)
        return self._add(name, json, check, default, optional)

    def integer(
        self,
        name: str,
        *,
        title: str | None = None,
        description: str | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        default: int | None = None,
        optional: bool = False,
    ) -> Self:
        """Add a whole-number field, with optional inclusive bounds."""
        return self._numeric(
            "integer", name, title, description, minimum, maximum, default, optional
        )

    def number(
        self,
        name: str,
        *,
        title: str | None = None,
        description: str | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        default: float | None = None,
        optional: bool = False,
    ) -> Self:
        """Add a numeric field (integer or fractional), with optional inclusive bounds."""
        return self._numeric(
            "number", name, title, description, minimum, maximum, default, optional
        )

    def boolean(
        self,
        name: str,
        *,
        title: str | None = None,
        description: str | None = None,
        default: bool | None = None,
        optional: bool = False,
    ) -> Self:
        """Add a yes/no field."""
        json = _base("boolean", title, description)
        return self._add(name, json, boolean_check, default, optional)

    def choice(
        self,
        name: str,
        options: Iterable[str | enum.Enum] | type[enum.Enum],
        *,
        titles: Sequence[str] | Mapping[Any, str] | None = None,
        title: str | None = None,
        description: str | None = None,
        default: str | enum.Enum | None = None,
        optional: bool = False,
        enum_names: bool = False,
    ) -> Self:
        """Add a single-select field.

        ``options`` are strings, or an Enum class (each member travels as its value when
        that is a str, else as its name). Without ``titles`` the field is an ``enum``;
        with them (a sequence parallel to the options, or a mapping from option to
        title) it is a ``oneOf`` of ``{"const", "title"}`` pairs, or, with
        ``enum_names=True``, the deprecated ``enum`` beside ``enumNames`` that clients
        written before titled choices still render.
        """
        values = _option_values(name, options)
        labels = _option_titles(name, values, titles)
        json = _base("string", title, description)
        if labels is None:
            json["enum"] = list(values)
        elif enum_names:
            json["enum"] = list(values)
            json["enumNames"] = list(labels)
        else:
            # _option_titles returned exactly one title per option.
            json["oneOf"] = [
                {"const": v, "title": t} for v, t in zip(values, labels, strict=False)
            ]
        return self._add(name, json, choice_check(values), wire_option(default), optional)

    def choices(
        self,
        name: str,
        options: Iterable[str | enum.Enum] | type[enum.Enum],
        *,
        titles: Sequence[str] | Mapping[Any, str] | None = None,
        title: str | None = None,
        description: str | None = None,
        min_items: int | None = None,
        max_items: int | None = None,
        default: Iterable[str | enum.Enum] | None = None,
        optional: bool = False,
    ) -> Self:
        """Add a multi-select field: the answer is a list of distinct options.

        ``options`` and ``titles`` work as in :meth:`choice`; titled options become
        ``items.anyOf``, untitled ones ``items.enum``.
        """
        values = _option_values(name, options)
        labels = _option_titles(name, values, titles)
        _need_count(name, "min_items", min_items)
        _need_count(name, "max_items", max_items)
        _need_order(name, "min_items", min_items, "max_items", max_items)
        if min_items is not None and min_items > len(values):
            raise ValueError(
                f"property {name!r}: min_items {min_items} exceeds the {len(values)} options"
            )
        json = _base("array", title, description)
        if min_items is not None:
            json["minItems"] = min_items
        if max_items is not None:
            json["maxItems"] = max_items
        if labels is None:
            json["items"] = {"type": "string", "enum": list(values)}
        else:
            # _option_titles returned exactly one title per option.
            json["items"] = {
                "anyOf": [{"const": v, "title": t} for v, t in zip(values, labels, strict=False)]
            }
        wire_default: object = None
        if default is not None:
            if isinstance(default, (str, bytes, Mapping)) or not isinstance(default, Iterable):
                raise ValueError(
                    f"property {name!r}: default must be a sequence of options, got {default!r}"
                )
            wire_default = [wire_option(item) for item in default]
        check = choices_check(values, min_items, max_items)
        return self._add(name, json, check, wire_default, optional)

    def to_schema(self) -> dict[str, Any]:
        """The ``requestedSchema`` object: ``{"type": "object", "properties", "required"}``.

        ``required`` is omitted when every property is optional. The result is a fresh
        copy each time.
        """
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {name: copy.deepcopy(prop.json) for name, prop in self._props.items()},
        }
        required = [name for name, prop in self._props.items() if prop.required]
        if required:
            schema["required"] = required
        return schema

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> Self:
        """Read a ``requestedSchema`` back into a form.

        Every 2026-07-28 variant is accepted; the legacy ``enum`` + ``enumNames`` shape
        stays that shape (a titled single-select with ``enum_names=True``), so a form read
        back is the form written. ``$schema`` is accepted and dropped. Anything
        outside the vocabulary (nested objects, other arrays, unknown types or
        keywords) raises ``ValueError`` naming the property.
        """
        if not isinstance(schema, Mapping):
            raise ValueError(f"requestedSchema must be an object, got {schema!r}")
        extra = set(schema) - {"$schema", "type", "properties", "required"}
        if extra:
            raise ValueError(
                f"requestedSchema has unsupported keyword(s) {sorted(map(str, extra))}"
            )
        if schema.get("type") != "object":
            raise ValueError(f'requestedSchema type must be "object", got {schema.get("type")!r}')
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            raise ValueError(f"requestedSchema properties must be an object, got {properties!r}")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
            raise ValueError(f"requestedSchema required must be a list of names, got {required!r}")
        unknown = [n for n in required if n not in properties]
        if unknown:
            raise ValueError(f"requestedSchema requires undefined property(ies) {unknown!r}")
        form = cls()
        wanted = set(required)
        for name, prop in properties.items():
            form._read(name, prop, optional=name not in wanted)
        return form

    def _read(self, name: str, prop: object, *, optional: bool) -> None:
        if not isinstance(prop, Mapping):
            raise ValueError(f"property {name!r}: schema must be an object, got {prop!r}")
        kind = prop.get("type")
        labels: list[str] | None
        common: Common = {
            "title": prop.get("title"),
            "description": prop.get("description"),
            "optional": optional,
        }
        if kind == "string":
            if "oneOf" in prop:
                _only(name, prop, {"type", "title", "description", "oneOf", "default"})
                values, labels = _const_titles(name, prop["oneOf"], "oneOf")
                self.choice(name, values, titles=labels, default=prop.get("default"), **common)
            elif "enum" in prop:
                _only(name, prop, {"type", "title", "description", "enum", "enumNames", "default"})
                self.choice(
                    name,
                    _string_list(name, prop["enum"], "enum"),
                    titles=prop.get("enumNames"),
                    default=prop.get("default"),
                    enum_names="enumNames" in prop,  # read back as it was written
                    **common,
                )
            else:
                _only(
                    name,
                    prop,
                    {"type", "title", "description", "minLength", "maxLength", "format", "default"},
                )
                self.string(
                    name,
                    min_length=prop.get("minLength"),
                    max_length=prop.get("maxLength"),
                    format=prop.get("format"),
                    default=prop.get("default"),
                    **common,
                )
        elif kind == "integer" or kind == "number":
            _only(name, prop, {"type", "title", "description", "minimum", "maximum", "default"})
            self._numeric(
                kind,
                name,
                common["title"],
                common["description"],
                prop.get("minimum"),
                prop.get("maximum"),
                prop.get("default"),
                optional,
            )
        elif kind == "boolean":
            _only(name, prop, {"type", "title", "description", "default"})
            self.boolean(name, default=prop.get("default"), **common)
        elif kind == "array":
            _only(
                name,
                prop,
                {"type", "title", "description", "minItems", "maxItems", "items", "default"},
            )
            items = prop.get("items")
            labels = None
            if isinstance(items, Mapping) and "anyOf" in items:
                _only(name, items, {"anyOf", "type"}, where="items")
                if items.get("type", "string") != "string":
                    raise ValueError(f"property {name!r}: multi-select items must be strings")
                values, labels = _const_titles(name, items["anyOf"], "items.anyOf")
            elif isinstance(items, Mapping) and "enum" in items:
                _only(name, items, {"enum", "type"}, where="items")
                if items.get("type") != "string":
                    raise ValueError(f"property {name!r}: multi-select items must be strings")
                values = _string_list(name, items["enum"], "items.enum")
            else:
                raise ValueError(
                    f"property {name!r}: arrays are only allowed as multi-select lists of "
                    "string choices (items with enum or anyOf)"
                )
            default = prop.get("default")
            if default is not None and not isinstance(default, list):
                raise ValueError(f"property {name!r}: default must be a list, got {default!r}")
            self.choices(
                name,
                values,
                titles=labels,
                min_items=prop.get("minItems"),
                max_items=prop.get("maxItems"),
                default=default,
                **common,
            )
        elif kind == "object":
            raise ValueError(
                f"property {name!r}: nested objects cannot be asked for in an elicitation "
                "form (the 2026-07-28 schema is flat)"
            )
        else:
            raise ValueError(f"property {name!r}: unsupported type {kind!r}")


def _only(name: str, prop: Mapping[str, Any], allowed: set[str], *, where: str = "") -> None:
    # Dropping a keyword we do not implement (pattern, exclusiveMinimum...) would
    # silently accept answers the schema's author meant to refuse.
    extra = set(prop) - allowed
    if extra:
        place = f" in {where}" if where else ""
        raise ValueError(
            f"property {name!r}: unsupported keyword(s){place} {sorted(map(str, extra))}"
        )


def _string_list(name: str, values: object, where: str) -> list[str]:
    if not isinstance(values, list):
        raise ValueError(f"property {name!r}: {where} must be a list, got {values!r}")
    return values


def _const_titles(name: str, entries: object, where: str) -> tuple[list[str], list[str]]:
    if not isinstance(entries, list):
        raise ValueError(f"property {name!r}: {where} must be a list, got {entries!r}")
    values: list[str] = []
    labels: list[str] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or set(entry) != {"const", "title"}:
            raise ValueError(
                f"property {name!r}: each {where} entry must be exactly "
                f'{{"const", "title"}}, got {entry!r}'
            )
        values.append(entry["const"])
        labels.append(entry["title"])
    return values, labels


# The forms this process compiled lately, by the 8 bytes of their digest that a ledger
# slot's fingerprint holds: a replay mismatch on the schema can then say what changed,
# old and new, when the recorded round ran in this process (the token keeps only the
# fingerprint). Bounded in entries and bytes; the oldest go first.
_SEEN: dict[bytes, bytes] = {}


_SEEN_ENTRIES = 512


_SEEN_BYTES = 4 << 20


_seen_bytes = 0


def _remember(digest8: bytes, canonical: bytes) -> None:
    global _seen_bytes
    if digest8 in _SEEN or len(canonical) > _SEEN_BYTES // 8:
        return
    _SEEN[digest8] = canonical
    _seen_bytes += len(canonical)
    while len(_SEEN) > _SEEN_ENTRIES or _seen_bytes > _SEEN_BYTES:
        try:
            _seen_bytes -= len(_SEEN.pop(next(iter(_SEEN))))
        except (StopIteration, KeyError, RuntimeError):  # another thread evicted it first
            break


def _changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    old_props = old.get("properties") or {}
    new_props = new.get("properties") or {}
    for name in old_props:
        if name not in new_props:
            lines.append(f"property {render(name)} removed (was {render(old_props[name])})")
    for name, prop in new_props.items():
        before = old_props.get(name)
        if before is None:
            lines.append(f"property {render(name)} added: {render(prop)}")
            continue
        for keyword in [*before, *(k for k in prop if k not in before)]:
            was, now = before.get(keyword, _ABSENT), prop.get(keyword, _ABSENT)
            if was != now:
                lines.append(f"property {render(name)}, {keyword}: {_shown(was)} -> {_shown(now)}")
    if old.get("required") != new.get("required"):
        lines.append(f"required: {_shown(old.get('required', _ABSENT))} -> {_shown(new.get('required', _ABSENT))}")
    return lines


_ABSENT = object()


def _shown(value: object) -> str:
    return "(absent)" if value is _ABSENT else render(value)


def schema_changes(recorded_digest8: bytes, asked: RequestedSchema) -> list[str] | None:
    """What differs between a recorded form and ``asked``, one line per property keyword.

    ``recorded_digest8`` is the half of a ledger fingerprint that stands for the schema.
    ``None`` when this process has not compiled that schema lately (it was asked in
    another process, or long ago): only its fingerprint is known then.
    """
    canonical = _SEEN.get(recorded_digest8)
    if canonical is None:
        return None
    old = msgspec.json.decode(canonical)
    return _changes(old, asked.schema) or ["no property or keyword differs (the schema's canonical form does)"]


class RequestedSchema:
    """A compiled elicitation form: wire JSON, canonical bytes, digest and validators.

    Instances are immutable. Build them with :func:`requested_schema`, or from a raw
    ``requestedSchema`` object with ``RequestedSchema(schema)``. Do not mutate
    :attr:`schema`: the canonical bytes and digest were computed from it.
    """

    __slots__ = (
        "schema",
        "canonical",
        "digest",
        "struct_type",
        "_checks",
        "_integers",
        "_required",
        "_hooks",
        "_fill_none",
        "_make",
    )

    schema: dict[str, Any]
    """The ``requestedSchema`` JSON object."""
    canonical: bytes
    """``schema`` as JSON with sorted keys: the same form always gives the same bytes."""
    digest: bytes
    """SHA-256 of :attr:`canonical`."""
    struct_type: type[msgspec.Struct] | None
    """The Struct class the form was derived from, or ``None``."""
    # Private state, set once in _setup (via object.__setattr__, as instances are immutable).
    _checks: dict[str, Check]
    _integers: tuple[str, ...]
    _required: tuple[str, ...]
    _hooks: tuple[tuple[str, Hook], ...]
    _fill_none: tuple[str, ...]
    _make: Callable[[dict[str, Any]], Any] | None

    def __init__(self, schema: Mapping[str, Any]) -> None:
        """Compile a raw ``requestedSchema`` object (see :meth:`Form.from_schema`)."""
        self._setup(Form.from_schema(schema), None, (), ())

    @classmethod
    def from_form(
        cls,
        form: Form,
        struct_type: type[msgspec.Struct] | None = None,
        hooks: tuple[tuple[str, Hook], ...] = (),
        fill_none: tuple[str, ...] = (),
        make: Callable[[dict[str, Any]], Any] | None = None,
    ) -> RequestedSchema:
        """The compiled form of ``form`` (what :func:`compiled` gives for a :class:`Form`).

        ``struct_type``, ``hooks``, ``fill_none`` and ``make`` are what deriving a form
        from a type adds (:mod:`mrtr.core.derive`): the Struct the answer converts to, the
        per-field conversions, the nullable fields an unanswered one fills with ``None``,
        and the model built from the Struct's fields (pydantic).
        """
        self = cls.__new__(cls)
        self._setup(form, struct_type, hooks, fill_none)
        # A form derived from another model kind (pydantic) builds that model from the answer.
        object.__setattr__(self, "_make", make)
        return self

    def _setup(
        self,
        form: Form,
        struct_type: type[msgspec.Struct] | None,
        hooks: tuple[tuple[str, Hook], ...],
        fill_none: tuple[str, ...],
    ) -> None:
        schema = form.to_schema()
        canonical = _canonical(schema)
        init = object.__setattr__
        init(self, "schema", schema)
        init(self, "canonical", canonical)
        init(self, "digest", hashlib.sha256(canonical).digest())
        init(self, "struct_type", struct_type)
        init(self, "_checks", {name: prop.check for name, prop in form._props.items()})
        init(self, "_integers", tuple(name for name, prop in form._props.items() if prop.json["type"] == "integer"))
        init(self, "_required", tuple(name for name, prop in form._props.items() if prop.required))
        init(self, "_hooks", hooks)
        init(self, "_fill_none", fill_none)
        init(self, "_make", None)
        _remember(self.digest[:8], canonical)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RequestedSchema is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"RequestedSchema is immutable (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestedSchema):
            return NotImplemented
        return self.canonical == other.canonical and self.struct_type is other.struct_type

    def __hash__(self) -> int:
        return hash((self.digest, self.struct_type))

    def __repr__(self) -> str:
        origin = f", struct_type={self.struct_type.__name__}" if self.struct_type else ""
        return f"RequestedSchema({self.canonical.decode()}{origin})"

    def validate(self, content: object) -> dict[str, Any]:
        """Check an accepted answer's ``content`` against this form; return it as the handler reads it.

        ``None`` stands for absent content, which only a form without required fields
        accepts (it then returns ``{}``). Raises :class:`~mrtr.core.errors.InvalidParams`
        naming the field on a missing required field, an unknown field, or a value of
        the wrong type, outside its bounds or options, or not in its format. What is
        returned is ``content`` itself, or a copy with each integer field's integral
        float (``5.0``) as the ``int`` (see :meth:`as_read`).
        """
        if content is None:
            if self._required:
                raise InvalidParams(
                    f"Elicitation answer is missing required field {render(self._required[0])}"
                )
            return {}
        if not isinstance(content, dict):
            raise InvalidParams(
                f"Elicitation answer content: expected an object, got {render(content)}"
            )
        for name in self._required:
            if name not in content:
                raise InvalidParams(f"Elicitation answer is missing required field {render(name)}")
        checks = self._checks
        unknown: list[object] | None = None
        for key, value in content.items():
            check = checks.get(key)
            if check is None:
                if unknown is None:
                    unknown = []
                unknown.append(key)
                continue
            problem = check(value)
            if problem is not None:
                raise InvalidParams(f"Elicitation answer field {render(key)}: {problem}")
        if unknown is not None:
            # The form defines the fields: anything else was not asked, so it cannot be trusted.
            names = ", ".join(render(key) for key in unknown)
            raise InvalidParams(
                f"Elicitation answer has field(s) the form did not ask for: {names}"
            )
        return self.as_read(content) if self._integers else content

    def as_read(self, content: dict[str, Any]) -> dict[str, Any]:
        """Accepted ``content`` as the handler reads it: each integer field's float (``5.0``) as the ``int``.

        JSON has one number type, so a client may write five as ``5.0``, and a token gives
        back what the client wrote; the handler was promised an ``int`` in every round.
        Expects content :meth:`validate` accepted; returns ``content`` itself when nothing
        changes, else a copy.
        """
        copied: dict[str, Any] | None = None
        for name in self._integers:
            value = content.get(name)
            if value.__class__ is float:
                if copied is None:
                    copied = dict(content)
                copied[name] = int(value)
        return content if copied is None else copied

    def convert(self, content: dict[str, Any] | None) -> Any:
        """Turn validated ``content`` into what the handler receives.

        For a Struct-derived form, an instance of :attr:`struct_type` (dates parsed,
        enum values turned into members, lists into sets where declared); otherwise the
        dict itself. Expects content that :meth:`validate` accepted; a conversion
        failure raises :class:`~mrtr.core.errors.InvalidParams`.
        """
        if content is None:
            content = {}
        struct_type = self.struct_type
        if struct_type is None:
            return content
        data = content
        if self._hooks or self._fill_none:
            data = dict(content)
            for name in self._fill_none:
                # msgspec requires ``X | None`` fields without a default; the form made
                # them optional, so an unanswered one means None.
                if name not in data:
                    data[name] = None
            for name, hook in self._hooks:
                value = data.get(name)
                if value is not None:
                    data[name] = hook(value)
        if self._make is not None:
            return self._make(data)
        try:
            return msgspec.convert(data, struct_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(
                f"Elicitation answer does not convert to {struct_type.__name__}: {exc}"
            ) from None


def compiled(form: Form) -> RequestedSchema:
    """The compiled form of ``form``, kept on it until it changes: asking the same form again costs one read."""
    done = form._compiled
    if done is None:
        done = form._compiled = RequestedSchema.from_form(form)
    return done
