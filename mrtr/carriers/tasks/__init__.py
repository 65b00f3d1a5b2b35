"""The tasks carrier: the replay core with the ledger kept in a task store instead of a token.

A task outlives the request that created it. Its record (status, ledger, pending
input requests, result or error, principal, lease) lives in a store: in memory,
SQLite on one host, or Redis across nodes. The same replay core that serves MRTR
rounds drives the handler; a Step's result is saved before the handler goes on, so a
node that takes over a task whose runner died replays without running it again.

The same store records the rounds that must run once (:mod:`.rounds`: a handler
declared ``once=True``, the round that creates a task), so one SQLite file or one
Redis serves both.
"""

from ..contract import ToolBinding
from .carrier import TaskCarrier, UnknownTask
from .host import serve_rounds, serve_tasks
from .record import MAX_RECORD_BYTES, TERMINAL, RoundRecord, Status, TaskRecord, TaskTooLarge, new_task_id
from .rounds import FinalRounds, OtherAnswers, RoundInterrupted
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
    "serve_rounds",
    "FinalRounds",
    "RoundRecord",
    "RoundInterrupted",
    "OtherAnswers",
]
