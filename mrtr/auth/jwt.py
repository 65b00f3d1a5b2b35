"""Verification of JWT access tokens (RFC 9068) against the authorization server's keys.

The order is fixed and each step refuses on its own, with a fixed description that
never quotes the token:

1. the compact JWS parses and its header is a JSON object;
2. ``alg`` is in the explicit allow-list (asymmetric algorithms only: ``none`` and
   ``HS*`` cannot even be configured), ``crit`` names nothing (we implement no JWS
   extension), ``typ`` is acceptable when a ``typ`` policy is set; other unknown
   header members are ignored, as RFC 7515 asks;
3. the key comes from configuration or the JWKS (by ``kid``), never from the token
   (``jku``, ``x5u`` and ``jwk`` headers are not followed), and its type must fit
   ``alg``;
4. the signature verifies (joserfc);
5. ``iss`` is one of the configured issuers, ``aud`` (string or list) contains one
   of the configured audiences compared as canonical URLs, ``exp`` is present and in
   the future and ``nbf`` (if present) in the past, both within ``leeway`` seconds.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import ParseError
from ..core.jsonrpc import decode_json
from .jwks import JWKSCache, import_keys
from .bearer import AccessToken, InvalidToken, RecentTokens, ScopeRule, checked_audiences, is_time, scopes_from_claims
from .urls import audience_key

if TYPE_CHECKING:
    import httpx

__all__ = ["JWTVerifier", "ALLOWED_ALGORITHMS"]

ALLOWED_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA", "Ed25519")
"""The default allow-list: what authorization servers sign access tokens with."""

# Which key an algorithm may be verified with: (key type, curve or None).
_KEY_FOR_ALG: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None), "RS384": ("RSA", None), "RS512": ("RSA", None),
    "PS256": ("RSA", None), "PS384": ("RSA", None), "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"), "ES384": ("EC", "P-384"), "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", "Ed25519"), "Ed25519": ("OKP", "Ed25519"),
}
_MAX_TOKEN_BYTES = 16 * 1024


def _joserfc() -> Any:
    try:
        from joserfc import jws
    except ImportError as exc:
        raise ImportError("JWTVerifier needs joserfc; install the 'auth' extra: pip install 'mrtr[auth]'") from exc
    return jws



def _key_type(material: Any) -> Any:
    """The JWK key type of a PEM or a ``cryptography`` public key; refuses anything else."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    key = material
    if isinstance(material, (str, bytes)):
        data = material.encode() if isinstance(material, str) else material
        key = serialization.load_pem_public_key(data)
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "OKP"
    raise ValueError("public_key must be an RSA, EC or Ed25519 public key (PEM, cryptography key, JWK or JWKS)")


class _StaticKeys:
    """Keys given in configuration: a PEM, a cryptography key, a JWK or a JWKS."""

    def __init__(self, material: Any) -> None:
        from joserfc import jwk

        if isinstance(material, Mapping) and "keys" in material:
            self._keys = import_keys(material)
        elif isinstance(material, Mapping):
            self._keys = import_keys({"keys": [dict(material)]})
        else:
            self._keys = {None: jwk.import_key(material, _key_type(material))}
        if not self._keys:
            raise ValueError("public_key holds no usable signature key")

    async def key(self, kid: str | None) -> Any | None:
        if len(self._keys) == 1:
            only_kid, only = next(iter(self._keys.items()))
            return only if kid is None or only_kid is None or only_kid == kid else None
        return self._keys.get(kid)


class JWTVerifier:
    """Verifies JWT access tokens signed by the authorization server.

    Give exactly one of ``jwks_uri`` (fetched with httpx on trio, cached; see
    :class:`~mrtr.auth.jwks.JWKSCache`) and ``public_key`` (PEM, a ``cryptography``
    public key, a JWK or a JWKS mapping). ``issuer`` and ``audience`` are one value or
    several; ``audience`` is normally the MCP endpoint URL. ``algorithms`` is the
    allow-list (asymmetric only). ``typ`` is ``None`` to accept any type, else the
    accepted values compared case-insensitively with an optional ``application/``
    prefix (``("at+jwt",)`` is RFC 9068's; many providers send ``JWT``). ``leeway`` is
    the clock skew tolerated on ``exp`` and ``nbf``. ``scope_rule`` makes this
    verifier's scope hierarchy known to the resource server. ``jwks_backoff`` and
    ``jwks_backoff_max`` bound the retries of a key set that cannot be fetched (see
    :class:`~mrtr.auth.jwks.JWKSCache`).

    A token that verified is remembered for ``cache_ttl`` seconds (never past its
    ``exp``), keyed by its SHA-256, so a client that sends the same token with every
    request pays for the signature once: a signature check costs hundreds of
    microseconds, a lookup nothing. ``cache_ttl=0`` turns this off; it bounds how long a
    key withdrawn from the key set still vouches for tokens already seen.
    """

    def __init__(
        self,
        *,
        issuer: str | Sequence[str],
        audience: str | Sequence[str],
        jwks_uri: str | None = None,
        public_key: Any = None,
        algorithms: Sequence[str] = ALLOWED_ALGORITHMS,
        typ: Sequence[str] | str | None = None,
        leeway: float = 30.0,
        scope_rule: ScopeRule | None = None,
        http_client: httpx.AsyncClient | None = None,
        jwks_ttl: float = 600.0,
        jwks_cooldown: float = 30.0,
        jwks_timeout: float = 10.0,
        jwks_max_bytes: int = 64 * 1024,
        jwks_backoff: float = 1.0,
        jwks_backoff_max: float = 30.0,
        cache_ttl: float = 60.0,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _joserfc()
        if (jwks_uri is None) == (public_key is None):
            raise ValueError("give exactly one of jwks_uri and public_key")
        refused = [alg for alg in algorithms if alg not in _KEY_FOR_ALG]
        if refused or not algorithms:
            raise ValueError(f"algorithms must be asymmetric signature algorithms from {sorted(_KEY_FOR_ALG)}; "
                             f"refused: {refused}")
        self.algorithms = tuple(algorithms)
        self.issuers = frozenset([issuer] if isinstance(issuer, str) else issuer)
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not self.issuers:
            raise ValueError("issuer and audience are required: a token for another resource must not pass")
        self.audiences = frozenset(audience_key(a) for a in audiences)
        types = [typ] if isinstance(typ, str) else typ
        self.typ = None if types is None else frozenset(self._media_type(t) for t in types)
        self.leeway = leeway
        self._clock = clock
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self._verified = RecentTokens(cache_ttl, cache_size, without_expiry=False)
        if scope_rule is not None:
            self.scope_satisfied = scope_rule
        self.keys: JWKSCache | _StaticKeys
        if jwks_uri is not None:
            self.keys = JWKSCache(jwks_uri, client=http_client, ttl=jwks_ttl, cooldown=jwks_cooldown,
                                  timeout=jwks_timeout, max_bytes=jwks_max_bytes, backoff=jwks_backoff,
                                  backoff_max=jwks_backoff_max)
        else:
            self.keys = _StaticKeys(public_key)

    @staticmethod
    def _media_type(value: str) -> str:
        value = value.lower()
        return value[len("application/"):] if value.startswith("application/") else value

    def _check_header(self, header: Mapping[str, Any]) -> str:
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("token algorithm not allowed")
        if "crit" in header:
            raise InvalidToken("token uses an unsupported critical header")
        if self.typ is not None:
            typ = header.get("typ")
            if not isinstance(typ, str) or self._media_type(typ) not in self.typ:
                raise InvalidToken("token type not accepted")
        return alg

    async def verify(self, token: str) -> AccessToken:
        """Verify ``token`` and return what it says; raises ``InvalidToken`` or ``VerifierUnavailable``."""
        if self.cache_ttl <= 0:
            return await self._verify(token)
        now = self._clock()
        key = RecentTokens.key(token)
        hit = self._verified.get(key, now)
        if hit is not None:
            return hit
        access = await self._verify(token)
        self._verified.put(key, access, now)
        return access

    async def _verify(self, token: str) -> AccessToken:
        jws = _joserfc()
        from joserfc.errors import JoseError, SecurityWarning

        if len(token) > _MAX_TOKEN_BYTES or token.count(".") != 2:
            raise InvalidToken("malformed token")
        try:
            lenient = jws.JWSRegistry(algorithms=self.algorithms, strict_check_header=False)
            compact = jws.extract_compact(token.encode("ascii"), registry=lenient)
            header = compact.headers()
        except (JoseError, ValueError, TypeError):
            raise InvalidToken("malformed token") from None
        alg = self._check_header(header)
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed token")
        key = await self.keys.key(kid)
        if key is None:
            raise InvalidToken("token signed with an unknown key")
        kty, crv = _KEY_FOR_ALG[alg]
        if key.key_type != kty or (crv is not None and key.get("crv") != crv) or key.get("alg", alg) != alg:
            raise InvalidToken("token algorithm does not match the signing key")
        registry = jws.JWSRegistry(algorithms=[alg], strict_check_header=False)
        try:
            with warnings.catch_warnings():
                # joserfc flags the "EdDSA" name as legacy (RFC 9864); it is allowed here on purpose.
                warnings.simplefilter("ignore", SecurityWarning)
                valid = jws.validate_compact(compact, key, algorithms=[alg], registry=registry)
        except (JoseError, ValueError, TypeError):
            valid = False
        if not valid:
            raise InvalidToken("token signature invalid")
        try:
            claims = decode_json(compact.payload)
        except ParseError:
            raise InvalidToken("malformed token") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token")
        return self._check_claims(claims)

    def _check_claims(self, claims: dict[str, Any]) -> AccessToken:
        now = self._clock()
        exp = claims.get("exp")
        if not is_time(exp):
            raise InvalidToken("token has no expiry")
        if now > exp + self.leeway:
            raise InvalidToken("token expired")
        nbf = claims.get("nbf")
        if nbf is not None and (not is_time(nbf) or now + self.leeway < nbf):
            raise InvalidToken("token not yet valid")
        issuer = claims.get("iss")
        if issuer not in self.issuers:
            raise InvalidToken("token issuer not accepted")
        audiences = checked_audiences(claims, self.audiences)
        subject = claims.get("sub")
        client_id = claims.get("client_id", claims.get("azp"))
        return AccessToken(
            subject=subject if isinstance(subject, str) else None,
            client_id=client_id if isinstance(client_id, str) else None,
            issuer=issuer,
            scopes=scopes_from_claims(claims),
            audience=audiences,
            expires_at=float(exp),
            claims=claims,
        )

    async def aclose(self) -> None:
        """Close the HTTP client the key cache created, if any."""
        if isinstance(self.keys, JWKSCache):
            await self.keys.aclose()


