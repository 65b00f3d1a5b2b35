"""The tasks carrier: the replay core with the ledger kept in a task store instead of a token.

A task outlives the request that created it. Its record (status, ledger, pending
input requests, result or error, principal, lease) lives in a store: in memory,
SQLite on one host, or Redis across nodes. The same replay core that serves MRTR
rounds drives the handler; a Step's result is saved before the handler goes on, so a
node that takes over a task whose runner died replays without running it again.
"""

from ..contract import ToolBinding
from .carrier import TaskCarrier, UnknownTask
from .host import serve_tasks
from .record import MAX_RECORD_BYTES, TERMINAL, Status, TaskRecord, TaskTooLarge, new_task_id
from .store import StoreUnavailable, TaskExists, TaskStore, mutate
from .urls import open_store

__all__ = [
    "TaskCarrier",
    "ToolBinding",
    "UnknownTask",
    "TaskRecord",
    "TaskTooLarge",
    "MAX_RECORD_BYTES",
    "Status",
    "TERMINAL",
    "new_task_id",
    "TaskStore",
    "TaskExists",
    "StoreUnavailable",
    "mutate",
    "open_store",
    "serve_tasks",
]
