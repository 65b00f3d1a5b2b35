"""The carrier interface: where a conversation's ledger lives between rounds.

The replay core (:mod:`mrtr.core.replay`) runs a handler against a ledger and returns
``Completed`` or ``InputRequired``; it does not care where the ledger came from. A
carrier does: it restores the ledger for a request, runs the core, and stores what the
core returns. One carrier implements this interface today:

- the wire carrier, :class:`mrtr.carriers.token.Engine`: the ledger travels in the sealed
  ``requestState`` token the client echoes (stateless; any worker serves any round).

The interface exists so that a second one, a tasks carrier keeping the ledger in a task
record in a store, can be added without touching dispatch.

The server reaches handlers only through :class:`Carrier`, so ordinals, fingerprints,
Step memoization and error mapping behave the same whichever carrier holds the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from ..core.context import Context
from ..core.errors import HandlerError
from ..core.jsonrpc import RunSync

__all__ = ["Carrier", "TaskAccess", "TaskHost", "ToolBinding", "TASKS_EXTENSION"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The tasks extension's key in client and server capabilities."""


class Carrier(Protocol):
    """Runs one handler invocation for ``tools/call``, ``prompts/get`` or ``resources/read``."""

    async def execute(
        self,
        method: str,
        params: Mapping[str, Any],
        handler: Any,
        arguments: Mapping[str, Any] | None,
        ctx: Context,
        *,
        run_sync: RunSync | None = None,
    ) -> Any:
        """Restore the ledger ``params`` point at, replay ``handler`` and return the outcome.

        ``params`` are the request's raw params; ``arguments`` the decoded arguments the
        handler is called with; ``run_sync`` runs a sync handler away from the event
        loop when given. Returns :class:`~mrtr.core.replay.Completed` with the handler's
        value, or a result message the server sends as it is (an
        ``InputRequiredResult``, for the wire carrier). Raises
        :class:`~mrtr.core.errors.ProtocolError` for requests it cannot trust and
        :class:`~mrtr.core.errors.HandlerError` when handler code fails.
        """
        ...


class ToolBinding(NamedTuple):
    """What the server gives the tasks carrier to run one tool later, on any node.

    ``arguments`` are the decoded arguments the handler is called with; ``shape`` turns
    the handler's value into the ``CallToolResult`` object; ``handler_failed`` turns a
    failing handler into the result the wire answers for it (a tool error result);
    ``scopes`` are the OAuth scopes calling the tool needs, recorded with its task.
    """

    handler: Any
    arguments: Mapping[str, Any]
    shape: Callable[[Any], dict[str, Any]]
    handler_failed: Callable[[HandlerError], dict[str, Any]]
    scopes: tuple[str, ...] = ()


class TaskAccess(NamedTuple):
    """What guards a task: the tool it runs and the scopes recorded for that tool at its creation."""

    tool: str
    scopes: tuple[str, ...]


class TaskHost(Carrier, Protocol):
    """The tasks carrier as the server sees it: a carrier for ``tools/call`` plus the ``tasks/*`` methods.

    ``execute`` answers ``CreateTaskResult`` (or an ``InputRequiredResult`` while the
    call's MRTR rounds last). Each method takes the caller's principal and raises
    ``-32602 "Unknown task"`` for unknown, expired and other principals' tasks alike.
    """

    async def get(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """``tasks/get``: the ``GetTaskResult``."""
        ...

    async def update(self, task_id: Any, principal: str | None, responses: Any) -> dict[str, Any]:
        """``tasks/update``: merge answers; the empty acknowledgement."""
        ...

    async def cancel(self, task_id: Any, principal: str | None) -> dict[str, Any]:
        """``tasks/cancel``: the empty acknowledgement."""
        ...

    async def access(self, task_id: Any, principal: str | None) -> TaskAccess | None:
        """What guards the task, or ``None`` for an unknown, expired or other principal's task."""
        ...
