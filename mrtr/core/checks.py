"""What an answer's value must be, property by property: the rules a form's validator applies.

One check per kind of property (:func:`string_check` with its formats,
:func:`number_check`, :func:`boolean_check`, :func:`choice_check`, :func:`choices_check`):
each returns ``None`` for an acceptable value, else what is wrong with it, so the same
rule serves an answer (``-32602`` naming the field) and a builder's default
(``ValueError``). :func:`render` shows a value inside such a message.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

__all__ = ["STRING_FORMATS", "INTEGER_MIN", "INTEGER_MAX", "Check", "render", "listing", "parse_date",
           "parse_date_time", "string_check", "number_check", "boolean_check", "choice_check", "choices_check"]


STRING_FORMATS: frozenset[str] = frozenset({"email", "uri", "date", "date-time"})
"""The values ``format`` may take on a string property."""


# A property check returns None when the value is acceptable, else what is wrong with it.
# Returning a reason rather than raising lets the same check serve answers (InvalidParams)
# and builder defaults (ValueError) with wording that fits each.
Check = Callable[[Any], "str | None"]


_MAX_RENDER = 80


_MAX_LISTED = 10


def render(value: object) -> str:
    """A short JSON-like rendering of a value for an error message."""
    if isinstance(value, float) and not math.isfinite(value):
        # msgspec writes non-finite floats as null, which would misreport the value.
        text = repr(value)
    else:
        try:
            text = msgspec.json.encode(value).decode()
        except Exception:  # noqa: BLE001 - anything at all must render in a message
            text = repr(value)
    if len(text) > _MAX_RENDER:
        text = text[: _MAX_RENDER - 3] + "..."
    return text


def listing(options: Sequence[str]) -> str:
    """The first options, rendered and joined, for a message (the rest counted, not shown)."""
    shown = ", ".join(render(option) for option in options[:_MAX_LISTED])
    if len(options) > _MAX_LISTED:
        shown += f", ... ({len(options)} options)"
    return shown


_WHITESPACE = re.compile(r"\s")


_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # RFC 3986 scheme


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


_DATE_TIME = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]"
    r"([0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?)"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def _is_email(text: str) -> bool:
    # Deliberately pragmatic: full RFC 5322 accepts addresses no form user means to type.
    if text.count("@") != 1 or _WHITESPACE.search(text):
        return False
    local, _, domain = text.partition("@")
    labels = domain.split(".")
    return bool(local) and len(labels) >= 2 and all(labels)


def _is_uri(text: str) -> bool:
    return _URI_SCHEME.match(text) is not None and _WHITESPACE.search(text) is None


def parse_date(text: str) -> _dt.date | None:
    """``YYYY-MM-DD`` as a date, or ``None``: the ``date`` format."""
    # fromisoformat alone also takes "20240102" and week dates, which are not RFC 3339.
    if _DATE.fullmatch(text) is None:
        return None
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        return None


def parse_date_time(text: str) -> _dt.datetime | None:
    """An RFC 3339 date-time as a datetime, or ``None``: the ``date-time`` format."""
    # Seconds and offset are optional because HTML datetime-local inputs send neither.
    match = _DATE_TIME.fullmatch(text)
    if match is None:
        return None
    day, time, offset = match.groups()
    if offset is None:
        offset = ""
    elif offset in ("Z", "z"):
        offset = "+00:00"
    try:
        return _dt.datetime.fromisoformat(f"{day}T{time}{offset}")
    except ValueError:
        return None


_FORMAT_CHECKS: dict[str, tuple[Callable[[str], object], str]] = {
    "email": (_is_email, "an email address"),
    "uri": (_is_uri, "a URI with a scheme"),
    "date": (parse_date, "a date (YYYY-MM-DD)"),
    "date-time": (parse_date_time, "an RFC 3339 date-time"),
}


def string_check(min_length: int | None, max_length: int | None, fmt: str | None) -> Check:
    """The check of a string property: its length bounds and format."""
    test, wanted = _FORMAT_CHECKS[fmt] if fmt is not None else (None, "")

    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return f"expected a string, got {render(value)}"
        if min_length is not None and len(value) < min_length:
            return f"expected at least {min_length} characters, got {len(value)}"
        if max_length is not None and len(value) > max_length:
            return f"expected at most {max_length} characters, got {len(value)}"
        if test is not None and not test(value):
            return f"expected {wanted}, got {render(value)}"
        return None

    return check


INTEGER_MIN = -(1 << 63)
"""The least integer an answer may hold: a ``requestState`` (MessagePack) carries no smaller one."""


INTEGER_MAX = (1 << 64) - 1
"""The greatest integer an answer may hold: a ``requestState`` (MessagePack) carries no larger one."""


def number_check(integer: bool, minimum: float | None, maximum: float | None) -> Check:
    """The check of a number property (an integer one when ``integer``): JSON numbers within the bounds."""
    kind = "an integer" if integer else "a number"

    def check(value: Any) -> str | None:
        # bool is an int subclass, but true is not an answer to "how many".
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected {kind}, got {render(value)}"
        # JSON has one number type, so 3.0 is an integer; NaN and infinities are not JSON.
        if isinstance(value, float) and (
            not math.isfinite(value) or (integer and not value.is_integer())
        ):
            return f"expected {kind}, got {render(value)}"
        # The same range in every era, so an answer a token could not carry is refused by its field's name.
        if integer and not INTEGER_MIN <= value <= INTEGER_MAX:
            return f"expected an integer within 64 bits, got {render(value)}"
        if minimum is not None and value < minimum:
            return f"expected at least {render(minimum)}, got {render(value)}"
        if maximum is not None and value > maximum:
            return f"expected at most {render(maximum)}, got {render(value)}"
        return None

    return check


def boolean_check(value: Any) -> str | None:
    """The check of a boolean property."""
    if value is True or value is False:
        return None
    return f"expected true or false, got {render(value)}"


def choice_check(options: tuple[str, ...]) -> Check:
    """The check of a single-choice property: one of ``options``."""
    allowed = frozenset(options)
    shown = listing(options)

    def check(value: Any) -> str | None:
        if isinstance(value, str) and value in allowed:
            return None
        return f"expected one of {shown}, got {render(value)}"

    return check


def choices_check(
    options: tuple[str, ...], min_items: int | None, max_items: int | None
) -> Check:
    """The check of a multi-select property: a list of distinct ``options`` within the item bounds."""
    allowed = frozenset(options)
    shown = listing(options)

    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"expected a list of choices, got {render(value)}"
        seen: set[str] = set()
        for item in value:
            if not isinstance(item, str) or item not in allowed:
                return f"expected each selection to be one of {shown}, got {render(item)}"
            if item in seen:
                return f"{render(item)} is selected more than once"
            seen.add(item)
        if min_items is not None and len(value) < min_items:
            return f"expected at least {min_items} selection(s), got {len(value)}"
        if max_items is not None and len(value) > max_items:
            return f"expected at most {max_items} selection(s), got {len(value)}"
        return None

    return check


