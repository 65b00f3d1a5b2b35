"""The HTTP options, each declared once.

:class:`ExchangeConfig` holds what the exchange decides (endpoint path, origins, SSE
pacing); both front ends take it. :class:`ServerConfig` is the native server's, and
embeds an :class:`ExchangeConfig` rather than repeating its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .cors import OriginPolicy
from .hosts import HostPolicy

__all__ = ["ExchangeConfig", "ServerConfig"]


@dataclass(frozen=True)
class ExchangeConfig:
    """The options of the exchange, shared by the native server and the ASGI app.

    ``path``: the MCP endpoint. ``allowed_origins``: origins accepted besides localhost
    ones; each is a full origin (``"https://app.example.com"``, port optional), a bare
    host (``"app.example.com"``: any scheme and port), or ``"*"`` to accept every origin;
    one string is taken as a single entry. An accepted origin also gets CORS headers
    naming it (never the literal ``*``). ``sse_keepalive``: seconds between ``:`` comment
    lines on a quiet SSE stream (``None`` disables them). ``notification_buffer``:
    notifications queued per request before further ones are dropped (handler code never
    blocks on a slow client). ``allowed_hosts``: the ``Host`` values served (``host`` or
    ``host:port`` entries, ``"*"`` for any); by default a server bound to loopback serves
    only loopback names at its port and any other checks nothing (see
    :mod:`mrtr.transports.http.hosts`); other hosts get ``421``. ``health_path``: where ``GET``
    answers ``200`` without authentication for load balancers (``None`` turns it off).

    Two more pace the SSE streams of 2025-era sessions (2025-11-25 ones: older
    clients cannot poll): ``sse_poll_after``, seconds after which a connection carrying
    such a stream ends with a ``retry:`` field while the stream goes on, so the client
    resumes it with ``GET`` and ``Last-Event-ID`` (``None``, the default: a connection
    lasts as long as its stream; set it behind proxies that cut long responses), and
    ``sse_retry``, the seconds ``retry:`` asks the client to wait before it comes back.
    """

    path: str = "/mcp"
    allowed_origins: tuple[str, ...] = ()
    sse_keepalive: float | None = 15.0
    notification_buffer: int = 10_000
    allowed_hosts: tuple[str, ...] | None = None
    health_path: str | None = "/healthz"
    sse_poll_after: float | None = None
    sse_retry: float = 1.0
    origins: OriginPolicy = field(init=False, repr=False, compare=False)
    hosts: HostPolicy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', got {self.path!r}")
        policy = OriginPolicy.parse(self.allowed_origins)
        object.__setattr__(self, "allowed_origins", policy.entries)
        object.__setattr__(self, "origins", policy)
        hosts = HostPolicy.parse(self.allowed_hosts)
        object.__setattr__(self, "allowed_hosts", hosts.entries)
        object.__setattr__(self, "hosts", hosts)
        if self.health_path is not None:
            if not isinstance(self.health_path, str) or not self.health_path.startswith("/"):
                raise ValueError(f"health_path must start with '/' or be None, got {self.health_path!r}")
            if self.health_path == self.path:
                raise ValueError("health_path must differ from the MCP endpoint path")
        if self.sse_keepalive is not None and not self.sse_keepalive > 0:
            raise ValueError(f"sse_keepalive must be positive or None, got {self.sse_keepalive!r}")
        if self.sse_poll_after is not None and (isinstance(self.sse_poll_after, bool)
                                                or not isinstance(self.sse_poll_after, (int, float))
                                                or not self.sse_poll_after > 0):
            raise ValueError(f"sse_poll_after must be a positive number of seconds or None, got {self.sse_poll_after!r}")
        if isinstance(self.sse_retry, bool) or not isinstance(self.sse_retry, (int, float)) \
                or not 0 <= self.sse_retry <= 3600:
            raise ValueError(f"sse_retry must be a number of seconds from 0 to 3600, got {self.sse_retry!r}")
        if isinstance(self.notification_buffer, bool) or not isinstance(self.notification_buffer, int) \
                or self.notification_buffer < 1:
            raise ValueError(f"notification_buffer must be a positive integer, got {self.notification_buffer!r}")

    def origin_allowed(self, origin: str) -> bool:
        """Whether a request carrying ``Origin: origin`` may proceed."""
        return self.origins.allows(origin)


_EXCHANGE_FIELDS = frozenset(f.name for f in fields(ExchangeConfig) if f.init)


@dataclass(frozen=True)
class ServerConfig:
    """Options of the native server; every one is a keyword of ``serve`` and ``run``.

    ``exchange`` holds the options both front ends share (see :class:`ExchangeConfig`);
    its fields are also accepted as plain keywords by :meth:`from_options`. The rest:

    - ``max_body_size`` (4 MiB): larger bodies get ``413``, as soon as
      ``Content-Length`` says so or a chunked body grows past it;
    - ``max_header_size`` (16 KiB): a request head that does not fit gets ``431``;
    - ``max_connections`` (1000): when it is reached, the connection idle the longest
      (waiting for a request's first byte) is closed to make room; with none idle, a new
      connection is answered ``503`` with ``Retry-After: 1`` and closed;
    - ``max_connections_per_client`` (256, ``None`` for no cap): the same, per client
      IP address (behind a proxy every client has the proxy's address: raise or lift it);
    - ``first_byte_timeout`` (5 s): how long a new connection may stay silent before it
      is closed;
    - ``request_timeout`` (30 s): the time to receive a request's head and body, from
      its first byte; then ``408``;
    - ``keep_alive_timeout`` (5 s): how long an idle keep-alive connection is kept;
    - ``write_timeout`` (30 s): how long one write may wait for a client that does not
      read; then the connection is dropped and the request cancelled;
    - ``shutdown_grace`` (10 s): how long in-flight requests may run on after a
      shutdown began; then they are cancelled;
    - ``backlog`` (1024): the listen backlog; ``reuse_port`` (False): set
      ``SO_REUSEPORT`` so several processes can bind the same port.
    """

    exchange: ExchangeConfig = field(default_factory=ExchangeConfig)
    max_body_size: int = 4 * 1024 * 1024
    max_header_size: int = 16 * 1024
    max_connections: int = 1000
    max_connections_per_client: int | None = 256
    first_byte_timeout: float = 5.0
    request_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    write_timeout: float = 30.0
    shutdown_grace: float = 10.0
    backlog: int = 1024
    reuse_port: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.exchange, ExchangeConfig):
            raise TypeError(f"exchange must be an ExchangeConfig, got {self.exchange!r}")
        for name in ("max_body_size", "max_header_size", "max_connections", "backlog"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        per_client = self.max_connections_per_client
        if per_client is not None and (isinstance(per_client, bool) or not isinstance(per_client, int)
                                       or per_client < 1):
            raise ValueError(f"max_connections_per_client must be a positive integer or None, got {per_client!r}")
        for name in ("first_byte_timeout", "request_timeout", "keep_alive_timeout", "write_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(self.shutdown_grace, bool) or not isinstance(self.shutdown_grace, (int, float)) \
                or self.shutdown_grace < 0:
            raise ValueError(f"shutdown_grace must be a number of seconds >= 0, got {self.shutdown_grace!r}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ServerConfig:
        """Build from keywords: the server's own fields and the exchange's, side by side.

        An ``exchange=`` config and exchange keywords cannot be mixed. Unknown names
        raise ``TypeError`` listing the known ones.
        """
        own = {f.name for f in fields(cls)}
        known = (own | _EXCHANGE_FIELDS) - {"exchange"}
        unknown = sorted(set(options) - known - {"exchange"})
        if unknown:
            raise TypeError(f"unknown HTTP server option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        exchange_options = {name: value for name, value in options.items() if name in _EXCHANGE_FIELDS}
        server_options = {name: value for name, value in options.items() if name not in _EXCHANGE_FIELDS}
        if exchange_options:
            if "exchange" in server_options:
                raise TypeError("pass either exchange= or the exchange options "
                                f"({', '.join(sorted(exchange_options))}), not both")
            server_options["exchange"] = exchange_config(exchange_options)
        return cls(**server_options)


def exchange_config(options: Mapping[str, Any], config: ExchangeConfig | None = None) -> ExchangeConfig:
    """An :class:`ExchangeConfig` from ``config`` or from keywords (not both)."""
    if config is not None:
        if options:
            raise TypeError(f"pass either a config or the exchange options ({', '.join(sorted(options))}), not both")
        if not isinstance(config, ExchangeConfig):
            raise TypeError(f"config must be an ExchangeConfig, got {config!r}")
        return config
    unknown = sorted(set(options) - _EXCHANGE_FIELDS)
    if unknown:
        raise TypeError(f"unknown exchange option(s): {', '.join(unknown)}; known: {', '.join(sorted(_EXCHANGE_FIELDS))}")
    return ExchangeConfig(**options)
