"""ResourceServer: the metadata document, bearer parsing, scope decisions and exact challenges."""

from __future__ import annotations

import json
import time

import pytest

from mrtr.auth import (
    AccessToken,
    AuthError,
    InsufficientScope,
    MalformedAuthorization,
    InvalidToken,
    JWTVerifier,
    ResourceServer,
    VerifierUnavailable,
    canonical_url,
    metadata_path,
    prefix_scopes,
    quote,
)

from .idp import RESOURCE, SigningKey, mint

ISSUER = "http://issuer.test"


class Table:
    """A verifier over a fixed table: the API-key style a service-to-service deployment uses."""

    def __init__(self, tokens: dict[str, AccessToken], broken: bool = False) -> None:
        self.tokens = tokens
        self.broken = broken

    async def verify(self, token: str) -> AccessToken:
        if self.broken:
            raise ConnectionError("database down")
        try:
            return self.tokens[token]
        except KeyError:
            raise InvalidToken("unknown API key") from None


ALICE = AccessToken(subject="alice", client_id="c1", issuer=ISSUER, scopes=frozenset({"mcp:read"}))


def resource_server(**options: object) -> ResourceServer:
    config: dict = {"resource": "https://MCP.example.com:443/mcp/", "authorization_servers": ["https://auth.example.com"],
                    "scopes_supported": ["mcp:read", "files:write"], "required_scopes": ["mcp:read"]}
    config.update(options)
    return ResourceServer(Table({"alice-key": ALICE}), **config)


def header(reply_headers: tuple[tuple[bytes, bytes], ...], name: bytes) -> str | None:
    values = [v.decode() for k, v in reply_headers if k == name]
    assert len(values) <= 1
    return values[0] if values else None


def test_urls_are_canonical_and_path_inserted() -> None:
    assert canonical_url("HTTPS://MCP.Example.COM:443/mcp/#frag") == "https://mcp.example.com/mcp"
    assert canonical_url("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert metadata_path("https://mcp.example.com/mcp") == "/.well-known/oauth-protected-resource/mcp"
    assert metadata_path("https://mcp.example.com") == "/.well-known/oauth-protected-resource"
    for bad in ("mcp.example.com/mcp", "ftp://x/y", "https://user:pw@x/mcp"):
        with pytest.raises(ValueError):
            canonical_url(bad)


def test_metadata_document_comes_from_configuration() -> None:
    rs = resource_server(resource_name="Files")
    reply = rs.metadata_reply("GET")
    assert reply.status == 200
    assert header(reply.headers, b"content-type") == "application/json"
    assert header(reply.headers, b"access-control-allow-origin") == "*"
    assert json.loads(reply.body) == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "scopes_supported": ["mcp:read", "files:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Files",
    }
    assert rs.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    assert rs.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    preflight = rs.metadata_reply("OPTIONS")
    assert preflight.status == 204 and "GET" in (header(preflight.headers, b"access-control-allow-methods") or "")
    assert rs.metadata_reply("POST").status == 405


@pytest.mark.parametrize("options", [
    {"authorization_servers": []},
    {"authorization_servers": "https://auth.example.com"},
    {"scopes_supported": ["mcp:read", "offline_access"]},
    {"resource": "https://mcp.example.com/mcp?tenant=1"},
])
def test_bad_configuration_is_refused(options: dict) -> None:
    with pytest.raises(ValueError):
        resource_server(**options)


async def test_no_credentials_or_other_scheme_is_a_bare_challenge() -> None:
    rs = resource_server()
    for authorization in ([], ["Basic YWxpY2U6c2VjcmV0"], ["DPoP abc"], ["Bearer"]):
        if authorization == ["Bearer"]:
            continue
        with pytest.raises(AuthError) as caught:
            await rs.authenticate(authorization)
        reply = rs.challenge(caught.value)
        assert reply.status == 401 and reply.body == b""
        assert header(reply.headers, b"www-authenticate") == (
            'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", '
            'scope="mcp:read"')


@pytest.mark.parametrize("authorization", [["Bearer"], ["Bearer  "], ["Bearer a b"], ["Bearer a", "Bearer b"],
                                           ["Bearer tok\"en"]])
async def test_malformed_bearer_is_invalid_request(authorization: list[str]) -> None:
    rs = resource_server()
    with pytest.raises(MalformedAuthorization) as caught:
        await rs.authenticate(authorization)
    reply = rs.challenge(caught.value)
    assert reply.status == 400
    assert (header(reply.headers, b"www-authenticate") or "").startswith('Bearer error="invalid_request"')


async def test_scheme_is_case_insensitive_and_principal_is_returned() -> None:
    assert await resource_server().authenticate(["bearer alice-key"]) is ALICE
    assert await resource_server().authenticate(["BEARER alice-key"]) is ALICE


async def test_invalid_token_challenge_is_exact() -> None:
    rs = resource_server()
    with pytest.raises(InvalidToken) as caught:
        await rs.authenticate(["Bearer mallory-key"])
    reply = rs.challenge(caught.value)
    assert reply.status == 401
    assert header(reply.headers, b"www-authenticate") == (
        'Bearer error="invalid_token", error_description="unknown API key", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:read"')
    assert json.loads(reply.body) == {"error": "invalid_token", "error_description": "unknown API key"}
    assert b"mallory-key" not in reply.body


async def test_required_scopes_missing_is_403_naming_them() -> None:
    rs = resource_server(required_scopes=["mcp:read", "mcp:use"])
    with pytest.raises(InsufficientScope) as caught:
        await rs.authenticate(["Bearer alice-key"])
    reply = rs.challenge(caught.value)
    assert reply.status == 403
    assert header(reply.headers, b"www-authenticate") == (
        'Bearer error="insufficient_scope", scope="mcp:read mcp:use", error_description="mcp:read mcp:use required", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"')


def test_per_operation_scopes_and_hierarchy() -> None:
    rs = resource_server()
    writer = AccessToken(subject="w", client_id="c", issuer=ISSUER, scopes=frozenset({"mcp:read", "files"}))
    with pytest.raises(InsufficientScope) as caught:
        rs.authorize(writer, ["files:write", "mcp:read"], "tools/call write_file")
    assert caught.value.scopes == ("files:write", "mcp:read")  # every scope it needs, granted or not
    assert caught.value.description == "files:write mcp:read required for tools/call write_file"
    hierarchical = resource_server(scope_rule=prefix_scopes())
    hierarchical.authorize(writer, ["files:write", "files:read:meta"], "tools/call write_file")
    with pytest.raises(InsufficientScope):
        hierarchical.authorize(writer, ["filesystem"], "x")
    rs.authorize(writer, [], "tools/list")


def test_verifier_scope_rule_is_used(keys: dict[str, SigningKey]) -> None:
    verifier = JWTVerifier(public_key=keys["rsa"].public_pem(), issuer=ISSUER, audience=RESOURCE,
                           scope_rule=prefix_scopes("."))
    rs = ResourceServer(verifier, resource=RESOURCE, authorization_servers=[ISSUER])
    rs.authorize(AccessToken(subject="s", client_id=None, issuer=ISSUER, scopes=frozenset({"files"})), ["files.write"])


async def test_verifier_failure_is_503_without_challenge() -> None:
    rs = ResourceServer(Table({}, broken=True), resource=RESOURCE, authorization_servers=[ISSUER])
    with pytest.raises(VerifierUnavailable) as caught:
        await rs.authenticate(["Bearer something"])
    reply = rs.challenge(caught.value)
    assert reply.status == 503
    assert header(reply.headers, b"www-authenticate") is None
    assert b"invalid_token" not in reply.body


def test_quoted_values_are_escaped_and_cannot_split_the_header() -> None:
    assert quote('a "b" \\c') == '"a \\"b\\" \\\\c"'
    assert quote("line\r\nInjected: yes") == '"lineInjected: yes"'
    rs = resource_server()
    reply = rs.challenge(InvalidToken('bad "quote" \\ and\r\nX-Evil: 1'))
    value = header(reply.headers, b"www-authenticate") or ""
    assert 'error_description="bad \\"quote\\" \\\\ andX-Evil: 1"' in value
    assert "\r" not in value and "\n" not in value


async def test_real_jwt_through_the_resource_server(keys: dict[str, SigningKey]) -> None:
    verifier = JWTVerifier(public_key=keys["ed25519"].public_jwk(), issuer=ISSUER, audience=RESOURCE)
    rs = ResourceServer(verifier, resource=RESOURCE, authorization_servers=[ISSUER], required_scopes=["mcp:read"])
    alice = await rs.authenticate([f"Bearer {mint(keys['ed25519'])}"])
    mallory = await rs.authenticate([f"Bearer {mint(keys['ed25519'], sub='mallory')}"])
    assert alice.principal != mallory.principal
    assert json.loads(alice.principal) == [ISSUER, "alice", "client-1"]
    expired = mint(keys["ed25519"], exp=int(time.time()) - 3600)
    with pytest.raises(InvalidToken) as caught:
        await rs.authenticate([f"Bearer {expired}"])
    assert 'error_description="token expired"' in (header(rs.challenge(caught.value).headers, b"www-authenticate") or "")
