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


def raw_signed(key: SigningKey, claims: dict[str, Any], header: dict[str, Any]) -> str:
    """A JWS signed by ``key`` with exactly ``header``, bypassing any header policy (for ``crit``)."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
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
    mode: str = "ok"  # "ok" | "500" | "hang" | "huge" | "junk"
    jwks_fetches: int = 0
    cache_control: str | None = None
    gate: trio.Event | None = None  # when set to an Event, JWKS answers wait for it
    fetch_arrived: trio.Event = field(default_factory=trio.Event)
    introspection: dict[str, dict[str, Any]] = field(default_factory=dict)
    introspection_requests: list[dict[str, Any]] = field(default_factory=list)
    client_credentials: tuple[str, str] = ("rs-client", "rs-secret")
    port: int = 0

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
