"""Who is who through the proxy: its own resource server authenticates its callers; upstream it is itself.

The identity provider on loopback (``tests/auth/idp.py``) signs the downstream callers'
tokens; the proxy verifies them as any protected mrtr server does. Upstream it sends its
own key (``upstream_headers``), never the caller's token: the upstream names whoever
reaches it, a bearer token included, so a token passed on would show.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio

import mrtr
from mrtr.auth import JWTVerifier, ResourceServer
from mrtr.transports.http.native import serve

from ..auth.idp import RESOURCE, IdentityProvider, SigningKey, mint
from .upstream_app import server as upstream_server


@pytest.fixture
async def keys() -> dict[str, SigningKey]:
    from ..auth.idp import make_key

    return {"rsa": make_key("rsa", "rsa-1")}


async def test_callers_are_the_proxys_and_the_upstream_sees_the_proxy(nursery: trio.Nursery,
                                                                      keys: dict[str, SigningKey]) -> None:
    idp = IdentityProvider(keys=[keys["rsa"]])
    await idp.serve(nursery)
    upstream_port = await nursery.start(partial(serve, upstream_server, "127.0.0.1", 0))
    verifier = JWTVerifier(jwks_uri=idp.jwks_uri, issuer="http://issuer.test", audience=RESOURCE)
    proxied = mrtr.proxy(f"http://127.0.0.1:{upstream_port}/mcp", secret=b"p" * 32, store_url="memory:",
                         upstream_headers={"X-Upstream-Key": "the-proxy"},
                         auth=ResourceServer(verifier, resource=RESOURCE, authorization_servers=["http://issuer.test"],
                                             required_scopes=["mcp:read"]))
    port = await nursery.start(partial(serve, proxied, "127.0.0.1", 0))
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with mrtr.Client(url, era="modern") as anonymous:
            with pytest.raises(mrtr.ClientError) as refused:
                await anonymous.call_tool("whoami")
        assert refused.value.status == 401
        token = mint(keys["rsa"], iss="http://issuer.test", sub="ada", scope="mcp:read")
        answers = iter([mrtr.accept(name="Ada"), mrtr.accept(colour="red")])
        for era in ("modern", "legacy"):
            headers: dict[str, Any] = {"Authorization": f"Bearer {token}"}
            async with mrtr.Client(url, era=era, headers=headers,
                                   on_elicit=lambda request: next(answers)) as client:
                seen = await client.call_tool("whoami")
                if era == "modern":
                    talked = await client.call_tool("interview", {"topic": "auth"})
                    assert talked.text == "Ada/red/auth"
            assert seen.text == "principal=the-proxy"  # never the caller's token
    finally:
        await verifier.aclose()
