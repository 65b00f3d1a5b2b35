"""The OAuth client against mrtr's own protected server and the loopback authorization server, and against liars.

The server is real (``mrtr.auth.ResourceServer`` with a JWT verifier, served by the native
HTTP server on loopback); so is the authorization server (``tests/auth/idp.py``), which
approves at once. What is checked: step-up on a 403 with the scopes had and the scopes
challenged, the limit on step-ups, and that a lying party (an authorization server
that redirects forever, names another issuer, answers for another issuer; a resource
whose metadata names another server; an MCP server that redirects elsewhere) gets a
clear error, in bounded time, and never a token.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

import mrtr
from mrtr import Server
from mrtr.auth import JWTVerifier, ResourceServer
from mrtr.client.oauth import AuthorizationCode, AuthorizationError, parse_challenge
from mrtr.client.tokens import FileTokenStore, MemoryTokenStore
from mrtr.transports.http.native import serve

from ..auth.idp import AuthorizationServer, IdentityProvider, approve_in_browser, make_key
from .hostile import head, serve_http

REPO = Path(__file__).resolve().parents[2]
GUARD = 20


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def provider(nursery: trio.Nursery) -> IdentityProvider:
    made = IdentityProvider(keys=[make_key("rsa", "as-1")], authorization=AuthorizationServer())
    await made.serve(nursery)
    return made


@pytest.fixture
async def protected(nursery: trio.Nursery, provider: IdentityProvider) -> str:
    """mrtr's own server behind OAuth: ``read`` needs ``mcp:read``, ``write`` ``mcp:write`` too."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    assert provider.authorization is not None
    provider.authorization.resource = url
    server = Server("protected", auth=ResourceServer(
        JWTVerifier(jwks_uri=provider.jwks_uri, issuer=provider.base, audience=url),
        resource=url, authorization_servers=[provider.base], required_scopes=["mcp:read"],
        scopes_supported=["mcp:read", "mcp:write", "mcp:admin"]))

    @server.tool
    def read() -> str:
        return "read ok"

    @server.tool(scopes=["mcp:write"])
    def write() -> str:
        return "write ok"

    @server.tool(scopes=["mcp:admin"])
    def admin() -> str:
        return "admin ok"

    await nursery.start(partial(serve, server, "127.0.0.1", port))
    return url


def _seen(provider: IdentityProvider, path: str) -> list[dict[str, Any]]:
    assert provider.authorization is not None
    return [entry for entry in provider.authorization.seen if entry["path"] == path]


async def test_step_up_asks_for_the_scopes_had_and_the_scopes_challenged(protected, provider):
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=MemoryTokenStore())) as client:
        assert (await client.call_tool("read")).text == "read ok"
        assert (await client.call_tool("write")).text == "write ok"
    first, second = (set(entry["form"]["scope"].split()) for entry in _seen(provider, "/authorize"))
    assert {"mcp:read", "offline_access"} <= first and "mcp:write" not in first
    assert first | {"mcp:write"} <= second


async def test_step_up_is_limited(protected, provider):
    provider.authorization.grantable = frozenset({"mcp:read", "offline_access"})  # never mcp:admin
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=MemoryTokenStore())) as client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.ClientError) as refused:
            await client.call_tool("admin")
    assert refused.value.status == 403
    assert len(_seen(provider, "/authorize")) <= 3


@pytest.mark.parametrize("mode, message", [
    ("redirect-loop", "no authorization server metadata"),
    ("other-issuer", "names the issuer"),
    ("wrong-iss", "names another issuer"),
    ("huge", "more than 262144 bytes"),
])
async def test_a_lying_authorization_server_gets_no_code_and_no_token(protected, provider, mode, message):
    provider.authorization.mode = mode
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=MemoryTokenStore())) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError, match=message):
            await client.call_tool("read")
    assert _seen(provider, "/token") == []  # the code (if any) went nowhere
    assert len(provider.authorization.seen) < 10  # a redirect loop is not followed


async def _metadata_server(nursery: trio.Nursery, resource: str, authorization_server: str) -> str:
    """An endpoint that challenges every POST and serves metadata naming ``resource``; returns its URL."""
    document = json.dumps({"resource": resource, "authorization_servers": [authorization_server]}).encode()

    async def respond(message: dict[str, Any], stream: trio.SocketStream) -> None:
        raise AssertionError("unreachable")

    received: list[bytes] = []

    async def connection(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            received.append(data)
            if data.startswith(b"GET /.well-known/oauth-protected-resource"):
                await stream.send_all(head(200, Content_Length=str(len(document))) + document)
            else:
                await stream.send_all(head(401, WWW_Authenticate='Bearer scope="mcp:read"', Content_Length="0"))

    listeners = await nursery.start(partial(trio.serve_tcp, connection, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"


async def test_metadata_for_another_resource_is_refused(nursery, provider):
    url = await _metadata_server(nursery, "https://evil.example/mcp", provider.base)
    async with mrtr.Client(url, auth=AuthorizationCode(open_url=approve_in_browser, store=MemoryTokenStore())) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError, match="not for"):
            await client.call_tool("read")
    assert _seen(provider, "/authorize") == []


async def test_a_token_never_follows_a_redirect_elsewhere(nursery, protected, provider):
    store = MemoryTokenStore()
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        await client.call_tool("read")
    token = store.load(protected)["tokens"]["access_token"]
    stolen: list[bytes] = []

    async def thief(message: dict[str, Any], stream: trio.SocketStream) -> None:
        stolen.append(json.dumps(message).encode())

    elsewhere = await serve_http(nursery, thief)

    async def redirect(message: dict[str, Any], stream: trio.SocketStream) -> None:
        await stream.send_all(head(307, Location=elsewhere, Content_Length="0"))

    moved = await serve_http(nursery, redirect)
    store.save(moved, store.load(protected))  # the same tokens, kept for an endpoint that redirects
    async with mrtr.Client(moved, auth=AuthorizationCode(open_url=approve_in_browser, store=store), era="modern") as client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.ClientError):
            await client.call_tool("read")
    assert stolen == []
    assert all(token not in json.dumps(entry) for entry in provider.authorization.seen)


def test_challenges_are_parsed():
    assert parse_challenge('Bearer resource_metadata="https://a/x", scope="a b"') == {
        "resource_metadata": "https://a/x", "scope": "a b"}
    assert parse_challenge('DPoP algs="ES256", Bearer error="insufficient_scope", scope="w"') == {
        "error": "insufficient_scope", "scope": "w"}
    assert parse_challenge('Bearer realm="x\\"y"')["realm"] == 'x"y'
    assert parse_challenge("Basic realm=x") == {}
    assert parse_challenge("") == {}


def test_the_file_store_is_owner_only(tmp_path: Path):
    store = FileTokenStore(tmp_path / "t")
    store.save("http://127.0.0.1:1/mcp", {"tokens": {"access_token": "a"}})
    assert stat.S_IMODE((tmp_path / "t").stat().st_mode) == 0o700
    (path,) = (tmp_path / "t").iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.load("HTTP://127.0.0.1:1/mcp/") == {"tokens": {"access_token": "a"}}  # the canonical URL keys it
    path.chmod(0o644)
    with pytest.raises(PermissionError):
        store.load("http://127.0.0.1:1/mcp")
    assert store.delete("http://127.0.0.1:1/mcp") and not store.delete("http://127.0.0.1:1/mcp")
    assert "access_token" not in repr(store)


@pytest.mark.slow
async def test_mrtr_call_authorizes_in_the_browser_and_logout_forgets(protected, provider, tmp_path: Path):
    tokens = tmp_path / "tokens"
    env = {**os.environ, "MRTR_TOKENS": str(tokens),
           "BROWSER": f"{sys.executable} {REPO / 'tests' / 'client' / 'follow_redirects.py'} %s"}
    done = await trio.run_process([sys.executable, "-m", "mrtr", "call", protected, "read"], env=env, cwd=REPO,
                                  capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "read ok"
    assert "Open this address to authorize: http://127.0.0.1:" in done.stderr.decode()
    (kept,) = tokens.iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    again = await trio.run_process([sys.executable, "-m", "mrtr", "call", protected, "read"], env=env, cwd=REPO,
                                   capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and "Open this address" not in again.stderr.decode()  # the kept token served
    logout = await trio.run_process([sys.executable, "-m", "mrtr", "logout", protected], env=env, cwd=REPO,
                                    capture_stderr=True, check=False)
    assert logout.returncode == 0 and b"forgot the tokens" in logout.stderr
    assert list(tokens.iterdir()) == []
