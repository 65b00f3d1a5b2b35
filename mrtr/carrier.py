"""The carrier interface: where a conversation's ledger lives between rounds.

The replay core (:mod:`mrtr.replay`) runs a handler against a ledger and returns
``Completed`` or ``InputRequired``; it does not care where the ledger came from. A
carrier does: it restores the ledger for a request, runs the core, and stores what the
core returns. One carrier implements this interface today:

- the wire carrier, :class:`mrtr.engine.Engine`: the ledger travels in the sealed
  ``requestState`` token the client echoes (stateless; any worker serves any round).

The interface exists so that a second one, a tasks carrier keeping the ledger in a task
record in a store, can be added without touching dispatch.

The server reaches handlers only through :class:`Carrier`, so ordinals, fingerprints,
Step memoization and error mapping behave the same whichever carrier holds the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .context import Context
from .jsonrpc import RunSync

__all__ = ["Carrier"]


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
        loop when given. Returns :class:`~mrtr.replay.Completed` with the handler's
        value, or a result message the server sends as it is (an
        ``InputRequiredResult``, for the wire carrier). Raises
        :class:`~mrtr.errors.ProtocolError` for requests it cannot trust and
        :class:`~mrtr.errors.HandlerError` when handler code fails.
        """
        ...
