"""mrtr.Client(auth=...) against a protected server nobody here wrote: the official Python SDK 2.3 ``MCPServer``.

The SDK server (``sdk_auth_server.py``, in ``.cache/interop-venv``) publishes its protected
resource metadata and challenges with 401; the loopback provider (``tests/auth/idp.py``)
is the authorization server, approving at once. The client discovers both, registers,
runs the authorization code grant with PKCE through its loopback redirect (the
"browser" here follows the provider's redirect to it), stores the tokens owner-only,
refreshes them, and never shows a token to anyone but the MCP server.
"""

from __future__ import annotations

import logging
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import mrtr
from mrtr.client.oauth import AuthorizationCode, ClientCredentials
from mrtr.client.tokens import FileTokenStore, MemoryTokenStore

from ..auth.idp import AuthorizationServer, IdentityProvider, approve_in_browser, make_key
from ..conftest import until
from .test_interop import _clean_env, interop_python  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.slow  # starts processes (tests/conftest.py: the tiers)

HERE = Path(__file__).resolve().parent


@pytest.fixture
async def protected(nursery: trio.Nursery, interop_python: Path, tmp_path: Path) -> Any:  # noqa: F811
    """The provider (as authorization server) and the SDK server it protects; yields ``(url, provider)``."""
    provider = IdentityProvider(keys=[make_key("rsa", "as-1")], authorization=AuthorizationServer())
    await provider.serve(nursery)
    pem = tmp_path / "issuer.pem"
    pem.write_bytes(provider.keys[0].public_pem())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    provider.authorization.resource = url  # type: ignore[union-attr]
    process = await trio.lowlevel.open_process(
        [str(interop_python), str(HERE / "sdk_auth_server.py"), str(port), provider.base, str(pem)],
        env=_clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def answering() -> bool:
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
                        ).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        await until(answering, timeout=30)
        yield url, provider
    finally:
        process.kill()
        await process.wait()


def _bearers_seen(provider: IdentityProvider) -> list[str]:
    assert provider.authorization is not None
    return [entry["path"] for entry in provider.authorization.seen
            if entry["headers"].get("authorization", "").lower().startswith("bearer")]


async def test_the_authorization_code_grant_end_to_end(protected, tmp_path: Path, caplog):
    url, provider = protected
    authorization = provider.authorization
    store = FileTokenStore(tmp_path / "tokens")
    caplog.set_level(logging.DEBUG)
    async with mrtr.Client(url, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        assert (await client.call_tool("whoami")).text == "client client-1 with mcp:read offline_access"
    paths = [entry["path"] for entry in authorization.seen]
    assert paths == ["/.well-known/oauth-authorization-server", "/register", "/authorize", "/token"]
    registered, asked, traded = authorization.seen[1], authorization.seen[2], authorization.seen[3]
    assert asked["form"]["code_challenge_method"] == "S256" and asked["form"]["resource"] == url
    assert asked["form"]["redirect_uri"].startswith("http://127.0.0.1:")
    assert traded["form"]["code_verifier"] and traded["form"]["resource"] == url
    assert "offline_access" in asked["form"]["scope"].split() and "mcp:read" in asked["form"]["scope"].split()
    assert _bearers_seen(provider) == []  # no token ever went to the authorization server
    # Kept owner-only, and never in a log line.
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    (saved,) = list(store.directory.iterdir())
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    record = store.load(url)
    assert record is not None
    secrets_kept = [record["tokens"]["access_token"], record["tokens"]["refresh_token"]]
    assert not [line for line in caplog.text.splitlines() if any(secret in line for secret in secrets_kept)]
    # A later client (a later process) finds the tokens and authorizes nothing.
    async with mrtr.Client(url, auth=AuthorizationCode(open_url=approve_in_browser, store=FileTokenStore(store.directory))) \
            as again:
        assert (await again.call_tool("whoami")).text.startswith("client client-1")
    assert len(authorization.seen) == 4


async def test_an_expiring_token_is_refreshed(protected):
    url, provider = protected
    provider.authorization.token_ttl = 29  # inside the client's 30 s margin: due for refresh at every use
    store = MemoryTokenStore()
    async with mrtr.Client(url, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        await client.call_tool("whoami")
        first = store.load(url)["tokens"]["access_token"]
        assert (await client.call_tool("whoami")).text.startswith("client client-1")
        assert store.load(url)["tokens"]["access_token"] != first
    assert provider.authorization.grants.count("refresh_token") >= 1
    assert [entry["path"] for entry in provider.authorization.seen].count("/authorize") == 1


async def test_a_refused_token_is_replaced(protected):
    url, provider = protected
    store = MemoryTokenStore()
    async with mrtr.Client(url, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        await client.call_tool("whoami")
        record = store.load(url)
        record["tokens"]["access_token"] = "not-a-token"  # revoked, say: the server answers 401
        store.save(url, record)
        assert (await client.call_tool("whoami")).text.startswith("client client-1")
    assert provider.authorization.grants == ["authorization_code", "refresh_token"]


async def test_client_credentials_for_a_program(protected):
    url, provider = protected
    provider.authorization.clients["reporter"] = {"secret": "s3cret", "redirect_uris": [], "method": "basic"}
    auth = ClientCredentials("reporter", client_secret="s3cret", issuer=provider.base, store=MemoryTokenStore(),
                             scopes=["mcp:read"])
    async with mrtr.Client(url, auth=auth) as client:
        assert (await client.call_tool("whoami")).text == "client reporter with mcp:read"
    (token_request,) = [entry for entry in provider.authorization.seen if entry["path"] == "/token"]
    assert token_request["form"]["grant_type"] == "client_credentials" and token_request["form"]["resource"] == url
    assert token_request["headers"]["authorization"].startswith("Basic ")
    wrong = ClientCredentials("reporter", client_secret="guess", issuer=provider.base, store=MemoryTokenStore())
    async with mrtr.Client(url, auth=wrong) as client:
        with pytest.raises(mrtr.ClientError, match="token endpoint refused"):
            await client.call_tool("whoami")


async def test_without_auth_the_challenge_is_a_clear_error(protected):
    url, _ = protected
    async with mrtr.Client(url) as client:
        with pytest.raises(mrtr.ClientError) as refused:
            await client.call_tool("whoami")
    assert refused.value.status == 401
