"""A protected server over real HTTP: the native server and the ASGI app (hypercorn), alike.

The identity provider is the loopback one from ``idp.py``; the server verifies tokens
against its JWKS. Every answer is compared in full: status, challenge, body.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from mrtr import Elicit, Form
from mrtr.auth import JWTVerifier, ResourceServer
from mrtr.transports.http.native import serve
from mrtr.server import Server

from ..http.conftest import BASE_HEADERS, decode_reply, mcp_headers, rpc, start_front_end
from .idp import RESOURCE, IdentityProvider, SigningKey, mint

PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
PRM_URL = "http://127.0.0.1:8123" + PRM_PATH
SECRET = base64.b64encode(bytes(range(32))).decode()


def protected_server(idp: IdentityProvider) -> Server:
    verifier = JWTVerifier(jwks_uri=idp.jwks_uri, issuer="http://issuer.test", audience=RESOURCE)
    server = Server("files", "1.0.0", secret=SECRET, auth=ResourceServer(
        verifier, resource=RESOURCE, authorization_servers=["http://issuer.test"],
        scopes_supported=["mcp:read", "files:write"], required_scopes=["mcp:read"], resource_name="Files"))

    @server.tool
    def whoami(ctx) -> str:
        return f"{ctx.auth.subject} via {ctx.auth.client_id} with {' '.join(sorted(ctx.auth.scopes))}"

    @server.tool(scopes=["files:write"])
    def write_file(ctx, path: str) -> str:
        return f"{ctx.auth.subject} wrote {path}"

    @server.tool(scopes=["admin", "files:write"])
    def reset() -> str:
        return "reset"

    @server.tool
    def greet(ctx):
        answer = yield Elicit("Name?", Form().string("name"))
        return f"hello {answer.content['name']}, said {ctx.auth.subject}"

    return server


@dataclass
class Protected:
    kind: str
    client: httpx.AsyncClient
    idp: IdentityProvider
    keys: dict[str, SigningKey]
    server: Server

    def token(self, **claims: Any) -> str:
        return mint(self.keys["rsa"], iss="http://issuer.test", **claims)

    async def call(self, method: str, params: dict[str, Any] | None = None, *, token: str | None = None,
                   headers: dict[str, str] | None = None, id: int = 1) -> Any:
        message = rpc(method, params, id=id)
        sent = {**BASE_HEADERS, **mcp_headers(message), **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        response = await self.client.post("/mcp", content=json.dumps(message).encode(), headers=sent)
        if b'"jsonrpc"' in response.content:  # a JSON-RPC answer; auth refusals are plain OAuth JSON
            return decode_reply(response, message)
        return response


@pytest.fixture(params=["native", "asgi"])
async def protected(request: Any, nursery: trio.Nursery, idp: IdentityProvider,
                    keys: dict[str, SigningKey]) -> AsyncIterator[Protected]:
    server = protected_server(idp)
    port = await start_front_end(request.param, nursery, server)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Protected(request.param, client, idp, keys, server)
    await server.auth.verifier.aclose()  # type: ignore[union-attr]


def challenge(response: httpx.Response) -> str:
    values = response.headers.get_list("www-authenticate")
    assert len(values) == 1, values
    return values[0]


async def test_metadata_document(protected: Protected) -> None:
    response = await protected.client.get(PRM_PATH, headers={"Host": "evil.example"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.json() == {
        "resource": RESOURCE, "authorization_servers": ["http://issuer.test"],
        "scopes_supported": ["mcp:read", "files:write"], "bearer_methods_supported": ["header"],
        "resource_name": "Files",
    }
    preflight = await protected.client.options(PRM_PATH, headers={
        "Origin": "https://anywhere.example", "Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    assert (await protected.client.post(PRM_PATH, content=b"{}")).status_code == 405
    head = await protected.client.head(PRM_PATH)
    assert head.status_code == 200 and head.content == b""


@pytest.mark.parametrize("authorization", [None, "Basic YWxpY2U6c2VjcmV0", "DPoP abc"])
@pytest.mark.parametrize("method", ["server/discover", "tools/list", "tools/call"])
async def test_no_bearer_credentials_get_a_bare_challenge(protected: Protected, authorization: str | None,
                                                          method: str) -> None:
    params = {"name": "whoami"} if method == "tools/call" else None
    response = await protected.call(method, params, headers={"Authorization": authorization} if authorization else {})
    assert response.status_code == 401
    assert challenge(response) == f'Bearer resource_metadata="{PRM_URL}", scope="mcp:read"'
    assert response.content == b""


async def test_token_outside_the_header_is_ignored(protected: Protected) -> None:
    token = protected.token()
    message = rpc("tools/list") | {"access_token": token}
    response = await protected.client.post(f"/mcp?access_token={token}", content=json.dumps(message).encode(),
                                           headers={**BASE_HEADERS, **mcp_headers(message)})
    # the query string does not even reach the endpoint path match; the body token is never read
    assert response.status_code in (401, 404)
    form = await protected.client.post("/mcp", content=json.dumps(rpc("tools/list")).encode(),
                                       headers={**BASE_HEADERS, **mcp_headers(rpc("tools/list")),
                                                "X-Access-Token": token})
    assert form.status_code == 401


async def test_bad_tokens_get_invalid_token(protected: Protected, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cases = {
        "garbage": ("not.a.token", "malformed token"),
        "expired": (protected.token(exp=1), "token expired"),
        "foreign issuer": (mint(protected.keys["rsa"], iss="http://evil.test"), "token issuer not accepted"),
        "foreign audience": (protected.token(aud="https://other.example/mcp"), "token audience not accepted"),
    }
    for name, (token, description) in cases.items():
        response = await protected.call("tools/list", token=token)
        assert response.status_code == 401, name
        assert challenge(response) == (f'Bearer error="invalid_token", error_description="{description}", '
                                       f'resource_metadata="{PRM_URL}", scope="mcp:read"'), name
        assert response.json() == {"error": "invalid_token", "error_description": description}
        assert token not in response.text and token not in caplog.text


async def test_malformed_authorization_is_400(protected: Protected) -> None:
    response = await protected.call("tools/list", headers={"Authorization": "Bearer a b"})
    assert response.status_code == 400
    assert challenge(response).startswith('Bearer error="invalid_request"')


async def test_authenticated_calls_see_the_principal(protected: Protected) -> None:
    reply = await protected.call("tools/call", {"name": "whoami"}, token=protected.token())
    assert reply.status == 200
    assert reply.result["content"][0]["text"] == "alice via client-1 with mcp:read"
    # each POST is authenticated on its own: swap the token, the caller changes
    reply = await protected.call("tools/call", {"name": "whoami"}, token=protected.token(sub="bob"))
    assert reply.result["content"][0]["text"] == "bob via client-1 with mcp:read"


async def test_server_wide_scope_missing_is_403(protected: Protected) -> None:
    response = await protected.call("server/discover", token=protected.token(scope="files:write"))
    assert response.status_code == 403
    assert challenge(response) == ('Bearer error="insufficient_scope", scope="mcp:read", '
                                   'error_description="mcp:read required", '
                                   f'resource_metadata="{PRM_URL}"')


async def test_tool_scopes_403_names_all_of_them(protected: Protected) -> None:
    response = await protected.call("tools/call", {"name": "reset"}, token=protected.token(scope="mcp:read files:write"))
    assert response.status_code == 403
    assert challenge(response) == ('Bearer error="insufficient_scope", scope="admin files:write", '
                                   'error_description="admin files:write required for tools/call reset", '
                                   f'resource_metadata="{PRM_URL}"')
    assert response.json()["error"] == "insufficient_scope"
    reply = await protected.call("tools/call", {"name": "write_file", "arguments": {"path": "a.txt"}},
                                 token=protected.token(scope="mcp:read files:write"))
    assert reply.result["content"][0]["text"] == "alice wrote a.txt"


async def test_tools_list_hides_what_the_caller_cannot_call(protected: Protected) -> None:
    names = lambda reply: [tool["name"] for tool in reply.result["tools"]]  # noqa: E731
    reader = await protected.call("tools/list", token=protected.token())
    assert names(reader) == ["whoami", "greet"]
    assert reader.result["cacheScope"] == "private"
    writer = await protected.call("tools/list", token=protected.token(scope="mcp:read files:write admin"))
    assert names(writer) == ["whoami", "write_file", "reset", "greet"]


async def test_origin_is_checked_before_the_token(protected: Protected) -> None:
    reply = await protected.call("tools/list", headers={"Origin": "https://evil.example"})
    assert reply.status == 403 and reply.error["code"] == -32600  # the transport's refusal, not a challenge
    assert "www-authenticate" not in reply.headers


async def test_token_is_checked_before_mcp_headers(protected: Protected) -> None:
    message = rpc("tools/list")
    response = await protected.client.post("/mcp", content=json.dumps(message).encode(), headers=BASE_HEADERS)
    assert response.status_code == 401  # no MCP headers either, but the token decides first
    authed = await protected.client.post("/mcp", content=json.dumps(message).encode(),
                                         headers={**BASE_HEADERS, "Authorization": f"Bearer {protected.token()}"})
    assert authed.status_code == 400 and authed.json()["error"]["code"] == -32020


async def test_jwks_down_is_503_not_invalid_token(protected: Protected) -> None:
    protected.idp.mode = "500"
    response = await protected.call("tools/list", token=protected.token())
    assert response.status_code == 503
    assert "www-authenticate" not in response.headers
    assert "invalid_token" not in response.text


async def test_mrtr_conversation_under_auth_and_replay_by_another_caller(protected: Protected) -> None:
    alice = protected.token()
    first = await protected.call("tools/call", {"name": "greet"}, token=alice)
    assert first.result["resultType"] == "input_required"
    (key, _), = first.result["inputRequests"].items()
    retry = {"name": "greet", "requestState": first.result["requestState"],
             "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}}
    stolen = await protected.call("tools/call", retry, token=protected.token(sub="mallory"), id=2)
    assert stolen.status == 400 and stolen.error["code"] == -32602
    other_client = await protected.call("tools/call", retry, token=protected.token(client_id="client-2"), id=3)
    assert other_client.error["code"] == -32602
    done = await protected.call("tools/call", retry, token=protected.token(), id=4)  # a fresh token, still alice
    assert done.result["content"][0]["text"] == "hello Ada, said alice"


async def test_a_browser_client_can_read_the_challenge(protected: Protected) -> None:
    response = await protected.call("tools/list", headers={"Origin": "http://localhost:5173"})
    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert response.headers["access-control-expose-headers"] == "WWW-Authenticate"
    # the preflight itself carries no credentials, so it is answered before authentication
    preflight = await protected.client.options("/mcp", headers={
        "Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204
    assert "authorization" in preflight.headers["access-control-allow-headers"]


async def test_behind_a_proxy_the_metadata_answers_at_both_paths(nursery: trio.Nursery, idp: IdentityProvider,
                                                                  keys: dict[str, SigningKey]) -> None:
    public = "https://gateway.example/team/mcp"
    verifier = JWTVerifier(jwks_uri=idp.jwks_uri, issuer="http://issuer.test", audience=public)
    server = Server("files", secret=SECRET, auth=ResourceServer(
        verifier, resource=public, authorization_servers=["http://issuer.test"]))
    server.tool(lambda: "ok", name="ping_tool")
    port = await nursery.start(partial(serve, server, "127.0.0.1", 0))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        for path in ("/.well-known/oauth-protected-resource/team/mcp", PRM_PATH):
            response = await client.get(path)
            assert response.status_code == 200 and response.json()["resource"] == public
        message = rpc("tools/call", {"name": "ping_tool"})
        token = mint(keys["p256"], iss="http://issuer.test", aud=public)
        answer = await client.post("/mcp", content=json.dumps(message).encode(), headers={
            **BASE_HEADERS, **mcp_headers(message), "Authorization": f"Bearer {token}"})
        assert answer.json()["result"]["content"] == [{"type": "text", "text": "ok"}]
        refused = await client.post("/mcp", content=json.dumps(message).encode(),
                                    headers={**BASE_HEADERS, **mcp_headers(message)})
        assert ('resource_metadata="https://gateway.example/.well-known/oauth-protected-resource/team/mcp"'
                in refused.headers["www-authenticate"])
    await verifier.aclose()


async def test_a_whole_conversation_under_auth_through_mrtr_client(protected: Protected) -> None:
    import mrtr

    url = str(protected.client.base_url.join("/mcp"))
    asked: list[str] = []

    def answer(request: Any) -> dict[str, Any]:
        asked.append(request.message)
        return mrtr.accept(name="Ada")

    alice = {"Authorization": f"Bearer {protected.token()}"}
    async with mrtr.Client(url, headers=alice, on_elicit=answer) as client:
        assert {tool["name"] for tool in await client.list_tools()} == {"whoami", "greet"}  # no files:write
        result = await client.call_tool("greet")
    assert (result.text, asked) == ("hello Ada, said alice", ["Name?"])

    async with mrtr.Client(url, on_elicit=answer) as anonymous:
        with pytest.raises(mrtr.ClientError) as refused:
            await anonymous.call_tool("greet")
    assert refused.value.status == 401
