"""Verification of opaque tokens by asking the authorization server (RFC 7662).

Each unknown token costs one authenticated ``POST`` to the introspection endpoint.
Only ``active: true`` counts as valid; ``active: false`` is a bad token (401), while
a missing ``active``, a non-200 answer, a timeout or a refused connection mean we
could not find out (503). An active token must still name this resource in ``aud``
and, when an issuer is configured, come from it. Positive answers are cached for
``cache_ttl`` seconds at most and never past the token's ``exp``, keyed by a hash of
the token so the cache holds no usable credential; negative answers are not cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .fetch import fetch_json, new_client
from .bearer import (
    AccessToken,
    InvalidToken,
    RecentTokens,
    ScopeRule,
    VerifierUnavailable,
    checked_audiences,
    is_time,
    scopes_from_claims,
)
from .urls import audience_key

if TYPE_CHECKING:
    import httpx

__all__ = ["IntrospectionVerifier"]



class IntrospectionVerifier:
    """Verifies opaque access tokens with the authorization server's introspection endpoint.

    ``endpoint`` is the ``introspection_endpoint``; ``client_id`` and ``client_secret``
    are this resource server's own credentials there, sent as HTTP Basic
    (``client_secret_basic``) or in the form (``client_secret_post``). ``audience`` is
    the resource (normally the MCP endpoint URL) an active token must be issued for;
    ``issuer``, when given, the issuer it must name. ``cache_ttl`` bounds how long a
    positive answer is reused (revocation takes at most that long to bite);
    ``cache_size`` bounds the cache.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str | Sequence[str],
        issuer: str | Sequence[str] | None = None,
        auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
        cache_ttl: float = 60.0,
        cache_size: int = 10_000,
        timeout: float = 10.0,
        max_bytes: int = 64 * 1024,
        leeway: float = 30.0,
        scope_rule: ScopeRule | None = None,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences:
            raise ValueError("audience is required: a token for another resource must not pass")
        self.endpoint = endpoint
        self.audiences = frozenset(audience_key(a) for a in audiences)
        self.issuers = None if issuer is None else frozenset([issuer] if isinstance(issuer, str) else issuer)
        self._client_id = client_id
        self._client_secret = client_secret
        self.auth_method = auth_method
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.leeway = leeway
        self._clock = clock
        self._client = http_client
        self._owns_client = http_client is None
        self._cache = RecentTokens(cache_ttl, cache_size, without_expiry=True)
        if scope_rule is not None:
            self.scope_satisfied = scope_rule
        self.requests = 0

    async def verify(self, token: str) -> AccessToken:
        """Introspect ``token`` (or reuse a recent positive answer) and describe the caller."""
        now = self._clock()
        key = RecentTokens.key(token)
        cached = self._cache.get(key, now)
        if cached is not None:
            return cached
        access = await self._introspect(token, now)
        self._cache.put(key, access, now)
        return access

    async def _introspect(self, token: str, now: float) -> AccessToken:
        if self._client is None:
            self._client = new_client()
        form = {"token": token, "token_type_hint": "access_token"}
        auth: tuple[str, str] | None = (self._client_id, self._client_secret)
        if self.auth_method == "client_secret_post":
            form |= {"client_id": self._client_id, "client_secret": self._client_secret}
            auth = None
        self.requests += 1
        fetched = await fetch_json(self._client, "POST", self.endpoint, data=form, auth=auth,
                                   timeout=self.timeout, max_bytes=self.max_bytes, what="introspection")
        return self._check(fetched.data, now)

    def _check(self, answer: dict[str, Any], now: float) -> AccessToken:
        active = answer.get("active")
        if active is False:
            raise InvalidToken("token inactive")
        if active is not True:
            raise VerifierUnavailable("introspection answer has no active member")
        exp = answer.get("exp")
        if is_time(exp) and now > exp + self.leeway:
            raise InvalidToken("token expired")
        nbf = answer.get("nbf")
        if is_time(nbf) and now + self.leeway < nbf:
            raise InvalidToken("token not yet valid")
        issuer = answer.get("iss")
        if self.issuers is not None and issuer not in self.issuers:
            raise InvalidToken("token issuer not accepted")
        audiences = checked_audiences(answer, self.audiences)
        subject = answer.get("sub")
        client_id = answer.get("client_id")
        return AccessToken(
            subject=subject if isinstance(subject, str) else None,
            client_id=client_id if isinstance(client_id, str) else None,
            issuer=issuer if isinstance(issuer, str) else None,
            scopes=scopes_from_claims(answer),
            audience=audiences,
            expires_at=float(exp) if is_time(exp) else None,
            claims=answer,
        )

    async def aclose(self) -> None:
        """Close the HTTP client this verifier created (a client passed in stays open)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()

