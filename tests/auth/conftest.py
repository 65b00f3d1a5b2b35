"""Fixtures for the auth tests: the loopback identity provider and its keys."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from .idp import IdentityProvider, SigningKey, make_key


@pytest.fixture(scope="session")
def keys() -> dict[str, SigningKey]:
    """One key of each kind, made once (RSA generation is the slow part)."""
    return {kind: make_key(kind, f"{kind}-1") for kind in ("rsa", "pss", "p256", "ed25519", "rsa384")}


@pytest.fixture
async def idp(nursery: trio.Nursery, keys: dict[str, SigningKey]) -> AsyncIterator[IdentityProvider]:
    """The identity provider serving the RS256, PS256, ES256 and EdDSA keys."""
    provider = IdentityProvider(keys=[keys["rsa"], keys["pss"], keys["p256"], keys["ed25519"]])
    await provider.serve(nursery)
    yield provider
    if provider.gate is not None:
        provider.gate.set()
