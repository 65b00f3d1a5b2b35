"""The Redis store: several nodes share one Redis, through ``coredis`` (anyio, runs on trio).

Each task is a hash (``version``, ``status``, ``lease_expiry``, ``expires_at``, ``body``)
that Redis expires at the task's ``expires_at`` (moved by every write); a lease renewal
writes the three small fields and leaves ``body`` alone. Working tasks also sit in one
sorted set scored by lease expiry, which is how a node finds tasks whose runner died.
Create, compare-and-set and renewal are Lua scripts, so the version check and the write
are one atomic step on the server: two nodes never both win the same transition.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .record import MAX_RECORD_BYTES, TaskRecord, decode, encode, restore
from .store import StoreUnavailable, TaskExists, masked, reason, store_failed

try:
    import coredis
    import coredis.exceptions
except ImportError:  # pragma: no cover - exercised by the missing-extra message
    coredis = None  # type: ignore[assignment]

__all__ = ["RedisStore", "require_coredis"]

_FIELDS = ["body", "version", "lease_expiry", "expires_at"]  # what a read takes of a task's hash

# ARGV of every script: version, status, lease_expiry, expires_at ('' for none), PEXPIREAT ('' for none),
# task id, then the body for create and replace.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'lease_expiry', ARGV[3], 'expires_at', ARGV[4],
           'body', ARGV[7])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) end
if ARGV[2] == 'working' then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6]) end
return 1
"""

_REPLACE = """
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored or tonumber(stored) ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'status', ARGV[2], 'lease_expiry', ARGV[3], 'expires_at', ARGV[4],
           'body', ARGV[7])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) else redis.call('PERSIST', KEYS[1]) end
if ARGV[2] == 'working' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6])
else
  redis.call('ZREM', KEYS[2], ARGV[6])
end
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

    async def _script(self, script: str, record: TaskRecord, *extra: Any) -> Any:
        keys = [self._key(record.task_id), self._leases]
        return await self._call(self._client.eval(script, keys, [*self._args(record), *extra]))

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`."""
        if not await self._script(_CREATE, record, encode(record, self.max_record_bytes)):
            raise TaskExists(record.task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`; Redis drops expired hashes by itself."""
        fields = await self._call(self._client.hmget(self._key(task_id), _FIELDS))
        return None if fields[0] is None else self._restore(list(fields))

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`."""
        return bool(await self._script(_REPLACE, record, encode(record, self.max_record_bytes)))

    async def renew(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.renew`: the hash's small fields, the key's expiry and the lease set; not the body."""
        return bool(await self._script(_RENEW, record))

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

