"""What an answerer is given: one object per embedded request of an ``input_required`` round.

Each object is built from the wire params decoded through :mod:`mrtr.core.wire`, so a
malformed request from a server is refused before any answerer sees it. Its ``kind``
is the row of :data:`mrtr.core.kinds.KINDS` that says its method, the capability that
lets a client be asked it and the answer it must get. ``raw`` keeps
the params exactly as they arrived, for answerers that want a member this object does
not surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..core.kinds import Kind

__all__ = ["ElicitationRequest", "SamplingRequest", "RootsRequest", "InputRequest"]


@dataclass(frozen=True)
class ElicitationRequest:
    """The server asks the user: fill in a form (``mode == "form"``) or open a URL (``"url"``)."""

    kind: ClassVar[Kind] = Kind.ELICIT

    key: str
    """The key the answer goes under in ``inputResponses``."""
    message: str
    """What to tell the user."""
    mode: Literal["form", "url"]
    """``"form"``: answer with content matching :attr:`requested_schema`; ``"url"``: consent."""
    requested_schema: dict[str, Any] | None = None
    """The flat form schema (form mode), else ``None``."""
    url: str | None = None
    """The page to open (URL mode), else ``None``."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """The request's ``params`` as sent."""


@dataclass(frozen=True)
class SamplingRequest:
    """The server asks for a model completion (``sampling/createMessage``)."""

    kind: ClassVar[Kind] = Kind.SAMPLE

    key: str
    """The key the answer goes under in ``inputResponses``."""
    messages: list[dict[str, Any]]
    """The conversation so far, in wire shape (``{"role", "content"}``)."""
    max_tokens: int
    """The most tokens the server wants back."""
    system_prompt: str | None = None
    """An optional system prompt."""
    model_preferences: dict[str, Any] | None = None
    """Hints and priorities for choosing a model, in wire shape."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """The request's ``params`` as sent."""


@dataclass(frozen=True)
class RootsRequest:
    """The server asks which filesystem roots the client exposes (``roots/list``)."""

    kind: ClassVar[Kind] = Kind.ROOTS

    key: str
    """The key the answer goes under in ``inputResponses``."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """The request's ``params`` as sent (usually empty)."""


InputRequest = ElicitationRequest | SamplingRequest | RootsRequest
"""Any of the three request objects."""
