"""The legacy era's recorded calls: what it keeps in the shared store besides the calls themselves.

With a shared store the transport records each 2025 call as it goes, and adopts one
whose process stopped (:mod:`mrtr.core.calls`, :mod:`mrtr.carriers.tasks.calls`). For
an adopted call to be served, its session must be known where it is adopted:

- on Redis every node already knows every session (its record is in Redis,
  :mod:`mrtr.carriers.tasks.sessions`);
- on SQLite (the workers of one machine, each session living in the worker that opened
  it, ADR 14) a session is known to its worker alone. :class:`CallKeeping` therefore
  keeps a **copy** of what each session negotiated in the store (written at
  ``initialize`` and at each change, its expiry moved with the session's activity, at
  most every quarter of the idle timeout), so the process that replaces a worker that
  died serves that worker's sessions, and their calls go on there. A session ended by
  its process (closed, expired, ended to make room) has its copy removed, and is not
  served from it meanwhile.

``DELETE`` removes a session's recorded calls with it. The registry's bounds are not
changed by copies: a copy made into a session counts against the bounds of the process
that serves it, as any session does.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from ..core.calls import RecordedCalls
from .sessions import Session, SessionRegistry

__all__ = ["CallKeeping"]

log = logging.getLogger("mrtr")

_FORGOTTEN = 10_000  # ended sessions remembered while their copies are removed

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(dict)


class CallKeeping:
    """The recorded calls of a legacy era (``calls``, what transports reach) and, on SQLite, its sessions' copies.

    ``calls`` is this process's :class:`~mrtr.carriers.tasks.calls.Calls`; ``sessions``
    the era's registry (its idle timeout is how long a copy lives without activity).
    """

    def __init__(self, calls: Any, sessions: SessionRegistry) -> None:
        self._calls = calls
        self.sessions = sessions
        self._copies = calls.copies
        self._touched: dict[str, float] = {}
        self._forgotten: OrderedDict[str, None] = OrderedDict()

    @property
    def calls(self) -> RecordedCalls:
        """The recorded calls, as a transport reaches them."""
        return self._calls  # type: ignore[no-any-return]

    @property
    def copies(self) -> bool:
        """Whether sessions are copied into the store (SQLite: no session records of their own there)."""
        return self._copies is not None

    async def keep(self, session: Session, record: Mapping[str, Any]) -> None:
        """Write the copy of ``session`` (at ``initialize`` and at each change)."""
        if self._copies is None or session.lasting:
            return
        await self._copies.save_session(session.id, _encoder.encode(record), self.sessions.idle_timeout)
        self._touched[session.id] = self.sessions.clock()

    def touch(self, session: Session, record: Mapping[str, Any]) -> None:
        """The session is active: move its copy's expiry, at most every quarter of the idle timeout."""
        if self._copies is None or session.lasting:
            return
        now = self.sessions.clock()
        if now - self._touched.get(session.id, -1e18) < self.sessions.idle_timeout / 4:
            return
        self._touched[session.id] = now
        data = _encoder.encode(record)
        self._calls.later(lambda: self._copies.save_session(session.id, data, self.sessions.idle_timeout))

    async def copy_of(self, session_id: str) -> dict[str, Any] | None:
        """The copy of a session this process does not hold (its worker was replaced), or ``None``."""
        if self._copies is None or session_id in self._forgotten:
            return None
        data = await self._copies.load_session(session_id)
        if data is None:
            return None
        try:
            return _decoder.decode(data)  # type: ignore[no-any-return]
        except msgspec.DecodeError:
            return None

    def ended(self, session_id: str) -> None:
        """A session ended here: its copy goes, and it is not served from the copy meanwhile."""
        self._touched.pop(session_id, None)
        if self._copies is None:
            return
        self._forgotten[session_id] = None
        while len(self._forgotten) > _FORGOTTEN:
            self._forgotten.popitem(last=False)
        copies = self._copies
        self._calls.later(lambda: copies.delete_session(session_id))

    async def closed(self, session_id: str) -> None:
        """The client ended a session (``DELETE``): its recorded calls go too."""
        await self._calls.forget(session_id)
