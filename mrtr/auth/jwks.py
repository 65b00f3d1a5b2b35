"""A JSON Web Key Set fetched from the authorization server and cached.

The cache keeps the last good key set for its lifetime (the response's ``max-age``
within bounds, else ``ttl``) and keeps serving it when a refresh fails. Refreshes are
single-flight: however many requests need a refresh at once, one fetch goes out and
the others wait for its result. A token naming a ``kid`` we do not know forces one
refetch (keys rotate), at most once per ``cooldown`` seconds, so a stream of tokens
with made-up key ids cannot turn the server into a load generator against the
authorization server. A failed fetch is retried after a bounded exponential backoff,
and until then no request fetches: with no key set held, requests are answered 503 at
once (never "unknown key", which would make clients discard good tokens). Keys that
cannot verify signatures (symmetric keys, keys marked for encryption, keys joserfc
cannot import) are skipped, never fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from .fetch import fetch_json, new_client
from .bearer import VerifierUnavailable

if TYPE_CHECKING:
    import httpx

__all__ = ["JWKSCache", "import_keys"]


def import_keys(document: Mapping[str, Any]) -> dict[str | None, Any]:
    """The usable signature-verification keys of a JWKS document, by ``kid``.

    Keys without a ``kid`` are stored under ``None`` (only usable when they are alone).
    Symmetric keys are refused: a key set is public, and a public value used as an
    HMAC secret is the algorithm-confusion attack.
    """
    from joserfc import jwk

    keys: dict[str | None, Any] = {}
    entries = document.get("keys")
    if not isinstance(entries, list):
        return keys
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        public = {k: v for k, v in entry.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "oth")}
        try:
            key = jwk.import_key(public)
        except Exception:  # joserfc raises several types for unusable keys; skip them all
            continue
        kid = entry.get("kid")
        keys[kid if isinstance(kid, str) else None] = key
    return keys


class JWKSCache:
    """Keys from ``uri``, cached, refreshed single-flight, refetched once on an unknown ``kid``.

    ``ttl`` is the lifetime when the response names none (and the upper bound when it
    does); ``cooldown`` the least time between two fetches forced by unknown key ids;
    ``timeout`` bounds one fetch and ``max_bytes`` the document. After a failed fetch
    the next one waits ``backoff`` seconds, doubling with each further failure up to
    ``backoff_max``; until then no request fetches. ``client`` is an
    ``httpx.AsyncClient`` (one is created when omitted). ``clock`` is monotonic
    seconds (trio's clock by default). ``fetches`` counts fetch attempts.

    What a request gets while the key set cannot be fetched: with no key set held,
    :class:`VerifierUnavailable` (503), always, whether it waited for the failed fetch
    or arrived during the backoff; with a key set held, its keys keep vouching for the
    tokens they signed, and a token naming another key is unavailable too (the
    provider may have rotated to it), never "unknown key". Only a key set fetched
    successfully can make a ``kid`` unknown.
    """

    def __init__(
        self,
        uri: str,
        *,
        client: httpx.AsyncClient | None = None,
        ttl: float = 600.0,
        cooldown: float = 30.0,
        timeout: float = 10.0,
        max_bytes: int = 64 * 1024,
        backoff: float = 1.0,
        backoff_max: float = 30.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not 0 < backoff <= backoff_max:
            raise ValueError(f"need 0 < backoff <= backoff_max, got {backoff!r} and {backoff_max!r}")
        self.uri = uri
        self._client = client
        self._owns_client = client is None
        self.ttl = ttl
        self.cooldown = cooldown
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.backoff = backoff
        self.backoff_max = backoff_max
        self._clock = clock or trio.current_time
        self._keys: dict[str | None, Any] | None = None
        self._fresh_until = 0.0
        self._last_fetch: float | None = None
        self._generation = 0
        self._lock = trio.Lock()
        self._failures = 0  # consecutive failed fetches; 0 once one succeeds
        self._retry_at = 0.0  # no fetch before this time while failing
        self._failure = ""
        self.fetches = 0

    async def key(self, kid: str | None) -> Any | None:
        """The key for ``kid`` (``None``: the set's only key), or ``None`` when there is none.

        ``None`` is a verdict (the token names a key the provider does not have), so it
        is given only from a key set fetched successfully. Raises
        :class:`VerifierUnavailable` when no key set is held, and when ``kid`` is not
        in the set held and the provider cannot be asked (its last fetch failed).
        """
        now = self._clock()
        if (self._keys is None or now >= self._fresh_until) and now >= self._retry_at:
            await self._refresh(self._generation, forced=False)
        if self._keys is None:
            # Also every request that waited on the fetch that just failed: no keys, no verdict.
            raise self._unavailable()
        found = self._lookup(kid)
        if found is not None:
            return found
        last = self._last_fetch
        if not self._failures and last is not None and self._clock() - last < self.cooldown:
            return None
        await self._refresh(self._generation, forced=True)
        found = self._lookup(kid)
        if found is None and self._failures:
            raise self._unavailable()
        return found

    def _lookup(self, kid: str | None) -> Any | None:
        keys = self._keys or {}
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def _unavailable(self) -> VerifierUnavailable:
        wait = max(self._retry_at - self._clock(), 0.0)
        return VerifierUnavailable(f"{self._failure or 'key set unavailable'}; next fetch in {wait:.1f} s",
                                   retry_after=wait)

    async def _refresh(self, seen: int, *, forced: bool) -> None:
        """Fetch the key set unless another caller just did, or the backoff says not yet.

        Never raises: the outcome is in the state :meth:`key` reads (keys held, failures).
        """
        async with self._lock:
            if self._generation != seen:
                return  # someone refreshed while we waited: use their result
            now = self._clock()
            if not forced and self._keys is not None and now < self._fresh_until:
                return
            if now < self._retry_at:
                return  # backing off after a failed fetch
            self._last_fetch = now
            self.fetches += 1
            try:
                if self._client is None:
                    self._client = new_client()
                fetched = await fetch_json(self._client, "GET", self.uri, timeout=self.timeout,
                                           max_bytes=self.max_bytes, what="key set")
                keys = import_keys(fetched.data)
                if not keys:
                    raise VerifierUnavailable("key set holds no usable signing key")
            except VerifierUnavailable as exc:
                # Kept keys keep serving; the next try waits, so an outage costs the provider
                # one fetch per backoff step however many requests arrive.
                self._generation += 1
                self._failures += 1
                self._failure = exc.description
                delay = min(self.backoff * 2 ** min(self._failures - 1, 62), self.backoff_max)
                self._retry_at = self._clock() + delay
                return
            self._generation += 1
            self._failures = 0
            self._retry_at = 0.0
            self._keys = keys
            lifetime = self.ttl if fetched.max_age is None else min(max(fetched.max_age, self.cooldown), self.ttl)
            self._fresh_until = now + lifetime

    async def aclose(self) -> None:
        """Close the HTTP client this cache created (a client passed in stays open)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
