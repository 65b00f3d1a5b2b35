"""What a Redis store URL names, how to reach it, and where mrtr keeps its keys there.

Redis is deployed in three shapes, and the URL says which:

- ``redis://[user[:password]@]host[:port][/db]``: one Redis (``rediss://`` over TLS;
  ``unix:///path/redis.sock`` over a Unix socket);
- ``redis+cluster://host:port[,host:port...]``: a Redis Cluster, reached through any of
  the nodes named (the others are discovered; ``rediss+cluster://`` over TLS);
- ``redis+sentinel://host:port[,host:port...]/service[/db]``: the primary that these
  Sentinels name for ``service``, followed through failovers (``rediss+sentinel://``
  over TLS to the Sentinels and the primary alike).

Query parameters: ``prefix`` (what every key and channel starts with, default ``mrtr:``,
so several servers can share one Redis), ``db``, and for TLS ``ssl_ca_certs`` (a CA
bundle to trust instead of the system's), ``ssl_certfile`` and ``ssl_keyfile`` (a client
certificate), ``ssl_cert_reqs`` (``required``, the default, or ``none``) and
``ssl_check_hostname`` (``true``, the default, or ``false``). Any other parameter is a
mistake and refused, so a misspelt ``prefix`` cannot silently mix two servers' keys.

The password comes from the URL, else from ``MRTR_REDIS_PASSWORD``; Sentinels that
want one of their own read ``MRTR_REDIS_SENTINEL_PASSWORD``. The environment is the
place for it: a command line is readable by every user of the machine.

**Keys.** A Lua script may only touch keys of one hash slot in a cluster. The scripts
that write a task touch its hash and the set of leases, so in a cluster both carry one
hash tag: tasks are spread over :data:`CLUSTER_SHARDS` tags (``{mrtr:7}task:<id>``
beside ``{mrtr:7}leases``), which the cluster spreads over its primaries. One Redis and
Sentinel keep the layout of earlier versions (``mrtr:task:<id>``, ``mrtr:leases``), so
the data already there stays readable. Round records touch one key each and need no
tag. 2025-era session records (``<prefix>session:<id>``) and the indexes that bound
them (``<prefix>sessions:live``, ``...:owners``, ``...:busy``, ``...:client:<tag>``) are
written together by scripts, so in a cluster they share one tag
(``{mrtr:sessions}session:<id>``), one slot. Pub/sub channels are
not keys: ``<prefix>notifications`` carries what every node hears, ``<prefix>node:<id>``
what is meant for one node alone. Token buckets (``<prefix>bucket:<name>``) are one key
each, written by one script, and need no tag either.
"""

from __future__ import annotations

import os
import re
import ssl
import urllib.parse
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CLUSTER_SHARDS", "DEFAULT_PREFIX", "KeyLayout", "RedisTarget", "is_redis_url", "parse_redis_url",
           "redis_client"]

DEFAULT_PREFIX = "mrtr:"
"""What keys and channels start with unless the URL's ``prefix`` says otherwise: the keys of earlier versions."""

CLUSTER_SHARDS = 16
"""Hash tags tasks are spread over in a Redis Cluster (each with its own set of leases)."""

Kind = Literal["standalone", "unix", "cluster", "sentinel"]

SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis": ("standalone", False), "rediss": ("standalone", True), "unix": ("unix", False),
    "redis+cluster": ("cluster", False), "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False), "rediss+sentinel": ("sentinel", True),
}

_TLS_PARAMETERS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname")
_PREFIX = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")  # no glob characters (SCAN patterns) and no braces (hash tags)
_CONNECT_TIMEOUT = 5.0
_STREAM_TIMEOUT = 10.0


def is_redis_url(url: str) -> bool:
    """Whether ``url`` names a Redis store (of any shape)."""
    return url.partition("://")[0].lower() in SCHEMES and "://" in url


@dataclass(frozen=True)
class KeyLayout:
    """Where one server's data lives in a Redis: its keys and its channels.

    ``sharded`` (a Redis Cluster) puts a task's hash and the lease set it is listed in
    under one hash tag, chosen from the task id, so the scripts that write both stay in
    one slot.
    """

    prefix: str = DEFAULT_PREFIX
    sharded: bool = False

    def _tag(self, task_id: str) -> str:
        return "{" + f"{self.prefix}{zlib.crc32(task_id.encode()) % CLUSTER_SHARDS}" + "}"

    def task(self, task_id: str) -> str:
        """The hash holding one task."""
        return f"{self._tag(task_id)}task:{task_id}" if self.sharded else f"{self.prefix}task:{task_id}"

    def leases_of(self, task_id: str) -> str:
        """The sorted set (by lease expiry) a working task is listed in."""
        return f"{self._tag(task_id)}leases" if self.sharded else f"{self.prefix}leases"

    def lease_sets(self) -> list[str]:
        """Every lease set, which a node looks through for abandoned tasks."""
        if not self.sharded:
            return [f"{self.prefix}leases"]
        return ["{" + f"{self.prefix}{shard}" + "}leases" for shard in range(CLUSTER_SHARDS)]

    def task_pattern(self) -> str:
        """A ``SCAN MATCH`` pattern for every task hash."""
        return "{" + f"{self.prefix}*" + "}task:*" if self.sharded else f"{self.prefix}task:*"

    def task_id_of(self, key: str) -> str:
        """The task id in a task hash's key."""
        return key.rpartition("}task:")[2] if self.sharded else key[len(self.prefix) + len("task:"):]

    def round(self, key: str) -> str:
        """The hash holding one round record."""
        return f"{self.prefix}round:{key}"

    def bucket(self, name: str) -> str:
        """The hash holding one token bucket (a ``RateLimit``'s), which Redis expires once it is full again."""
        return f"{self.prefix}bucket:{name}"

    @property
    def notifications(self) -> str:
        """The channel every node subscribes to: notifications for every listener of every node."""
        return f"{self.prefix}notifications"

    def node(self, node_id: str) -> str:
        """The channel of one node alone (messages meant for the node that holds something)."""
        return f"{self.prefix}node:{node_id}"

    def _sessions(self) -> str:
        # In a cluster the session scripts touch records and indexes together: one hash tag for all.
        return "{" + f"{self.prefix}sessions" + "}" if self.sharded else self.prefix

    def session(self, session_id: str) -> str:
        """The string holding one 2025-era session's record (with a TTL that moves with its activity)."""
        return f"{self._sessions()}session:{session_id}"

    def sessions_live(self) -> str:
        """The sorted set of every 2025-era session, by its last activity (microseconds, Redis's clock)."""
        return f"{self._sessions()}sessions:live"

    def sessions_owners(self) -> str:
        """The hash naming each 2025-era session's client tag."""
        return f"{self._sessions()}sessions:owners"

    def sessions_busy(self) -> str:
        """The hash counting each 2025-era session's calls in flight, on any node."""
        return f"{self._sessions()}sessions:busy"

    def sessions_of(self, tag: str) -> str:
        """The set of one client's 2025-era sessions (``tag``: a digest of its principal or address)."""
        return f"{self._sessions()}sessions:client:{tag}"

    def call(self, session_id: str, stream: str) -> str:
        """The hash of one recorded 2025-era call (its holder's version, request, state, stream counters)."""
        return f"{self._sessions()}call:{session_id}:{stream}"

    def call_events(self, session_id: str, stream: str) -> str:
        """The list of one recorded call's kept stream events."""
        return f"{self._sessions()}callev:{session_id}:{stream}"

    def calls_of(self, session_id: str) -> str:
        """The hash naming each recorded call of a session: its holder, questions, answers and request ids."""
        return f"{self._sessions()}calls:{session_id}"

    def node_lease(self, node_id: str) -> str:
        """The key a live node holds (with a TTL of its lease) while it may hold recorded calls."""
        return f"{self._sessions()}nodelease:{node_id}"

    def node_slots(self) -> str:
        """The hash naming the node in each supervised worker's slot."""
        return f"{self._sessions()}nodeslots"


@dataclass(frozen=True)
class RedisTarget:
    """A parsed Redis store URL: which deployment, where, how to log in, and the key layout."""

    url: str
    kind: Kind
    addresses: tuple[tuple[str, int], ...] = ()
    path: str | None = None  # a Unix socket
    service: str | None = None  # the Sentinel service name
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)
    tls: Mapping[str, str] | None = None  # the TLS query parameters; None: no TLS
    prefix: str = DEFAULT_PREFIX

    @property
    def layout(self) -> KeyLayout:
        """The keys and channels this server uses in that Redis."""
        return KeyLayout(self.prefix, sharded=self.kind == "cluster")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context the URL's parameters describe, or ``None`` without TLS."""
        if self.tls is None:
            return None
        context = ssl.create_default_context(cafile=self.tls.get("ssl_ca_certs"))
        if _flag(self.tls.get("ssl_check_hostname", "true"), "ssl_check_hostname") is False:
            context.check_hostname = False
        requirement = self.tls.get("ssl_cert_reqs", "required").lower()
        if requirement not in ("required", "optional", "none"):
            raise ValueError(f"ssl_cert_reqs must be required, optional or none, got {requirement!r}")
        if requirement != "required":
            context.check_hostname = False
            context.verify_mode = ssl.CERT_OPTIONAL if requirement == "optional" else ssl.CERT_NONE
        certificate = self.tls.get("ssl_certfile")
        if certificate:
            context.load_cert_chain(certificate, self.tls.get("ssl_keyfile") or None)
        return context


def _flag(text: str, name: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be true or false, got {text!r}")


def _addresses(hosts: str, default_port: int) -> tuple[tuple[str, int], ...]:
    found = []
    for item in hosts.split(","):
        item = item.strip()
        if not item:
            raise ValueError("an empty host in the list of hosts")
        if item.startswith("["):  # [IPv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        if not host:
            raise ValueError(f"no host in {item!r}")
        try:
            port = int(port_text) if port_text else default_port
        except ValueError:
            raise ValueError(f"invalid port in {item!r}") from None
        if not 0 < port < 65536:
            raise ValueError(f"invalid port in {item!r}")
        found.append((urllib.parse.unquote(host), port))
    return tuple(found)


def parse_redis_url(url: str, environ: Mapping[str, str] | None = None) -> RedisTarget:
    """Read a Redis store URL (see the module's description); ``ValueError`` says what is wrong with one.

    ``environ`` (default ``os.environ``) supplies ``MRTR_REDIS_PASSWORD`` when the URL
    carries no password, and ``MRTR_REDIS_SENTINEL_PASSWORD``. No message names the
    password.
    """
    env = os.environ if environ is None else environ
    scheme, separator, rest = url.partition("://")
    shape = SCHEMES.get(scheme.lower())
    if not separator or shape is None:
        raise ValueError(f"not a Redis URL (expected one of {', '.join(s + '://' for s in SCHEMES)})")
    kind, tls = shape
    rest, _, query = rest.partition("?")
    authority, _, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if not at:
        userinfo, hosts = "", authority
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = urllib.parse.unquote(user) or None
        password = urllib.parse.unquote(secret) if colon else None
    parameters: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name in parameters:
            raise ValueError(f"the query parameter {name} is given twice")
        parameters[name] = value
    known = {"prefix", "db"} | (set(_TLS_PARAMETERS) if tls else set())
    unknown = sorted(set(parameters) - known)
    if unknown:
        hint = " (TLS parameters need a rediss scheme)" if any(name in _TLS_PARAMETERS for name in unknown) else ""
        raise ValueError(f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}{hint}; "
                         f"expected {', '.join(sorted(known))}")
    prefix = parameters.get("prefix", DEFAULT_PREFIX)
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(f"prefix must be 1-64 letters, digits and _ . : / -, got {prefix!r}")
    segments = [urllib.parse.unquote(segment) for segment in path.split("/") if segment] if path else []
    service = None
    if kind == "sentinel":
        if not segments:
            raise ValueError("a redis+sentinel URL names the service after the hosts: "
                             "redis+sentinel://host:26379/mymaster")
        service, segments = segments[0], segments[1:]
    addresses: tuple[tuple[str, int], ...] = ()
    socket_path = None
    if kind == "unix":
        socket_path = "/" + path if path else ""
        if not path:
            raise ValueError("a unix URL names the socket: unix:///path/to/redis.sock")
        segments = []
    else:
        addresses = _addresses(hosts, 26379 if kind == "sentinel" else 6379)
        if kind == "standalone" and len(addresses) != 1:
            raise ValueError("a redis URL names one host; use redis+cluster:// or redis+sentinel:// for several")
    db_text = parameters.get("db") or (segments[0] if segments else "0")
    if len(segments) > 1:
        raise ValueError(f"unexpected path {path!r}")
    try:
        db = int(db_text)
    except ValueError:
        raise ValueError(f"the database must be a number, got {db_text!r}") from None
    if db < 0:
        raise ValueError(f"the database must be a number, got {db_text!r}")
    if kind == "cluster" and db != 0:
        raise ValueError("a Redis Cluster has database 0 only")
    target = RedisTarget(
        url=url, kind=kind, addresses=addresses, path=socket_path, service=service, db=db, username=username,
        password=password if password is not None else (env.get("MRTR_REDIS_PASSWORD") or None),
        sentinel_password=env.get("MRTR_REDIS_SENTINEL_PASSWORD") or None,
        tls={name: parameters[name] for name in _TLS_PARAMETERS if name in parameters} if tls else None,
        prefix=prefix,
    )
    try:
        target.ssl_context()  # TLS parameters that cannot be used fail here, with the rest of the URL
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"the TLS files the URL names cannot be used: {exc}") from None
    return target


@asynccontextmanager
async def redis_client(target: RedisTarget) -> AsyncIterator[Any]:
    """A connected ``coredis`` client for ``target``, for the block (a cluster or Sentinel client as it says)."""
    import coredis
    from coredis.connection import TCPLocation

    common: dict[str, Any] = {"connect_timeout": _CONNECT_TIMEOUT, "stream_timeout": _STREAM_TIMEOUT,
                              "username": target.username, "password": target.password}
    context = target.ssl_context()
    if context is not None:
        common["ssl_context"] = context
    if target.kind == "cluster":
        nodes = [TCPLocation(host, port) for host, port in target.addresses]
        async with coredis.RedisCluster(startup_nodes=nodes, **common) as cluster:
            yield cluster
        return
    if target.kind == "sentinel":
        assert target.service is not None
        sentinel_options: dict[str, Any] = {"connect_timeout": _CONNECT_TIMEOUT, "stream_timeout": _STREAM_TIMEOUT,
                                            "password": target.sentinel_password}
        if context is not None:
            sentinel_options["ssl_context"] = context
        sentinels = coredis.Sentinel([TCPLocation(host, port) for host, port in target.addresses],
                                     sentinel_kwargs=sentinel_options, db=target.db, **common)
        async with sentinels:
            async with sentinels.primary_for(target.service) as primary:
                yield primary
        return
    if target.kind == "unix":
        async with coredis.Redis(unix_socket_path=target.path, db=target.db, **common) as local:
            yield local
        return
    ((host, port),) = target.addresses
    async with coredis.Redis(host, port, db=target.db, **common) as client:
        yield client
