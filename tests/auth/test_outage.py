"""The key set unavailable: with no key set held every request is 503, and failed fetches back off.

A server that started while its identity provider was down used to answer most of a
burst of good tokens with 401 ``invalid_token "token signed with an unknown key"`` (the
requests that waited for the one failed fetch found no keys and called the token bad), so
clients following docs/auth.md threw good tokens away; and every request without cached
keys fetched the key set again. The provider here is the loopback one, taken off the
network (connections refused) and brought back; the requests are real HTTP to both
front ends.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from mrtr.auth import InvalidToken, JWTVerifier, ResourceServer, VerifierUnavailable
from mrtr.auth.jwks import JWKSCache
from mrtr.http import ASGIApp
from mrtr.transports.http.native import serve
from mrtr.server import Server

from ..http.conftest import BASE_HEADERS, mcp_headers, rpc, start_hypercorn
from .idp import RESOURCE, IdentityProvider, SigningKey, make_key, mint

ISSUER = "http://issuer.test"
BACKOFF = 2.0
BACKOFF_MAX = 4.0


@dataclass
class Outage:
    client: httpx.AsyncClient
    idp: IdentityProvider
    verifier: JWTVerifier
    token: str

    @property
    def fetches(self) -> int:
        assert isinstance(self.verifier.keys, JWKSCache)
        return self.verifier.keys.fetches

    async def call(self) -> httpx.Response:
        message = rpc("tools/call", {"name": "ping_tool"})
        headers = {**BASE_HEADERS, **mcp_headers(message), "Authorization": f"Bearer {self.token}"}
        return await self.client.post("/mcp", json=message, headers=headers)


@pytest.fixture(params=["native", "asgi"])
async def outage(request: Any, nursery: trio.Nursery, idp: IdentityProvider,
                 keys: dict[str, SigningKey]) -> AsyncIterator[Outage]:
    """A protected server whose identity provider is down from the start."""
    await idp.down()
    verifier = JWTVerifier(jwks_uri=idp.jwks_uri, issuer=ISSUER, audience=RESOURCE,
                           jwks_backoff=BACKOFF, jwks_backoff_max=BACKOFF_MAX)
    server = Server("outage", secret=b"o" * 32, auth=ResourceServer(
        verifier, resource=RESOURCE, authorization_servers=[ISSUER]))
    server.tool(lambda: "pong", name="ping_tool")
    if request.param == "native":
        port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    else:
        port = await start_hypercorn(nursery, ASGIApp(server), trio.Event())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Outage(client, idp, verifier, mint(keys["rsa"], iss=ISSUER))
    await verifier.aclose()


def fetches_allowed(elapsed: float) -> int:
    """How many fetches the backoff schedule allows within ``elapsed`` seconds of the first."""
    count, at, delay = 1, 0.0, BACKOFF
    while at + delay <= elapsed:
        at += delay
        count += 1
        delay = min(delay * 2, BACKOFF_MAX)
    return count


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert "www-authenticate" not in response.headers  # no challenge: the token is not blamed
    assert "invalid_token" not in response.text
    assert 1 <= int(response.headers["retry-after"]) <= math.ceil(BACKOFF_MAX)


async def test_no_key_set_is_503_for_everyone_and_fetches_back_off(outage: Outage) -> None:
    started = trio.current_time()
    responses: list[httpx.Response] = []

    async def one() -> None:
        responses.append(await outage.call())

    async with trio.open_nursery() as burst:
        for _ in range(20):
            burst.start_soon(one)
    for response in responses:
        assert_unavailable(response)
    # one fetch for the whole burst (more only if the burst outlasted a backoff step)
    assert outage.fetches <= fetches_allowed(trio.current_time() - started) < 20

    for _ in range(50):
        assert_unavailable(await outage.call())
    elapsed = trio.current_time() - started
    assert outage.fetches <= fetches_allowed(elapsed), (outage.fetches, elapsed)

    await outage.idp.up()
    before = outage.fetches
    with trio.fail_after(BACKOFF_MAX + 5):
        while True:
            response = await outage.call()
            if response.status_code == 200:
                break
            assert_unavailable(response)  # never a 401 while the keys are being recovered
            await trio.sleep(0.05)
    assert response.json()["result"]["content"] == [{"type": "text", "text": "pong"}]
    assert outage.fetches - before <= 2  # at most the failed try in flight and the one that succeeded

    async with trio.open_nursery() as burst:
        for _ in range(20):
            burst.start_soon(one)
    assert [r.status_code for r in responses[-20:]] == [200] * 20


async def test_the_backoff_doubles_up_to_its_cap(idp: IdentityProvider, keys: dict[str, SigningKey],
                                                  mock_clock: trio.testing.MockClock) -> None:
    idp.mode = "500"
    cache = JWKSCache(idp.jwks_uri, backoff=1.0, backoff_max=8.0)

    async def refused() -> float:
        with pytest.raises(VerifierUnavailable) as caught:
            await cache.key("rsa-1")
        assert not isinstance(caught.value, InvalidToken)
        assert caught.value.retry_after is not None
        return caught.value.retry_after

    # (clock jump, fetches seen after it, seconds until the next attempt)
    schedule = [(0, 1, 1.0), (0.5, 1, 0.5), (0.5, 2, 2.0), (1.75, 2, 0.25), (0.25, 3, 4.0),
                (4, 4, 8.0), (8, 5, 8.0), (7.5, 5, 0.5)]
    for jump, fetches, retry_after in schedule:
        mock_clock.jump(jump)
        assert await refused() == pytest.approx(retry_after)
        assert (idp.jwks_fetches, cache.fetches) == (fetches, fetches)
    idp.mode = "ok"
    mock_clock.jump(0.5)
    assert await cache.key("rsa-1") is not None
    assert idp.jwks_fetches == 6
    await cache.aclose()


async def test_while_a_refresh_fails_an_unknown_key_is_503_and_known_keys_still_pass(
        idp: IdentityProvider, keys: dict[str, SigningKey], mock_clock: trio.testing.MockClock) -> None:
    v = JWTVerifier(jwks_uri=idp.jwks_uri, issuer=ISSUER, audience=RESOURCE, cache_ttl=0)
    await v.verify(mint(keys["rsa"]))
    mock_clock.jump(601)  # the key set is stale
    idp.mode = "500"
    assert (await v.verify(mint(keys["rsa"]))).subject == "alice"  # the keys held still vouch
    assert idp.jwks_fetches == 2
    rotated = make_key("p256", "rotated")
    # The provider may well have rotated to this key: with the set unconfirmed, that is not a verdict.
    with pytest.raises(VerifierUnavailable):
        await v.verify(mint(rotated))
    assert idp.jwks_fetches == 2  # backing off: no fetch
    idp.mode = "ok"
    idp.keys.append(rotated)
    mock_clock.jump(1)
    assert (await v.verify(mint(rotated))).subject == "alice"
    assert idp.jwks_fetches == 3
    # the set is confirmed again: a made-up key id is refused as before, without a fetch
    with pytest.raises(InvalidToken, match="unknown key"):
        await v.verify(mint(make_key("p256", "made-up")))
    assert idp.jwks_fetches == 3
    await v.aclose()


async def test_waiters_on_a_failed_forced_refetch_get_503_not_unknown_key(
        idp: IdentityProvider, keys: dict[str, SigningKey], mock_clock: trio.testing.MockClock) -> None:
    v = JWTVerifier(jwks_uri=idp.jwks_uri, issuer=ISSUER, audience=RESOURCE, cache_ttl=0)
    await v.verify(mint(keys["rsa"]))
    mock_clock.jump(31)  # past the cooldown: a new kid forces a refetch
    rotated = make_key("p256", "rotated")
    idp.mode = "500"
    idp.gate, idp.fetch_arrived = trio.Event(), trio.Event()
    outcomes: list[type[BaseException]] = []

    async def call() -> None:
        try:
            await v.verify(mint(rotated))
        except (InvalidToken, VerifierUnavailable) as error:
            outcomes.append(type(error))

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(call)
        await idp.fetch_arrived.wait()
        await trio.testing.wait_all_tasks_blocked()  # every caller waits on the one refetch
        idp.gate.set()
    assert outcomes == [VerifierUnavailable] * 10
    assert idp.jwks_fetches == 2
    await v.aclose()
