"""The OAuth client against hostile MCP and authorization servers: what it sends, keeps and says.

Everything here is real HTTP on loopback: mrtr's own protected server, the loopback
authorization server of ``tests/auth/idp.py`` as the one a credential was registered with,
a second one on another origin as the attacker's, and a hostile MCP endpoint whose
protected resource metadata names whichever authorization server the test wants.

- A confidential credential (a client secret, a private key) is bound to its issuer: it
  cannot be given without one, and it reaches no other authorization server, whatever
  the MCP server names (``ClientCredentials`` as docs/client.md shows it, and ``mrtr call``).
- A document nested far past any recursion limit, from wherever it comes on the way to a
  token, is an ``AuthorizationError``, never a ``RecursionError``.
- An access token that is no RFC 6750 ``b64token`` is never kept, never sent, and never
  printed.
"""

from __future__ import annotations

import json
import logging
import os
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
from mrtr.client.oauth import AuthorizationCode, AuthorizationError, ClientCredentials
from mrtr.client.tokens import MemoryTokenStore
from mrtr.transports.http.native import serve

from ..auth.idp import AuthorizationServer, IdentityProvider, approve_in_browser, deeply_nested, make_key
from .hostile import head
from .test_oauth import GUARD, _free_port, protected, provider  # noqa: F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret-for-one-issuer"
REPORTER = {"secret": SECRET, "redirect_uris": [], "method": "client_secret_basic"}


def _private_key() -> str:
    from cryptography.hazmat.primitives import serialization

    key = make_key("p256", "client-key").private
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _credential(method: str) -> dict[str, Any]:
    """The keyword arguments of ``ClientCredentials`` for one way of authenticating."""
    if method == "private_key_jwt":
        return {"private_key": _private_key()}
    return {"client_secret": SECRET, "token_endpoint_auth_method": method}


async def _attacker(nursery: trio.Nursery) -> IdentityProvider:
    """An authorization server on another origin, recording every request that reaches it."""
    made = IdentityProvider(keys=[make_key("p256", "evil")], authorization=AuthorizationServer())
    await made.serve(nursery)
    return made


def _credentials_seen(provider: IdentityProvider) -> list[dict[str, Any]]:
    """The requests that reached ``provider`` carrying a client credential of any kind."""
    assert provider.authorization is not None
    return [entry for entry in provider.authorization.seen
            if "authorization" in entry["headers"] or SECRET in json.dumps(entry)
            or {"client_secret", "client_assertion"} & set(entry["form"])]


async def _hostile_resource(nursery: trio.Nursery, servers: list[str], document: bytes | None = None) -> str:
    """An MCP endpoint that challenges every POST; its metadata names itself and ``servers`` (or is ``document``)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    body = document if document is not None else json.dumps(
        {"resource": url, "authorization_servers": servers}).encode()

    async def connection(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                data += chunk
            if data.startswith(b"GET /.well-known/oauth-protected-resource"):
                await stream.send_all(head(200, Content_Length=str(len(body))) + body)
            else:
                await stream.send_all(head(401, WWW_Authenticate='Bearer scope="mcp:read"', Content_Length="0"))

    await nursery.start(partial(trio.serve_tcp, connection, port, host="127.0.0.1"))
    return url


# -- a confidential credential is bound to its issuer ------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: ClientCredentials("reporter", client_secret=SECRET),  # as docs/client.md showed it
    lambda: ClientCredentials("reporter", client_secret=SECRET, token_endpoint_auth_method="client_secret_post"),
    lambda: ClientCredentials("reporter", private_key=_private_key()),
    lambda: AuthorizationCode(client_id="reporter", client_secret=SECRET),
], ids=["basic", "post", "private_key_jwt", "authorization_code"])
def test_a_confidential_credential_cannot_be_given_without_its_issuer(make):
    with pytest.raises(ValueError, match="issuer=") as refused:
        make()
    assert SECRET not in str(refused.value)


def test_the_issuer_of_a_credential_is_an_https_url():
    with pytest.raises(ValueError, match="plain http"):
        ClientCredentials("reporter", client_secret=SECRET, issuer="http://auth.example.com")
    with pytest.raises(ValueError, match="not an absolute URL"):
        ClientCredentials("reporter", client_secret=SECRET, issuer="auth.example.com")
    assert ClientCredentials("reporter", client_secret=SECRET, issuer="https://auth.example.com").issuer \
        == "https://auth.example.com"


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "private_key_jwt"])
async def test_a_credential_never_reaches_the_authorization_server_a_hostile_server_names(nursery, provider, method):
    """The hostile server's metadata names an authorization server on another origin: it hears nothing at all."""
    evil = await _attacker(nursery)
    url = await _hostile_resource(nursery, [evil.base])
    auth = ClientCredentials("reporter", issuer=provider.base, store=MemoryTokenStore(), **_credential(method))
    async with mrtr.Client(url, auth=auth) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError) as refused:
            await client.call_tool("read")
    assert evil.authorization.seen == []  # not even its metadata was asked for
    assert provider.authorization.seen == []
    message = str(refused.value)
    assert evil.base in message and provider.base in message and "registered with" in message
    assert SECRET not in message


async def test_a_client_bound_to_an_issuer_asks_no_other(nursery, provider):
    """``issuer=`` without a client id: the client registers itself, with that authorization server only."""
    evil = await _attacker(nursery)
    url = await _hostile_resource(nursery, [evil.base])
    async with mrtr.Client(url, auth=AuthorizationCode(issuer=provider.base, open_url=approve_in_browser,
                                                       store=MemoryTokenStore())) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError, match="the one this client is bound to"):
            await client.call_tool("read")
    assert evil.authorization.seen == [] and provider.authorization.seen == []


@pytest.fixture
async def listed_second(nursery: trio.Nursery, provider: IdentityProvider) -> tuple[str, IdentityProvider]:
    """mrtr's protected server naming two authorization servers: the attacker's first, the credential's second."""
    evil = await _attacker(nursery)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    assert provider.authorization is not None
    provider.authorization.resource = url
    provider.authorization.clients["reporter"] = dict(REPORTER)
    server = Server("protected", auth=ResourceServer(
        JWTVerifier(jwks_uri=provider.jwks_uri, issuer=provider.base, audience=url), resource=url,
        authorization_servers=[evil.base, provider.base], required_scopes=["mcp:read"],
        scopes_supported=["mcp:read"]))

    @server.tool
    def read() -> str:
        return "read ok"

    await nursery.start(partial(serve, server, "127.0.0.1", port))
    return url, evil


async def test_the_credentials_own_issuer_is_chosen_among_those_listed(listed_second, provider):
    url, evil = listed_second
    auth = ClientCredentials("reporter", client_secret=SECRET, issuer=provider.base, store=MemoryTokenStore(),
                             scopes=["mcp:read"])
    async with mrtr.Client(url, auth=auth) as client:
        with trio.fail_after(GUARD):
            assert (await client.call_tool("read")).text == "read ok"
    assert evil.authorization.seen == []
    (token_request,) = [entry for entry in provider.authorization.seen if entry["path"] == "/token"]
    assert token_request["headers"]["authorization"].startswith("Basic ")


async def _run_call(*arguments: str, env: dict[str, str] | None = None) -> Any:
    """``mrtr call`` in a process, with a browser whose person approves (tests/client/follow_redirects.py)."""
    browser = f"{sys.executable} {REPO / 'tests' / 'client' / 'follow_redirects.py'} %s"
    with trio.fail_after(GUARD * 3):
        return await trio.run_process([sys.executable, "-m", "mrtr", "call", *arguments], cwd=REPO, capture_stdout=True,
                                capture_stderr=True, check=False, stdin=subprocess.DEVNULL,
                                env={**os.environ, "MRTR_CLIENT_SECRET": "", "BROWSER": browser, **(env or {})})


@pytest.mark.slow
async def test_mrtr_call_binds_a_client_secret_to_its_issuer(nursery, protected, provider, tmp_path):
    provider.authorization.clients["reporter"] = dict(REPORTER)
    evil = await _attacker(nursery)
    hostile = await _hostile_resource(nursery, [evil.base])
    env = {"MRTR_TOKENS": str(tmp_path / "tokens")}
    given = ["--client-id", "reporter", "--client-secret", SECRET]
    # Without --issuer the secret could go anywhere: a usage error, before any request.
    for secret in (given, ["--client-id", "reporter"]):
        unbound = await _run_call(hostile, "read", *secret, env={**env, "MRTR_CLIENT_SECRET": SECRET})
        assert unbound.returncode == 2, unbound.stderr.decode()
        assert "--issuer" in unbound.stderr.decode() and SECRET not in unbound.stderr.decode()
    # Bound to its issuer, it never reaches the one the hostile server names.
    bound = await _run_call(hostile, "read", *given, "--issuer", provider.base, env=env)
    assert bound.returncode == 1, bound.stderr.decode()
    error = bound.stderr.decode()
    assert "registered with" in error and evil.base in error and "Traceback" not in error and SECRET not in error
    assert evil.authorization.seen == [] and _credentials_seen(evil) == []
    # And with the server that names that issuer, it works.
    done = await _run_call(protected, "read", *given, "--issuer", provider.base, env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "read ok"
    assert evil.authorization.seen == []


# -- deeply nested JSON from an authorization server ------------------------------------------------


@pytest.mark.parametrize("where", ["/.well-known/oauth-authorization-server", "/register", "/token"])
async def test_deeply_nested_json_from_an_authorization_server_is_an_authorization_error(protected, provider, where):
    provider.authorization.deep = where
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser,
                                                             store=MemoryTokenStore())) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError):
            await client.call_tool("read")


async def test_deeply_nested_resource_metadata_is_an_authorization_error(nursery, provider):
    url = await _hostile_resource(nursery, [], document=deeply_nested())
    auth = ClientCredentials("reporter", client_secret=SECRET, issuer=provider.base, store=MemoryTokenStore())
    async with mrtr.Client(url, auth=auth) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError, match="protected resource metadata"):
            await client.call_tool("read")


@pytest.mark.slow
async def test_mrtr_call_reports_deeply_nested_json_in_one_line(nursery, protected, provider, tmp_path):
    provider.authorization.deep = "/token"
    done = await _run_call(protected, "read", env={"MRTR_TOKENS": str(tmp_path / "tokens")})
    error = done.stderr.decode()
    assert done.returncode == 1, error
    assert "Traceback" not in error and "RecursionError" not in error
    assert error.rstrip("\n").splitlines()[-1] == (
        "error -32600: the token endpoint answered the authorization_code grant with HTTP 200 and no JSON object "
        "this client reads (not JSON, or nested too deeply)")


# -- malformed access tokens ---------------------------------------------------------------------------

MARK = "TOKENMARK"
MALFORMED = [f"{MARK}\r\nX-Injected: 1", f"{MARK} with spaces", f"{MARK}\tx", f"{MARK}\u00e9", f"{MARK}=x",
             f"{MARK}\x00", f"{MARK}\"", ""]


@pytest.mark.parametrize("token", MALFORMED, ids=range(len(MALFORMED)))
async def test_a_malformed_access_token_is_refused_before_it_is_kept(protected, provider, token, caplog):
    provider.authorization.issued_token = token
    store = MemoryTokenStore()
    caplog.set_level(logging.DEBUG)
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        with trio.fail_after(GUARD), pytest.raises(AuthorizationError, match="not a bearer token") as refused:
            await client.call_tool("read")
    assert MARK not in str(refused.value) and MARK not in repr(refused.value)
    assert MARK not in caplog.text
    assert "tokens" not in (store.load(protected) or {})


async def test_a_malformed_token_kept_before_is_never_sent_nor_shown(protected, provider, caplog):
    store = MemoryTokenStore()
    caplog.set_level(logging.DEBUG)
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        assert (await client.call_tool("read")).text == "read ok"
    record = store.load(protected)
    record["tokens"]["access_token"] = f"{MARK}\r\nX-Injected: 1"  # a store written by an older version
    store.save(protected, record)
    async with mrtr.Client(protected, auth=AuthorizationCode(open_url=approve_in_browser, store=store)) as client:
        with trio.fail_after(GUARD):
            assert (await client.call_tool("read")).text == "read ok"  # authorized afresh
    assert MARK not in caplog.text
    assert MARK not in json.dumps(store.load(protected))


class _Careless:
    """An authorizer of the caller's own that hands out a value no header can carry."""

    async def authorization(self, client: Any) -> str:
        return f"Bearer {MARK}\r\nX-Injected: 1"

    async def challenged(self, client: Any, status: int, challenge: str, attempt: int) -> bool:
        return False


async def test_an_authorization_value_no_header_can_carry_is_never_sent_nor_shown(protected, caplog):
    caplog.set_level(logging.DEBUG)
    async with mrtr.Client(protected, auth=_Careless()) as client:
        with trio.fail_after(GUARD), pytest.raises(mrtr.ClientError, match="not sent, and not shown") as refused:
            await client.call_tool("read")
    assert MARK not in str(refused.value) and MARK not in caplog.text
