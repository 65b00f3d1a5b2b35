"""Pydantic models where msgspec types are accepted: tool arguments, forms, structured output.

People coming from the official SDK and FastMCP describe arguments, forms and outputs
with pydantic ``BaseModel`` classes. mrtr accepts them in the same places as a msgspec
``Struct``, dataclass or TypedDict, by the same rules:

- as an elicitation form, a model is read field by field into the Struct it is
  equivalent to (same annotations, bounds, titles, descriptions, defaults, aliases), and
  that Struct is derived by :mod:`mrtr.core.schema` exactly as one written by hand: the
  flat-form rules and their errors are the Struct's. The handler gets an instance of the
  model, built by pydantic's own validation (its validators run);
- as a tool parameter or return type, the JSON Schema is pydantic's own
  (:func:`json_schema`), arguments are validated by pydantic (:func:`validate`), and a
  returned model is sent as its JSON form (:func:`enc_hook`).

pydantic stays optional: nothing here imports it until a model is met, and a model
class can only exist once pydantic is imported. A pydantic 1 model (``pydantic.v1``), or
a model met while pydantic itself cannot be imported, is refused with an error naming
the ``pydantic`` extra.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from .errors import InvalidParams

__all__ = ["EXTRA_HINT", "is_model", "as_struct", "builder", "json_schema", "validate", "enc_hook", "dump"]

EXTRA_HINT = "pip install 'mrtr[pydantic]' (pydantic 2)"
"""How to get the pydantic support, for the errors that need it."""


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:
        raise ImportError(f"pydantic models need pydantic 2: {EXTRA_HINT} ({exc})") from None
    if not str(getattr(pydantic, "VERSION", "1")).startswith("2"):
        raise ImportError(f"pydantic models need pydantic 2, found {pydantic.VERSION}: {EXTRA_HINT}")
    return pydantic


def _looks_like_model(tp: Any) -> bool:
    return any(base.__name__ == "BaseModel" and base.__module__.split(".")[0] == "pydantic"
               for base in getattr(tp, "__mro__", ()))


def is_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic 2 ``BaseModel`` subclass (without importing pydantic for anything else).

    A pydantic 1 model raises ``TypeError`` naming the extra: it would otherwise be taken
    for an arbitrary class and fail later, further from the cause.
    """
    if not isinstance(tp, type) or "pydantic" not in sys.modules or not _looks_like_model(tp):
        return False
    pydantic = _pydantic()
    if issubclass(tp, pydantic.BaseModel):
        return True
    raise TypeError(f"{tp.__qualname__} is a pydantic 1 model (pydantic.v1); mrtr accepts pydantic 2 models: "
                    f"{EXTRA_HINT}")


# -- a model as the Struct it is equivalent to ---------------------------------------------

_STRUCTS: dict[type, type[msgspec.Struct]] = {}


def _meta(field: Any) -> msgspec.Meta | None:
    """The msgspec.Meta saying what a pydantic field's metadata and labels say."""
    options: dict[str, Any] = {}
    for item in field.metadata:
        for name in ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern"):
            value = getattr(item, name, None)
            if value is not None:
                options[name] = value
    if field.title is not None:
        options["title"] = field.title
    if field.description is not None:
        options["description"] = field.description
    return msgspec.Meta(**options) if options else None


def _translate(annotation: Any) -> Any:
    """``annotation`` with every model in it replaced by its Struct (so nesting is refused as nesting)."""
    if is_model(annotation):
        return as_struct(annotation)
    origin = typing.get_origin(annotation)
    if origin is None or origin is typing.Literal:
        return annotation
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return typing.Annotated[(_translate(args[0]), *args[1:])]  # type: ignore[valid-type]
    translated = tuple(_translate(arg) for arg in args)
    if translated == args:
        return annotation
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[translated]
    return origin[translated]


def as_struct(model: type) -> type[msgspec.Struct]:
    """The msgspec Struct equivalent to a pydantic model, field by field (cached per model).

    Named like the model, so the form rules' errors name ``Model.field``. Constraints
    the Struct cannot carry (custom validators) are left to pydantic, which validates the
    answer when the model is built from it.
    """
    found = _STRUCTS.get(model)
    if found is not None:
        return found
    pydantic = _pydantic()
    fields: list[tuple[Any, ...]] = []
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        annotation = _translate(field.annotation)
        meta = _meta(field)
        if meta is not None:
            annotation = typing.Annotated[annotation, meta]
        options: dict[str, Any] = {"name": field.alias} if field.alias else {}
        if field.default_factory is not None:
            options["default_factory"] = field.default_factory
        elif field.default is not pydantic.fields.PydanticUndefined:
            options["default"] = field.default
        fields.append((name, annotation, msgspec.field(**options)) if options else (name, annotation))
    struct = msgspec.defstruct(model.__name__, fields, kw_only=True, module=model.__module__)
    struct.__qualname__ = model.__qualname__
    return _STRUCTS.setdefault(model, struct)


def builder(model: type) -> Callable[[dict[str, Any]], Any]:
    """What turns a validated form answer into an instance of ``model`` (pydantic's validation)."""
    pydantic = _pydantic()

    def build(data: dict[str, Any]) -> Any:
        try:
            return model.model_validate(data)  # type: ignore[attr-defined]
        except pydantic.ValidationError as exc:
            raise InvalidParams(f"Elicitation answer does not convert to {model.__name__}: {_first_error(exc)}") from None

    return build


# -- tool arguments and results ------------------------------------------------------------


def json_schema(model: type, *, mode: str = "validation") -> dict[str, Any]:
    """pydantic's JSON Schema of ``model`` (``mode="serialization"`` for what a tool returns)."""
    _pydantic()
    return model.model_json_schema(mode=mode, ref_template="#/$defs/{model}")  # type: ignore[attr-defined, no-any-return]


def _first_error(exc: Any) -> str:
    errors = exc.errors(include_url=False)
    if not errors:
        return str(exc)
    error = errors[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))


def validate(model: type, value: Any, what: str) -> Any:
    """``value`` (JSON data) as an instance of ``model``; ``-32602`` naming ``what`` and the field when it is not one."""
    pydantic = _pydantic()
    try:
        return model.model_validate(value)  # type: ignore[attr-defined]
    except pydantic.ValidationError as exc:
        raise InvalidParams(f"{what}: {_first_error(exc)}") from None


def dump(value: Any) -> Any:
    """A model instance as JSON data (by alias, as its schema names the fields)."""
    return value.model_dump(mode="json", by_alias=True)


def enc_hook(value: Any) -> Any:
    """A ``msgspec`` ``enc_hook`` that encodes model instances; anything else stays unsupported."""
    if "pydantic" in sys.modules and _looks_like_model(type(value)) and hasattr(value, "model_dump"):
        return dump(value)
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")
