"""``RateLimit``: a token bucket per caller, kept in the server's store so every node shares it.

Each request a caller makes takes a token from the caller's bucket; a bucket holds at
most ``burst`` tokens and gains ``per_second`` of them a second. A request that finds
no token is refused with :class:`~mrtr.core.errors.RateLimited`, saying when one will
be there: on HTTP ``429 Too Many Requests`` with ``Retry-After`` in the modern era, and
in both eras the JSON-RPC error carrying ``data.retryAfter`` (seconds).

What counts:

- **a caller** is, by default, its principal (the verified token's, or the server's
  ``principal=`` source); without one, the address the transport names
  (``Incoming.client``: the remote address on HTTP, the one a 2025-era session was
  opened from, an IPv6 one by its /64; ``"stdio:<pid>"`` on stdio, the serving process's
  own client); without one, its 2025-era session; a request with
  none of them (served in this process without ``client=``) counts against the bucket
  named ``local``. Never one bucket for everyone, and never a new bucket for a new
  session: ``initialize`` is no request of the pipeline's, so a client could otherwise
  open a session per request and never be limited. ``key=`` chooses otherwise (a tenant
  header's principal, an address behind a proxy...); returning ``None`` exempts the
  request;
- **a conversation once**: only the first round of a modern conversation counts (its
  later rounds carry the answers of a conversation already admitted, and are never
  refused for rate), and the task methods (``tasks/get``, ``tasks/update``,
  ``tasks/cancel``) reach a task its creating call already paid for. A 2025-era call is
  one request, its questions asked inside it. Notifications never count;
- ``methods=``, when given, limits the requests of those methods alone (a cost guard on
  ``tools/call``).

The buckets live in the server's store (:meth:`~mrtr.carriers.tasks.store.TaskStore.take_token`):
in memory for one process, in a SQLite file for the processes of one host, in Redis for
every node, refilled and taken from in one atomic step, forgotten once full again. A
server whose only state is a ``RateLimit`` opens its store as one with ``once=True``
handlers does (``memory:`` unless ``--store``/``MRTR_STORE`` names one: give one when
several workers or nodes must share the limit). A store that cannot be reached refuses
the request (``-32603``), never lets it through unlimited.
"""

from __future__ import annotations

import hashlib
import inspect
import ipaddress
import math
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from ..core.errors import InternalError, RateLimited
from .pipeline import CallNext, Incoming

__all__ = ["Buckets", "KeyFunction", "RateLimit", "caller_of"]

KeyFunction = Callable[[Incoming], "str | None | Awaitable[str | None]"]
"""A ``RateLimit``'s ``key=``: whose bucket a request takes from (``None``: the request is not limited)."""

LOCAL = "local"
"""The bucket of requests no transport named a client for (served in this process)."""


class Buckets(Protocol):
    """Where a ``RateLimit`` keeps its buckets: the server's store (any :class:`~mrtr.carriers.tasks.TaskStore`)."""

    async def take_token(self, bucket: str, per_second: float, burst: float) -> float:
        """``0.0`` when a token was taken from ``bucket``, else the seconds until one will be there."""
        ...


def caller_of(request: Incoming) -> str:
    """The default key of a ``RateLimit``: the principal, else the client's address, else the 2025 session.

    The address comes before the session: sessions cost a client nothing to open, so
    keyed by session an unauthenticated client would get a fresh bucket with each. An
    IPv6 address counts by its /64, which one host holds whole.
    Prefixed with what it is (``principal:``, ``client:``, ``session:``), so a principal
    never shares a bucket with an address spelt the same; ``"local"`` for a request no
    transport named a client for.
    """
    if request.principal is not None:
        return f"principal:{request.principal}"
    if request.client is not None:
        return f"client:{_address(request.client)}"
    if request.session_id is not None:
        return f"session:{request.session_id}"
    return LOCAL


def _address(client: str) -> str:
    """The part of a client's address that names one client: an IPv6 address's /64, else all of it.

    One host is given a whole IPv6 /64 and may send from any address in it, so keyed by
    the exact address it would have 2**64 buckets. An IPv4 address mapped into IPv6 is
    its IPv4 address; anything that is no IP address (``stdio:<pid>``) is kept as it is.
    """
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return client


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"RateLimit {name} must be a positive number, got {value!r}")
    return float(value)


class RateLimit:
    """A middleware refusing a caller's requests beyond ``per_second`` a second, ``burst`` at once (see the module).

    ``per_second`` tokens a second refill a caller's bucket, which holds at most
    ``burst`` (default: one second's worth, at least 1). ``key`` says whose bucket a
    request takes from (default :func:`caller_of`: principal, address, 2025 session); it may
    be async, and ``None`` exempts the request. ``methods`` limits the requests of those
    methods alone (default: every request; task methods and notifications never count,
    nor a conversation's later rounds). ``name`` names the
    buckets in the store: two limits with the same name and the same caller share a
    bucket, on every node, so two limits of one server need different names (by
    default it is made of ``per_second``, ``burst`` and ``methods``)::

        server.middleware(RateLimit(per_second=5, burst=20))
        server.middleware(RateLimit(per_second=0.2, burst=3, methods={"tools/call"}, name="calls"))
    """

    def __init__(self, per_second: float, burst: float | None = None, *, key: KeyFunction | None = None,
                 methods: Collection[str] | None = None, name: str | None = None) -> None:
        self.per_second = _positive("per_second", per_second)
        self.burst = max(1.0, self.per_second) if burst is None else _positive("burst", burst)
        if self.burst < 1:
            raise ValueError(f"RateLimit burst must be at least 1 (one request), got {burst!r}")
        if key is not None and not callable(key):
            raise TypeError(f"RateLimit key must be a callable taking the request, got {key!r}")
        if isinstance(methods, str):
            raise TypeError("RateLimit methods is a collection of method names, not one string")
        self.key = key or caller_of
        self.methods = None if methods is None else frozenset(methods)
        if name is None:
            shown = "all" if self.methods is None else ",".join(sorted(self.methods))
            name = f"rate:{self.per_second!r}:{self.burst!r}:{shown}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"RateLimit name must be a non-empty str, got {name!r}")
        self.name = name
        self._store: Buckets | None = None

    def use_store(self, store: Buckets | None) -> None:
        """Keep the buckets in ``store`` (the server hands its store over while it runs; ``None`` after)."""
        self._store = store

    def counts(self, request: Incoming) -> bool:
        """Whether ``request`` takes a token: not a notification, a task method, a later round, or another method."""
        method = request.method
        if request.is_notification or method.startswith("tasks/"):
            return False
        if self.methods is not None and method not in self.methods:
            return False
        return request.round == 1

    async def __call__(self, request: Incoming, call_next: CallNext) -> Any:
        """Take a token for ``request`` from its caller's bucket and go on, or refuse it with :class:`RateLimited`."""
        if not self.counts(request):
            return await call_next(request)
        who = self.key(request)
        if inspect.isawaitable(who):
            who = await who
        if who is None:
            return await call_next(request)
        if not isinstance(who, str):
            raise TypeError(f"a RateLimit key must return a str or None, got {type(who).__name__}")
        store = self._store
        if store is None:
            raise InternalError("Internal error: RateLimit keeps its buckets in the server's store, which is open "
                                "only while the server runs (enter Server.running())")
        wait = await store.take_token(self._bucket(who), self.per_second, self.burst)
        if wait > 0:
            raise RateLimited(wait)
        return await call_next(request)

    def _bucket(self, who: str) -> str:
        # A digest: a principal may be an e-mail address, and a key any length; neither belongs in the store as is.
        digest = hashlib.sha256(f"{self.name}\n{who}".encode()).hexdigest()[:32]
        return f"{hashlib.sha256(self.name.encode()).hexdigest()[:8]}:{digest}"

    def __repr__(self) -> str:
        return f"RateLimit(per_second={self.per_second:g}, burst={self.burst:g}, name={self.name!r})"
