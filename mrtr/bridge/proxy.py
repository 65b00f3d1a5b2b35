"""``mrtr.proxy(target)``: an ordinary :class:`~mrtr.server.Server` whose catalogue is another server's.

The result is a :class:`~mrtr.server.Server` like any other: serve it (``mrtr proxy``,
:mod:`mrtr.http`, :mod:`mrtr.stdio`, the ASGI app), mount it in another server, give it
middleware. Its lifespan keeps the connection to the upstream open
(:mod:`mrtr.bridge.upstream`), reads the upstream's catalogue into its own
(:mod:`mrtr.bridge.mirror`) and holds the upstream calls that wait live
(:mod:`mrtr.bridge.held`); every entry forwards (:mod:`mrtr.bridge.forwarded`).

Questions cross eras in the four directions (see ``docs/proxy.md``):

===================  ===========================  ==============================================
downstream client    upstream server              how a question travels
===================  ===========================  ==============================================
2026-07-28           2026-07-28                   the upstream's ``requestState`` inside the
                                                  proxy's sealed token; nothing kept here
2025 session         2026-07-28                   the proxy drives the upstream's rounds and
                                                  asks each question live downstream
2025 session         2025 session                 relayed live both ways
2026-07-28           2025 session                 the upstream call waits here (held) while the
                                                  client answers by retrying; the token names it
===================  ===========================  ==============================================
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..client.client import Client
from ..server.dispatch import Server
from .forwarded import forwarding_handler
from .held import DEFAULT_MAX_HELD, DEFAULT_MAX_HELD_PER_CLIENT, HeldCalls
from .mirror import Mirror
from .upstream import Upstream
from .watched import DEFAULT_MAX_WATCHED, DEFAULT_MAX_WATCHED_PER_CLIENT, UpstreamWatch

__all__ = ["proxy"]


def proxy(
    target: str | Sequence[str],
    *,
    name: str = "mrtr-proxy",
    upstream_headers: Mapping[str, str] | None = None,
    upstream_auth: Any = None,
    upstream_env: Mapping[str, str] | None = None,
    upstream_cwd: str | None = None,
    upstream_era: str = "auto",
    upstream_timeout: float = 300.0,
    connect_timeout: float = 10.0,
    held_answer_timeout: float | None = None,
    max_held: int = DEFAULT_MAX_HELD,
    max_held_per_client: int = DEFAULT_MAX_HELD_PER_CLIENT,
    max_upstream_subscriptions: int = DEFAULT_MAX_WATCHED,
    max_upstream_subscriptions_per_client: int = DEFAULT_MAX_WATCHED_PER_CLIENT,
    **server_options: Any,
) -> Server:
    """A :class:`~mrtr.server.Server` forwarding everything to the MCP server ``target``, in either era.

    ``target`` is an ``http(s)://`` URL, or a command line as a sequence of words
    (``["python", "server.py"]``) spoken to over stdio (a child that exits is started
    again, with a backoff). Upstream, the proxy is its own client: ``upstream_headers``
    (``{"Authorization": "Bearer ..."}``, read from where you keep it, never the
    downstream caller's) or ``upstream_auth`` (an :class:`mrtr.client.oauth.OAuth`: client
    credentials, a token store) authorize it at an HTTP upstream; ``upstream_env`` and
    ``upstream_cwd`` are a stdio child's. ``upstream_era`` is ``"auto"`` (probe),
    ``"modern"`` or ``"legacy"``; ``upstream_timeout`` bounds each read from the upstream
    (seconds); ``connect_timeout`` how long start (and a request during a reconnect)
    waits for the upstream.

    A 2025 upstream's calls made for 2026-07-28 clients wait in this process between
    rounds: each question at most ``held_answer_timeout`` seconds (default: the
    ``requestState`` TTL), at most ``max_held`` at once and ``max_held_per_client`` per
    principal. The resources the proxy's clients subscribe to are subscribed to upstream,
    one upstream subscription per uri however many clients want it, at most
    ``max_upstream_subscriptions`` uris at once and ``max_upstream_subscriptions_per_client``
    subscriptions per client (its principal, else its address; :mod:`mrtr.bridge.watched`).
    Every other keyword is the :class:`~mrtr.server.Server`'s (``auth=`` for the proxy's own
    resource server, ``secret=``, ``eras=``, ``answer_timeout=``...).
    """
    if isinstance(target, str):
        if not target.startswith(("http://", "https://")):
            raise ValueError(f"a proxy target is an http(s):// URL or a command line as a list of words, got "
                             f"{target!r}")
    elif not target or not all(isinstance(word, str) and word for word in target):
        raise ValueError("a stdio proxy target needs a command and its arguments, non-empty strings")
    server = Server(name, **server_options)

    def owner() -> str:
        legacy = server.legacy
        return legacy.owner if legacy is not None else "0"

    held = HeldCalls(answer_timeout=held_answer_timeout or 300.0, max_held=max_held,
                     max_held_per_client=max_held_per_client, owner=owner)
    mirror: Mirror

    async def connected(client: Client) -> None:
        await mirror.read(client)
        await watch.connected(client)

    async def list_changed(what: str) -> None:
        client = await upstream.client()
        await mirror.changed(client, what)

    def resource_updated(uri: str) -> None:
        watch.upstream_updated(uri)

    upstream = Upstream(target, held, on_connect=connected, on_list_changed=list_changed,
                        on_resource_updated=resource_updated,
                        headers=upstream_headers, auth=upstream_auth, env=upstream_env, cwd=upstream_cwd,
                        era=upstream_era, timeout=upstream_timeout, connect_timeout=connect_timeout)
    mirror = Mirror(server, forwarding_handler(upstream), upstream.request)
    watch = UpstreamWatch(upstream, server.notify_resource_updated, max_uris=max_upstream_subscriptions,
                          max_per_client=max_upstream_subscriptions_per_client)
    server.watch_resources(watch)

    @asynccontextmanager
    async def bridged() -> AsyncIterator[Upstream]:
        if held_answer_timeout is None:  # the time a modern client has to answer a round: the token's
            held.answer_timeout = server.token_carrier.codec.ttl
        async with held.running(), watch.running(), upstream.running():
            yield upstream

    server.lifespan(lambda: bridged())
    return server
