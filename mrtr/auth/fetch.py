"""Bounded JSON fetches over httpx on trio, for the key set and introspection.

Both verifiers talk to the authorization server the same way: one overall deadline,
a cap on the body size read, and every failure (refused connection, timeout, non-2xx,
oversized or non-JSON body) turned into :class:`VerifierUnavailable`, so a transport
answers 503 and never mistakes an outage for a bad token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..core.errors import ParseError
from ..core.jsonrpc import decode_json
from .bearer import VerifierUnavailable

if TYPE_CHECKING:
    import httpx

__all__ = ["FetchedJSON", "fetch_json", "new_client"]


def new_client() -> httpx.AsyncClient:
    """An httpx client for talking to an authorization server (no redirects, no env proxies)."""
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("mrtr.auth needs httpx; install the 'auth' extra: pip install 'mrtr[auth]'") from exc
    return httpx.AsyncClient(follow_redirects=False, trust_env=False)


class FetchedJSON:
    """A JSON object fetched from a URL, with the response's ``Cache-Control`` max-age if any."""

    __slots__ = ("data", "max_age")

    def __init__(self, data: dict[str, Any], max_age: int | None) -> None:
        self.data = data
        self.max_age = max_age


def _max_age(cache_control: str | None) -> int | None:
    if not cache_control:
        return None
    for directive in cache_control.split(","):
        name, _, value = directive.strip().partition("=")
        if name.lower() == "no-store" or name.lower() == "no-cache":
            return 0
        if name.lower() == "max-age" and value.strip().isdigit():
            return int(value.strip())
    return None


async def fetch_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    what: str,
    data: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> FetchedJSON:
    """``method`` ``url`` and read a JSON object of at most ``max_bytes``, within ``timeout`` seconds.

    ``what`` names the endpoint in the error (``"key set"``, ``"introspection"``).
    """
    import httpx

    try:
        with trio.fail_after(timeout):
            async with client.stream(method, url, data=data, auth=auth,
                                     headers={"accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise VerifierUnavailable(f"{what} endpoint answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise VerifierUnavailable(f"{what} document exceeds {max_bytes} bytes")
                cache_control = response.headers.get("cache-control")
    except trio.TooSlowError as exc:
        raise VerifierUnavailable(f"{what} endpoint timed out") from exc
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{what} endpoint unreachable") from exc
    try:
        parsed = decode_json(bytes(body))  # the depth-safe reader: 100,000 brackets are not JSON we take
    except ParseError:
        raise VerifierUnavailable(f"{what} document is not JSON") from None
    if not isinstance(parsed, dict):
        raise VerifierUnavailable(f"{what} document is not a JSON object")
    return FetchedJSON(parsed, _max_age(cache_control))
