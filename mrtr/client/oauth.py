"""The OAuth 2.1 client half of MCP authorization: from a 401 to a bearer token, and keeping it.

A protected server answers a request without a (good) token with 401 and a
``WWW-Authenticate: Bearer`` challenge. The client then:

1. finds the server's **protected resource metadata** (RFC 9728): at the challenge's
   ``resource_metadata`` URL, else at the path-inserted well-known URL, else at the
   root one. Its ``resource`` must name this server (same origin, and a prefix of its
   path); it is sent back verbatim as the ``resource`` parameter (RFC 8707);
2. finds the **authorization server's metadata** for the first issuer listed, at the
   OAuth and OpenID Connect well-known URLs in the order the spec gives for issuers
   with and without a path; a document whose ``issuer`` is not exactly that issuer is
   refused, and one without ``S256`` in ``code_challenge_methods_supported`` too;
3. gets a **client id**: the pre-registered one (bound to the issuer it was given for:
   a confidential one, with a secret or a private key, cannot be given without its
   issuer, and is used only when the server lists that issuer), else a Client ID
   Metadata Document URL where the server supports them, else dynamic registration,
   remembered per issuer and never offered to another;
4. runs the **authorization code** grant with PKCE (S256), ``state`` and ``resource``,
   the scopes of the challenge (else the metadata's ``scopes_supported``; plus
   ``offline_access`` where the authorization server lists it), receives the redirect
   on a loopback port, checks ``state`` and ``iss`` (RFC 9207) before the code goes
   anywhere, and trades the code for tokens with the client authentication the server
   supports (``none``, ``client_secret_basic``, ``client_secret_post``);
5. sends ``Authorization: Bearer`` on every request to this server, and only to it;
   refreshes the token when it expires or is refused; on a 403 ``insufficient_scope``
   asks again for the scopes it had plus those challenged, a few times at most.

:class:`ClientCredentials` replaces step 4 for programs acting on their own behalf
(``client_credentials``, with a secret or a ``private_key_jwt`` assertion). Every
document from an authorization server is read by the package's one depth-safe JSON rule
(:func:`mrtr.core.jsonrpc.decode_json`), and an access token that is not an RFC 6750
``b64token`` is refused before it is kept. Tokens and registrations go to a
:class:`~mrtr.client.tokens.TokenStore`; none is ever logged or put in an error.
Needs httpx (the ``client`` extra); ``private_key_jwt`` needs joserfc (the ``auth`` extra).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import secrets
import time
import webbrowser
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import trio

from ..core.bearer import is_bearer_token
from ..core.errors import INVALID_REQUEST, ParseError
from ..core.jsonrpc import decode_json
from ..core.resource_urls import canonical_url, metadata_url, root_metadata_url
from ..core.web_urls import web_url_problem
from .display import printable
from .errors import ClientError
from .tokens import FileTokenStore, TokenStore

__all__ = ["AuthorizationCode", "AuthorizationError", "ClientCredentials", "OAuth", "Redirect", "parse_challenge",
           "receive_redirect"]

log = logging.getLogger("mrtr.client.oauth")

MAX_STEP_UPS = 2
"""How many times one request may ask for more scopes after a 403 before the refusal stands."""

MAX_DOCUMENT = 256 * 1024
"""The most bytes of one metadata, registration or token answer read from an authorization server."""

REDIRECT_TIMEOUT = 300.0
"""Seconds to wait for the browser to come back to the loopback redirect."""

OFFLINE_ACCESS = "offline_access"

_NO_DOCUMENT = "no JSON object this client reads (not JSON, or nested too deeply)"

_PARAM = re.compile(r'\s*([A-Za-z0-9_\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')


class AuthorizationError(ClientError):
    """Authorization could not be done: a document refused, a grant denied, a redirect that does not fit.

    ``code`` is ``-32600``; ``status`` the MCP server's status (401 or 403) when it refused the token.
    """


def parse_challenge(header: str) -> dict[str, str]:
    """The parameters of the ``Bearer`` challenge in a ``WWW-Authenticate`` header (lowercase names).

    Other schemes in the header are skipped; a header without a Bearer challenge gives ``{}``.
    """
    found: dict[str, str] = {}
    text = header.strip()
    start = re.search(r"(?i)(?:^|,)\s*bearer(?:\s+|$)", text)
    if start is None:
        return found
    rest = text[start.end():]
    position = 0
    while position < len(rest):
        match = _PARAM.match(rest, position)
        if match is None:
            break
        name = match[1].lower()
        value = match[2] if match[2] is not None else match[3] or ""
        if match[2] is not None:
            value = re.sub(r"\\(.)", r"\1", value)
        found.setdefault(name, value)
        position = match.end()
        if re.match(r"\s*[A-Za-z0-9_\-]+\s+[A-Za-z0-9_\-]+\s*=", rest[position:]):
            break  # the next scheme's challenge starts here
    return found


def _secure(url: str, what: str) -> str:
    problem = web_url_problem(url)
    if problem is None:
        return url
    raise AuthorizationError(INVALID_REQUEST, f"the {what} {url!r} {problem}")


def _named(servers: Sequence[str]) -> str:
    """The authorization servers a metadata document lists, for an error message (a few, one line each)."""
    shown = ", ".join(printable(server, multiline=False)[:200] for server in servers[:3])
    return shown + (f" and {len(servers) - 3} more" if len(servers) > 3 else "")


def _unbound(what: str) -> str:
    return (f"{what} needs issuer=, the authorization server the credential is registered with (as in "
            "issuer=\"https://auth.example.com\"): without it the credential would go to whichever "
            "authorization server the MCP server names")


def _scopes(value: Any) -> list[str]:
    if isinstance(value, str):
        return [scope for scope in value.split() if scope]
    if isinstance(value, list):
        return [scope for scope in value if isinstance(scope, str) and scope]
    return []


def _union(*groups: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for group in groups:
        seen += [scope for scope in group if scope not in seen]
    return seen


def as_metadata_urls(issuer: str) -> list[str]:
    """Where the metadata of ``issuer`` may be, in the order MCP clients must try."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(where: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, where, "", ""))

    if not path:
        return [at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")]
    return [at(f"/.well-known/oauth-authorization-server{path}"), at(f"/.well-known/openid-configuration{path}"),
            at(f"{path}/.well-known/openid-configuration")]


@dataclass(frozen=True)
class Redirect:
    """Where the browser comes back to: the loopback ``redirect_uri`` and how to wait for its visit."""

    uri: str
    wait: Callable[[], Awaitable[str]]
    """Waits for the visit; returns the full URL it came back with."""


async def receive_redirect(nursery: trio.Nursery, *, port: int = 0, path: str = "/callback",
                           timeout: float = REDIRECT_TIMEOUT) -> Redirect:
    """Listen on ``127.0.0.1:port`` (0: any free port) for one browser visit to ``path``.

    The visit is answered with a short page telling the person to go back to the
    terminal; anything else gets a 404. The listener closes after the visit, or after
    ``timeout`` seconds (then the wait raises :class:`AuthorizationError`).
    """
    arrived = trio.Event()
    received: list[str] = []
    scope = trio.CancelScope()
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    bound = listeners[0].socket.getsockname()[1]

    async def visit(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) < 16384:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = line.partition(" ")
            target = rest.rpartition(" ")[0]
            if method == "GET" and urlsplit(target).path == path and not arrived.is_set():
                received.append(f"http://127.0.0.1:{bound}{target}")
                arrived.set()
                body = b"<!doctype html><title>Done</title><p>You can close this window and go back to the terminal."
                status = b"200 OK"
            else:
                body, status = b"not found", b"404 Not Found"
            try:
                await stream.send_all(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
                                      b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                                      + body)
            except trio.BrokenResourceError:
                pass

    async def serve() -> None:
        with scope:
            await trio.serve_listeners(visit, listeners)

    nursery.start_soon(serve)

    async def wait() -> str:
        try:
            with trio.move_on_after(timeout):
                await arrived.wait()
            if not received:
                raise AuthorizationError(INVALID_REQUEST, f"the browser did not come back to the loopback redirect "
                                                          f"within {timeout:g} s")
            return received[0]
        finally:
            scope.cancel()

    return Redirect(f"http://127.0.0.1:{bound}{path}", wait)


async def open_in_browser(url: str) -> None:
    """Print the authorization URL (always: the browser may be elsewhere) and open it in a browser if one is there."""
    import sys

    print(f"Open this address to authorize: {printable(url, multiline=False)}", file=sys.stderr)
    try:
        await trio.to_thread.run_sync(webbrowser.open, url)
    except Exception as exc:  # no browser here: the printed address is the way
        log.debug("no browser opened: %s", exc)


class OAuth:
    """The shared machinery: discovery, registration, tokens, refresh and step-up, for one MCP server.

    Give an instance to ``mrtr.Client(url, auth=...)``; use :class:`AuthorizationCode`
    for a person with a browser, :class:`ClientCredentials` for a program. ``store``
    keeps tokens per server (default: a :class:`~mrtr.client.tokens.FileTokenStore`).
    """

    grant = "authorization_code"

    def __init__(self, *, client_id: str | None = None, client_secret: str | None = None,
                 token_endpoint_auth_method: str | None = None, issuer: str | None = None,
                 scopes: Sequence[str] | None = None, store: TokenStore | None = None,
                 client_name: str = "mrtr", timeout: float = 30.0) -> None:
        problem = web_url_problem(issuer) if issuer is not None else None
        if problem is not None:
            raise ValueError(f"issuer={issuer!r} {problem}")
        if client_secret is not None and issuer is None:
            raise ValueError(_unbound("a client_secret"))
        self.client_id = client_id
        self._client_secret = client_secret
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.issuer = issuer
        """The one authorization server to use, the one a pre-registered ``client_id`` belongs to (``None``:
        whichever the server names; never ``None`` for a confidential client, whose secret or key goes to that
        issuer only). A server whose metadata does not list it gets an :class:`AuthorizationError`."""
        self.scopes = list(scopes or [])
        """Scopes asked for on top of those the server names."""
        self.store: TokenStore = store if store is not None else FileTokenStore()
        self.client_name = client_name
        self.timeout = timeout
        self._http: Any = None
        self._server: str | None = None
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} client_id={self.client_id!r} store={self.store!r}>"

    # -- what the HTTP target asks ------------------------------------------------------------

    def bind(self, server: str, nursery: trio.Nursery) -> None:
        """Serve the MCP endpoint ``server``; background work (the loopback redirect) goes into ``nursery``."""
        self._server = server
        self._nursery = nursery

    def _record(self) -> dict[str, Any]:
        assert self._server is not None
        return self.store.load(self._server) or {}

    def _save(self, record: Mapping[str, Any]) -> None:
        assert self._server is not None
        self.store.save(self._server, record)

    async def authorization(self, client: Any) -> str | None:
        """``Bearer <token>`` for the next request to the server, refreshed first if it has expired."""
        record = self._record()
        tokens = record.get("tokens") or {}
        if not tokens.get("access_token"):
            return None
        expires = tokens.get("expires_at")
        if isinstance(expires, (int, float)) and expires - 30 < time.time() and tokens.get("refresh_token"):
            async with self._lock:
                if await self._refresh(self._record()):
                    tokens = self._record().get("tokens") or {}
        token = tokens.get("access_token")
        if token and not is_bearer_token(token):
            # Kept by an older version, or written by hand: sent, it would break the request (and the
            # error would show it). Without it the server's 401 starts a refresh, or authorization.
            log.info("the access token kept for %s is not a bearer token: authorizing again", self._server)
            return None
        return f"Bearer {token}" if token else None

    async def challenged(self, client: Any, status: int, challenge: str, attempt: int) -> bool:
        """Answer a 401 (authorize, or refresh) or a 403 ``insufficient_scope`` (step up); whether to retry."""
        params = parse_challenge(challenge)
        async with self._lock:
            if status == 401:
                if attempt > 1 + MAX_STEP_UPS:
                    return False
                return await self._authorize(params, refreshed_first=attempt == 1)
            if status == 403 and params.get("error") == "insufficient_scope" and attempt <= MAX_STEP_UPS:
                if self.grant == "client_credentials" and not self.step_up:
                    return False
                record = self._record()
                wanted = _union(record.get("scopes") or [], _scopes(params.get("scope")))
                log.info("the server needs more scopes (%s): authorizing again", " ".join(_scopes(params.get("scope"))))
                return await self._authorize(params, scopes=wanted, refreshed_first=False)
        return False

    step_up = True

    # -- the steps -----------------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._http is None:
            import httpx

            # Its own connection pool with no default headers: nothing meant for the MCP
            # server (a token, a header the caller gave the client) reaches an authorization server.
            self._http = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        return self._http

    async def aclose(self) -> None:
        """Close the connection pool used for metadata and token requests."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _json(self, method: str, url: str, **options: Any) -> tuple[int, Any]:
        import httpx

        try:
            async with self._client().stream(method, url, **options) as response:
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_DOCUMENT:
                        raise AuthorizationError(INVALID_REQUEST, f"{url} answered with more than {MAX_DOCUMENT} "
                                                                  "bytes")
                    chunks.append(chunk)
                status = response.status_code
        except httpx.HTTPError as exc:
            raise AuthorizationError(INVALID_REQUEST, f"request to {url} failed: {exc or type(exc).__name__}") \
                from None
        try:
            return status, decode_json(b"".join(chunks))
        except ParseError:  # not JSON, or nested past the decoder's depth: no document, said by the caller
            return status, None

    async def _resource_metadata(self, params: Mapping[str, str]) -> dict[str, Any]:
        assert self._server is not None
        candidates = []
        if params.get("resource_metadata"):
            candidates.append(params["resource_metadata"])
        else:
            candidates += [metadata_url(self._server), root_metadata_url(self._server)]
        for url in dict.fromkeys(candidates):
            _secure(url, "protected resource metadata URL")
            status, document = await self._json("GET", url, headers={"Accept": "application/json"})
            if status == 200 and isinstance(document, dict):
                self._check_resource(document)
                return document
            log.debug("no protected resource metadata at %s (HTTP %s)", url, status)
        raise AuthorizationError(INVALID_REQUEST, f"the server asked for authorization but publishes no protected "
                                                  f"resource metadata (tried {', '.join(candidates)})")

    def _check_resource(self, document: Mapping[str, Any]) -> None:
        assert self._server is not None
        resource = document.get("resource")
        servers = document.get("authorization_servers")
        if not isinstance(resource, str) or not isinstance(servers, list) or not servers \
                or not all(isinstance(server, str) for server in servers):
            raise AuthorizationError(INVALID_REQUEST, "the protected resource metadata needs a resource and at "
                                                      "least one authorization server")
        try:
            named, ours = urlsplit(canonical_url(resource)), urlsplit(canonical_url(self._server))
        except ValueError:
            raise AuthorizationError(INVALID_REQUEST, f"the protected resource metadata names {resource!r}, which "
                                                      "is no http(s) URL") from None
        inside = ours.path == named.path or ours.path.startswith(named.path.rstrip("/") + "/")
        if (named.scheme, named.netloc) != (ours.scheme, ours.netloc) or not inside:
            raise AuthorizationError(INVALID_REQUEST, f"the protected resource metadata is for {resource!r}, not "
                                                      f"for {self._server!r}: refusing to get a token for it")

    async def _server_metadata(self, issuer: str) -> dict[str, Any]:
        _secure(issuer, "authorization server")
        for url in as_metadata_urls(issuer):
            status, document = await self._json("GET", url, headers={"Accept": "application/json"})
            if status != 200 or not isinstance(document, dict):
                continue
            if document.get("issuer") != issuer:
                raise AuthorizationError(INVALID_REQUEST, f"the authorization server metadata at {url} names the "
                                                          f"issuer {document.get('issuer')!r}, not {issuer!r}: "
                                                          "refused")
            for member in ("token_endpoint", "authorization_endpoint", "registration_endpoint"):
                if isinstance(document.get(member), str):
                    _secure(document[member], member.replace("_", " "))
            return document
        raise AuthorizationError(INVALID_REQUEST, f"no authorization server metadata for {issuer} (tried "
                                                  f"{', '.join(as_metadata_urls(issuer))})")

    def _scope_for(self, params: Mapping[str, str], resource_metadata: Mapping[str, Any],
                   server_metadata: Mapping[str, Any], scopes: Sequence[str] | None) -> list[str]:
        if scopes is not None:
            wanted = list(scopes)
        elif params.get("scope"):
            wanted = _scopes(params["scope"])
        else:
            wanted = _scopes(resource_metadata.get("scopes_supported"))
        wanted = _union(wanted, self.scopes)
        if self.grant == "authorization_code" and OFFLINE_ACCESS in _scopes(server_metadata.get("scopes_supported")):
            wanted = _union(wanted, [OFFLINE_ACCESS])  # a refresh token, where the server hands them out
        return wanted

    def _confidential(self) -> bool:
        """Whether this client authenticates with a secret or a key of its own (given, not registered here)."""
        return self._client_secret is not None

    async def _authorize(self, params: Mapping[str, str], *, scopes: Sequence[str] | None = None,
                         refreshed_first: bool) -> bool:
        resource_metadata = await self._resource_metadata(params)
        record = self._record()
        servers = resource_metadata["authorization_servers"]
        if self.issuer is not None:
            # A client bound to one issuer: decided before any other is asked anything.
            if self.issuer not in servers:
                if self.client_id is None:
                    bound = "the one this client is bound to (issuer=)"
                else:
                    bound = f"which the client id {self.client_id!r} is registered with: " + (
                        "its credentials go to that issuer only" if self._confidential()
                        else "register with the one named first, or give its own client id")
                raise AuthorizationError(INVALID_REQUEST, f"the server names the authorization server "
                                                          f"{_named(servers)}, not {self.issuer}, {bound}")
            issuer = self.issuer
        else:
            issuer = record["issuer"] if record.get("issuer") in servers else servers[0]
        if record.get("issuer") not in (None, issuer):
            log.info("the server now names another authorization server (%s): its tokens are dropped", issuer)
            record = {"registrations": record.get("registrations") or {}}
        if refreshed_first and (record.get("tokens") or {}).get("refresh_token") and await self._refresh(record):
            return True
        server_metadata = await self._server_metadata(issuer)
        wanted = self._scope_for(params, resource_metadata, server_metadata, scopes)
        registration = await self._registration(issuer, server_metadata, record)
        tokens = await self._grant(server_metadata, registration, resource_metadata["resource"], wanted)
        registrations = dict(record.get("registrations") or {})
        if registration.get("dynamic"):
            registrations[issuer] = registration
        self._save({"issuer": issuer, "resource": resource_metadata["resource"], "scopes": wanted,
                    "token_endpoint": server_metadata.get("token_endpoint"), "tokens": tokens,
                    "registrations": registrations})
        return True

    def _auth_method(self, server_metadata: Mapping[str, Any], has_secret: bool) -> str:
        supported = _scopes(server_metadata.get("token_endpoint_auth_methods_supported")) or ["client_secret_basic"]
        if self.token_endpoint_auth_method is not None:
            return self.token_endpoint_auth_method
        if has_secret:
            for method in ("client_secret_basic", "client_secret_post"):
                if method in supported:
                    return method
        return "none" if "none" in supported or not has_secret else supported[0]

    async def _registration(self, issuer: str, server_metadata: Mapping[str, Any],
                            record: Mapping[str, Any]) -> dict[str, Any]:
        """The client id (and secret) to use with ``issuer``, in the order the spec prefers."""
        if self.client_id is not None and self.issuer in (None, issuer):
            secret = self._client_secret
            return {"client_id": self.client_id, "client_secret": secret,
                    "method": self._auth_method(server_metadata, secret is not None)}
        if self.client_id is not None:
            raise AuthorizationError(INVALID_REQUEST, f"the client id given is registered with {self.issuer}, but the "
                                                      f"server now names {issuer}: register with it first")
        known = (record.get("registrations") or {}).get(issuer)
        if isinstance(known, dict) and known.get("client_id"):
            return known
        metadata_document = self.client_metadata_url()
        if metadata_document is not None and server_metadata.get("client_id_metadata_document_supported") is True:
            return {"client_id": metadata_document, "client_secret": None, "method": "none"}
        endpoint = server_metadata.get("registration_endpoint")
        if isinstance(endpoint, str):
            return await self._register(endpoint, server_metadata)
        raise AuthorizationError(INVALID_REQUEST, f"{issuer} offers no way to register this client (no client ID "
                                                  "metadata documents, no dynamic registration): give a client id")

    def client_metadata_url(self) -> str | None:
        """The Client ID Metadata Document URL this client is known by, if it has one."""
        return None

    def redirect_uris(self) -> list[str]:
        """The redirect URIs this client registers."""
        return []

    async def _register(self, endpoint: str, server_metadata: Mapping[str, Any]) -> dict[str, Any]:
        supported = _scopes(server_metadata.get("token_endpoint_auth_methods_supported")) or ["client_secret_basic"]
        method = self.token_endpoint_auth_method or next(
            (m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported), supported[0])
        grants = [self.grant] + (["refresh_token"] if self.grant == "authorization_code" else [])
        body: dict[str, Any] = {"client_name": self.client_name, "grant_types": grants,
                                "token_endpoint_auth_method": method, "application_type": "native"}
        if self.grant == "authorization_code":
            body |= {"redirect_uris": self.redirect_uris(), "response_types": ["code"]}
        status, answer = await self._json("POST", endpoint, json=body, headers={"Accept": "application/json"})
        if not isinstance(answer, dict):
            raise AuthorizationError(INVALID_REQUEST, f"dynamic client registration at {endpoint} answered HTTP "
                                                      f"{status} with {_NO_DOCUMENT}")
        if status not in (200, 201) or not isinstance(answer.get("client_id"), str):
            detail = answer.get("error_description") or answer.get("error")
            raise AuthorizationError(INVALID_REQUEST, f"dynamic client registration at {endpoint} failed (HTTP "
                                                      f"{status}{': ' + printable(str(detail)) if detail else ''})")
        secret = answer.get("client_secret") if isinstance(answer.get("client_secret"), str) else None
        return {"client_id": answer["client_id"], "client_secret": secret, "dynamic": True,
                "method": answer.get("token_endpoint_auth_method") or ("none" if secret is None else method)}

    async def _grant(self, server_metadata: Mapping[str, Any], registration: Mapping[str, Any], resource: str,
                     scopes: Sequence[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _client_auth(self, registration: Mapping[str, Any], form: dict[str, str], token_endpoint: str
                     ) -> dict[str, str]:
        """Add the client's authentication to a token request ``form``; return the headers it needs."""
        method = registration.get("method") or "none"
        client_id, secret = registration["client_id"], registration.get("client_secret")
        if method == "client_secret_basic" and secret is not None:
            pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
            return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
        form["client_id"] = client_id
        if method == "client_secret_post" and secret is not None:
            form["client_secret"] = secret
        return {}

    async def _token_request(self, token_endpoint: str, form: dict[str, str], headers: Mapping[str, str]
                             ) -> dict[str, Any]:
        status, answer = await self._json("POST", token_endpoint, content=urlencode(form),
                                          headers={"Content-Type": "application/x-www-form-urlencoded",
                                                   "Accept": "application/json", **headers})
        if not isinstance(answer, dict):
            raise AuthorizationError(INVALID_REQUEST, f"the token endpoint answered the {form['grant_type']} grant "
                                                      f"with HTTP {status} and {_NO_DOCUMENT}")
        if status != 200 or not isinstance(answer.get("access_token"), str):
            detail = answer.get("error_description") or answer.get("error")
            raise AuthorizationError(INVALID_REQUEST, f"the token endpoint refused the {form['grant_type']} grant "
                                                      f"(HTTP {status}{': ' + printable(str(detail)) if detail else ''})")
        if not is_bearer_token(answer["access_token"]):
            # Kept, it would break every later request; sent, it could add a header of its choosing.
            raise AuthorizationError(INVALID_REQUEST, "the token endpoint issued an access token that is not a "
                                                      "bearer token (RFC 6750 b64token: letters, digits and "
                                                      "-._~+/, then = padding): refused, and not kept")
        if str(answer.get("token_type", "Bearer")).lower() != "bearer":
            raise AuthorizationError(INVALID_REQUEST, f"the token endpoint issued a {answer.get('token_type')!r} "
                                                      "token; this client sends Bearer tokens only")
        tokens: dict[str, Any] = {"access_token": answer["access_token"]}
        if isinstance(answer.get("refresh_token"), str):
            tokens["refresh_token"] = answer["refresh_token"]
        expires = answer.get("expires_in")
        if isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires > 0:
            tokens["expires_at"] = time.time() + float(expires)
        if isinstance(answer.get("scope"), str):
            tokens["scope"] = answer["scope"]
        return tokens

    async def _refresh(self, record: Mapping[str, Any]) -> bool:
        tokens = record.get("tokens") or {}
        endpoint, issuer = record.get("token_endpoint"), record.get("issuer")
        registration = (record.get("registrations") or {}).get(issuer) if issuer else None
        if registration is None and self.client_id is not None and self.issuer in (None, issuer):
            registration = {"client_id": self.client_id, "client_secret": self._client_secret,
                            "method": self.token_endpoint_auth_method or (
                                "client_secret_basic" if self._client_secret else "none")}
        if not (tokens.get("refresh_token") and isinstance(endpoint, str) and registration):
            return False
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
                "resource": record.get("resource") or ""}
        try:
            fresh = await self._token_request(endpoint, form, self._client_auth(registration, form, endpoint))
        except AuthorizationError as error:
            log.info("refreshing the token failed (%s): authorizing again", error.message)
            return False
        fresh.setdefault("refresh_token", tokens["refresh_token"])  # a server that does not rotate keeps the old one
        self._save({**record, "tokens": fresh})
        return True

    def forget(self) -> bool:
        """Drop every token and registration kept for the server."""
        assert self._server is not None
        return self.store.delete(self._server)


class AuthorizationCode(OAuth):
    """The authorization code grant for a person: a browser, a loopback redirect, PKCE.

    ``open_url(url)`` shows the authorization page (default: print the URL and open a
    browser); ``redirect_port`` fixes the loopback port (0: any free one, which
    authorization servers accept for loopback redirects); ``client_metadata_url`` is the
    HTTPS URL of this client's Client ID Metadata Document, used as its client id where
    the authorization server supports them. Other options are :class:`OAuth`'s.
    """

    grant = "authorization_code"

    def __init__(self, *, open_url: Callable[[str], Awaitable[Any]] | None = None, redirect_port: int = 0,
                 client_metadata_url: str | None = None, redirect_timeout: float = REDIRECT_TIMEOUT,
                 **options: Any) -> None:
        super().__init__(**options)
        self.open_url = open_url or open_in_browser
        self.redirect_port = redirect_port
        self._metadata_document = client_metadata_url
        self.redirect_timeout = redirect_timeout
        self._redirect: Redirect | None = None

    def client_metadata_url(self) -> str | None:
        """The Client ID Metadata Document URL given, if any."""
        return self._metadata_document

    def redirect_uris(self) -> list[str]:
        """The loopback redirect registered (the port the listener got)."""
        return [self._redirect.uri] if self._redirect is not None else ["http://127.0.0.1/callback"]

    async def _authorize(self, params: Mapping[str, str], *, scopes: Sequence[str] | None = None,
                         refreshed_first: bool) -> bool:
        assert self._nursery is not None, "bind() the authorizer to a nursery first"
        try:
            async with trio.open_nursery() as nursery:
                self._redirect = await receive_redirect(nursery, port=self.redirect_port,
                                                        timeout=self.redirect_timeout)
                try:
                    return await super()._authorize(params, scopes=scopes, refreshed_first=refreshed_first)
                finally:
                    nursery.cancel_scope.cancel()
                    self._redirect = None
        except BaseExceptionGroup as group:
            # The listener's nursery wraps what failed: let it leave as it was raised.
            error: BaseException = group
            while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
                error = error.exceptions[0]
            raise error from None

    async def _grant(self, server_metadata: Mapping[str, Any], registration: Mapping[str, Any], resource: str,
                     scopes: Sequence[str]) -> dict[str, Any]:
        assert self._redirect is not None
        if "S256" not in _scopes(server_metadata.get("code_challenge_methods_supported")):
            raise AuthorizationError(INVALID_REQUEST, "the authorization server does not say it supports PKCE with "
                                                      "S256: refusing to authorize")
        endpoint = server_metadata.get("authorization_endpoint")
        token_endpoint = server_metadata.get("token_endpoint")
        if not isinstance(endpoint, str) or not isinstance(token_endpoint, str):
            raise AuthorizationError(INVALID_REQUEST, "the authorization server metadata lacks an authorization or "
                                                      "token endpoint")
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(24)
        expected_issuer = server_metadata["issuer"]
        query = {"response_type": "code", "client_id": registration["client_id"], "redirect_uri": self._redirect.uri,
                 "code_challenge": challenge, "code_challenge_method": "S256", "state": state, "resource": resource}
        if scopes:
            query["scope"] = " ".join(scopes)
        separator = "&" if urlsplit(endpoint).query else "?"
        await self.open_url(f"{endpoint}{separator}{urlencode(query)}")
        answer = {key: values[0] for key, values in parse_qs(urlsplit(await self._redirect.wait()).query).items()}
        # RFC 9207: the issuer is checked before anything else in the answer is believed.
        iss = answer.get("iss")
        if iss is not None and iss != expected_issuer:
            raise AuthorizationError(INVALID_REQUEST, "the authorization response names another issuer than the "
                                                      "authorization server asked: refused (a mix-up attack?)")
        if iss is None and server_metadata.get("authorization_response_iss_parameter_supported") is True:
            raise AuthorizationError(INVALID_REQUEST, "the authorization response lacks the iss parameter its "
                                                      "server promised: refused")
        if answer.get("state") != state:
            raise AuthorizationError(INVALID_REQUEST, "the authorization response does not carry this request's "
                                                      "state: refused")
        if "error" in answer:
            detail = answer.get("error_description") or answer["error"]
            raise AuthorizationError(INVALID_REQUEST, f"authorization was refused: {printable(detail, multiline=False)}")
        if not answer.get("code"):
            raise AuthorizationError(INVALID_REQUEST, "the authorization response carries no code")
        form = {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": self._redirect.uri,
                "code_verifier": verifier, "resource": resource}
        headers = self._client_auth(registration, form, token_endpoint)
        return await self._token_request(token_endpoint, form, headers)


class ClientCredentials(OAuth):
    """The client credentials grant, for a program acting on its own behalf (no person, no browser).

    Authenticates with ``client_secret`` (``client_secret_basic`` unless
    ``token_endpoint_auth_method`` says ``client_secret_post``) or with ``private_key``
    (a PEM private key: a ``private_key_jwt`` assertion signed with
    ``signing_algorithm``). ``issuer`` is required: the authorization server the
    credential is registered with. It is used only when the MCP server lists that
    issuer; a server naming another gets an :class:`AuthorizationError` before any
    authorization server is asked anything. ``step_up`` lets a 403 ``insufficient_scope``
    ask for more scopes (the spec leaves it to such clients; off by default: the refusal
    stands).
    """

    grant = "client_credentials"

    def __init__(self, client_id: str, *, client_secret: str | None = None, private_key: str | bytes | None = None,
                 signing_algorithm: str = "ES256", step_up: bool = False, **options: Any) -> None:
        if (client_secret is None) == (private_key is None):
            raise ValueError("ClientCredentials needs exactly one of client_secret= and private_key=")
        if options.get("issuer") is None:
            raise ValueError(_unbound("ClientCredentials"))
        method = options.pop("token_endpoint_auth_method", None) or (
            "private_key_jwt" if private_key is not None else "client_secret_basic")
        super().__init__(client_id=client_id, client_secret=client_secret, token_endpoint_auth_method=method,
                         **options)
        self._private_key = private_key
        self.signing_algorithm = signing_algorithm
        self.step_up = step_up

    def _confidential(self) -> bool:
        return True  # a secret or a private key: the constructor takes nothing else

    def _client_auth(self, registration: Mapping[str, Any], form: dict[str, str], token_endpoint: str
                     ) -> dict[str, str]:
        if registration.get("method") != "private_key_jwt":
            return super()._client_auth(registration, form, token_endpoint)
        form["client_id"] = registration["client_id"]
        form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        form["client_assertion"] = self._assertion(registration["client_id"], self._audience)
        return {}

    _audience = ""

    def _assertion(self, client_id: str, audience: str) -> str:
        try:
            from joserfc import jwk, jwt
        except ImportError:
            raise ImportError("private_key_jwt needs joserfc: install the 'auth' extra: pip install 'mrtr[auth]'") \
                from None
        assert self._private_key is not None
        key = jwk.import_key(self._private_key)
        now = int(time.time())
        claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 300,
                  "jti": secrets.token_urlsafe(16)}
        return jwt.encode({"alg": self.signing_algorithm}, claims, key, algorithms=[self.signing_algorithm])

    async def _grant(self, server_metadata: Mapping[str, Any], registration: Mapping[str, Any], resource: str,
                     scopes: Sequence[str]) -> dict[str, Any]:
        token_endpoint = server_metadata.get("token_endpoint")
        if not isinstance(token_endpoint, str):
            raise AuthorizationError(INVALID_REQUEST, "the authorization server metadata lacks a token endpoint")
        form = {"grant_type": "client_credentials", "resource": resource}
        if scopes:
            form["scope"] = " ".join(scopes)
        self._audience = server_metadata["issuer"]  # RFC 7523: the assertion is for this authorization server
        headers = self._client_auth(registration, form, token_endpoint)
        return await self._token_request(token_endpoint, form, headers)

    async def _refresh(self, record: Mapping[str, Any]) -> bool:
        return False  # a new client_credentials grant is as cheap as a refresh, and needs no refresh token

