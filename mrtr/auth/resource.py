"""The resource server: metadata, bearer authentication, scope decisions and challenges.

:class:`ResourceServer` is configuration plus pure decisions; it holds no socket and
imports no event loop, so the native HTTP server and the ASGI app ask it the same
questions and render the same :class:`Reply`:

* :meth:`ResourceServer.metadata_reply` answers the RFC 9728 document at
  :attr:`ResourceServer.metadata_path` (GET/HEAD, CORS preflight, 405 otherwise);
* :meth:`ResourceServer.authenticate` reads the ``Authorization`` header, asks the
  verifier and checks the server-wide ``required_scopes``;
* :meth:`ResourceServer.authorize` checks the scopes one operation needs;
* :meth:`ResourceServer.accepted_until` says how long a token stays good, which is how
  long a listen stream opened with it may last;
* :meth:`ResourceServer.challenge` turns any :class:`AuthError` into the exact
  status, ``WWW-Authenticate`` header and body.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.bearer import is_bearer_token
from .bearer import (
    AccessToken,
    AuthError,
    InsufficientScope,
    MalformedAuthorization,
    ScopeRule,
    TokenVerifier,
    VerifierUnavailable,
    exact_scopes,
)
from .urls import canonical_url, metadata_path, metadata_url

__all__ = ["Reply", "ResourceServer", "quote"]

Header = tuple[bytes, bytes]

_NOT_QDTEXT = re.compile(r"[^\t\x20-\x7e]")
_OFFLINE_ACCESS = "offline_access"


def quote(value: str) -> str:
    """``value`` as an RFC 9110 quoted-string: backslash and double quote escaped.

    Control characters (CR and LF above all) cannot appear in a quoted-string; they
    are dropped so no value can split or extend the header.
    """
    clean = _NOT_QDTEXT.sub("", value)
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Reply:
    """A complete HTTP answer decided by the auth layer: status, headers and body."""

    status: int
    headers: tuple[Header, ...]
    body: bytes = b""


class ResourceServer:
    """An MCP server's identity as an OAuth 2.1 protected resource.

    ``verifier`` checks bearer tokens (a :class:`~mrtr.auth.JWTVerifier`, an
    :class:`~mrtr.auth.IntrospectionVerifier` or anything with an async ``verify``);
    ``resource`` is the public URL of the MCP endpoint exactly as clients use it (it is
    stored in canonical form, and the metadata document is served at the path-inserted
    well-known URL derived from it); ``authorization_servers`` the issuers clients may
    get tokens from (at least one); ``scopes_supported`` what the metadata advertises
    (defaults to ``required_scopes``; ``offline_access`` is refused); ``required_scopes``
    what every request needs; ``scope_rule`` decides whether granted scopes satisfy a
    required one (default: the verifier's ``scope_satisfied`` if it has one, else exact
    match); ``resource_name`` and ``resource_documentation`` go into the metadata.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str,
        authorization_servers: Sequence[str],
        scopes_supported: Sequence[str] | None = None,
        required_scopes: Sequence[str] = (),
        scope_rule: ScopeRule | None = None,
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        metadata_max_age: int = 3600,
    ) -> None:
        if not callable(getattr(verifier, "verify", None)):
            raise TypeError("verifier must have an async verify(token) method")
        self.verifier = verifier
        self.resource = canonical_url(resource)
        if "?" in self.resource:
            raise ValueError("the resource URL must not carry a query string")
        if isinstance(authorization_servers, str) or not authorization_servers:
            raise ValueError("authorization_servers must list at least one authorization server")
        self.authorization_servers = tuple(authorization_servers)
        self.required_scopes = tuple(required_scopes)
        supported = tuple(scopes_supported) if scopes_supported is not None else self.required_scopes
        if _OFFLINE_ACCESS in supported or _OFFLINE_ACCESS in self.required_scopes:
            raise ValueError("offline_access is between client and authorization server; "
                             "a resource does not advertise or require it")
        self.scopes_supported = supported
        own_rule = getattr(verifier, "scope_satisfied", None)
        self.scope_rule: ScopeRule = scope_rule or own_rule or exact_scopes
        self.resource_name = resource_name
        self.resource_documentation = resource_documentation
        self.metadata_max_age = metadata_max_age
        self.metadata_path = metadata_path(self.resource)
        self.metadata_url = metadata_url(self.resource)
        self._metadata_body = json.dumps(self.metadata(), separators=(",", ":")).encode()

    # -- metadata (RFC 9728) -------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document, built from configuration alone."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported:
            document["scopes_supported"] = list(self.scopes_supported)
        if self.resource_name is not None:
            document["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            document["resource_documentation"] = self.resource_documentation
        return document

    def metadata_reply(self, method: str) -> Reply:
        """The answer to ``method`` on :attr:`metadata_path`: unauthenticated, open to any origin.

        GET and HEAD get the document (HEAD without its body; the transport drops it),
        OPTIONS a CORS preflight answer, anything else 405.
        """
        cors: tuple[Header, ...] = (
            (b"access-control-allow-origin", b"*"),
            (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
        )
        if method in ("GET", "HEAD"):
            return Reply(200, (
                (b"content-type", b"application/json"),
                (b"cache-control", b"public, max-age=%d" % self.metadata_max_age),
                *cors,
            ), self._metadata_body)
        if method == "OPTIONS":
            return Reply(204, (*cors, (b"access-control-max-age", b"600")))
        return Reply(405, ((b"allow", b"GET, HEAD, OPTIONS"), *cors))

    # -- authentication and scopes ---------------------------------------------------

    @staticmethod
    def bearer(authorization: Sequence[str]) -> str | None:
        """The bearer token in the ``Authorization`` header values given, or ``None``.

        ``None`` means no credentials for us (no header, or another scheme such as
        Basic or DPoP): the client gets a challenge without an error code. Several
        headers, or a ``Bearer`` with no token or a space-split one, raise
        :class:`MalformedAuthorization`. Tokens anywhere else (query, body) are never read.
        """
        if len(authorization) > 1:
            raise MalformedAuthorization("more than one Authorization header")
        if not authorization:
            return None
        scheme, _, rest = authorization[0].strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = rest.strip(" ")
        if not is_bearer_token(token):  # RFC 6750 §2.1 b64token: the only shape a bearer credential may have
            raise MalformedAuthorization("malformed bearer credentials")
        return token

    async def authenticate(self, authorization: Sequence[str]) -> AccessToken:
        """Verify the request's bearer token and the server-wide required scopes.

        ``authorization`` holds every ``Authorization`` header value of the request.
        Raises :class:`AuthError`: a bare :class:`AuthError` when there are no bearer
        credentials, :class:`MalformedAuthorization`, :class:`~mrtr.auth.InvalidToken`,
        :class:`VerifierUnavailable` or :class:`InsufficientScope`.
        """
        token = self.bearer(authorization)
        if token is None:
            raise AuthError("authentication required")
        try:
            access = await self.verifier.verify(token)
        except AuthError:
            raise
        except Exception as exc:
            # A verifier that breaks is infrastructure, never a verdict on the token.
            raise VerifierUnavailable("token verification failed") from exc
        self.authorize(access, self.required_scopes)
        return access

    def accepted_until(self, access: AccessToken) -> float | None:
        """Until when (epoch seconds) a new request with this token would still pass, or ``None``.

        The token's ``expires_at`` plus the verifier's ``leeway`` (the clock skew it
        tolerates, if it has one): a ``subscriptions/listen`` stream opened with the
        token ends then, so a stream never outlives the requests its token could make.
        ``None`` when the verifier did not learn an expiry.
        """
        if access.expires_at is None:
            return None
        leeway = getattr(self.verifier, "leeway", 0.0)
        return access.expires_at + (leeway if isinstance(leeway, (int, float)) and leeway > 0 else 0.0)

    def satisfies(self, access: AccessToken, required: Collection[str]) -> bool:
        """True when the token's scopes satisfy every scope in ``required``."""
        return all(self.scope_rule(access.scopes, scope) for scope in required)

    def authorize(self, access: AccessToken, required: Sequence[str], operation: str = "") -> None:
        """Raise :class:`InsufficientScope` naming all of ``required`` unless the token satisfies it."""
        if not self.satisfies(access, required):
            what = f" for {operation}" if operation else ""
            raise InsufficientScope(required, f"{' '.join(required)} required{what}")

    # -- challenges (RFC 6750 §3, RFC 9728 §5.1) -----------------------------------

    @property
    def challenge_scopes(self) -> tuple[str, ...]:
        """The ``scope`` a 401 challenge names: what every request needs, else what is advertised."""
        return self.required_scopes or self.scopes_supported

    def challenge(self, error: AuthError) -> Reply:
        """The exact HTTP answer for ``error``.

        No credentials: 401 with ``resource_metadata`` and ``scope`` and no error code.
        Infrastructure failure: 503 without a challenge, ``Retry-After`` from the
        error's ``retry_after`` (5 s when the verifier does not know). Otherwise the RFC 6750 error
        code with a safe ``error_description``; a 403 names the scopes the operation
        needs.
        """
        if isinstance(error, VerifierUnavailable):
            body = json.dumps({"error": "temporarily_unavailable",
                               "error_description": "token verification is unavailable"}).encode()
            wait = 5 if error.retry_after is None else max(1, math.ceil(error.retry_after))
            return Reply(503, ((b"content-type", b"application/json"), (b"retry-after", b"%d" % wait)), body)
        params: list[tuple[str, str]] = []
        if error.error is not None:
            params.append(("error", error.error))
            if isinstance(error, InsufficientScope):
                params.append(("scope", " ".join(error.scopes)))
            if error.description:
                params.append(("error_description", error.description))
        params.append(("resource_metadata", self.metadata_url))
        if not isinstance(error, InsufficientScope) and self.challenge_scopes:
            params.append(("scope", " ".join(self.challenge_scopes)))
        header = "Bearer " + ", ".join(f"{name}={quote(value)}" for name, value in params)
        headers: list[Header] = [(b"www-authenticate", header.encode("ascii"))]
        body = b""
        if error.error is not None:
            headers.append((b"content-type", b"application/json"))
            body = json.dumps({"error": error.error, "error_description": error.description}).encode()
        return Reply(error.status_hint, tuple(headers), body)
