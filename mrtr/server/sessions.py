"""Legacy sessions: what one ``initialize`` negotiated, and the registry that bounds them.

A 2025-era client opens a session with ``initialize`` and keeps it for every later
request: the negotiated protocol version, the client's capabilities and identity, the
principal that opened it, the log level ``logging/setLevel`` chose, the resources it
subscribed to. A :class:`Session` holds exactly that, and a :class:`SessionRegistry`
holds the sessions of one process, with bounds a user never has to set:

- sessions per process (:data:`DEFAULT_MAX_SESSIONS`): at the bound the session idle
  the longest is ended to make room; when every session is busy, ``initialize`` is
  refused with :class:`SessionLimit`;
- sessions per client (:data:`DEFAULT_MAX_SESSIONS_PER_CLIENT`), the client being the
  principal or, without one, what the transport names (a remote address): a client that
  floods ``initialize`` ends its own oldest idle sessions, never another's;
- idle expiry (:data:`DEFAULT_IDLE_TIMEOUT`), measured from the end of the session's
  last request: a session with a request in flight (a handler waiting for an answer
  included) is never idle. A session a transport holds for its whole connection
  (stdio's) never expires;
- handlers waiting for their clients' answers, in fair shares: per session
  (:data:`DEFAULT_MAX_SUSPENDED_PER_SESSION`), per client
  (:data:`DEFAULT_MAX_SUSPENDED_PER_CLIENT`, the client counted as above) and per
  process (:data:`DEFAULT_MAX_SUSPENDED`). A dropped connection is not a cancellation
  in this era, so a client could otherwise start calls, drop each connection once its
  question arrives, and hold every slot of the process: with shares it exhausts its
  own and nobody else's. A call past a share fails at once, its error naming the bound
  and the option that raises it (:meth:`SessionRegistry.waits_of` counts one call).

Expired sessions are swept when sessions are opened and looked up, oldest first, so no
timer runs. A session id is at least 128 random bits in visible ASCII, minted here and
never taken from a client, prefixed with the owner the registry was built with
(``<owner>.<random>``: a process serving several workers can tell which one holds a
session from its id alone, see :func:`owner_of`). A session opened by a principal is
found only by that principal: another one's id is as if unknown.

**Several nodes.** With a Redis store every node serving a session keeps a copy of it
here, made from its record in Redis (:meth:`SessionRegistry.adopt`, under the id the
node that opened it minted) and kept current by the legacy era
(:mod:`mrtr.server.legacy`). The registry is then :attr:`~SessionRegistry.shared`: the
bounds on sessions (per process, now across every node, and per client) and their idle
expiry are kept in Redis (:mod:`mrtr.carriers.tasks.sessions`), which ends a session to
make room or finds it expired for every node at once; this registry holds copies, and
ends one when told. The shares of waiting calls stay each node's own: a waiting handler
lives on its node.

The registry does no I/O and reads time from the clock it is given.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import INTERNAL_ERROR, InvalidParams, ProtocolError
from ..core.jsonrpc import Notify
from ..core.peer import TooManySuspended

if TYPE_CHECKING:
    from ..carriers.live import Suspensions

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_SESSIONS_PER_CLIENT",
    "DEFAULT_MAX_SUSPENDED",
    "DEFAULT_MAX_SUSPENDED_PER_CLIENT",
    "DEFAULT_MAX_SUSPENDED_PER_SESSION",
    "ENDED_FOR_CLIENT",
    "ENDED_FOR_PROCESS",
    "MAX_SUBSCRIPTIONS",
    "Session",
    "SessionLimit",
    "SessionRegistry",
    "owner_of",
]

DEFAULT_MAX_SESSIONS = 10_000
"""Sessions one process holds at most."""

DEFAULT_MAX_SESSIONS_PER_CLIENT = 100
"""Sessions one client (principal, or transport address) holds at most."""

DEFAULT_IDLE_TIMEOUT = 1800.0
"""Seconds a session with nothing in flight lives after its last request."""

DEFAULT_MAX_SUSPENDED = 1_000
"""Handlers one process holds waiting for their clients' answers at most."""

DEFAULT_MAX_SUSPENDED_PER_CLIENT = 100
"""Handlers one client (principal, or transport address) holds waiting for answers at most: a tenth of the process's."""

DEFAULT_MAX_SUSPENDED_PER_SESSION = 32
"""Handlers one session holds waiting for answers at most (a client runs a few calls at once, not dozens)."""

MAX_SUBSCRIPTIONS = 1_000
"""Resource uris one session may subscribe to."""

_OWNER = re.compile(r"^[\x21-\x2d\x2f-\x7e]{1,16}$")  # visible ASCII but ".", which separates the owner


ENDED_FOR_CLIENT = "ended to make room for a newer session of the same client"
"""Why a session ended when its client opened one past its bound."""

ENDED_FOR_PROCESS = "ended to make room for a newer session"
"""Why a session ended when the server opened one past its bound."""


class SessionLimit(ProtocolError):
    """No session can be opened now: the process or the client holds its limit, all of them busy.

    ``-32603`` with HTTP status 503 (the server is busy; the client may retry later).
    """

    code = INTERNAL_ERROR

    @classmethod
    def reached(cls, bound: str, limit: int) -> SessionLimit:
        """The refusal at ``bound`` (``"client"``, or ``"process"``: the server's, across its nodes) of ``limit``."""
        if bound == "client":
            return cls(f"Server busy: this client holds {limit} sessions, all of them busy; end one (DELETE) or "
                       "try again later")
        return cls(f"Server busy: the server holds {limit} sessions, all of them busy; try again later")

    @property
    def status_hint(self) -> int:
        """503: the refusal is temporary."""
        return 503


class Session:
    """One legacy session: what its ``initialize`` negotiated and what later requests set.

    ``version`` is the negotiated protocol version; ``client_capabilities`` the client's
    capabilities as that version defines them; ``client_info`` its ``clientInfo``;
    ``principal`` who opened it (``None`` when anonymous); ``log_level`` the minimum
    level of ``notifications/message`` (``None``: every level); ``subscriptions`` the
    resource uris subscribed to; ``initialized`` whether ``notifications/initialized``
    arrived; ``waiting`` how many of its handlers wait for answers; ``outlet`` the sink for notifications unrelated to any request (list
    changes, resource updates), callable from any thread; ``watched`` the uris of its subscriptions
    this process told the server's resource watchers of (those subscribed through this node).
    """

    __slots__ = ("id", "version", "client_capabilities", "client_info", "principal", "client", "log_level",
                 "subscriptions", "initialized", "outlet", "lasting", "in_flight", "waiting", "last_active", "ended",
                 "watched", "_on_end", "_on_ready", "checked", "__weakref__")

    def __init__(self, session_id: str, *, version: str, client_capabilities: Mapping[str, Any],
                 client_info: Mapping[str, Any] | None, principal: str | None, client: str | None,
                 outlet: Notify | None, lasting: bool, now: float) -> None:
        self.id = session_id
        self.version = version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.principal = principal
        self.client = client
        self.log_level: str | None = None
        self.subscriptions: set[str] | None = None  # made on the first subscribe: most sessions never do
        self.watched: set[str] | None = None  # likewise
        self.initialized = False
        self.outlet = outlet
        self.lasting = lasting
        self.in_flight = 0
        self.waiting = 0  # handlers of this session waiting for the client's answers
        self.last_active = now
        self.ended: str | None = None
        self._on_end: list[Callable[[str], None]] | None = None
        self._on_ready: list[Callable[[], None]] | None = None
        self.checked = -math.inf  # when this copy was last read from the shared store, if there is one

    def on_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once ``notifications/initialized`` has arrived (at once if it has)."""
        if self.initialized:
            callback()
            return
        if self._on_ready is None:
            self._on_ready = []
        self._on_ready.append(callback)

    def mark_initialized(self) -> None:
        """``notifications/initialized`` arrived (on this node or, with sessions in Redis, another)."""
        if self.initialized:
            return
        self.initialized = True
        callbacks, self._on_ready = self._on_ready or [], None
        for callback in callbacks:
            callback()

    def subscribe(self, uri: str) -> None:
        """Add ``uri`` to the subscriptions; ``-32602`` past :data:`MAX_SUBSCRIPTIONS`."""
        if self.subscriptions is None:
            self.subscriptions = set()
        if uri not in self.subscriptions and len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
            raise InvalidParams(f"resources/subscribe: a session subscribes to at most {MAX_SUBSCRIPTIONS} resources")
        self.subscriptions.add(uri)

    def unsubscribe(self, uri: str) -> None:
        """Remove ``uri`` from the subscriptions (an unknown uri is no error)."""
        if self.subscriptions is not None:
            self.subscriptions.discard(uri)

    def on_end(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once when the session ends (at once if it already has)."""
        if self.ended is not None:
            callback(self.ended)
            return
        if self._on_end is None:
            self._on_end = []
        self._on_end.append(callback)

    def _end(self, reason: str) -> None:
        if self.ended is not None:
            return
        self.ended = reason
        callbacks, self._on_end = self._on_end or [], None
        for callback in callbacks:
            callback(reason)

    def __repr__(self) -> str:
        return f"Session({self.id[:8]}..., version={self.version!r}, in_flight={self.in_flight})"


def owner_of(session_id: str) -> str | None:
    """The owner a session id names (what its registry was built with), or ``None`` for no id of ours."""
    owner, dot, rest = session_id.partition(".")
    return owner if dot and rest and _OWNER.match(owner) else None


class SessionRegistry:
    """The legacy sessions of one process, bounded; also its count of waiting handlers.

    ``max_sessions``, ``max_per_client``, ``idle_timeout`` (seconds),
    ``max_suspended``, ``max_suspended_per_client`` and ``max_suspended_per_session``
    are the bounds described in this module; ``owner`` prefixes every
    session id (visible ASCII, no ``.``, at most 16 characters); ``clock`` gives
    seconds (``time.monotonic`` by default).
    """

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 max_per_client: int = DEFAULT_MAX_SESSIONS_PER_CLIENT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT, max_suspended: int = DEFAULT_MAX_SUSPENDED,
                 max_suspended_per_client: int = DEFAULT_MAX_SUSPENDED_PER_CLIENT,
                 max_suspended_per_session: int = DEFAULT_MAX_SUSPENDED_PER_SESSION,
                 owner: str = "0", clock: Callable[[], float] = time.monotonic) -> None:
        for name, value in (("max_sessions", max_sessions), ("max_per_client", max_per_client),
                            ("max_suspended", max_suspended), ("max_suspended_per_client", max_suspended_per_client),
                            ("max_suspended_per_session", max_suspended_per_session)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(idle_timeout, bool) or not isinstance(idle_timeout, (int, float)) or not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be a positive number of seconds, got {idle_timeout!r}")
        _check_owner(owner)
        self.max_sessions = max_sessions
        self.max_per_client = max_per_client
        self.idle_timeout = float(idle_timeout)
        self.max_suspended = max_suspended
        self.max_suspended_per_client = max_suspended_per_client
        self.max_suspended_per_session = max_suspended_per_session
        self.owner = owner
        self.clock = clock
        # Ordered by last activity, least recent first: expiry and eviction read from the front.
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._by_client: dict[str, dict[str, Session]] = {}
        self._suspended = 0
        self._waiting_by_client: dict[str, int] = {}
        self.shared = False
        """Whether the sessions' records, bounds and expiry are kept in a shared store (Redis), which
        decides for every node: this registry then holds copies, ending none to make room nor for idleness."""

    def __len__(self) -> int:
        return len(self._sessions)

    def serve_as(self, owner: str) -> None:
        """Mint ids naming ``owner`` from now on (a worker process, after the fork, names itself).

        Sessions opened before keep their ids; a process serving several workers calls it
        before its first session.
        """
        _check_owner(owner)
        self.owner = owner

    def sessions(self) -> list[Session]:
        """The live sessions, as a list taken at once (safe to iterate from any thread)."""
        return list(self._sessions.values())

    # -- opening and finding ----------------------------------------------------------------

    def open(self, *, version: str, client_capabilities: Mapping[str, Any], client_info: Mapping[str, Any] | None,
             principal: str | None, client: str | None = None, outlet: Notify | None = None,
             lasting: bool = False) -> Session:
        """A new session, making room by ending idle ones if a bound is reached.

        ``client`` counts the session against a client's bound (the principal counts
        when given). ``lasting`` marks a session its transport holds for the whole
        connection: it never expires and is never ended to make room. Raises
        :class:`SessionLimit` when no room can be made.
        """
        session_id = f"{self.owner}.{secrets.token_urlsafe(18)}"  # 144 random bits
        return self._admit(session_id, version=version, client_capabilities=client_capabilities,
                           client_info=client_info, principal=principal, client=client, outlet=outlet,
                           lasting=lasting)

    def adopt(self, session_id: str, *, version: str, client_capabilities: Mapping[str, Any],
              client_info: Mapping[str, Any] | None, principal: str | None, client: str | None = None) -> Session:
        """This node's copy of a session another node opened (its record read from the shared store).

        The copy already held, if any; else a new one under the same bounds as :meth:`open`
        (:class:`SessionLimit` when no room can be made).
        """
        held = self._sessions.get(session_id)
        if held is not None:
            return held
        return self._admit(session_id, version=version, client_capabilities=client_capabilities,
                           client_info=client_info, principal=principal, client=client, outlet=None, lasting=False)

    def peek(self, session_id: str) -> Session | None:
        """The copy held of ``session_id``, whoever asks and however idle (for messages between nodes)."""
        return self._sessions.get(session_id)

    def _admit(self, session_id: str, *, version: str, client_capabilities: Mapping[str, Any],
               client_info: Mapping[str, Any] | None, principal: str | None, client: str | None,
               outlet: Notify | None, lasting: bool) -> Session:
        now = self.clock()
        owner = principal if principal is not None else client
        if not self.shared:  # shared, the store bounds and expires them for every node
            self._sweep(now)
            self._make_room(owner)
        session = Session(session_id, version=version, client_capabilities=client_capabilities,
                          client_info=client_info, principal=principal, client=owner, outlet=outlet,
                          lasting=lasting, now=now)
        self._sessions[session_id] = session
        if owner is not None:
            self._by_client.setdefault(owner, {})[session_id] = session
        return session

    def _make_room(self, owner: str | None) -> None:
        """End the idle sessions a new one needs ended, or raise :class:`SessionLimit`."""
        if owner is not None:
            mine = self._by_client.get(owner)
            if mine is not None and len(mine) >= self.max_per_client:
                idle = _least_recent_idle(mine.values())
                if idle is None:
                    raise SessionLimit.reached("client", self.max_per_client)
                self._end(idle, ENDED_FOR_CLIENT)
        if len(self._sessions) >= self.max_sessions:
            idle = self._oldest_idle()
            if idle is None:
                raise SessionLimit.reached("process", self.max_sessions)
            self._end(idle, ENDED_FOR_PROCESS)

    def get(self, session_id: Any, principal: str | None) -> Session | None:
        """The live session ``session_id`` names for ``principal``; ``None`` when unknown, ended,
        expired or opened by another principal (one answer for all, so none can be told apart)."""
        if not isinstance(session_id, str):
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if not self.shared and self._expired(session, self.clock()):
            self._end(session, "expired")
            return None
        if session.principal != principal:
            return None
        return session

    # -- activity -----------------------------------------------------------------------------

    def touch(self, session: Session) -> None:
        """Note activity on ``session`` (a notification, say)."""
        if session.ended is None:
            session.last_active = self.clock()
            self._sessions.move_to_end(session.id)

    def begin(self, session: Session) -> None:
        """A request of ``session`` starts: it is not idle until :meth:`finish`."""
        session.in_flight += 1
        self.touch(session)

    def finish(self, session: Session) -> None:
        """A request of ``session`` ended; its idle time runs from now."""
        session.in_flight -= 1
        self.touch(session)

    def end(self, session_id: str, reason: str = "closed") -> bool:
        """End a session (its end callbacks run); whether it was live."""
        session = self._sessions.get(session_id)
        if session is None:
            return False
        self._end(session, reason)
        return True

    def close(self, reason: str = "the server is shutting down") -> None:
        """End every session."""
        for session in list(self._sessions.values()):
            self._end(session, reason)

    # -- handlers waiting for answers, in fair shares ---------------------------------------

    @property
    def suspended(self) -> int:
        """Handlers waiting for answers now, in the whole process."""
        return self._suspended

    def waiting_of(self, client: str) -> int:
        """Handlers of ``client`` (a principal, or a transport address) waiting for answers now."""
        return self._waiting_by_client.get(client, 0)

    def waits_of(self, session: Session) -> Suspensions:
        """What one call of ``session`` counts its waits with (the live carrier's
        :class:`~mrtr.carriers.live.Suspensions`): against the session's, its client's and the process's share."""
        return _Waits(self, session)

    def hold(self, session: Session, method: str, *, adopted: bool = False) -> None:
        """Count one more handler of ``session`` waiting for answers.

        At a bound nothing is counted and :class:`~mrtr.core.peer.TooManySuspended` names
        it, the narrowest first: the session's, its client's, the process's. A call
        ``adopted`` from a process that stopped was admitted under that process's shares:
        it is counted here, so new calls meet the bounds, but never refused.
        """
        client = session.client
        if not adopted:
            self._check_shares(session, method)
        session.waiting += 1
        if client is not None:
            self._waiting_by_client[client] = self._waiting_by_client.get(client, 0) + 1
        self._suspended += 1

    def _check_shares(self, session: Session, method: str) -> None:
        client = session.client
        if session.waiting >= self.max_suspended_per_session:
            raise TooManySuspended(method, self.max_suspended_per_session, bound="session",
                                   option="max_suspended_per_session")
        if client is not None and self._waiting_by_client.get(client, 0) >= self.max_suspended_per_client:
            raise TooManySuspended(method, self.max_suspended_per_client, bound="client",
                                   option="max_suspended_per_client")
        if self._suspended >= self.max_suspended:
            raise TooManySuspended(method, self.max_suspended, bound="process", option="max_suspended")

    def let_go(self, session: Session) -> None:
        """Count one fewer handler of ``session`` waiting (its answers came, or its wait ended)."""
        session.waiting -= 1
        client = session.client
        if client is not None:
            left = self._waiting_by_client[client] - 1
            if left:
                self._waiting_by_client[client] = left
            else:
                del self._waiting_by_client[client]  # a client with nothing waiting costs nothing
        self._suspended -= 1

    # -- internals ------------------------------------------------------------------------

    def _expired(self, session: Session, now: float) -> bool:
        return not session.lasting and session.in_flight == 0 and now - session.last_active >= self.idle_timeout

    def _oldest_idle(self) -> Session | None:
        # The registry is ordered by activity: the first idle session is the one idle the longest.
        for session in self._sessions.values():
            if not (session.lasting or session.in_flight):
                return session
        return None

    def _sweep(self, now: float) -> None:
        expired: list[Session] = []
        for session in self._sessions.values():
            if session.lasting or session.in_flight:
                continue  # busy or held: never expires, and says nothing about the ones behind it
            if now - session.last_active < self.idle_timeout:
                break  # the rest are more recent
            expired.append(session)
        for session in expired:
            self._end(session, "expired")

    def _end(self, session: Session, reason: str) -> None:
        self._sessions.pop(session.id, None)
        if session.client is not None:
            mine = self._by_client.get(session.client)
            if mine is not None:
                mine.pop(session.id, None)
                if not mine:
                    del self._by_client[session.client]
        session._end(reason)


def _check_owner(owner: Any) -> None:
    if not isinstance(owner, str) or not _OWNER.match(owner):
        raise ValueError(f"owner must be 1-16 visible ASCII characters without '.', got {owner!r}")


def _least_recent_idle(sessions: Iterable[Session]) -> Session | None:
    """Of ``sessions`` (one client's, at most its bound), the idle one with the oldest activity."""
    best: Session | None = None
    for session in sessions:
        if session.lasting or session.in_flight:
            continue
        if best is None or session.last_active < best.last_active:
            best = session
    return best


class _Waits:
    """One call's waits, counted against its session's shares (:class:`~mrtr.carriers.live.Suspensions`)."""

    __slots__ = ("registry", "session")

    def __init__(self, registry: SessionRegistry, session: Session) -> None:
        self.registry = registry
        self.session = session

    def acquire(self, method: str, *, adopted: bool = False) -> None:
        self.registry.hold(self.session, method, adopted=adopted)

    def release(self) -> None:
        self.registry.let_go(self.session)
