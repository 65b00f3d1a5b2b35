"""2025-era session records in Redis, so every node sharing it serves every request of a session.

A 2025-era session is what its ``initialize`` negotiated plus what later requests set
(see :mod:`mrtr.server.sessions`). With a Redis store each session's record lives in
one string, ``<prefix>session:<id>`` (:meth:`~mrtr.carriers.tasks.redis_url.KeyLayout.session`),
holding a JSON object of at most :data:`MAX_SESSION_RECORD_BYTES`, with a TTL of the
session's idle timeout:

- opening a session writes it (``SET ... PX ttl NX``: an id is never taken twice);
- every request of the session reads it and moves its expiry in one command
  (``GETEX ... PX ttl``), so a session used on any node stays alive on all of them and
  one idle for its timeout is gone from all of them at once;
- a change (the log level, the resources subscribed to, ``notifications/initialized``)
  rewrites it, keeping its expiry moving (``SET ... PX ttl XX``: a record that
  expired or was deleted meanwhile is not brought back);
- ``DELETE`` removes it.

That is one Redis command per request, and one more per change. What suspends (a
handler waiting for its client's answer) never moves: it stays on the node that runs
it, and the record says nothing of it (the server's request ids name that node, see
``docs/adr/0015-nodes-on-one-redis.md``). Every failure is
:class:`~mrtr.carriers.tasks.store.StoreUnavailable`.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from .redis_url import KeyLayout
from .store import store_failed

__all__ = ["MAX_SESSION_RECORD_BYTES", "SessionRecords"]

MAX_SESSION_RECORD_BYTES = 256 * 1024
"""The largest session record stored (capabilities, client info and subscribed uris together)."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(dict)


class SessionRecords:
    """The session records of one server in one Redis (``client``, ``layout``); see the module docs."""

    def __init__(self, client: Any, layout: KeyLayout, url: str) -> None:
        self._client = client
        self.layout = layout
        self.url = url

    @staticmethod
    def encode(record: dict[str, Any]) -> bytes:
        """The stored form of ``record``; ``ValueError`` past :data:`MAX_SESSION_RECORD_BYTES`."""
        data = _encoder.encode(record)
        if len(data) > MAX_SESSION_RECORD_BYTES:
            raise ValueError(f"a session record of {len(data)} bytes is over {MAX_SESSION_RECORD_BYTES}")
        return data

    async def create(self, session_id: str, record: dict[str, Any], ttl: float) -> bool:
        """Store a new record; whether it was stored (``False``: the id exists)."""
        data = self.encode(record)
        return bool(await self._call(self._client.set(self.layout.session(session_id), data, px=_ms(ttl),
                                                      condition=_literal("NX"))))

    async def load(self, session_id: str, ttl: float) -> dict[str, Any] | None:
        """The record, its expiry moved ``ttl`` seconds ahead; ``None`` when unknown, expired or deleted."""
        data = await self._call(self._client.getex(self.layout.session(session_id), px=_ms(ttl)))
        if data is None:
            return None
        try:
            record = _decoder.decode(data)
        except msgspec.DecodeError:
            return None  # not written by this code: as if unknown
        return record

    async def save(self, session_id: str, record: dict[str, Any], ttl: float) -> bool:
        """Rewrite a live record; whether it was still there."""
        data = self.encode(record)
        return bool(await self._call(self._client.set(self.layout.session(session_id), data, px=_ms(ttl),
                                                      condition=_literal("XX"))))

    async def delete(self, session_id: str) -> bool:
        """Remove a record; whether it was there."""
        return bool(await self._call(self._client.delete([self.layout.session(session_id)])))

    async def _call(self, request: Any) -> Any:
        try:
            return await request
        except Exception as exc:
            raise store_failed(self.url, exc) from None


def _ms(ttl: float) -> int:
    return max(1, math.ceil(ttl * 1000)) if math.isfinite(ttl) else 2**62


def _literal(name: str) -> Any:
    from coredis.tokens import PureToken

    return getattr(PureToken, name)
