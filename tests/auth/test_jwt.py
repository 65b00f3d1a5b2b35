"""JWTVerifier against real keys and a real JWKS on loopback: every token the checklist names."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
import trio
import trio.testing

from mrtr.auth import AccessToken, InvalidToken, JWTVerifier, VerifierUnavailable

from ..conftest import FakeClock
from .idp import RESOURCE, IdentityProvider, SigningKey, hmac_signed, make_key, mint, raw_signed, unsigned

ISSUER = "http://issuer.test"


def verifier(idp: IdentityProvider, **options: Any) -> JWTVerifier:
    return JWTVerifier(jwks_uri=idp.jwks_uri, issuer=ISSUER, audience=RESOURCE, **options)


async def refused(v: JWTVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        await v.verify(token)
    assert token not in str(caught.value)
    return caught.value.description


@pytest.mark.parametrize("kind", ["rsa", "pss", "p256", "ed25519"])
async def test_each_allowed_algorithm_verifies(idp: IdentityProvider, keys: dict[str, SigningKey], kind: str) -> None:
    access = await verifier(idp).verify(mint(keys[kind], scope="mcp:read files:write"))
    assert isinstance(access, AccessToken)
    assert (access.subject, access.client_id, access.issuer) == ("alice", "client-1", ISSUER)
    assert access.scopes == {"mcp:read", "files:write"}
    assert access.claims["aud"] == RESOURCE


async def test_accepted_shapes(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    v = verifier(idp)
    rsa = keys["rsa"]
    # aud as a list, aud with uppercase scheme and host and a trailing slash
    assert (await v.verify(mint(rsa, aud=["https://other.example", RESOURCE]))).audience[1] == RESOURCE
    await v.verify(mint(rsa, aud="HTTP://127.0.0.1:8123/mcp/"))
    # an unknown non-critical header (Clerk sends "cat"), typ "JWT", scp as a list, azp as client
    access = await v.verify(mint(rsa, header={"cat": "cl_B7d4PD111AAA", "typ": "JWT"},
                                 scope=None, scp=["a", "b"], client_id=None, azp="spa"))
    assert access.scopes == {"a", "b"} and access.client_id == "spa"
    # exp just past, within the leeway
    await v.verify(mint(rsa, exp=int(time.time()) - 10))


async def test_static_public_key_pem_and_jwk(keys: dict[str, SigningKey]) -> None:
    for material in (keys["p256"].public_pem(), keys["p256"].public_jwk()):
        v = JWTVerifier(public_key=material, issuer=ISSUER, audience=RESOURCE)
        assert (await v.verify(mint(keys["p256"]))).subject == "alice"
        await refused(v, mint(keys["rsa"]))


async def test_bad_tokens_are_invalid_token(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    v = verifier(idp)
    rsa = keys["rsa"]
    now = int(time.time())
    good = mint(rsa)
    head, payload, signature = good.split(".")
    forged = make_key("rsa", rsa.kid)  # same kid, different key
    cases = {
        "garbage": "not-a-token",
        "three garbage segments": "a.b.c",
        "bad signature": mint(forged),
        "tampered payload": f"{head}.{mint(rsa, sub='root').split('.')[1]}.{signature}",
        "expired": mint(rsa, exp=now - 120),
        "no exp": mint(rsa, exp=None),
        "nbf in the future": mint(rsa, nbf=now + 300),
        "wrong iss": mint(rsa, iss="http://evil.test"),
        "wrong aud": mint(rsa, aud="http://127.0.0.1:8123/other"),
        "missing aud": mint(rsa, aud=None),
        "aud list without us": mint(rsa, aud=["https://a.example", "https://b.example"]),
        "unknown crit": raw_signed(rsa, {"iss": ISSUER, "aud": RESOURCE, "exp": now + 300},
                                   {"alg": "RS256", "kid": rsa.kid, "crit": ["urn:x"], "urn:x": 1}),
    }
    descriptions = {name: await refused(v, token) for name, token in cases.items()}
    assert descriptions["expired"] == "token expired"
    assert descriptions["nbf in the future"] == "token not yet valid"
    assert descriptions["wrong iss"] == "token issuer not accepted"
    assert descriptions["wrong aud"] == descriptions["missing aud"] == "token audience not accepted"
    assert descriptions["bad signature"] == "token signature invalid"
    assert descriptions["unknown crit"] == "token uses an unsupported critical header"


async def test_alg_none_and_hs256_with_the_public_key(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    v = verifier(idp)
    rsa = keys["rsa"]
    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "mallory", "exp": int(time.time()) + 300}
    for alg in ("none", "None", "NONE"):
        assert await refused(v, unsigned(claims, {"alg": alg, "kid": rsa.kid})) == "token algorithm not allowed"
    # The classic confusion: HMAC keyed with the verifier's own public key, PEM or JWK bytes.
    for secret in (rsa.public_pem(), str(rsa.public_jwk()).encode()):
        token = hmac_signed(claims, {"alg": "HS256", "kid": rsa.kid, "typ": "JWT"}, secret)
        assert await refused(v, token) == "token algorithm not allowed"
    static = JWTVerifier(public_key=rsa.public_pem(), issuer=ISSUER, audience=RESOURCE)
    await refused(static, hmac_signed(claims, {"alg": "HS256"}, rsa.public_pem()))


async def test_disallowed_and_mismatched_algorithms(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    idp.keys.append(keys["rsa384"])
    assert await refused(verifier(idp), mint(keys["rsa384"])) == "token algorithm not allowed"
    # RS256 is allowed, but the kid names the P-256 key: the key type must fit the algorithm.
    only_rs = verifier(idp, algorithms=["RS256", "ES256"])
    token = mint(keys["rsa"], header={"kid": keys["p256"].kid})
    assert await refused(only_rs, token) == "token algorithm does not match the signing key"
    assert await refused(verifier(idp, algorithms=["ES256"]), mint(keys["rsa"])) == "token algorithm not allowed"


@pytest.mark.parametrize("algorithms", [["HS256"], ["none"], ["RS256", "HS512"], []])
def test_symmetric_or_none_cannot_be_configured(algorithms: list[str]) -> None:
    with pytest.raises(ValueError):
        JWTVerifier(jwks_uri="http://127.0.0.1:1/jwks", issuer=ISSUER, audience=RESOURCE, algorithms=algorithms)


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        JWTVerifier(issuer=ISSUER, audience=RESOURCE)
    with pytest.raises(ValueError, match="audience"):
        JWTVerifier(jwks_uri="http://127.0.0.1:1/jwks", issuer=ISSUER, audience=[])


async def test_typ_policy(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    strict = verifier(idp, typ="at+jwt")
    await strict.verify(mint(keys["rsa"], header={"typ": "application/AT+JWT"}))
    assert await refused(strict, mint(keys["rsa"], header={"typ": "JWT"})) == "token type not accepted"
    assert await refused(strict, mint(keys["rsa"], header={"typ": None})) == "token type not accepted"
    await verifier(idp).verify(mint(keys["rsa"], header={"typ": None}))


async def test_key_location_from_the_token_is_not_followed(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    attacker = make_key("rsa", "attacker")
    token = mint(attacker, header={"jku": "http://127.0.0.1:1/evil", "x5u": "http://127.0.0.1:1/x5"})
    assert await refused(verifier(idp), token) == "token signed with an unknown key"


async def test_unknown_kid_refetches_once_then_refuses(idp: IdentityProvider, keys: dict[str, SigningKey],
                                                       mock_clock: trio.testing.MockClock) -> None:
    v = verifier(idp)
    await v.verify(mint(keys["rsa"]))
    assert idp.jwks_fetches == 1
    stranger = make_key("rsa", "stranger")
    assert await refused(v, mint(stranger)) == "token signed with an unknown key"
    assert idp.jwks_fetches == 1  # within the cooldown of the first fetch: no refetch
    mock_clock.jump(31)
    for _ in range(10):  # a burst of unknown kids costs one refetch per cooldown
        await refused(v, mint(stranger))
    assert idp.jwks_fetches == 2


async def test_rotation_under_concurrency_is_one_refetch(idp: IdentityProvider, keys: dict[str, SigningKey],
                                                         mock_clock: trio.testing.MockClock) -> None:
    v = verifier(idp)
    await v.verify(mint(keys["rsa"]))
    mock_clock.jump(31)
    rotated = make_key("ed25519", "rotated-2")
    idp.keys.append(rotated)
    idp.gate, idp.fetch_arrived = trio.Event(), trio.Event()
    results: list[AccessToken] = []

    async def call(n: int) -> None:
        results.append(await v.verify(mint(rotated, sub=f"user{n}")))

    async with trio.open_nursery() as nursery:
        for n in range(25):
            nursery.start_soon(call, n)
        await idp.fetch_arrived.wait()
        await trio.testing.wait_all_tasks_blocked()  # every caller now waits on the one fetch
        idp.gate.set()
    assert len(results) == 25
    assert idp.jwks_fetches == 2


async def test_cache_lifetime_follows_max_age_and_survives_an_outage(
        idp: IdentityProvider, keys: dict[str, SigningKey], mock_clock: trio.testing.MockClock) -> None:
    idp.cache_control = "public, max-age=120"
    v = verifier(idp, cache_ttl=0)  # every call reaches the key cache
    await v.verify(mint(keys["rsa"]))
    mock_clock.jump(100)
    await v.verify(mint(keys["rsa"]))
    assert idp.jwks_fetches == 1
    mock_clock.jump(30)
    idp.mode = "500"
    await v.verify(mint(keys["rsa"]))  # stale keys keep serving while the provider fails
    assert idp.jwks_fetches == 2
    await v.verify(mint(keys["rsa"]))
    assert idp.jwks_fetches == 2  # and the failing fetch is not retried at once


@pytest.mark.parametrize("mode", ["500", "huge", "junk", "deep"])
async def test_broken_key_set_is_infrastructure_failure(idp: IdentityProvider, keys: dict[str, SigningKey],
                                                        mode: str) -> None:
    idp.mode = mode
    with pytest.raises(VerifierUnavailable):
        await verifier(idp).verify(mint(keys["rsa"]))


async def test_key_set_server_down_fails_closed() -> None:
    with trio.socket.socket() as sock:  # a port that was just free: nothing listens there
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    v = JWTVerifier(jwks_uri=f"http://127.0.0.1:{port}/jwks", issuer=ISSUER, audience=RESOURCE)
    with pytest.raises(VerifierUnavailable) as caught:
        await v.verify(mint(make_key("p256", "k")))
    assert not isinstance(caught.value, InvalidToken)
    await v.aclose()


async def test_hanging_key_set_times_out(idp: IdentityProvider, keys: dict[str, SigningKey]) -> None:
    idp.mode = "hang"
    v = verifier(idp, jwks_timeout=0.3)
    started = trio.current_time()
    with pytest.raises(VerifierUnavailable, match="timed out"):
        await v.verify(mint(keys["rsa"]))
    assert trio.current_time() - started < 5
    await v.aclose()


def test_missing_joserfc_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "joserfc", None)
    monkeypatch.setitem(sys.modules, "joserfc.jws", None)
    with pytest.raises(ImportError, match=r"mrtr\[auth\]"):
        JWTVerifier(jwks_uri="http://127.0.0.1:1/jwks", issuer=ISSUER, audience=RESOURCE)


async def test_verified_tokens_are_remembered_briefly(keys: dict[str, SigningKey]) -> None:
    clock = FakeClock()
    v = JWTVerifier(public_key=keys["rsa"].public_pem(), issuer=ISSUER, audience=RESOURCE, cache_ttl=60,
                    clock=clock)
    token = mint(keys["rsa"], exp=int(clock.now) + 90)
    first = await v.verify(token)
    assert await v.verify(token) is first  # a hash lookup, no second signature check
    clock.advance(61)
    again = await v.verify(token)
    assert again is not first and again == first
    clock.advance(60)  # past exp (and the leeway): the cache does not outlive the token
    with pytest.raises(InvalidToken, match="expired"):
        await v.verify(token)
    # a refused token is never remembered as good
    forged = make_key("rsa", keys["rsa"].kid)
    for _ in range(2):
        await refused(v, mint(forged))


async def test_a_signed_payload_nested_too_deep_is_a_malformed_token(idp: IdentityProvider,
                                                                    keys: dict[str, SigningKey]) -> None:
    # Signed by a key the server trusts, so only its authorization server could send it; still read by
    # the depth-safe rule every document goes through, never a RecursionError out of the request.
    rsa = keys["rsa"]
    token = raw_signed(rsa, b"[" * 50_000 + b"]" * 50_000, {"alg": rsa.alg, "kid": rsa.kid, "typ": "at+jwt"})
    with pytest.raises(InvalidToken, match="malformed token"):
        await verifier(idp).verify(token)
