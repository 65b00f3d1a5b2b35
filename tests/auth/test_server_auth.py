"""The server side of auth without HTTP: stdio refuses it, in-process callers pass a token."""

from __future__ import annotations

import base64

import pytest

from mrtr.auth import AccessToken, InvalidToken, ResourceServer
from mrtr.server import Server
from mrtr.transports.stdio import run_stdio, serve_stdio

from ..conftest import meta

META = meta()


class Keys:
    async def verify(self, token: str) -> AccessToken:
        raise InvalidToken("unknown API key")


def server(**options: object) -> Server:
    rs = ResourceServer(Keys(), resource="https://mcp.example.com/mcp", authorization_servers=["https://as.example"])
    built = Server("s", auth=rs, secret=base64.b64encode(bytes(32)).decode(), **options)  # type: ignore[arg-type]

    @built.tool(scopes=["files:write"])
    def write(ctx) -> str:
        return ctx.principal

    @built.tool
    def who(ctx) -> str:
        return ctx.principal

    return built


async def test_stdio_refuses_a_protected_server() -> None:
    with pytest.raises(ValueError, match="stdio"):
        await serve_stdio(server())
    with pytest.raises(ValueError, match="stdio"):
        run_stdio(server())


async def test_protected_server_refuses_an_unauthenticated_dispatch() -> None:
    response = await server().handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
    assert response["error"]["code"] == -32600


async def test_in_process_token_scopes_principal_and_cache_scope() -> None:
    s = server()
    alice = AccessToken(subject="alice", client_id="c", issuer="https://as.example", scopes=frozenset())
    listed = await s.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}, auth=alice)
    assert [t["name"] for t in listed["result"]["tools"]] == ["who"]
    assert listed["result"]["cacheScope"] == "private"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write", "_meta": META}}
    assert (await s.handle(call, auth=alice))["error"]["code"] == -32600
    who = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "who", "_meta": META}}
    text = (await s.handle(who, auth=alice))["result"]["content"][0]["text"]
    assert text == alice.principal
    assert server(principal=lambda info: "own").cache_scope == "private"
    assert server(cache_scope="public").cache_scope == "public"


def test_scopes_must_be_scope_tokens() -> None:
    s = Server("s")
    with pytest.raises(ValueError):
        s.tool(scopes=["has space"])(lambda: None)
    with pytest.raises(TypeError):
        s.tool(scopes="files:write")(lambda: None)  # type: ignore[arg-type]
