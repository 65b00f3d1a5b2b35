"""A form derived from a type: a flat ``msgspec.Struct`` or a pydantic model, read field by field.

:func:`requested_schema` compiles whatever a handler asks with (a :class:`~mrtr.core.forms.Form`,
a Struct or model class, or an already compiled form); a type is derived once and kept by
class. Each field's type becomes a property (``str`` with its format, ``int``, ``float``,
``bool``, dates, a ``Literal`` or ``Enum`` as a choice, a list or set of them as a
multi-select), with the conversion the answer needs on its way back (a date parsed, a
value turned into its enum member); a field the flat vocabulary cannot express is a
:class:`~mrtr.core.forms.FormTypeError` naming the class and field.
"""

from __future__ import annotations

import datetime as _dt
import enum
import typing
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.inspect as mi

from .checks import parse_date, parse_date_time
from .forms import Common, Form, FormTypeError, Hook, RequestedSchema, compiled, wire_option, wire_value

__all__ = ["requested_schema"]


_NESTED = (
    mi.StructType,
    mi.DictType,
    mi.FrozenDictType,
    mi.TypedDictType,
    mi.DataclassType,
    mi.NamedTupleType,
)


_COLLECTIONS = (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)


_FLAT = "(the 2026-07-28 schema is flat)"


_SUPPORTED = (
    "use str, int, float, bool, datetime.date, datetime.datetime, a str Literal or Enum, "
    "or a list/set of Literal or Enum choices"
)


def _literal_args(annotation: object, out: list[object]) -> None:
    if typing.get_origin(annotation) is typing.Literal:
        out.extend(typing.get_args(annotation))
        return
    for arg in typing.get_args(annotation):
        _literal_args(arg, out)


def _unwrap(tp: mi.Type, where: str) -> tuple[mi.Type, bool, dict[str, Any]]:
    """Strip Metadata and ``| None`` from a field type: (core type, nullable, title/description)."""
    nullable = False
    meta: dict[str, Any] = {}
    while True:
        if isinstance(tp, mi.Metadata):
            extra = tp.extra_json_schema or {}
            for key in ("title", "description"):
                if key in extra:
                    meta.setdefault(key, extra[key])
            tp = tp.type
        elif isinstance(tp, mi.UnionType):
            members = [m for m in tp.types if not isinstance(m, mi.NoneType)]
            nullable = nullable or len(members) != len(tp.types)
            literals = [m for m in members if isinstance(m, mi.LiteralType)]
            if len(members) == 1:
                tp = members[0]
            elif members and len(literals) == len(members):
                tp = mi.LiteralType(values=tuple(v for m in literals for v in m.values))
            else:
                raise TypeError(
                    f"{where}: unions other than X | None cannot be asked for in an "
                    f"elicitation form; {_SUPPORTED}"
                )
        elif isinstance(tp, mi.LiteralType) and None in tp.values:
            nullable = True
            tp = mi.LiteralType(values=tuple(v for v in tp.values if v is not None))
        else:
            return tp, nullable, meta


def _choice_options(
    tp: mi.Type, where: str, literal_order: list[object]
) -> tuple[list[str] | type[enum.Enum], Hook | None] | None:
    """Options and a wire-to-member hook for a Literal or Enum type; None for anything else."""
    if isinstance(tp, mi.LiteralType):
        strings = [v for v in tp.values if isinstance(v, str)]
        if len(strings) != len(tp.values):
            raise TypeError(f"{where}: only string literals can be offered as choices")
        # msgspec sorts literal values; the form should list them as declared.
        rank = {v: i for i, v in enumerate(literal_order) if isinstance(v, str)}
        return sorted(strings, key=lambda v: rank.get(v, len(rank))), None
    if isinstance(tp, mi.EnumType):
        cls = tp.cls
        if all(isinstance(member.value, str) for member in cls):
            return cls, None  # msgspec already maps str values to members
        by_wire = {wire_value(member): member for member in cls}

        def to_member(value: Any) -> Any:
            return by_wire.get(value, value) if isinstance(value, str) else value

        return cls, to_member
    return None


def _each(hook: Hook) -> Hook:
    def each(value: Any) -> Any:
        return [hook(item) for item in value] if isinstance(value, list) else value

    return each


def _parsing(parse: Callable[[str], object]) -> Hook:
    # Parse with the same rules validate() used, so msgspec's stricter RFC 3339 parser
    # never rejects an answer that was accepted (e.g. a datetime without seconds).
    def hook(value: Any) -> Any:
        if isinstance(value, str):
            parsed = parse(value)
            if parsed is not None:
                return parsed
        return value

    return hook


def _add_field(
    form: Form,
    name: str,
    tp: mi.Type,
    default: Any,
    kw: Common,
    where: str,
    literal_order: list[object],
) -> Hook | None:
    # ``default`` is the Struct field's default, of whatever type it was declared with:
    # nothing checks it before the Form method below does, which raises ValueError (turned
    # into TypeError by _derive) when it does not fit the field. Hence Any, not object.
    if isinstance(tp, mi.StrType):
        if tp.pattern is not None:
            raise TypeError(
                f"{where}: a pattern constraint cannot be expressed in an elicitation form"
            )
        form.string(name, min_length=tp.min_length, max_length=tp.max_length, default=default, **kw)
        return None
    if isinstance(tp, mi.BoolType):
        form.boolean(name, default=default, **kw)
        return None
    if isinstance(tp, mi.IntType):
        if tp.multiple_of is not None:
            raise TypeError(f"{where}: multiple_of cannot be expressed in an elicitation form")
        # Exclusive bounds on integers have exact inclusive equivalents.
        minimum = tp.ge if tp.ge is not None else (tp.gt + 1 if tp.gt is not None else None)
        maximum = tp.le if tp.le is not None else (tp.lt - 1 if tp.lt is not None else None)
        form.integer(name, minimum=minimum, maximum=maximum, default=default, **kw)
        return None
    if isinstance(tp, mi.FloatType):
        if tp.gt is not None or tp.lt is not None or tp.multiple_of is not None:
            raise TypeError(
                f"{where}: gt, lt and multiple_of cannot be expressed in an elicitation form "
                "(only inclusive ge/le bounds)"
            )
        form.number(name, minimum=tp.ge, maximum=tp.le, default=default, **kw)
        return None
    if isinstance(tp, mi.DateTimeType):
        if isinstance(default, _dt.datetime):
            default = default.isoformat()
        form.string(name, format="date-time", default=default, **kw)
        return _parsing(parse_date_time)
    if isinstance(tp, mi.DateType):
        if isinstance(default, _dt.date):
            default = default.isoformat()
        form.string(name, format="date", default=default, **kw)
        return _parsing(parse_date)
    found = _choice_options(tp, where, literal_order)
    if found is not None:
        options, hook = found
        form.choice(name, options, default=default, **kw)
        return hook
    if isinstance(tp, _COLLECTIONS):
        item, item_nullable, _ = _unwrap(tp.item_type, where)
        found = None if item_nullable else _choice_options(item, where, literal_order)
        if found is None:
            raise TypeError(
                f"{where}: only lists of string choices (Literal or Enum items) can be asked "
                f"for in an elicitation form {_FLAT}"
            )
        options, hook = found
        if isinstance(default, (set, frozenset)):
            # Set order varies between runs; the schema (and its digest) must not.
            rank: dict[object, int] = {
                value: i
                for i, value in enumerate(
                    [wire_value(m) for m in options] if isinstance(options, type) else options
                )
            }
            default = sorted(
                default,
                key=lambda v: rank.get(wire_option(v), len(rank)),
            )
        form.choices(
            name,
            options,
            min_items=tp.min_length,
            max_items=tp.max_length,
            default=default,
            **kw,
        )
        return _each(hook) if hook is not None else None
    if isinstance(tp, _NESTED):
        raise TypeError(
            f"{where}: nested objects cannot be asked for in an elicitation form {_FLAT}"
        )
    if isinstance(tp, mi.AnyType):
        raise TypeError(f"{where}: Any cannot be asked for in an elicitation form; {_SUPPORTED}")
    raise TypeError(
        f"{where}: {type(tp).__name__.removesuffix('Type')} cannot be asked for in an "
        f"elicitation form; {_SUPPORTED}"
    )


def _field_default(field: mi.Field) -> object:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    return None


def _derive(cls: type[msgspec.Struct], make: Callable[[dict[str, Any]], Any] | None = None) -> RequestedSchema:
    info = msgspec.inspect.type_info(cls)
    if not isinstance(info, mi.StructType):  # pragma: no cover - type_info of a Struct class
        raise TypeError(f"{cls.__name__} is not a Struct")
    if info.array_like:
        raise TypeError(
            f"{cls.__name__}: array_like Structs cannot receive elicitation answers "
            "(they arrive as JSON objects)"
        )
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # noqa: BLE001 - only used to order Literal options
        hints = {}
    form = Form()
    hooks: list[tuple[str, Hook]] = []
    fill_none: list[str] = []
    for field in info.fields:
        where = f"{cls.__name__}.{field.name}"
        tp, nullable, meta = _unwrap(field.type, where)
        literal_order: list[object] = []
        _literal_args(hints.get(field.name), literal_order)
        kw: Common = {
            "title": meta.get("title"),
            "description": meta.get("description"),
            "optional": nullable or not field.required,
        }
        try:
            hook = _add_field(
                form, field.encode_name, tp, _field_default(field), kw, where, literal_order
            )
        except ValueError as exc:
            raise TypeError(f"{where}: {exc}") from None
        if hook is not None:
            hooks.append((field.encode_name, hook))
        if nullable and field.required:
            fill_none.append(field.encode_name)
    return RequestedSchema.from_form(form, cls, tuple(hooks), tuple(fill_none), make)


def _derived(spec: type) -> RequestedSchema:
    try:
        if issubclass(spec, msgspec.Struct):
            return _derive(spec)
        from . import models

        if models.is_model(spec):
            return _derive(models.as_struct(spec), models.builder(spec))
    except FormTypeError:
        raise
    except TypeError as exc:
        raise FormTypeError(str(exc)) from None
    raise TypeError(
        f"expected a Form, a msgspec.Struct class, a pydantic model or a RequestedSchema, got {spec!r}"
    )


# Keyed by class: a Struct's form never changes, and every replayed question asks again.
_STRUCT_CACHE: dict[type, RequestedSchema] = {}


def requested_schema(spec: Form | type | RequestedSchema) -> RequestedSchema:
    """Compile a form, a flat Struct class or pydantic model, or pass a compiled form through.

    Repeat calls are cheap: a Struct or model class is derived once and cached by class,
    a :class:`Form` keeps its compiled form until it is modified. A field the flat
    vocabulary cannot express raises :class:`FormTypeError` (a ``TypeError``) naming the
    class and field; anything that is not one of the accepted kinds raises ``TypeError``.
    A pydantic model is read as the Struct it is equivalent to (:mod:`mrtr.core.models`),
    so the same rules give the same errors, and the handler receives the model.
    """
    if isinstance(spec, Form):
        return compiled(spec)
    if isinstance(spec, type):
        cached = _STRUCT_CACHE.get(spec)
        if cached is not None:
            return cached
        # setdefault: if two threads derive at once, both get the same object.
        return _STRUCT_CACHE.setdefault(spec, _derived(spec))
    if isinstance(spec, RequestedSchema):
        return spec
    raise TypeError(
        f"expected a Form, a msgspec.Struct class, a pydantic model or a RequestedSchema, got {spec!r}"
    )
