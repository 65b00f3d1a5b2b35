"""What a verified bearer token says, and the ways verification can fail.

A verifier turns the credential a client presented into an :class:`AccessToken` or
raises one of three errors, and the difference between them decides the HTTP answer:

* :class:`InvalidToken`: the token itself is bad (signature, expiry, issuer,
  audience, inactive). The client should get a new token: 401 ``invalid_token``.
* :class:`VerifierUnavailable`: we could not tell (the JWKS or introspection endpoint
  is down or answered nonsense). Fail closed without blaming the token: 503, so the
  client keeps a token that may well be good.
* :class:`InsufficientScope`: the token is good but does not reach this operation:
  403 ``insufficient_scope`` naming the scopes the operation needs.

The raw token is deliberately not kept on :class:`AccessToken`: a resource server
must not pass the client's token on, and what is not held cannot leak into a log.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeGuard, runtime_checkable

from .urls import audience_key

__all__ = [
    "AccessToken",
    "RecentTokens",
    "checked_audiences",
    "is_time",
    "AuthError",
    "MalformedAuthorization",
    "InvalidToken",
    "InsufficientScope",
    "VerifierUnavailable",
    "ScopeRule",
    "TokenVerifier",
    "exact_scopes",
    "prefix_scopes",
    "scopes_from_claims",
]


@dataclass(frozen=True)
class AccessToken:
    """The caller as a verified token describes it.

    ``subject`` is the ``sub`` claim (the user, or the client for a client-credentials
    token), ``client_id`` the OAuth client that obtained the token, ``issuer`` the
    authorization server that issued it, ``scopes`` what it grants, ``audience`` the
    resources it was issued for, ``expires_at`` its expiry in epoch seconds (``None``
    when the verifier does not know it) and ``claims`` everything else the verifier
    learned (JWT claims, or the introspection response).
    """

    subject: str | None
    client_id: str | None
    issuer: str | None
    scopes: frozenset[str] = frozenset()
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def principal(self) -> str:
        """A stable identity string: issuer, subject and client id, unambiguously joined.

        ``requestState`` tokens are bound to it, so a conversation started with
        alice's token cannot be continued with mallory's, even when both tokens were
        issued to the same client.
        """
        return json.dumps([self.issuer, self.subject, self.client_id], separators=(",", ":"))


class AuthError(Exception):
    """A reason to refuse a request before it reaches the MCP layer.

    ``status_hint`` is the HTTP status, ``error`` the RFC 6750 error code (``None``
    for "no credentials" and for infrastructure failures, which carry no OAuth error),
    ``description`` a fixed, safe sentence: never token material.
    """

    status_hint: ClassVar[int] = 401
    error: ClassVar[str | None] = None

    def __init__(self, description: str = "") -> None:
        super().__init__(description)
        self.description = description


class InvalidToken(AuthError):
    """The token is malformed, forged, expired, not yet valid, foreign or inactive."""

    status_hint = 401
    error = "invalid_token"


class MalformedAuthorization(AuthError):
    """The ``Authorization`` header is malformed (empty token, several credentials).

    Rendered as the RFC 6750 ``invalid_request`` error; the JSON-RPC -32600 error is
    :class:`mrtr.core.errors.InvalidRequest`.
    """

    status_hint = 400
    error = "invalid_request"


class InsufficientScope(AuthError):
    """The token is valid but lacks scopes this operation needs.

    ``scopes`` lists every scope the operation needs (not only the missing ones), so a
    client can ask for all of them in one step-up.
    """

    status_hint = 403
    error = "insufficient_scope"

    def __init__(self, scopes: Sequence[str], description: str = "") -> None:
        super().__init__(description or f"{' '.join(scopes)} required")
        self.scopes = tuple(scopes)


class VerifierUnavailable(AuthError):
    """Verification could not be carried out (key set or introspection unreachable).

    Not the token's fault: the transport answers 503 without an ``invalid_token``
    challenge so the client does not throw away a token that may be valid.
    ``retry_after`` is when asking again may help, in seconds, if the verifier knows.
    """

    status_hint = 503
    error = None

    def __init__(self, description: str = "", retry_after: float | None = None) -> None:
        super().__init__(description)
        self.retry_after = retry_after


@runtime_checkable
class TokenVerifier(Protocol):
    """Anything that turns a bearer token into an :class:`AccessToken`.

    ``verify`` raises :class:`InvalidToken` for a bad token and
    :class:`VerifierUnavailable` when it cannot decide. It must check that the token
    was issued for this resource (audience): the resource server does not look at
    the audience again. A verifier may also define ``scope_satisfied(granted,
    required) -> bool`` to say how its scopes imply one another, and ``leeway``, the
    seconds past ``expires_at`` it still accepts a token (a listen stream lasts as long).
    """

    async def verify(self, token: str) -> AccessToken:
        """Verify ``token`` and describe the caller."""
        ...


ScopeRule = Callable[[Collection[str], str], bool]
"""Decides whether the granted scopes satisfy one required scope."""


def exact_scopes(granted: Collection[str], required: str) -> bool:
    """Scopes imply nothing but themselves."""
    return required in granted


def prefix_scopes(separator: str = ":") -> ScopeRule:
    """A hierarchy by prefix: ``files`` grants ``files:read`` and ``files:read:meta``.

    A granted scope satisfies a required one when it is equal to it or is one of its
    ``separator``-delimited prefixes.
    """

    def satisfied(granted: Collection[str], required: str) -> bool:
        parts = required.split(separator)
        return any(separator.join(parts[:n]) in granted for n in range(1, len(parts) + 1))

    return satisfied


def scopes_from_claims(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: ``scope`` (space-delimited) or ``scp`` (list or string)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return frozenset(value)
    return frozenset()


class RecentTokens:
    """Tokens verified recently, keyed by a SHA-256 of the token (never the token itself).

    A verifier asks :meth:`get` before the costly check and calls :meth:`put` after it.
    An entry lives ``ttl`` seconds and never past the token's ``expires_at``; a token
    without one is kept for ``ttl`` when ``without_expiry`` is true, else not at all. At
    most ``size`` entries, the oldest going first.
    """

    __slots__ = ("_entries", "size", "ttl", "without_expiry")

    def __init__(self, ttl: float, size: int, *, without_expiry: bool) -> None:
        self.ttl = ttl
        self.size = size
        self.without_expiry = without_expiry
        self._entries: OrderedDict[bytes, tuple[float, AccessToken]] = OrderedDict()

    @staticmethod
    def key(token: str) -> bytes:
        """The key a token is remembered under."""
        return hashlib.sha256(token.encode()).digest()

    def get(self, key: bytes, now: float) -> AccessToken | None:
        """The remembered answer for ``key``, unless it is too old (then it is forgotten)."""
        hit = self._entries.get(key)
        if hit is None:
            return None
        if now < hit[0]:
            return hit[1]
        del self._entries[key]
        return None

    def put(self, key: bytes, access: AccessToken, now: float) -> None:
        """Remember ``access`` for the token behind ``key``, as long as the rules above allow."""
        until = now + self.ttl
        if access.expires_at is not None:
            until = min(until, access.expires_at)
        elif not self.without_expiry:
            return
        if until > now:
            self._entries[key] = (until, access)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def is_time(value: Any) -> TypeGuard[float]:
    """Whether a claim is a NumericDate (a number of seconds, never a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def checked_audiences(claims: Mapping[str, Any], accepted: Collection[str]) -> tuple[str, ...]:
    """The token's audiences (``aud``, a string or a list); ``InvalidToken`` unless one of
    them, compared by :func:`~mrtr.auth.urls.audience_key`, is ``accepted``."""
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience
    if not isinstance(audiences, list) or not any(
            isinstance(a, str) and audience_key(a) in accepted for a in audiences):
        raise InvalidToken("token audience not accepted")
    return tuple(a for a in audiences if isinstance(a, str))
