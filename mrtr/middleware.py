"""Middleware: wrap every request of both eras, once, before it is dispatched.

``@server.middleware`` registers ``async def mw(request, call_next)``; ``request`` is an
:class:`Incoming` (a read-only view of what arrived, the same in both eras) and ``await
call_next(request)`` runs the rest and returns the result. See ``docs/server.md``
(Middleware) for the order, what each era and carrier shows a middleware, and recipes;
:mod:`mrtr.server.pipeline` holds the rules.
"""

from __future__ import annotations

from .server.pipeline import CallNext, Incoming, Middleware

__all__ = ["CallNext", "Incoming", "Middleware"]
