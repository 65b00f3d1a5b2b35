"""What a call returns to its caller: the final results of ``tools/call``, ``prompts/get`` and ``resources/read``.

Each result is checked against its wire shape before it is handed over (:func:`checked`);
a result the server got wrong is a :class:`~mrtr.client.errors.ClientError`, never a
half-read object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..core import wire
from ..core.errors import INVALID_REQUEST
from .errors import ClientError

__all__ = ["PromptResult", "ResourceResult", "ToolResult", "checked", "read_tool_result"]


def checked(result: dict[str, Any], shape: type[Any], what: str) -> None:
    """Raise :class:`ClientError` (``-32600``) unless ``result`` has the wire ``shape`` of ``what``."""
    try:
        msgspec.convert(result, shape)
    except msgspec.ValidationError as exc:
        raise ClientError(INVALID_REQUEST, f"Invalid {what} from the server: {exc}") from None


def _text_of(blocks: Sequence[Any]) -> str:
    return "\n".join(block["text"] for block in blocks if isinstance(block, dict) and block.get("type") == "text")


@dataclass(frozen=True)
class ToolResult:
    """The final result of ``tools/call``."""

    content: list[dict[str, Any]]
    """The content blocks, in wire shape."""
    structured: Any
    """``structuredContent``, or ``None`` when the tool returned none."""
    is_error: bool
    """Whether the tool reported a failure (``isError``)."""
    raw: dict[str, Any] = field(repr=False)
    """The whole result as received."""

    @property
    def text(self) -> str:
        """The text blocks of :attr:`content`, joined by newlines."""
        return _text_of(self.content)


@dataclass(frozen=True)
class PromptResult:
    """The final result of ``prompts/get``."""

    messages: list[dict[str, Any]]
    """The prompt's messages (``{"role", "content"}``), in wire shape."""
    description: str | None
    """The prompt's description, if the server gave one."""
    raw: dict[str, Any] = field(repr=False)
    """The whole result as received."""

    @property
    def text(self) -> str:
        """The text content of every message, joined by newlines."""
        return _text_of([message.get("content") for message in self.messages])


@dataclass(frozen=True)
class ResourceResult:
    """The final result of ``resources/read``."""

    contents: list[dict[str, Any]]
    """Text (``text``) or binary (``blob``, Base64) contents, in wire shape."""
    raw: dict[str, Any] = field(repr=False)
    """The whole result as received."""

    @property
    def text(self) -> str:
        """The text contents joined by newlines."""
        return "\n".join(item["text"] for item in self.contents if isinstance(item.get("text"), str))


def read_tool_result(result: dict[str, Any]) -> ToolResult:
    """A ``CallToolResult`` dict, checked, as a :class:`ToolResult`."""
    checked(result, wire.CallToolResult, "CallToolResult")
    return ToolResult(list(result["content"]), result.get("structuredContent"), bool(result.get("isError")), result)


