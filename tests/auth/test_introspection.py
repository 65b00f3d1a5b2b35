"""IntrospectionVerifier against a real RFC 7662 endpoint on loopback."""

from __future__ import annotations

import time

import pytest

from mrtr.auth import InvalidToken, IntrospectionVerifier, VerifierUnavailable

from ..conftest import FakeClock
from .idp import RESOURCE, IdentityProvider


def introspector(idp: IdentityProvider, **options: object) -> IntrospectionVerifier:
    return IntrospectionVerifier(idp.introspection_endpoint, client_id="rs-client", client_secret="rs-secret",
                                 audience=RESOURCE, **options)  # type: ignore[arg-type]


def active(**claims: object) -> dict[str, object]:
    return {"active": True, "aud": RESOURCE, "sub": "alice", "client_id": "c1", "iss": "http://issuer.test",
            "scope": "mcp:read files:write", "exp": int(time.time()) + 600} | claims


async def test_active_token_is_accepted_and_the_request_authenticated(idp: IdentityProvider) -> None:
    idp.introspection["opaque-1"] = active()
    access = await introspector(idp).verify("opaque-1")
    assert (access.subject, access.client_id, access.scopes) == ("alice", "c1", {"mcp:read", "files:write"})
    seen = idp.introspection_requests[-1]
    assert seen["form"] == {"token": "opaque-1", "token_type_hint": "access_token"}
    assert seen["authorization"].startswith("Basic ")
    idp.introspection["opaque-2"] = active()
    await introspector(idp, auth_method="client_secret_post").verify("opaque-2")
    assert idp.introspection_requests[-1]["form"]["client_id"] == "rs-client"


async def test_refusals(idp: IdentityProvider) -> None:
    idp.introspection |= {
        "inactive": {"active": False, "aud": RESOURCE, "sub": "alice"},
        "foreign": active(aud="https://other.example/mcp"),
        "no-aud": {k: v for k, v in active().items() if k != "aud"},
        "expired": active(exp=int(time.time()) - 600),
        "wrong-iss": active(iss="http://evil.test"),
    }
    verifier = introspector(idp, issuer="http://issuer.test")
    reasons = {}
    for token in ("inactive", "foreign", "no-aud", "expired", "wrong-iss", "never-issued"):
        with pytest.raises(InvalidToken) as caught:
            await verifier.verify(token)
        reasons[token] = caught.value.description
    assert reasons["inactive"] == reasons["never-issued"] == "token inactive"
    assert reasons["foreign"] == reasons["no-aud"] == "token audience not accepted"
    assert reasons["expired"] == "token expired"


async def test_uppercase_audience_is_the_same_resource(idp: IdentityProvider) -> None:
    idp.introspection["t"] = active(aud=["https://x.example", RESOURCE.upper().replace("/MCP", "/mcp")])
    await introspector(idp).verify("t")


async def test_failures_are_infrastructure(idp: IdentityProvider) -> None:
    idp.introspection["t"] = {"scope": "x"}  # no "active" member
    with pytest.raises(VerifierUnavailable):
        await introspector(idp).verify("t")
    bad_credentials = IntrospectionVerifier(idp.introspection_endpoint, client_id="rs-client",
                                            client_secret="wrong", audience=RESOURCE)
    with pytest.raises(VerifierUnavailable):
        await bad_credentials.verify("t")
    idp.mode = "500"
    with pytest.raises(VerifierUnavailable):
        await introspector(idp).verify("t")
    idp.mode = "deep"  # read by the depth-safe rule: not JSON we take, never a RecursionError
    with pytest.raises(VerifierUnavailable, match="not JSON"):
        await introspector(idp).verify("t")


async def test_positive_answers_are_cached_briefly_and_negative_ones_not(idp: IdentityProvider) -> None:
    clock = FakeClock()
    idp.introspection["t"] = active()
    verifier = introspector(idp, cache_ttl=60, clock=clock)
    await verifier.verify("t")
    await verifier.verify("t")
    assert verifier.requests == 1
    clock.now += 61
    del idp.introspection["t"]  # revoked: visible once the cached answer lapses
    with pytest.raises(InvalidToken):
        await verifier.verify("t")
    with pytest.raises(InvalidToken):
        await verifier.verify("t")
    assert verifier.requests == 3
    # never past the token's own expiry
    idp.introspection["short"] = active(exp=clock.now + 5)
    await verifier.verify("short")
    await verifier.verify("short")
    assert verifier.requests == 4
    clock.now += 6
    await verifier.verify("short")  # asked again (and still inside the leeway)
    assert verifier.requests == 5
