"""A stand-in authorization server on loopback: a JWKS and an introspection endpoint.

Real HTTP over a real socket (h11 on trio), real keys made with ``cryptography``, real
signatures made with joserfc. Tests change what it serves (rotate keys, fail, hang,
hold a response until released) and read what it saw (fetch counts, credentials).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from functools import partial
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import h11
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from joserfc import jwk, jwt
from joserfc.jws import JWSRegistry

ISSUER_PATH = ""
RESOURCE = "http://127.0.0.1:8123/mcp"  # the resource the tests' tokens are issued for


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


DEEP_DOCUMENT = b'{"keys":' + b"[" * 30_000 + b"]" * 30_000 + b"}"
"""A JSON document nested past any recursive parser's depth, well under the fetch's size bound."""


@dataclass
class SigningKey:
    """A private key (made with cryptography), its joserfc form and its kid."""

    kid: str
    alg: str
    private: Any
    jose: Any

    def public_jwk(self) -> dict[str, Any]:
        return self.jose.as_dict(private=False) | {"kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def make_key(kind: str, kid: str) -> SigningKey:
    """A fresh key: ``rsa`` (RS256), ``pss`` (PS256), ``p256`` (ES256), ``ed25519`` (EdDSA), ``rsa384``."""
    if kind in ("rsa", "pss", "rsa384"):
        private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        alg = {"rsa": "RS256", "pss": "PS256", "rsa384": "RS384"}[kind]
        jose: Any = jwk.RSAKey.import_key(private, parameters={"kid": kid})
    elif kind == "p256":
        private = ec.generate_private_key(ec.SECP256R1())
        alg, jose = "ES256", jwk.ECKey.import_key(private, parameters={"kid": kid})
    elif kind == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
        alg, jose = "EdDSA", jwk.OKPKey.import_key(private, parameters={"kid": kid})
    else:
        raise ValueError(kind)
    return SigningKey(kid, alg, private, jose)


def mint(key: SigningKey, claims: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None,
         alg: str | None = None, **overrides: Any) -> str:
    """A signed JWT: sensible claims for ``RESOURCE`` from ``issuer``, overridden as asked.

    A claim overridden with ``None`` is left out.
    """
    now = int(time.time())
    body: dict[str, Any] = {
        "iss": overrides.pop("iss", "http://issuer.test"), "aud": RESOURCE, "sub": "alice",
        "client_id": "client-1", "exp": now + 300, "iat": now, "scope": "mcp:read",
    }
    body.update(claims or {})
    body.update(overrides)
    body = {k: v for k, v in body.items() if v is not None}
    head = {"alg": alg or key.alg, "kid": key.kid, "typ": "at+jwt"} | (header or {})
    head = {k: v for k, v in head.items() if v is not None}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns that "EdDSA" is the legacy name
        registry = JWSRegistry(algorithms=[head["alg"]], strict_check_header=False)
        return jwt.encode(head, body, key.jose, algorithms=[head["alg"]], registry=registry)


def raw_signed(key: SigningKey, claims: dict[str, Any] | bytes, header: dict[str, Any]) -> str:
    """A JWS signed by ``key`` with exactly ``header``, bypassing any header policy (for ``crit``).

    ``claims`` as bytes is the payload exactly (a document no claims dict can encode).
    """
    payload = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(payload)}"
    signature = JWSRegistry().get_alg(header["alg"]).sign(signing_input.encode(), key.jose)
    return f"{signing_input}.{b64url(signature)}"


def unsigned(claims: dict[str, Any], header: dict[str, Any]) -> str:
    """A JWS with the given header and an empty signature (for ``alg: none``)."""
    return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}."


def hmac_signed(claims: dict[str, Any], header: dict[str, Any], secret: bytes) -> str:
    """A JWS signed HS256 with ``secret`` (the algorithm-confusion attack uses a public key)."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


@dataclass
class IdentityProvider:
    """The loopback authorization server's state; ``serve`` runs it in a nursery."""

    keys: list[SigningKey] = field(default_factory=list)
    mode: str = "ok"  # "ok" | "500" | "hang" | "huge" | "junk" | "deep" (50,000 nested arrays, under the size bound)
    jwks_fetches: int = 0
    cache_control: str | None = None
    gate: trio.Event | None = None  # when set to an Event, JWKS answers wait for it
    fetch_arrived: trio.Event = field(default_factory=trio.Event)
    introspection: dict[str, dict[str, Any]] = field(default_factory=dict)
    introspection_requests: list[dict[str, Any]] = field(default_factory=list)
    client_credentials: tuple[str, str] = ("rs-client", "rs-secret")
    port: int = 0
    authorization: AuthorizationServer | None = None
    """When set, this provider is also an OAuth authorization server (metadata, authorize, token, register)."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_uri(self) -> str:
        return self.base + "/jwks"

    @property
    def introspection_endpoint(self) -> str:
        return self.base + "/introspect"

    async def serve(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        await self._listen(0)

    async def _listen(self, port: int) -> None:
        scope = trio.CancelScope()
        closed = trio.Event()

        async def run(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await trio.serve_tcp(self._connection, port, host="127.0.0.1", task_status=task_status)
            finally:
                closed.set()

        listeners = await self._nursery.start(run)
        self.port = listeners[0].socket.getsockname()[1]
        self._listener = (scope, closed)

    async def down(self) -> None:
        """Stop listening and drop every connection: fetches are refused until :meth:`up`."""
        scope, closed = self._listener
        scope.cancel()
        await closed.wait()

    async def up(self) -> None:
        """Listen again on the same port."""
        await self._listen(self.port)

    async def _route(self, request: h11.Request, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        path = request.target.decode()
        if self.authorization is not None:
            answered = self.authorization.route(self, request, body)
            if answered is not None:
                return answered
        if path == "/jwks":
            self.jwks_fetches += 1
            self.fetch_arrived.set()
            if self.gate is not None:
                await self.gate.wait()
            if self.mode == "hang":
                await trio.sleep_forever()
            if self.mode == "500":
                return 500, [], b"oops"
            if self.mode == "huge":
                return 200, [("content-type", "application/json")], b'{"keys":[' + b" " * 200_000 + b"]}"
            if self.mode == "junk":
                return 200, [("content-type", "application/json")], b"<html>"
            if self.mode == "deep":
                return 200, [("content-type", "application/json")], DEEP_DOCUMENT
            headers = [("content-type", "application/json")]
            if self.cache_control:
                headers.append(("cache-control", self.cache_control))
            return 200, headers, json.dumps({"keys": [k.public_jwk() for k in self.keys]}).encode()
        if path == "/introspect" and request.method == b"POST":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            auth = dict(request.headers).get(b"authorization", b"").decode()
            self.introspection_requests.append({"form": form, "authorization": auth})
            if self.mode == "500":
                return 500, [], b""
            if self.mode == "deep":
                return 200, [("content-type", "application/json")], DEEP_DOCUMENT
            basic = "Basic " + base64.b64encode(":".join(self.client_credentials).encode()).decode()
            posted = (form.get("client_id"), form.get("client_secret")) == self.client_credentials
            if auth != basic and not posted:
                return 401, [("content-type", "application/json")], b'{"error":"invalid_client"}'
            answer = self.introspection.get(form.get("token", ""), {"active": False})
            return 200, [("content-type", "application/json")], json.dumps(answer).encode()
        return 404, [], b""

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    request, body = event, b""
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    assert request is not None
                    status, headers, payload = await self._route(request, body)
                    headers.append(("content-length", str(len(payload))))
                    await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
                    await stream.send_all(conn.send(h11.Data(data=payload)))
                    await stream.send_all(conn.send(h11.EndOfMessage()))
                    conn.start_next_cycle()
                else:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return


def _json_reply(status: int, value: Any, *headers: tuple[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("content-type", "application/json"), *headers], json.dumps(value).encode()


@dataclass
class AuthorizationServer:
    """The OAuth side of the loopback provider: what an MCP client authorizes against.

    It approves every authorization request at once (the "person" always says yes),
    checks PKCE S256, the redirect URI and the ``resource``, and issues JWT access
    tokens signed with the provider's first key for ``resource``, with refresh tokens.
    ``mode`` makes it misbehave: ``"redirect-loop"`` (its metadata redirects to itself),
    ``"other-issuer"`` (its metadata names another issuer), ``"huge"`` (8 MiB of
    metadata), ``"wrong-iss"`` (the
    authorization response names another issuer). ``deep`` names a path (its metadata,
    ``/register``, ``/token``) whose answer is JSON nested :data:`DEEP` levels deep, and
    ``issued_token`` replaces the access tokens it issues. ``seen`` records every request
    (path, headers, form) so tests can check what reached it, and what did not.
    """

    resource: str = ""
    scopes_supported: tuple[str, ...] = ("mcp:read", "mcp:write", "offline_access")
    token_ttl: int = 300
    mode: str = "ok"
    registration: bool = True
    seen: list[dict[str, Any]] = field(default_factory=list)
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    refresh_tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    grants: list[str] = field(default_factory=list)
    grantable: frozenset[str] | None = None
    """The scopes it ever grants (``None``: whatever is asked); the rest of a request is dropped."""
    deep: str = ""
    issued_token: str | None = None

    def metadata(self, provider: IdentityProvider) -> dict[str, Any]:
        base = provider.base
        document = {
            "issuer": "https://elsewhere.example" if self.mode == "other-issuer" else base,
            "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
            "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token",
                                                                            "client_credentials"],
            "code_challenge_methods_supported": ["S256"], "scopes_supported": list(self.scopes_supported),
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "authorization_response_iss_parameter_supported": True, "jwks_uri": provider.jwks_uri,
        }
        if self.registration:
            document["registration_endpoint"] = base + "/register"
        return document

    def route(self, provider: IdentityProvider, request: h11.Request, body: bytes
              ) -> tuple[int, list[tuple[str, str]], bytes] | None:
        from urllib.parse import urlencode, urlsplit

        target = request.target.decode()
        path, _, query = target.partition("?")
        headers = {name.decode().lower(): value.decode() for name, value in request.headers}
        form = {k: v[0] for k, v in parse_qs(body.decode() if body else query).items()}
        if path.startswith("/.well-known/") or path in ("/authorize", "/token", "/register"):
            self.seen.append({"path": path, "headers": headers, "form": form})
        if self.deep and path == self.deep:
            return 200, [("content-type", "application/json")], deeply_nested()
        if path == "/.well-known/oauth-authorization-server":
            if self.mode == "redirect-loop":
                return 302, [("location", provider.base + path)], b""
            if self.mode == "huge":
                return 200, [("content-type", "application/json")], b'{"issuer": "' + b"x" * (8 << 20) + b'"}'

            return _json_reply(200, self.metadata(provider))
        if path == "/register" and request.method == b"POST":
            asked = json.loads(body or b"{}")
            client_id = f"client-{len(self.clients) + 1}"
            method = asked.get("token_endpoint_auth_method", "none")
            secret = None if method == "none" else secrets_token()
            self.clients[client_id] = {"secret": secret, "redirect_uris": asked.get("redirect_uris", []),
                                       "method": method}
            return _json_reply(201, {"client_id": client_id, **({"client_secret": secret} if secret else {}),
                                     "token_endpoint_auth_method": method,
                                     "redirect_uris": asked.get("redirect_uris", [])})
        if path == "/authorize":
            if form.get("code_challenge_method") != "S256" or not form.get("code_challenge"):
                return _json_reply(400, {"error": "invalid_request"})
            code = secrets_token()
            self.codes[code] = dict(form)
            redirect = form["redirect_uri"]
            answer = {"code": code, "state": form.get("state", ""),
                      "iss": "https://evil.example" if self.mode == "wrong-iss" else provider.base}
            separator = "&" if urlsplit(redirect).query else "?"
            return 302, [("location", f"{redirect}{separator}{urlencode(answer)}")], b""
        if path == "/token" and request.method == b"POST":
            return self._token(provider, form, headers)
        return None

    def _client_of(self, form: dict[str, str], headers: dict[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        if auth.startswith("Basic "):
            from urllib.parse import unquote

            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            known = self.clients.get(client_id)
            return client_id if known is not None and known["secret"] == secret else None
        client_id = form.get("client_id", "")
        known = self.clients.get(client_id)
        if known is None:
            return None
        return client_id if known["secret"] in (None, form.get("client_secret")) else None

    def _issue(self, provider: IdentityProvider, client_id: str, scope: str, resource: str
               ) -> tuple[int, list[tuple[str, str]], bytes]:
        if self.grantable is not None:
            scope = " ".join(part for part in scope.split() if part in self.grantable)
        token = mint(provider.keys[0], iss=provider.base, aud=resource, client_id=client_id, scope=scope,
                     exp=int(time.time()) + self.token_ttl, jti=secrets_token())
        refresh = secrets_token()
        self.refresh_tokens[refresh] = {"client_id": client_id, "scope": scope, "resource": resource}
        if self.issued_token is not None:
            token = self.issued_token
        return _json_reply(200, {"access_token": token, "token_type": "Bearer", "expires_in": self.token_ttl,
                                 "refresh_token": refresh, "scope": scope})

    def _token(self, provider: IdentityProvider, form: dict[str, str], headers: dict[str, str]
               ) -> tuple[int, list[tuple[str, str]], bytes]:
        grant = form.get("grant_type", "")
        self.grants.append(grant)
        client_id = self._client_of(form, headers)
        if client_id is None:
            return _json_reply(401, {"error": "invalid_client"})
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            challenge = b64url(hashlib.sha256(verifier.encode()).digest())
            if asked is None or asked["code_challenge"] != challenge or asked["client_id"] != client_id \
                    or asked["redirect_uri"] != form.get("redirect_uri") or asked.get("resource") != form.get(
                        "resource"):
                return _json_reply(400, {"error": "invalid_grant"})
            return self._issue(provider, client_id, asked.get("scope", ""), form["resource"])
        if grant == "refresh_token":
            known = self.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if known is None or known["client_id"] != client_id:
                return _json_reply(400, {"error": "invalid_grant"})
            return self._issue(provider, client_id, known["scope"], known["resource"])
        if grant == "client_credentials":
            return self._issue(provider, client_id, form.get("scope", ""), form.get("resource", ""))
        return _json_reply(400, {"error": "unsupported_grant_type"})


DEEP = 100_000
"""How deep :func:`deeply_nested` nests: far past any recursion limit, well within a document's size cap."""


def deeply_nested(depth: int = DEEP) -> bytes:
    """An object whose one member is ``depth`` nested arrays: valid JSON a recursive parser cannot read."""
    return b'{"issuer": "x", "access_token": "x", "client_id": "x", "deep": ' + b"[" * depth + b"]" * depth + b"}"


def secrets_token() -> str:
    """A random, URL-safe token."""
    import secrets

    return secrets.token_urlsafe(24)


async def approve_in_browser(url: str) -> None:
    """A browser whose person approves: follow the authorization server's redirects, to the client's loopback one.

    The loopback authorization server (and the official suite's) approves at once, so
    following its redirect delivers the code to the client's listener, as a browser would.
    """
    import httpx

    async with httpx.AsyncClient(follow_redirects=False, timeout=10) as client:
        for _ in range(5):
            response = await client.get(url)
            if not response.is_redirect:
                return
            url = response.headers["location"]
