"""Which ``Host`` a request may name: protection against DNS rebinding.

A web page on ``evil.example`` can make the victim's browser resolve its own name to
127.0.0.1 and then talk to a server on the victim's loopback interface; the browser
sends ``Host: evil.example`` (and often no ``Origin``). A server bound to loopback
therefore answers only requests whose ``Host`` names loopback at its own port
(``localhost``, ``127.0.0.1``, ``[::1]``), and ``421 Misdirected Request`` otherwise.

``allowed_hosts`` replaces that default: a list of ``host`` (any port) or
``host:port`` entries, or ``"*"`` to accept any ``Host``, e.g. behind a reverse proxy
that sets ``Host`` to the public name. A server bound to any other address checks
nothing unless ``allowed_hosts`` is given, since it cannot know the names it is
reached by. Pure functions, no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from ...core.web_urls import is_loopback_host

__all__ = ["HostPolicy"]

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@functools.lru_cache(maxsize=256)
def _split(value: str) -> tuple[str, int | None] | None:
    """``(host, port)`` of a ``Host`` value or an allow-list entry; ``None`` when malformed.

    Cached by the raw value: a client repeats its ``Host`` on every request.
    """
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    elif ":" in value:  # a bare IPv6 address without brackets
        host, port_text = value, None
    else:
        host, port_text = value, None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)


@functools.lru_cache(maxsize=64)
def _loopback_names(bound: tuple[str, int]) -> frozenset[tuple[str, int | None]] | None:
    """The ``Host`` values a server bound to ``bound`` answers by default; ``None``: it checks nothing.

    Cached by the address: a server's listening address does not change while it serves.
    """
    if not is_loopback_host(bound[0]):
        return None
    # The bound name itself too: a server bound to "app.localhost" answers to that name.
    return frozenset((name, bound[1]) for name in (*_LOOPBACK_NAMES, bound[0].strip("[]").lower()))


# (Host value, bound address) -> (the policy that decided, its verdict); emptied when full.
_ALLOWED: dict[tuple[str | None, tuple[str, int] | None], tuple[HostPolicy, bool]] = {}
_ALLOWED_LIMIT = 256
_ALLOWED_LENGTH = 256


@dataclass(frozen=True)
class HostPolicy:
    """The normalised ``allowed_hosts``: ``None`` for the default, else the entries."""

    entries: tuple[str, ...] | None
    any_host: bool
    names: frozenset[tuple[str, int | None]]

    @classmethod
    def parse(cls, allowed: str | Iterable[str] | None) -> HostPolicy:
        """Normalise an ``allowed_hosts`` value; ``ValueError`` names a bad entry."""
        if allowed is None:
            return cls(None, False, frozenset())
        entries = (allowed,) if isinstance(allowed, str) else tuple(allowed)
        names: set[tuple[str, int | None]] = set()
        any_host = False
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"allowed_hosts entries must be non-empty strings, got {entry!r}")
            if entry.strip() == "*":
                any_host = True
                continue
            parsed = _split(entry)
            if parsed is None:
                raise ValueError(f"allowed_hosts: {entry!r} is not a host or host:port")
            names.add(parsed)
        return cls(tuple(entries), any_host, frozenset(names))

    def allows(self, host: str | None, bound: tuple[str, int] | None) -> bool:
        """Whether a request with ``Host: host`` may proceed on a server bound to ``bound``.

        ``bound`` is the listening address (``None`` when the front end does not know
        it); without ``allowed_hosts`` only a loopback-bound server checks anything.
        A client repeats its ``Host`` on every request: the answer is kept per value and
        address (a bounded table, since the value is client input).
        """
        key = (host, bound)
        known = _ALLOWED.get(key)
        if known is not None and known[0] is self:
            return known[1]
        verdict = self._allows(host, bound)
        if host is None or len(host) <= _ALLOWED_LENGTH:  # a longer value is decided each time, never kept
            if len(_ALLOWED) >= _ALLOWED_LIMIT:
                _ALLOWED.clear()
            _ALLOWED[key] = (self, verdict)
        return verdict

    def _allows(self, host: str | None, bound: tuple[str, int] | None) -> bool:
        if self.any_host:
            return True
        if self.entries is None:
            if bound is None:
                return True
            loopback = _loopback_names(bound)
            if loopback is None:
                return True
            names = loopback
        else:
            names = self.names
        if host is None:
            return False
        parsed = _split(host)
        if parsed is None:
            return False
        name, port = parsed
        if port is None:
            port = 80  # Host without a port names the scheme's default; plain HTTP here
        return (name, port) in names or (name, None) in names
