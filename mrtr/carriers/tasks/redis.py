"""The Redis store: several nodes share one Redis, through ``coredis`` (anyio, runs on trio).

Each task is a hash (``version``, ``status``, ``shown``, ``lease_expiry``, ``expires_at``,
``body``) that Redis expires at the task's ``expires_at`` (moved by every write); a lease
renewal writes the three small fields and leaves ``body`` alone. Working tasks also sit
in a sorted set scored by lease expiry, which is how a node finds tasks whose runner
died. Create, compare-and-set and renewal are Lua scripts, so the version check and the
write are one atomic step on the server: two nodes never both win the same transition.

A write that changes what a client sees of a task (its status or status message,
``shown``) publishes the task's ``notifications/tasks`` in the same script, on the
channel every node hears (:mod:`mrtr.carriers.tasks.bus`): whichever node wrote it,
every node learns of it once, in the order Redis applied the writes.

A round record is a hash under ``<prefix>round:<key>`` (``claim``, ``settled``, ``body``)
that Redis expires with its token; claiming it, settling it and releasing it are Lua
scripts too, so of two claims one wins and only the winning attempt writes the outcome.

A token bucket is a hash under ``<prefix>bucket:<name>`` (``tokens``, ``at``): one Lua
script reads Redis's own clock (``TIME``, the same for every node), refills it, takes a
token and sets the key to expire when the bucket would be full again, so Redis forgets
it by itself.

Which keys (and hash tags, in a Redis Cluster) is :class:`~mrtr.carriers.tasks.redis_url.KeyLayout`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import msgspec

from .bus import notification
from .record import MAX_RECORD_BYTES, TERMINAL, RoundRecord, TaskRecord, decode, decode_round, encode, restore
from .redis_url import RedisTarget, parse_redis_url, redis_client
from .store import StoreUnavailable, TaskExists, masked, reason, store_failed

try:
    import coredis
    import coredis.exceptions
except ImportError:  # pragma: no cover - exercised by the missing-extra message
    coredis = None  # type: ignore[assignment]

__all__ = ["RedisStore", "connected", "open_redis_store", "require_coredis"]

_FIELDS = ["body", "version", "lease_expiry", "expires_at"]  # what a read takes of a task's hash

# ARGV of every script: version, status, lease_expiry, expires_at ('' for none), PEXPIREAT ('' for none),
# task id; then for create and replace the body, what a client sees (status and status message), the
# channel and the notification to publish there when that changed.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'lease_expiry', ARGV[3], 'expires_at', ARGV[4],
           'body', ARGV[7], 'shown', ARGV[8])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) end
if ARGV[2] == 'working' then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6]) end
redis.call('PUBLISH', ARGV[9], ARGV[10])
return 1
"""

_REPLACE = """
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored or tonumber(stored) ~= tonumber(ARGV[1]) - 1 then return 0 end
local shown = redis.call('HGET', KEYS[1], 'shown')
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'lease_expiry', ARGV[3], 'expires_at', ARGV[4],
           'body', ARGV[7], 'shown', ARGV[8])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) else redis.call('PERSIST', KEYS[1]) end
if ARGV[2] == 'working' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6])
else
  redis.call('ZREM', KEYS[2], ARGV[6])
end
if shown ~= ARGV[8] then redis.call('PUBLISH', ARGV[9], ARGV[10]) end
return 1
"""

_RENEW = """
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored or tonumber(stored) ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'lease_expiry', ARGV[3], 'expires_at', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) else redis.call('PERSIST', KEYS[1]) end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6])
return 1
"""


# Rounds. ARGV: the claim, then for a claim the body and PEXPIREAT; for a settle whether it is settled,
# the body and PEXPIREAT.
_CLAIM_ROUND = """
local body = redis.call('HGET', KEYS[1], 'body')
if body then return body end
redis.call('HSET', KEYS[1], 'claim', ARGV[1], 'settled', '0', 'body', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return false
"""

_SETTLE_ROUND = """
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'settled') ~= '0' then return 0 end
redis.call('HSET', KEYS[1], 'settled', ARGV[2], 'body', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
"""

_RELEASE_ROUND = """
if redis.call('HGET', KEYS[1], 'claim') == ARGV[1] and redis.call('HGET', KEYS[1], 'settled') == '0' then
  redis.call('DEL', KEYS[1])
end
return 0
"""


# A token bucket. ARGV: tokens a second, the most it holds. Returns '0' when a token was taken, else the
# seconds until one will be (a string: Redis would cut a Lua number to an integer).
_TAKE_TOKEN = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = burst
if state[1] then
  tokens = math.min(burst, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * rate)
end
if tokens < 1 then return tostring((1 - tokens) / rate) end
tokens = tokens - 1
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((burst - tokens) / rate * 1000)))
return '0'
"""


def require_coredis() -> None:
    """Raise a clear error when the ``redis`` extra is not installed."""
    if coredis is None:
        raise StoreUnavailable(
            "a redis:// task store needs the coredis package; install the redis extra: pip install 'mrtr[redis]'"
        )


class RedisStore:
    """Task records in Redis hashes (keys as :class:`~mrtr.carriers.tasks.redis_url.KeyLayout` says).

    ``client`` is a connected ``coredis`` client for ``target`` (see
    :func:`open_redis_store`, which opens both).
    """

    def __init__(self, client: Any, target: RedisTarget, *, max_record_bytes: int = MAX_RECORD_BYTES) -> None:
        self.url = target.url
        self.target = target
        self.layout = target.layout
        self.max_record_bytes = max_record_bytes
        self._client = client

    async def _call(self, request: Any) -> Any:
        # Any failure is the store's: connection errors, and error replies too (-OOM when Redis
        # is full, -READONLY on a replica after a failover, -BUSY, -LOADING...). None may escape
        # as anything but StoreUnavailable, which every caller, background loops included, handles.
        try:
            return await request
        except Exception as exc:
            raise store_failed(self.url, exc) from None

    def _restore(self, fields: list[Any]) -> TaskRecord:
        body, version, lease_expiry, expires_at = fields
        try:
            if lease_expiry is None:  # written before the lease fields were kept beside the body
                return msgspec.structs.replace(decode(body), version=int(version))
            return restore(body, int(version), float(lease_expiry), float(expires_at) if expires_at else None)
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise store_failed(self.url, exc) from None

    def _args(self, record: TaskRecord) -> list[Any]:
        expires = record.expires_at
        return [
            record.version,
            record.status,
            repr(record.lease_expiry),
            "" if expires is None else repr(expires),
            "" if expires is None else int(expires * 1000),
            record.task_id,
        ]

    def _announced(self, record: TaskRecord) -> list[Any]:
        """The body, what a client sees of the task, and the notification a change of that publishes."""
        return [encode(record, self.max_record_bytes), f"{record.status}\n{record.status_message or ''}",
                self.layout.notifications, notification("notifications/tasks", record.to_wire())]

    async def _script(self, script: str, record: TaskRecord, *extra: Any) -> Any:
        keys = [self.layout.task(record.task_id), self.layout.leases_of(record.task_id)]
        return await self._call(self._client.eval(script, keys, [*self._args(record), *extra]))

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`; every node hears of the new task."""
        if not await self._script(_CREATE, record, *self._announced(record)):
            raise TaskExists(record.task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`; Redis drops expired hashes by itself."""
        fields = await self._call(self._client.hmget(self.layout.task(task_id), _FIELDS))
        return None if fields[0] is None else self._restore(list(fields))

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`; a change of what a client sees is published with the write."""
        return bool(await self._script(_REPLACE, record, *self._announced(record)))

    async def renew(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.renew`: the hash's small fields, the key's expiry and the lease set; not the body."""
        return bool(await self._script(_RENEW, record))

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """See :meth:`TaskStore.claimable`; ids of expired tasks are dropped from the lease sets here."""
        live: list[str] = []
        for leases in self.layout.lease_sets():
            members = await self._call(self._client.zrange(
                leases, "-inf", now, sortby=coredis.PureToken.BYSCORE, offset=0, count=limit - len(live)))
            for member in members:
                task_id = member.decode() if isinstance(member, bytes) else str(member)
                if await self._call(self._client.exists([self.layout.task(task_id)])):
                    live.append(task_id)
                else:
                    await self._call(self._client.zrem(leases, [task_id]))
            if len(live) >= limit:
                break
        return live

    async def delete(self, task_id: str) -> None:
        """See :meth:`TaskStore.delete`."""
        await self._call(self._client.delete([self.layout.task(task_id)]))
        await self._call(self._client.zrem(self.layout.leases_of(task_id), [task_id]))

    async def in_flight(self) -> list[str]:
        """See :meth:`TaskStore.in_flight`: a SCAN over the task keys (an operator's call, not a request's)."""
        ids = []

        async def scan() -> None:
            async for key in self._client.scan_iter(match=self.layout.task_pattern(), count=1000):
                name = key.decode() if isinstance(key, bytes) else str(key)
                status = await self._client.hget(name, "status")
                if status is not None and (status.decode() if isinstance(status, bytes) else status) not in TERMINAL:
                    ids.append(self.layout.task_id_of(name))

        await self._call(scan())
        return sorted(ids)

    def _decode_round(self, body: Any) -> RoundRecord:
        try:
            return decode_round(body)
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise store_failed(self.url, exc) from None

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        """See :meth:`TaskStore.claim_round`."""
        body = encode(record, self.max_record_bytes)
        found = await self._call(self._client.eval(
            _CLAIM_ROUND, [self.layout.round(record.key)], [record.claim, body, int(record.expires_at * 1000)]))
        return None if found is None else self._decode_round(found)

    async def get_round(self, key: str) -> RoundRecord | None:
        """See :meth:`TaskStore.get_round`; Redis drops expired rounds by itself."""
        body = await self._call(self._client.hget(self.layout.round(key), "body"))
        return None if body is None else self._decode_round(body)

    async def settle_round(self, record: RoundRecord) -> bool:
        """See :meth:`TaskStore.settle_round`."""
        body = encode(record, self.max_record_bytes)
        done = await self._call(self._client.eval(
            _SETTLE_ROUND, [self.layout.round(record.key)],
            [record.claim, "1" if record.settled else "0", body, int(record.expires_at * 1000)]))
        return bool(done)

    async def release_round(self, key: str, claim: str) -> None:
        """See :meth:`TaskStore.release_round`."""
        await self._call(self._client.eval(_RELEASE_ROUND, [self.layout.round(key)], [claim]))

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """See :meth:`TaskStore.take_token`: one script, on Redis's clock; the key expires when full again."""
        wait = await self._call(self._client.eval(_TAKE_TOKEN, [self.layout.bucket(bucket)],
                                                  [repr(float(per_second)), repr(float(burst))]))
        try:
            return float(wait.decode() if isinstance(wait, bytes) else wait)
        except (TypeError, ValueError) as exc:
            raise store_failed(self.url, exc) from None

    async def aclose(self) -> None:
        """Connections close when the ``async with`` block of :func:`open_redis_store` ends."""


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[tuple[Any, RedisTarget]]:
    """A client for the Redis ``url`` names, checked with a ``PING``, and the parsed URL, for the block.

    ``ValueError`` for a malformed URL; :class:`StoreUnavailable` naming the store (its
    password masked) when it cannot be reached now.
    """
    require_coredis()
    target = parse_redis_url(url)
    stack = AsyncExitStack()
    try:
        client = await stack.enter_async_context(redis_client(target))
        await client.ping()
    except Exception as exc:
        with contextlib.suppress(Exception):
            await stack.aclose()
        raise StoreUnavailable(f"task store {masked(url)} cannot be reached: {reason(exc)}") from None
    async with stack:
        yield client, target


@asynccontextmanager
async def open_redis_store(url: str, *, max_record_bytes: int = MAX_RECORD_BYTES) -> AsyncIterator[RedisStore]:
    """The Redis store ``url`` names, reachable now, for the block."""
    async with connected(url) as (client, target):
        yield RedisStore(client, target, max_record_bytes=max_record_bytes)
