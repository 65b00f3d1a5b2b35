"""Answers in wire shape: what a client sends back for an embedded request.

One implementation shared by :mod:`mrtr.testing` (scripted answers) and
:class:`mrtr.Client` (answerers): each helper returns the JSON value that goes into
``inputResponses`` for one key. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["accept", "decline", "cancel", "sampled", "roots"]


def accept(content: Mapping[str, Any] | msgspec.Struct | None = None, /, **fields: Any) -> dict[str, Any]:
    """An accepted elicitation answer; ``accept(name="Ada")`` or ``accept({"name": "Ada"})``.

    For a URL-mode request, ``accept()`` is the user's consent to open the URL.
    """
    base: Mapping[str, Any] = msgspec.to_builtins(content) if isinstance(content, msgspec.Struct) else (content or {})
    merged = {**base, **fields}
    return {"action": "accept", "content": merged}


def decline() -> dict[str, Any]:
    """The user declined the elicitation."""
    return {"action": "decline"}


def cancel() -> dict[str, Any]:
    """The user dismissed the elicitation without choosing."""
    return {"action": "cancel"}


def sampled(text: str, *, model: str = "test-model", stop_reason: str = "endTurn") -> dict[str, Any]:
    """A sampling answer whose assistant message is ``text``."""
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": model, "stopReason": stop_reason}


def roots(*uris: str | Mapping[str, Any]) -> dict[str, Any]:
    """A roots answer listing ``uris`` (strings or ``{"uri", "name"}`` dicts)."""
    return {"roots": [{"uri": uri} if isinstance(uri, str) else dict(uri) for uri in uris]}
