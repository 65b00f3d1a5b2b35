"""The Redis store: several nodes share one Redis, through ``coredis`` (anyio, runs on trio).

Each task is a hash (``version``, ``status``, ``body``) that Redis expires at the task's
``expires_at`` (moved by every write);
working tasks also sit in one sorted set scored by lease expiry, which is how a node
finds tasks whose runner died. Create and compare-and-set are Lua scripts, so the
version check and the write are one atomic step on the server: two nodes never both
win the same transition.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .record import MAX_RECORD_BYTES, TaskRecord, decode, encode
from .store import StoreUnavailable, TaskExists, masked, reason, store_failed

try:
    import coredis
    import coredis.exceptions
except ImportError:  # pragma: no cover - exercised by the missing-extra message
    coredis = None  # type: ignore[assignment]

__all__ = ["RedisStore", "require_coredis"]

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'body', ARGV[3])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) end
if ARGV[2] == 'working' then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[6]) end
return 1
"""

_REPLACE = """
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored or tonumber(stored) ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'body', ARGV[3])
if ARGV[6] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[6]) else redis.call('PERSIST', KEYS[1]) end
if ARGV[2] == 'working' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
else
  redis.call('ZREM', KEYS[2], ARGV[5])
end
return 1
"""


def require_coredis() -> None:
    """Raise a clear error when the ``redis`` extra is not installed."""
    if coredis is None:
        raise StoreUnavailable(
            "a redis:// task store needs the coredis package; install the redis extra: pip install 'mrtr[redis]'"
        )


class RedisStore:
    """Task records in Redis hashes under ``<prefix>task:<id>``; enter with ``async with``."""

    def __init__(self, url: str, *, prefix: str = "mrtr:", max_record_bytes: int = MAX_RECORD_BYTES) -> None:
        require_coredis()
        self.url = url
        self.max_record_bytes = max_record_bytes
        self._prefix = prefix
        self._leases = prefix + "leases"
        self._client: Any = coredis.Redis.from_url(url, connect_timeout=5, stream_timeout=10)

    def _key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    async def __aenter__(self) -> RedisStore:
        try:
            await self._client.__aenter__()
        except Exception as exc:
            raise StoreUnavailable(f"task store {masked(self.url)} cannot be reached: {reason(exc)}") from None
        try:
            await self._client.ping()
        except Exception as exc:
            await self._client.__aexit__(None, None, None)
            raise StoreUnavailable(f"task store {masked(self.url)} cannot be reached: {reason(exc)}") from None
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._client.__aexit__(*exc_info)

    async def _call(self, request: Any) -> Any:
        # Any failure is the store's: connection errors, and error replies too (-OOM when Redis
        # is full, -READONLY on a replica after a failover, -BUSY, -LOADING...). None may escape
        # as anything but StoreUnavailable, which every caller, background loops included, handles.
        try:
            return await request
        except Exception as exc:
            raise store_failed(self.url, exc) from None

    def _decode(self, body: bytes | str) -> TaskRecord:
        try:
            return decode(body)
        except msgspec.DecodeError as exc:
            raise store_failed(self.url, exc) from None

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`."""
        body = encode(record, self.max_record_bytes)
        args = [record.version, record.status, body, record.lease_expiry, _pexpireat(record), record.task_id]
        created = await self._call(self._client.eval(_CREATE, [self._key(record.task_id), self._leases], args))
        if not created:
            raise TaskExists(record.task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`; Redis drops expired hashes by itself."""
        body = await self._call(self._client.hget(self._key(task_id), "body"))
        return None if body is None else self._decode(body)

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`."""
        body = encode(record, self.max_record_bytes)
        args = [record.version, record.status, body, record.lease_expiry, record.task_id, _pexpireat(record)]
        replaced = await self._call(self._client.eval(_REPLACE, [self._key(record.task_id), self._leases], args))
        return bool(replaced)

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """See :meth:`TaskStore.claimable`; ids of expired tasks are dropped from the lease set here."""
        members = await self._call(
            self._client.zrange(self._leases, "-inf", now, sortby=coredis.PureToken.BYSCORE, offset=0, count=limit)
        )
        ids = [member.decode() if isinstance(member, bytes) else str(member) for member in members]
        live = []
        for task_id in ids:
            if await self._call(self._client.exists([self._key(task_id)])):
                live.append(task_id)
            else:
                await self._call(self._client.zrem(self._leases, [task_id]))
        return live

    async def delete(self, task_id: str) -> None:
        """See :meth:`TaskStore.delete`."""
        await self._call(self._client.delete([self._key(task_id)]))
        await self._call(self._client.zrem(self._leases, [task_id]))

    async def aclose(self) -> None:
        """Connections close when the ``async with`` block ends."""


def _pexpireat(record: TaskRecord) -> int | str:
    """The key's ``PEXPIREAT`` (epoch milliseconds), or ``""`` for a task kept until deleted."""
    return "" if record.expires_at is None else int(record.expires_at * 1000)
