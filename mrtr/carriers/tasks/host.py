"""Attach the tasks carrier to a server for the lifetime of a serving process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from .carrier import TaskCarrier
from .record import TaskRecord
from .store import Observed, TaskStore
from .urls import DEFAULT_URL, open_store

__all__ = ["serve_tasks", "DEFAULT_LEASE"]

DEFAULT_LEASE = 30.0
"""Seconds a runner's lease lasts without renewal."""


def _lease_from_env() -> float:
    text = os.environ.get("MRTR_TASK_LEASE")
    if not text:
        return DEFAULT_LEASE
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"MRTR_TASK_LEASE must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"MRTR_TASK_LEASE must be positive, got {text!r}")
    return value


@asynccontextmanager
async def serve_tasks(
    server: Any, url: str | None = None, *, lease: float | None = None, ttl_ms: int | None = 3_600_000,
    on_change: Callable[[TaskRecord], None] | None = None,
) -> AsyncIterator[TaskCarrier]:
    """Open the task store, run this node's task carrier and attach it to ``server``.

    ``url`` defaults to ``MRTR_TASKS`` or ``sqlite:///mrtr-tasks.sqlite3``; ``lease`` to
    ``MRTR_TASK_LEASE`` or 30 seconds. A store that cannot be reached fails here, at
    start, with :class:`~mrtr.tasks.StoreUnavailable` naming it. ``on_change`` is told
    of every status change this node writes (see :class:`~mrtr.carriers.tasks.store.Observed`).
    """
    chosen = url or os.environ.get("MRTR_TASKS") or DEFAULT_URL
    length = lease if lease is not None else _lease_from_env()
    async with open_store(chosen) as opened:
        store: TaskStore = opened if on_change is None else Observed(opened, on_change)
        carrier = TaskCarrier(store, server.task_binding, lease=length, ttl_ms=ttl_ms, token=server.token_carrier)
        async with trio.open_nursery() as nursery:
            await nursery.start(carrier.serve)
            server.tasks = carrier
            try:
                yield carrier
            finally:
                server.tasks = None
                nursery.cancel_scope.cancel()
