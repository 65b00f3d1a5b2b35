"""The in-memory store: one process, lost on exit; for tests and in-process clients."""

from __future__ import annotations

import time

from .record import MAX_RECORD_BYTES, TaskRecord, encode, restore
from .store import TaskExists

__all__ = ["MemoryStore"]


class MemoryStore:
    """Records kept as encoded bytes, so a caller never aliases a stored record and encoding bugs show at once.

    Each entry is the body of the record's last full write and its lease fields
    (version, lease expiry, expiry), kept apart as the other stores keep them.
    """

    def __init__(self, *, max_record_bytes: int = MAX_RECORD_BYTES) -> None:
        self.url = "memory:"
        self.max_record_bytes = max_record_bytes
        self._records: dict[str, tuple[bytes, int, float, float | None]] = {}

    def _live(self, task_id: str) -> TaskRecord | None:
        entry = self._records.get(task_id)
        if entry is None:
            return None
        record = restore(*entry)
        if record.expired(time.time()):
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

    async def aclose(self) -> None:
        """Nothing to release."""
