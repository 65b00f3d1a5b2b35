"""The client side of the tasks extension (``io.modelcontextprotocol/tasks``).

A server may answer ``tools/call`` with a task (``resultType: "task"``) instead of the
result. From then on the call lives on the server: the client polls ``tasks/get`` at the
task's ``pollIntervalMs``, answers the questions an ``input_required`` task lists with
``tasks/update`` (each key once: a task keeps listing a key until its answer is taken),
and reads the result or error the task ends with; ``tasks/cancel`` asks the server to
stop it. :class:`TaskHandle` is that loop for one task, reachable again by id from any
process (:meth:`mrtr.Client.task`). :meth:`mrtr.Client.call_tool` drives a handle to
the end by itself, so a task tool's call returns its result like any other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec
import trio

from ..core.errors import INTERNAL_ERROR, INVALID_REQUEST
from .callbacks import maybe_await
from .errors import ClientError
from .results import ToolResult, read_tool_result

__all__ = ["MAX_POLL_INTERVAL", "MIN_POLL_INTERVAL", "TaskCancelled", "TaskClient", "TaskHandle", "TaskStatus",
           "progress_of"]


class TaskClient(Protocol):
    """What a :class:`TaskHandle` needs of its client (:class:`mrtr.Client` is one)."""

    on_progress: Callable[..., Any] | None
    """Told each new ``statusMessage`` of the task, as progress."""

    def request(self, method: str, params: Mapping[str, Any]) -> Awaitable[dict[str, Any]]:
        """Send ``method`` with ``params`` and return the result (a task method: ``tasks/get`` and the others)."""

    def answer_round(self, requests: Mapping[str, Any]) -> Awaitable[dict[str, Any]]:
        """The answers to a round of questions (``inputRequests`` in wire shape), from the client's answerers."""

MIN_POLL_INTERVAL = 0.1
"""The shortest pause between two ``tasks/get`` (seconds), whatever ``pollIntervalMs`` says."""

MAX_POLL_INTERVAL = 30.0
"""The longest pause between two ``tasks/get`` (seconds): a task's end is noticed within it."""

DEFAULT_POLL_INTERVAL = 1.0
"""The pause when the server suggests none."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL = frozenset({"completed", "failed", "cancelled"})

_PROGRESS = re.compile(r"(?P<done>\d+(?:\.\d+)?)(?:/(?P<total>\d+(?:\.\d+)?))?(?::\s?(?P<message>.*))?", re.S)


class _Task(msgspec.Struct, rename="camel", kw_only=True):
    task_id: str
    status: Status
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    status_message: str | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskCancelled(ClientError):
    """The task ended ``cancelled`` (by :meth:`TaskHandle.cancel`, another client, or the server)."""


@dataclass(frozen=True)
class TaskStatus:
    """One ``tasks/get`` answer (or the ``CreateTaskResult``), checked."""

    task_id: str
    status: Status
    """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``."""
    status_message: str | None
    poll_interval: float
    """Seconds to wait before asking again: ``pollIntervalMs``, kept within
    :data:`MIN_POLL_INTERVAL` and :data:`MAX_POLL_INTERVAL`."""
    input_requests: dict[str, Any]
    """What an ``input_required`` task asks, by key (empty otherwise)."""
    result: dict[str, Any] | None
    """The ``CallToolResult`` of a ``completed`` task."""
    error: dict[str, Any] | None
    """The JSON-RPC error object of a ``failed`` task."""
    raw: dict[str, Any] = field(repr=False)

    @property
    def done(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled): its status never changes again."""
        return self.status in TERMINAL

    @classmethod
    def of(cls, value: Any) -> TaskStatus:
        """Check a task as the server sent it; a ClientError when it is no task."""
        try:
            task = msgspec.convert(value, _Task)
        except msgspec.ValidationError as exc:
            raise ClientError(INVALID_REQUEST, f"Invalid task from the server: {exc}") from None
        if task.status == "completed" and task.result is None:
            raise ClientError(INVALID_REQUEST, "Invalid task from the server: a completed task carries its result")
        if task.status == "failed" and not (isinstance(task.error, dict) and isinstance(task.error.get("code"), int)):
            raise ClientError(INVALID_REQUEST, "Invalid task from the server: a failed task carries its error")
        interval = DEFAULT_POLL_INTERVAL if task.poll_interval_ms is None else task.poll_interval_ms / 1000
        interval = min(max(interval, MIN_POLL_INTERVAL), MAX_POLL_INTERVAL) if math.isfinite(interval) \
            else DEFAULT_POLL_INTERVAL
        return cls(task.task_id, task.status, task.status_message, interval, dict(task.input_requests or {}),
                   task.result, task.error, dict(value))


def progress_of(status_message: str) -> tuple[float, float | None, str | None]:
    """``(progress, total, message)`` for ``on_progress`` from a task's ``statusMessage``.

    A message in the form mrtr writes (``"3/10: copying"``, ``"3"``) gives its numbers;
    any other text is the message, with progress 0 and no total.
    """
    match = _PROGRESS.fullmatch(status_message.strip())
    if match is None:
        return 0, None, status_message
    total = match["total"]
    return float(match["done"]), float(total) if total is not None else None, match["message"]


class TaskHandle:
    """One task on the server, by id: look at it, answer it, wait for it, cancel it.

    Made by :meth:`mrtr.Client.start_task` (which also answers the questions asked
    before the task is created) or :meth:`mrtr.Client.task` (a task started elsewhere,
    picked up by id). A call that finished without a task gives a handle whose
    :attr:`id` is ``None`` and whose :meth:`wait` returns that result at once.
    """

    def __init__(self, client: TaskClient, task_id: str | None, *, first: Mapping[str, Any] | None = None,
                 result: ToolResult | None = None) -> None:
        self.client = client
        self.id = task_id
        """The task id (``None`` when the server answered without a task)."""
        self.last: TaskStatus | None = TaskStatus.of(first) if first is not None else None
        """The last status seen."""
        self._result = result
        self._answered: set[str] = set()
        self._reported: str | None = None

    def __repr__(self) -> str:
        status = self.last.status if self.last is not None else "unknown"
        return f"<TaskHandle {self.id!r} {status}>"

    def _need_id(self) -> str:
        if self.id is None:
            raise RuntimeError("the call finished without a task: there is nothing to ask the server about")
        return self.id

    async def get(self) -> TaskStatus:
        """``tasks/get``: the task's status now."""
        result = await self.client.request("tasks/get", {"taskId": self._need_id()})
        self.last = status = TaskStatus.of(result)
        if status.task_id != self.id:
            raise ClientError(INVALID_REQUEST, f"Invalid tasks/get result: the task is {status.task_id!r}, "
                                               f"not {self.id!r}")
        return status

    async def update(self, responses: Mapping[str, Any]) -> None:
        """``tasks/update``: answers under the keys the task listed (taken eventually, not at once)."""
        await self.client.request("tasks/update", {"taskId": self._need_id(), "inputResponses": dict(responses)})
        self._answered.update(responses)

    async def cancel(self) -> None:
        """``tasks/cancel``: ask the server to stop the task (it may still end otherwise)."""
        await self.client.request("tasks/cancel", {"taskId": self._need_id()})

    async def wait(self) -> ToolResult:
        """Poll until the task ends, answering its questions with the client's answerers; return its result.

        ``statusMessage`` changes reach the client's ``on_progress``. A ``failed`` task
        raises its error as a ClientError; a ``cancelled`` one raises :class:`TaskCancelled`.
        """
        if self._result is not None:
            return self._result
        status = self.last if self.last is not None else await self.get()
        while True:
            await self._report(status)
            if status.done:
                return self._finish(status)
            if status.status == "input_required":
                pending = {key: value for key, value in status.input_requests.items() if key not in self._answered}
                if pending:
                    await self.update(await self.client.answer_round(pending))
                    status = await self.get()
                    continue
            await trio.sleep(status.poll_interval)
            status = await self.get()

    async def _report(self, status: TaskStatus) -> None:
        message = status.status_message
        on_progress = self.client.on_progress
        if message is None or message == self._reported or on_progress is None:
            return
        self._reported = message
        await maybe_await(on_progress(*progress_of(message)))

    def _finish(self, status: TaskStatus) -> ToolResult:
        if status.status == "completed":
            assert status.result is not None
            self._result = read_tool_result(status.result)
            return self._result
        if status.status == "failed":
            assert status.error is not None
            raise ClientError.from_error(status.error)
        raise TaskCancelled(INTERNAL_ERROR, f"task {self.id} was cancelled", {"taskId": self.id})
