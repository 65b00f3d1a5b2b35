"""Run the tasks carrier (its store and its background work) for the lifetime of a serving process.

A server without task tools whose handlers run once (``once=True``) still needs the
store for their rounds: :func:`serve_rounds` opens it and runs only
:class:`~mrtr.carriers.tasks.rounds.FinalRounds`. A server whose store is Redis also
runs this node's end of the bus between nodes (:func:`serve_bus`), whatever it registers;
one serving 2025-era sessions on a shared store records their calls there
(:func:`serve_calls`), so another process can adopt them.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..sealed import TokenCarrier
from .carrier import Resolve, TaskCarrier
from .record import MAX_RECORD_BYTES, TaskRecord
from .rounds import FinalRounds
from .bus import NodeBus
from .calls import Calls
from .store import Observed, TaskStore
from .urls import chosen_url, default_path, open_store

__all__ = ["serve_tasks", "serve_rounds", "serve_bus", "serve_calls", "DEFAULT_LEASE", "DEFAULT_TASK_TTL",
           "ROUNDS_URL", "parse_ttl", "lease_from_env"]

ROUNDS_URL = "memory:"
"""Where a server without task tools records its rounds that run once, when no store is configured."""

log = logging.getLogger("mrtr.tasks")

DEFAULT_LEASE = 30.0
"""Seconds a runner's lease lasts without renewal."""

DEFAULT_TASK_TTL = 3600.0
"""Seconds a task lives after its last activity (see :meth:`~mrtr.tasks.TaskRecord.lifetime_end`)."""


def parse_ttl(text: str) -> float:
    """A TTL as ``--task-ttl`` and ``MRTR_TASK_TTL`` take it: positive seconds, or ``none`` for no limit (``inf``)."""
    if text.strip().lower() == "none":
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number of seconds or none, got {text!r}") from None
    if not value > 0 or math.isnan(value):
        raise ValueError(f"must be a positive number of seconds or none, got {text!r}")
    return value


def _ttl_ms(ttl: float | None) -> int | None:
    """``ttl`` seconds (``None``: ``MRTR_TASK_TTL`` or one hour) as the ``ttlMs`` tasks carry (``None``: no limit)."""
    if ttl is None:
        text = os.environ.get("MRTR_TASK_TTL")
        try:
            ttl = DEFAULT_TASK_TTL if not text else parse_ttl(text)
        except ValueError as exc:
            raise ValueError(f"MRTR_TASK_TTL {exc}") from None
    if math.isinf(ttl):
        return None
    if not ttl > 0:
        raise ValueError(f"a task ttl must be a positive number of seconds, got {ttl!r}")
    return max(1, round(ttl * 1000))


def lease_from_env() -> float:
    """The lease ``MRTR_TASK_LEASE`` names, or the default (30 seconds)."""
    return _lease_from_env()


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
    ttl: float | None = None, max_record_bytes: int | None = None,
    on_change: Callable[[TaskRecord], None] | None = None, name: str = "server",
) -> AsyncIterator[TaskCarrier]:
    """Open the task store and run this node's task carrier for the block; gives the carrier.

    ``resolve`` binds a tool name and a call's arguments to what runs (the server's
    ``task_binding``); ``token`` is the server's token carrier, for a call's rounds
    before its task exists. ``url`` defaults to ``MRTR_STORE``, ``MRTR_TASKS`` or the SQLite
    file of the server called ``name`` in the user's state folder
    (:func:`~mrtr.carriers.tasks.urls.default_path`); ``lease`` to ``MRTR_TASK_LEASE`` or 30 seconds;
    ``ttl``, the seconds a task lives after its last activity (``math.inf``: no limit),
    to ``MRTR_TASK_TTL`` or one hour. The default store's folder is made (owner only); ``mrtr
    serve`` names the file in its listing at start. A store that cannot be reached fails here, at
    start, with :class:`~mrtr.tasks.StoreUnavailable` naming it. ``max_record_bytes``
    caps one task's record (default :data:`~mrtr.tasks.MAX_RECORD_BYTES`, 1 MiB).
    ``on_change`` is told of every status change this node writes (see
    :class:`~mrtr.carriers.tasks.store.Observed`); a Redis store publishes the changes
    every node writes itself, to the bus (:func:`serve_bus`), so a server with a bus
    passes none.
    """
    chosen = chosen_url(url)
    if chosen is None:
        # Nobody chose it: the server's own file in the user's state folder (mrtr serve's listing names it).
        path = default_path(name)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        chosen = f"sqlite:///{path}"
        log.debug("task store: %s (the default for this server)", path)
    length = lease if lease is not None else _lease_from_env()
    ttl_ms = _ttl_ms(ttl)
    async with open_store(chosen, max_record_bytes=max_record_bytes or MAX_RECORD_BYTES) as opened:
        store: TaskStore = opened if on_change is None else Observed(opened, on_change)
        carrier = TaskCarrier(store, resolve, lease=length, ttl_ms=ttl_ms, token=token)
        async with _serving(carrier.serve):
            yield carrier


@asynccontextmanager
async def serve_rounds(url: str | None = None, *, lease: float | None = None,
                       max_record_bytes: int | None = None) -> AsyncIterator[FinalRounds]:
    """Open the store and record this node's rounds that run once, for the block; gives the recorder.

    For a server with handlers declared ``once=True`` and no task tools. ``url`` defaults
    to ``MRTR_STORE``, ``MRTR_TASKS`` or :data:`ROUNDS_URL` (memory: one process only; several workers or
    nodes need a shared store to share the records); ``lease`` to ``MRTR_TASK_LEASE`` or
    30 seconds. A store that cannot be reached fails here, at start.
    """
    chosen = chosen_url(url) or ROUNDS_URL
    length = lease if lease is not None else _lease_from_env()
    async with open_store(chosen, max_record_bytes=max_record_bytes or MAX_RECORD_BYTES) as store:
        rounds = FinalRounds(store, lease=length)
        async with _serving(rounds.serve):
            yield rounds


@asynccontextmanager
async def serve_bus(url: str, *, deliver: Callable[[str, dict[str, Any]], None],
                    lost: Callable[[], None]) -> AsyncIterator[NodeBus]:
    """This node's end of the bus between the nodes sharing the Redis ``url`` names, for the block.

    ``deliver(method, params)`` gets every notification any node publishes (this one
    included), task status changes among them; ``lost()`` is called when the
    subscription was lost, so what was published meanwhile did not arrive. A Redis that
    cannot be reached fails here, at start, with :class:`~mrtr.tasks.StoreUnavailable`.
    """
    from .redis import connected

    async with connected(url) as (client, target):
        # In a cluster PUBLISH counts the subscribers of one shard only: it cannot tell a node is gone.
        bus = NodeBus(client, target.layout.notifications, url=url, deliver=deliver, lost=lost, layout=target.layout,
                      counts_receivers=target.kind != "cluster")
        async with _serving(bus.serve):
            yield bus


@asynccontextmanager
async def serve_calls(url: str, node_id: str, *, lease: float, ttl: float, slot: str | None = None,
                      client: Any = None, layout: Any = None) -> AsyncIterator[Calls]:
    """Record this process's 2025-era calls in the shared store ``url`` names, for the block; gives them.

    SQLite (the workers of one machine) opens the file; Redis uses ``client`` and
    ``layout``, the bus's connection (:func:`serve_bus`). ``node_id`` names this process
    (the bus's node id on Redis); its lease (``lease`` seconds) is held for the block and
    ended after it, so what it still holds then is adopted at once. ``ttl`` is how long a
    call's record lives after its last write; ``slot`` names a supervised worker's
    position. ``ValueError`` for a store that cannot share calls (``memory:``).
    """
    from .calls import Calls
    from .redis_url import is_redis_url

    if is_redis_url(url):
        from .calls_redis import RedisCalls

        if client is None or layout is None:
            raise ValueError("recording calls on Redis needs the bus's client")
        calls = Calls(RedisCalls(client, layout, url), node_id, lease=lease, ttl=ttl, slot=slot)
        async with _serving(calls.serve):
            yield calls
        return
    if not url.startswith("sqlite://"):
        raise ValueError(f"2025 calls are recorded on a shared store (sqlite:// or redis://), not {url!r}")
    from .calls_sqlite import SQLiteCalls

    path = url[len("sqlite://"):]
    path = path[1:] if path.startswith("/") else path
    store = await SQLiteCalls.open(path)
    try:
        calls = Calls(store, node_id, lease=lease, ttl=ttl, slot=slot)
        async with _serving(calls.serve):
            yield calls
    finally:
        await store.aclose()


@asynccontextmanager
async def _serving(serve: Callable[..., Any]) -> AsyncIterator[None]:
    """Run ``serve`` (a carrier's background work) in a nursery for the block, and stop it after."""
    async with trio.open_nursery() as nursery:
        await nursery.start(serve)
        try:
            yield
        finally:
            nursery.cancel_scope.cancel()
