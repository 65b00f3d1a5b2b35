"""2025-era session records in Redis, so every node sharing it serves every request of a session.

A 2025-era session is what its ``initialize`` negotiated plus what later requests set
(see :mod:`mrtr.server.sessions`). With a Redis store each session's record lives in
one string, ``<prefix>session:<id>`` (:meth:`~mrtr.carriers.tasks.redis_url.KeyLayout.session`),
holding a JSON object of at most :data:`MAX_SESSION_RECORD_BYTES`, with a TTL of the
session's idle timeout. Beside the records, the bounds of sessions are kept in Redis
too, so they hold across nodes, not per node:

- ``<prefix>sessions:live``, a sorted set of every session by its last activity
  (microseconds, Redis's clock);
- ``<prefix>sessions:client:<tag>``, a set per client (its principal, or its address;
  ``tag`` a digest of it, so any name makes a short key) of its sessions, and
  ``<prefix>sessions:owners``, a hash naming each session's client tag;
- ``<prefix>sessions:busy``, a hash counting each session's calls in flight on any node
  (a busy session is never ended to make room).

What a session's life does to them:

- opening a session (:meth:`SessionRecords.create`) is one script: it forgets sessions
  whose records expired (a few at a time, and every one of the client's), ends the
  client's least recently active idle session when the client holds its bound, then the
  server's when every node together holds its bound, and writes the record
  (``SET ... PX ttl NX``: an id is never taken twice), or refuses when every session at
  the bound is busy. What it ended is removed from Redis at once (record and indexes),
  and the ids come back so the node tells every node to end its copies: an evicted
  session is ``404`` everywhere. One client therefore keeps at most its bound of records
  alive, each at most :data:`MAX_SESSION_RECORD_BYTES`;
- every request of the session reads it and moves its expiry and its activity in one
  script (:meth:`SessionRecords.load`), so a session used on any node stays alive on
  all of them and one idle for its timeout is gone from all of them at once;
- a call that runs a handler counts itself busy for its length
  (:meth:`SessionRecords.begin`, :meth:`SessionRecords.finish`, which also move the
  activity: idle time runs from the end of the last request);
- a change (the log level, the resources subscribed to, ``notifications/initialized``)
  rewrites it, keeping its expiry moving (``SET ... PX ttl XX``: a record that
  expired or was deleted meanwhile is not brought back);
- ``DELETE`` removes it and its entries (:meth:`SessionRecords.delete`).

In a Redis Cluster the scripts touch several of these keys, so all of them carry one
hash tag and live in one slot. What suspends (a handler waiting for its client's
answer) never moves: it stays on the node that runs it, and the record says nothing of
it (the server's request ids name that node, see ``docs/adr/0015-nodes-on-one-redis.md``).
Every failure is :class:`~mrtr.carriers.tasks.store.StoreUnavailable`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from .redis_scripts import RedisScripts, milliseconds
from .store import StoreUnavailable

__all__ = ["MAX_SESSION_RECORD_BYTES", "SWEEP_BATCH", "Admission", "SessionRecords"]

log = logging.getLogger("mrtr.tasks")

MAX_SESSION_RECORD_BYTES = 256 * 1024
"""The largest session record stored (capabilities, client info and subscribed uris together)."""

SWEEP_BATCH = 64
"""Sessions whose records expired that one ``initialize`` forgets at most (beyond its own client's)."""

_FINISH_TIMEOUT = 5.0  # seconds a call's end may take to uncount it, even when the call was cancelled

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(dict)

# Redis's clock, in microseconds: every node's activity on one scale, and two requests a moment apart in order.
_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
"""

# KEYS: live, owners, busy, the client's set, the new record.
# ARGV: id, record, ttl (ms), bound per client, bound of all, client tag ('' for none), record key prefix,
# client set key prefix, sweep batch.
_CREATE = _NOW + """
local ttl = tonumber(ARGV[3])
local idle = ttl * 1000  -- in microseconds, as the activity
local ended = {}
local function forget(id, why)
  local tag = redis.call('HGET', KEYS[2], id)
  if tag then redis.call('SREM', ARGV[8] .. tag, id) end
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', ARGV[7] .. id)
  ended[#ended + 1] = id
  ended[#ended + 1] = why
end
local function alive(id)
  if redis.call('EXISTS', ARGV[7] .. id) == 1 then return true end
  forget(id, 'expired')
  return false
end
local function busy(id)
  return tonumber(redis.call('HGET', KEYS[3], id) or '0') > 0
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - idle, 'LIMIT', 0, tonumber(ARGV[9]))) do
  local left = redis.call('PTTL', ARGV[7] .. id)
  if left == -2 then
    forget(id, 'expired')
  else  -- kept alive by a reader that did not score it (a node of an earlier release)
    redis.call('ZADD', KEYS[1], left < 0 and now or now - idle + left * 1000, id)
  end
end
if ARGV[6] ~= '' and redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[4]) then
  local live = {}
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    if alive(id) then live[#live + 1] = id end
  end
  if #live >= tonumber(ARGV[4]) then
    local oldest, at = nil, nil
    for _, id in ipairs(live) do
      if not busy(id) then
        local score = tonumber(redis.call('ZSCORE', KEYS[1], id) or '0')
        if oldest == nil or score < at then oldest, at = id, score end
      end
    end
    if oldest == nil then return {0, 'client', unpack(ended)} end
    forget(oldest, 'client')
  end
end
while redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) do
  local found, pruned, start = nil, false, 0
  while found == nil and not pruned do
    local batch = redis.call('ZRANGE', KEYS[1], start, start + 99)
    if #batch == 0 then break end
    for _, id in ipairs(batch) do
      if not alive(id) then pruned = true; break end
      if not busy(id) then found = id; break end
    end
    start = start + 100
  end
  if found then
    forget(found, 'process')
  elseif not pruned then
    return {0, 'process', unpack(ended)}
  end
end
if not redis.call('SET', KEYS[5], ARGV[2], 'PX', ttl, 'NX') then return {0, 'taken', unpack(ended)} end
redis.call('ZADD', KEYS[1], now, ARGV[1])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[6])
  redis.call('SADD', KEYS[4], ARGV[1])
end
return {1, '', unpack(ended)}
"""

# KEYS: the record, live. ARGV: ttl (ms), id.
_LOAD = _NOW + """
local data = redis.call('GET', KEYS[1])
if not data then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', now, ARGV[2])
return data
"""

# KEYS: the record, live, busy. ARGV: ttl (ms), id, +1 (a call begins) or -1 (it ended).
_ACTIVITY = _NOW + """
local step = tonumber(ARGV[3])
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  if step < 0 then redis.call('HDEL', KEYS[3], ARGV[2]) end
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', now, ARGV[2])
if redis.call('HINCRBY', KEYS[3], ARGV[2], step) <= 0 then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""

# KEYS: the record, live, owners, busy. ARGV: id, client set key prefix.
_DELETE = """
local tag = redis.call('HGET', KEYS[3], ARGV[1])
if tag then redis.call('SREM', ARGV[2] .. tag, ARGV[1]) end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
"""


@dataclass(frozen=True)
class Admission:
    """What :meth:`SessionRecords.create` did.

    ``stored``: the record was written. ``refused``: why not, when it was not:
    ``"client"`` (the client holds its bound, every one of them busy), ``"process"`` (the
    server holds its bound across its nodes, every one busy) or ``"taken"`` (the id
    exists). ``ended``: the sessions it removed from Redis, each ``(id, why)`` with
    ``why`` ``"client"`` or ``"process"`` (ended to make room) or ``"expired"``; every
    node must end its copies of them.
    """

    stored: bool
    refused: str | None = None
    ended: list[tuple[str, str]] = field(default_factory=list)


class SessionRecords(RedisScripts):
    """The session records of one server in one Redis (``client``, ``layout``); see the module docs."""

    @staticmethod
    def encode(record: dict[str, Any]) -> bytes:
        """The stored form of ``record``; ``ValueError`` past :data:`MAX_SESSION_RECORD_BYTES`."""
        data = _encoder.encode(record)
        if len(data) > MAX_SESSION_RECORD_BYTES:
            raise ValueError(f"a session record of {len(data)} bytes is over {MAX_SESSION_RECORD_BYTES}")
        return data

    @staticmethod
    def client_tag(client: str) -> str:
        """The short, fixed-size name of a client (principal or address) in the keys: a digest of it."""
        return hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    async def create(self, session_id: str, record: dict[str, Any], ttl: float, *, client: str | None = None,
                     max_per_client: int | None = None, max_sessions: int | None = None) -> Admission:
        """Store a new record under the bounds, ending idle sessions to make room; see :class:`Admission`.

        ``client`` (a principal or an address; ``None``: counted in no client's bound)
        holds at most ``max_per_client`` sessions and all of them together at most
        ``max_sessions`` (``None``: unbounded), across every node on this Redis.
        """
        data = self.encode(record)
        layout = self.layout
        tag = self.client_tag(client) if client is not None else ""
        keys = [layout.sessions_live(), layout.sessions_owners(), layout.sessions_busy(), layout.sessions_of(tag),
                layout.session(session_id)]
        arguments = [session_id, data, milliseconds(ttl), max_per_client or 2**62, max_sessions or 2**62, tag,
                     layout.session(""), layout.sessions_of(""), SWEEP_BATCH]
        reply = await self._call(self._script(_CREATE, keys, arguments))
        words = [item.decode() if isinstance(item, bytes) else str(item) for item in reply[1:]]
        ended = list(zip(words[1::2], words[2::2], strict=True))
        if int(reply[0]) == 1:
            return Admission(True, None, ended)
        return Admission(False, words[0], ended)

    async def load(self, session_id: str, ttl: float) -> dict[str, Any] | None:
        """The record, its expiry and activity moved ``ttl`` seconds ahead; ``None`` when unknown, expired or deleted."""
        layout = self.layout
        data = await self._call(self._script(_LOAD, [layout.session(session_id), layout.sessions_live()],
                                             [milliseconds(ttl), session_id]))
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
        return bool(await self._call(self._client.set(self.layout.session(session_id), data, px=milliseconds(ttl),
                                                      condition=_literal("XX"))))

    async def begin(self, session_id: str, ttl: float) -> bool:
        """A call of the session starts: it is busy (never ended to make room) until :meth:`finish`.

        Whether the record was still there (``False``: the session is gone).
        """
        return bool(await self._activity(session_id, ttl, 1))

    async def finish(self, session_id: str, ttl: float) -> None:
        """The call ended: counted off, and the session's idle time runs from now.

        Done even when the call was cancelled (its session deleted, say), within a few
        seconds; a store that cannot be reached is logged, not raised: the count then
        stays until the record expires, and the session cannot be ended to make room meanwhile.
        """
        with trio.CancelScope(shield=True), trio.move_on_after(_FINISH_TIMEOUT):
            try:
                await self._activity(session_id, ttl, -1)
            except StoreUnavailable as exc:
                log.warning("could not count off a call of a 2025 session: %s", exc.message)

    async def delete(self, session_id: str) -> bool:
        """Remove a record and its entries; whether it was there."""
        layout = self.layout
        keys = [layout.session(session_id), layout.sessions_live(), layout.sessions_owners(), layout.sessions_busy()]
        return bool(await self._call(self._script(_DELETE, keys, [session_id, layout.sessions_of("")])))

    async def _activity(self, session_id: str, ttl: float, step: int) -> Any:
        layout = self.layout
        keys = [layout.session(session_id), layout.sessions_live(), layout.sessions_busy()]
        return await self._call(self._script(_ACTIVITY, keys, [milliseconds(ttl), session_id, step]))


def _literal(name: str) -> Any:
    from coredis.tokens import PureToken

    return getattr(PureToken, name)
