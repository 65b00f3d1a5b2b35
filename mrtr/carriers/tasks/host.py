"""Run the tasks carrier (its store and its background work) for the lifetime of a serving process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..token import TokenCarrier
from .carrier import Resolve, TaskCarrier
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
    resolve: Resolve, token: TokenCarrier, url: str | None = None, *, lease: float | None = None,
    ttl_ms: int | None = 3_600_000, on_change: Callable[[TaskRecord], None] | None = None,
) -> AsyncIterator[TaskCarrier]:
    """Open the task store and run this node's task carrier for the block; gives the carrier.

    ``resolve`` binds a tool name and a call's arguments to what runs (the server's
    ``task_binding``); ``token`` is the server's token carrier, for a call's rounds
    before its task exists. ``url`` defaults to ``MRTR_TASKS`` or
    ``sqlite:///mrtr-tasks.sqlite3``; ``lease`` to ``MRTR_TASK_LEASE`` or 30 seconds. A
    store that cannot be reached fails here, at start, with
    :class:`~mrtr.tasks.StoreUnavailable` naming it. ``on_change`` is told of every
    status change this node writes (see :class:`~mrtr.carriers.tasks.store.Observed`).
    """
    chosen = url or os.environ.get("MRTR_TASKS") or DEFAULT_URL
    length = lease if lease is not None else _lease_from_env()
    async with open_store(chosen) as opened:
        store: TaskStore = opened if on_change is None else Observed(opened, on_change)
        carrier = TaskCarrier(store, resolve, lease=length, ttl_ms=ttl_ms, token=token)
        async with trio.open_nursery() as nursery:
            await nursery.start(carrier.serve)
            try:
                yield carrier
            finally:
                nursery.cancel_scope.cancel()
