"""The in-memory store: one process, lost on exit; for tests and in-process clients."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from .record import MAX_RECORD_BYTES, TERMINAL, RoundRecord, TaskRecord, decode_round, encode, restore
from .store import TaskExists, refilled

__all__ = ["MAX_BUCKETS", "MemoryStore"]

MAX_BUCKETS = 100_000
"""The most token buckets the memory store holds (a few hundred bytes each): past it, the one used least
recently is forgotten (as if full again). Buckets full again are forgotten anyway."""


class MemoryStore:
    """Records kept as encoded bytes, so a caller never aliases a stored record and encoding bugs show at once.

    Each entry is the body of the record's last full write and its lease fields
    (version, lease expiry, expiry), kept apart as the other stores keep them. Round
    records are kept the same way, by key, with their expiry; token buckets by name, at
    most :data:`MAX_BUCKETS`. ``clock`` gives the time (epoch seconds) that decides
    whether a record has expired and how much a bucket refilled.
    """

    def __init__(self, *, max_record_bytes: int = MAX_RECORD_BYTES, clock: Callable[[], float] = time.time) -> None:
        self.url = "memory:"
        self.max_record_bytes = max_record_bytes
        self._clock = clock
        self._records: dict[str, tuple[bytes, int, float, float | None]] = {}
        self._rounds: dict[str, tuple[bytes, float]] = {}
        self._next_sweep = 0.0
        # name -> (tokens, when counted, when full again), least recently used first
        self._buckets: OrderedDict[str, tuple[float, float, float]] = OrderedDict()
        self._next_bucket_sweep = 0.0

    def _live(self, task_id: str) -> TaskRecord | None:
        entry = self._records.get(task_id)
        if entry is None:
            return None
        record = restore(*entry)
        if record.expired(self._clock()):
            del self._records[task_id]
            return None
        return record

    def _store(self, record: TaskRecord, body: bytes) -> None:
        self._records[record.task_id] = (body, record.version, record.lease_expiry, record.expires_at)

    async def create(self, record: TaskRecord) -> None:
        """See :meth:`TaskStore.create`."""
        if self._live(record.task_id) is not None:
            raise TaskExists(record.task_id)
        self._store(record, encode(record, self.max_record_bytes))

    async def get(self, task_id: str) -> TaskRecord | None:
        """See :meth:`TaskStore.get`."""
        return self._live(task_id)

    async def replace(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.replace`; atomic because nothing here awaits."""
        current = self._live(record.task_id)
        data = encode(record, self.max_record_bytes)
        if current is None or current.version != record.version - 1:
            return False
        self._store(record, data)
        return True

    async def renew(self, record: TaskRecord) -> bool:
        """See :meth:`TaskStore.renew`: the body stays as it is."""
        current = self._live(record.task_id)
        if current is None or current.version != record.version - 1:
            return False
        body = self._records[record.task_id][0]
        self._store(record, body)
        return True

    async def claimable(self, now: float, limit: int = 100) -> list[str]:
        """See :meth:`TaskStore.claimable`."""
        ids = []
        for task_id in list(self._records):
            record = self._live(task_id)
            if record is not None and record.lease_free(now):
                ids.append(task_id)
                if len(ids) >= limit:
                    break
        return ids

    async def delete(self, task_id: str) -> None:
        """See :meth:`TaskStore.delete`."""
        self._records.pop(task_id, None)

    async def in_flight(self) -> list[str]:
        """See :meth:`TaskStore.in_flight`."""
        return [task_id for task_id in list(self._records)
                if (record := self._live(task_id)) is not None and record.status not in TERMINAL]

    def _round(self, key: str) -> RoundRecord | None:
        now = self._clock()
        if now >= self._next_sweep:  # rounds nobody retries are never read again: drop them now and then
            self._next_sweep = now + 10
            for stale in [k for k, (_, end) in self._rounds.items() if now > end]:
                del self._rounds[stale]
        entry = self._rounds.get(key)
        if entry is None:
            return None
        if now > entry[1]:
            del self._rounds[key]
            return None
        return decode_round(entry[0])

    async def claim_round(self, record: RoundRecord) -> RoundRecord | None:
        """See :meth:`TaskStore.claim_round`; atomic because nothing here awaits."""
        found = self._round(record.key)
        if found is not None:
            return found
        self._rounds[record.key] = (encode(record, self.max_record_bytes), record.expires_at)
        return None

    async def get_round(self, key: str) -> RoundRecord | None:
        """See :meth:`TaskStore.get_round`."""
        return self._round(key)

    async def settle_round(self, record: RoundRecord) -> bool:
        """See :meth:`TaskStore.settle_round`."""
        data = encode(record, self.max_record_bytes)
        found = self._round(record.key)
        if found is None or found.settled or found.claim != record.claim:
            return False
        self._rounds[record.key] = (data, record.expires_at)
        return True

    async def release_round(self, key: str, claim: str) -> None:
        """See :meth:`TaskStore.release_round`."""
        found = self._round(key)
        if found is not None and not found.settled and found.claim == claim:
            del self._rounds[key]

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """See :meth:`TaskStore.take_token`; atomic because nothing here awaits."""
        now = self._clock()
        buckets = self._buckets
        if now >= self._next_bucket_sweep:  # buckets full again are what no bucket is: drop them now and then
            self._next_bucket_sweep = now + 10
            for full in [name for name, (_, _, full_at) in buckets.items() if full_at <= now]:
                del buckets[full]
        entry = buckets.get(bucket)
        tokens = burst if entry is None or entry[2] <= now else refilled(entry[0], entry[1], now, per_second, burst)
        if tokens < 1:
            return (1 - tokens) / per_second
        tokens -= 1
        buckets[bucket] = (tokens, now, now + (burst - tokens) / per_second)
        buckets.move_to_end(bucket)
        while len(buckets) > MAX_BUCKETS:
            buckets.popitem(last=False)
        return 0.0

    async def aclose(self) -> None:
        """Nothing to release."""
