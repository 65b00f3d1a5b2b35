"""Tasks: the documented import path of :mod:`mrtr.carriers.tasks`.

``from mrtr.tasks import open_store, TaskStore, ...`` keeps working; the carrier and
its stores live in :mod:`mrtr.carriers.tasks`.
"""

from ..carriers.tasks import (
    MAX_RECORD_BYTES,
    TERMINAL,
    Status,
    StoreUnavailable,
    TaskCarrier,
    TaskExists,
    TaskRecord,
    TaskStore,
    TaskTooLarge,
    ToolBinding,
    UnknownTask,
    mutate,
    new_task_id,
    open_store,
    serve_tasks,
)

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
