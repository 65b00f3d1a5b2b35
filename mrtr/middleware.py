"""Middleware: wrap every request of both eras, once, before it is dispatched.

``@server.middleware`` registers ``async def mw(request, call_next)``; ``request`` is an
:class:`Incoming` (a read-only view of what arrived, the same in both eras) and ``await
call_next(request)`` runs the rest and returns the result. See ``docs/server.md``
(Middleware) for the order, what each era and carrier shows a middleware, and recipes;
:mod:`mrtr.server.pipeline` holds the rules.

The built-ins, each a middleware to register with ``server.middleware(...)``:

- :class:`RateLimit`: a token bucket per caller (principal, else address, else 2025 session),
  in the server's store so every node shares it; a refused request is told when to retry
  (:class:`RateLimited`: HTTP 429 with ``Retry-After``, ``data.retryAfter``);
- :class:`Timing`: how long each request took below it, on its access line and its span;
- :class:`Authorize`: one rule, ``predicate(request, target)``, filtering listings and
  refusing calls alike;
- :class:`Cache`: listings and tools safe to cache, answered from memory for ``ttl`` seconds.

:func:`refused` refuses in words meant for the caller without logging a failure, and
:class:`Component` is what a request (or a listed item) names, as registered.
"""

from __future__ import annotations

from .core.errors import RateLimited
from .server.authorize import Authorize
from .server.caching import Cache
from .server.pipeline import CallNext, Incoming, Middleware, Component, refused
from .server.ratelimit import RateLimit, caller_of
from .server.timing import Timing

__all__ = ["Authorize", "Cache", "CallNext", "Incoming", "Middleware", "RateLimit", "RateLimited", "Component",
           "Timing", "caller_of", "refused"]
