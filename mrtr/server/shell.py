"""What an era needs of the server that holds it: the contract between the shell and its two eras.

The modern era (:mod:`mrtr.server.modern`) and the legacy era (:mod:`mrtr.server.legacy`)
are built by the :class:`~mrtr.server.Server` with its catalogue and a :class:`Shell`: the
server itself, read through these public members only, so neither era imports the server
or reaches into it.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ..carriers.contract import RoundRecords, TaskHost
from ..carriers.sealed import TokenCarrier

__all__ = ["Shell"]


class Shell(Protocol):
    """The server as its eras see it: its identity, its settings, its carriers and its capabilities."""

    server_info: dict[str, Any]
    """``serverInfo``: the name, version and title the server goes by."""
    instructions: str | None
    """The server's instructions for the model, if any."""
    sync_handlers: Literal["inline", "thread"]
    """Where sync handlers run unless registered with ``thread=True``."""
    stall_warning: float | None
    """Seconds a sync handler may hold the event loop before it is named in a warning."""
    list_ttl_ms: int
    """How long a client may cache a listing (modern era)."""
    cache_scope: Literal["public", "private"]
    """Who may share a cached listing (modern era)."""

    @property
    def token_carrier(self) -> TokenCarrier:
        """The token carrier (its key ring)."""

    @property
    def tasks(self) -> TaskHost | None:
        """The tasks carrier while the server is running with task tools, else ``None``."""

    @property
    def rounds(self) -> RoundRecords | None:
        """Where rounds that run once are recorded while the server is running, else ``None``."""

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities of the modern era, from what is registered."""
