"""mrtr as an OAuth 2.1 protected resource: bearer tokens, scopes and the caller's identity.

A layer beside the server: it verifies tokens and decides challenges, the transports
render its :class:`Reply`, and the server sees only the resulting
:class:`AccessToken`. mrtr is a resource server, never an authorization server: it
checks tokens an identity provider issued and points clients at that provider
through the RFC 9728 metadata document. See ``docs/auth.md``.

:class:`JWTVerifier` needs the ``auth`` extra (``pip install 'mrtr[auth]'``: joserfc
and httpx); :class:`IntrospectionVerifier` needs httpx.
"""

from .introspection import IntrospectionVerifier
from .jwt import ALLOWED_ALGORITHMS, JWTVerifier
from .resource import Reply, ResourceServer, quote
from .bearer import (
    AccessToken,
    AuthError,
    InsufficientScope,
    InvalidToken,
    MalformedAuthorization,
    ScopeRule,
    TokenVerifier,
    VerifierUnavailable,
    exact_scopes,
    prefix_scopes,
    scopes_from_claims,
)
from .urls import canonical_url, metadata_path, metadata_url

__all__ = [
    "ALLOWED_ALGORITHMS",
    "AccessToken",
    "AuthError",
    "InsufficientScope",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "MalformedAuthorization",
    "Reply",
    "ResourceServer",
    "ScopeRule",
    "TokenVerifier",
    "VerifierUnavailable",
    "canonical_url",
    "exact_scopes",
    "metadata_path",
    "metadata_url",
    "prefix_scopes",
    "quote",
    "scopes_from_claims",
]
