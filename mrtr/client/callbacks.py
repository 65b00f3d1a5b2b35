"""Calling what a user gave the client (answerers, progress and log callbacks), sync or async alike."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["maybe_await"]


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when a callback returned an awaitable (an ``async def`` answerer)."""
    if inspect.isawaitable(value):
        return await value
    return value
