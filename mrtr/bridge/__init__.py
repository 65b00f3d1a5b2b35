"""The bridge: :func:`proxy` puts any MCP server of either era behind clients of either era.

The proxy layer sits above the client and the server and imports both: an ordinary
:class:`~mrtr.server.Server` (:mod:`mrtr.bridge.proxy`) whose catalogue is an upstream
server's (:mod:`mrtr.bridge.mirror`), read and called through :class:`mrtr.Client`
(:mod:`mrtr.bridge.upstream`), each entry forwarding with the one generator
(:mod:`mrtr.bridge.forwarded`), and the upstream calls of a 2025 server held live
between a modern client's rounds (:mod:`mrtr.bridge.held`). See ``docs/proxy.md``.
"""

from .proxy import proxy

__all__ = ["proxy"]
