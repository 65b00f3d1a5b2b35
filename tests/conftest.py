"""Helpers every test package shares: the request ``_meta`` envelope, polling, a clock.

Import them relatively (``from .conftest import meta``, ``from ..conftest import until``);
pytest loads this module once as ``tests.conftest``, so both spellings are the same module.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import trio

from mrtr.core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

T = TypeVar("T")


def meta(capabilities: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A request ``_meta`` for this protocol version declaring ``capabilities`` (none by default).

    ``extra`` adds or overrides members by their full key:
    ``meta({"elicitation": {}}, **{META_LOG_LEVEL: "info"})``.
    """
    return {
        META_PROTOCOL_VERSION: PROTOCOL_VERSION,
        META_CLIENT_CAPABILITIES: dict(capabilities or {}),
        **extra,
    }


async def until(
    probe: Callable[[], T | Awaitable[T]],
    done: Callable[[T], Any] = bool,
    *,
    timeout: float = 10.0,
    every: float = 0.02,
) -> T:
    """Call ``probe`` (sync or async) until ``done`` holds for what it returns, and return that.

    Fails the test with ``trio.TooSlowError`` after ``timeout`` seconds; ``every`` is
    the pause between two calls. For conditions another task or process brings about:
    the test waits exactly as long as it takes, never a fixed time.
    """
    with trio.fail_after(timeout):
        while True:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if done(value):  # type: ignore[arg-type]
                return value  # type: ignore[return-value]
            await trio.sleep(every)


class FakeClock:
    """A wall clock for code that takes ``clock=``: it stands still until the test moves it."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds
