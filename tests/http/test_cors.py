"""CORS for browser clients on allowed origins, each test against both front ends (native and ASGI).

Preflights (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method: POST``) are
answered ``204`` for allowed origins only; every response to an allowed ``Origin`` names
that origin in ``Access-Control-Allow-Origin`` with ``Vary: Origin``; a request without
``Origin`` gets no CORS header at all. Every JSON-RPC body is validated against the schema
(``decode_reply`` and ``Endpoint.post`` do it).
"""

from __future__ import annotations

import httpx
import pytest
import trio

from mrtr.transports.http import ASGIApp

from .app import server as app_server
from .conftest import Endpoint, decode_reply, rpc, start_hypercorn, start_native

PREFLIGHT_HEADERS = {"access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers",
                     "access-control-max-age", "vary"}
# What a browser puts in Access-Control-Request-Headers for a tools/call with a mirrored argument
# (lowercase and sorted; Accept is CORS-safelisted and so usually left out).
BROWSER_REQUEST_HEADERS = "content-type,mcp-method,mcp-name,mcp-param-region,mcp-protocol-version"

LOCAL = "http://localhost:5173"
LISTED = "https://app.example.com"


def cors_names(headers: httpx.Headers) -> set[str]:
    """The CORS-related header names of a response (hypercorn adds date/server, h11 adds nothing)."""
    return {name for name in headers if name.startswith("access-control-") or name == "vary"}


def assert_cors(headers: httpx.Headers, origin: str) -> None:
    assert headers["access-control-allow-origin"] == origin
    assert headers.get_list("access-control-allow-origin") == [origin]
    assert headers["vary"] == "Origin"
    # no credentials, nothing to expose, never a wildcard
    assert cors_names(headers) == {"access-control-allow-origin", "vary"}


def assert_no_cors(headers: httpx.Headers) -> None:
    assert cors_names(headers) == set()


async def preflight(endpoint: Endpoint, origin: str | None, *, method: str | None = "POST",
                    request_headers: str | None = BROWSER_REQUEST_HEADERS) -> httpx.Response:
    headers = {}
    if origin is not None:
        headers["Origin"] = origin
    if method is not None:
        headers["Access-Control-Request-Method"] = method
    if request_headers is not None:
        headers["Access-Control-Request-Headers"] = request_headers
    return await endpoint.client.options("/mcp", headers=headers)


@pytest.fixture
def endpoint(modern_endpoint):
    """CORS as a server of the modern era alone answers it; what serving 2025 sessions adds is in test_sessions.py."""
    return modern_endpoint


def regional_call(**meta_extra) -> dict:
    return rpc("tools/call", {"name": "regional", "arguments": {"region": "eu"}}, **meta_extra)


# -- preflight -----------------------------------------------------------------------------


@pytest.mark.parametrize("origin", [LOCAL, "http://127.0.0.1:8080", "http://[::1]:6274", LISTED,
                                    "https://app.example.com:443", "http://trusted.example.org:3000"])
async def test_a_preflight_from_an_allowed_origin_is_204(endpoint, origin):
    response = await preflight(endpoint, origin)
    assert response.status_code == 204, response.content
    assert response.content == b""
    assert cors_names(response.headers) == PREFLIGHT_HEADERS
    assert response.headers["access-control-allow-origin"] == origin
    assert response.headers["access-control-allow-methods"] == "POST"
    assert response.headers["access-control-allow-headers"] == BROWSER_REQUEST_HEADERS.replace(",", ", ")
    assert response.headers["access-control-max-age"] == "600"
    assert response.headers["vary"] == "Origin"
    assert "content-type" not in response.headers
    assert "allow" not in response.headers

    # the request the browser sends next, on the same (kept-alive) connection
    reply = await endpoint.post(regional_call(), headers={"Origin": origin})
    assert reply.status == 200, reply.body
    assert reply.result["content"][0]["text"] == "eu:1:False:"
    assert_cors(reply.headers, origin)


async def test_every_header_a_client_may_send_is_echoed_lowercased_and_deduplicated(endpoint):
    requested = ("Content-Type, Accept, Authorization, MCP-Protocol-Version, Mcp-Method, Mcp-Name, "
                 "Mcp-Param-Region, mcp-param-dry-run, content-type")
    response = await preflight(endpoint, LISTED, request_headers=requested)
    assert response.status_code == 204
    assert response.headers["access-control-allow-headers"] == (
        "content-type, accept, authorization, mcp-protocol-version, mcp-method, mcp-name, "
        "mcp-param-region, mcp-param-dry-run")


async def test_a_preflight_without_requested_headers_gets_no_allow_headers(endpoint):
    response = await preflight(endpoint, LOCAL, request_headers=None)
    assert response.status_code == 204
    assert cors_names(response.headers) == PREFLIGHT_HEADERS - {"access-control-allow-headers"}


async def test_a_preflight_from_a_foreign_origin_is_403(endpoint):
    for origin in ("https://evil.example", "http://localhost.evil.example", "null", "https://app.example.com:8443"):
        response = await preflight(endpoint, origin)
        assert response.status_code == 403, origin
        reply = decode_reply(response)
        assert reply.error["code"] == -32600 and "id" not in reply.message
        assert "origin" in reply.error["message"].lower()
        assert_no_cors(response.headers)


@pytest.mark.parametrize("requested", [
    "content-type,x-custom,mcp-protocol-version",
    "content-type,mcp-session-id,mcp-protocol-version",
    "content-type,last-event-id,mcp-protocol-version",
    "content-type,cookie,mcp-param-,mcp-protocol-version",
    "content-type,mcp-param-a@b,mcp-protocol-version",
])
async def test_a_disallowed_request_header_is_left_out(endpoint, requested):
    response = await preflight(endpoint, LOCAL, request_headers=requested)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == LOCAL
    assert response.headers["access-control-allow-headers"] == "content-type, mcp-protocol-version"


async def test_a_preflight_asking_only_for_disallowed_headers_gets_no_allow_headers(endpoint):
    response = await preflight(endpoint, LISTED, request_headers="x-custom, x-other")
    assert response.status_code == 204
    assert "access-control-allow-headers" not in response.headers
    assert response.headers["access-control-allow-methods"] == "POST"


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "post"])
async def test_a_preflight_for_another_method_is_405(endpoint, method):
    response = await preflight(endpoint, LOCAL, method=method)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    reply = decode_reply(response)
    assert reply.error["code"] == -32600 and "id" not in reply.message
    assert_cors(response.headers, LOCAL)
    assert "access-control-allow-methods" not in response.headers


async def test_options_without_preflight_headers_is_405_as_before(endpoint):
    response = await endpoint.client.options("/mcp")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    decode_reply(response)
    assert_no_cors(response.headers)

    # Access-Control-Request-Method without Origin is no preflight either
    response = await preflight(endpoint, None)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert_no_cors(response.headers)

    # Origin without Access-Control-Request-Method: an ordinary OPTIONS from a page, readable by it
    response = await preflight(endpoint, LISTED, method=None)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    decode_reply(response)
    assert_cors(response.headers, LISTED)


async def test_the_path_check_comes_before_cors(endpoint):
    response = await endpoint.client.options("/other", headers={"Origin": LOCAL,
                                                                "Access-Control-Request-Method": "POST"})
    assert response.status_code == 404
    assert_no_cors(response.headers)


# -- CORS headers on the answers to POST -------------------------------------------------------


@pytest.mark.parametrize("origin", [LOCAL, LISTED])
async def test_a_json_response_names_the_origin(endpoint, origin):
    reply = await endpoint.call("tools/list", headers={"Origin": origin})
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert "tools" in reply.result
    assert_cors(reply.headers, origin)


async def test_an_sse_response_names_the_origin(endpoint):
    reply = await endpoint.call("tools/call", {"name": "count", "arguments": {"steps": 2}}, progressToken="p",
                                headers={"Origin": LISTED})
    assert reply.status == 200 and reply.is_sse
    assert len(reply.notifications) == 2
    assert reply.result["content"][0]["text"] == "counted to 2"
    assert_cors(reply.headers, LISTED)
    assert reply.headers["cache-control"] == "no-cache"


async def test_error_responses_name_the_origin(endpoint):
    origin = {"Origin": LOCAL}
    cases = [
        (await endpoint.post(rpc("tools/list"), headers={**origin, "Content-Type": "text/plain"}), 415, -32600),
        (await endpoint.post(rpc("tools/list"), headers={**origin, "Accept": "application/json"}), 406, -32600),
        (await endpoint.post(b"{not json", headers=origin), 400, -32700),
        (await endpoint.post(b"[]", headers=origin), 400, -32600),
        (await endpoint.post(rpc("tools/list"), headers={**origin, "Mcp-Method": "prompts/list"}), 400, -32020),
        (await endpoint.call("tools/call", {"name": "nope"}, headers=origin), 400, -32602),
        (await endpoint.call("initialize", headers=origin), 404, -32601),
        (await endpoint.call("prompts/get", {"name": "broken"}, headers=origin), 200, -32603),
    ]
    for reply, status, code in cases:
        assert (reply.status, reply.error["code"]) == (status, code), reply.body
        assert_cors(reply.headers, LOCAL)

    response = await endpoint.client.get("/mcp", headers={**origin, "Accept": "text/event-stream"})
    assert response.status_code == 405
    decode_reply(response)
    assert_cors(response.headers, LOCAL)


async def test_a_notification_202_names_the_origin(endpoint):
    reply = await endpoint.post(rpc("notifications/initialized", id=None), headers={"Origin": LISTED})
    assert reply.status == 202 and reply.body == b""
    assert_cors(reply.headers, LISTED)


async def test_a_foreign_origin_post_gets_no_cors_headers(endpoint):
    reply = await endpoint.call("tools/list", headers={"Origin": "https://evil.example"})
    assert reply.status == 403
    assert_no_cors(reply.headers)


async def test_no_origin_means_no_cors_headers(endpoint):
    no_origin = {"Origin": None}
    replies = [
        await endpoint.call("tools/list", headers=no_origin),
        await endpoint.call("tools/call", {"name": "count", "arguments": {"steps": 1}}, progressToken=1,
                            headers=no_origin),
        await endpoint.post(rpc("tools/list"), headers={**no_origin, "Content-Type": "text/plain"}),
        await endpoint.call("initialize", headers=no_origin),
        await endpoint.post(rpc("notifications/initialized", id=None), headers=no_origin),
    ]
    assert [reply.status for reply in replies] == [200, 200, 415, 404, 202]
    assert replies[1].is_sse
    for reply in replies:
        assert_no_cors(reply.headers)
    json_reply = replies[0]
    assert [name for name in json_reply.headers if name not in ("date", "server")] == \
        ["content-type", "content-length"]


# -- allowed_origins=["*"] -------------------------------------------------------------------------


@pytest.fixture(params=["native", "asgi"])
async def open_endpoint(request, nursery):
    """The test server accepting every origin (``allowed_origins=["*"]``) behind one front end."""
    if request.param == "native":
        port = await start_native(nursery, allowed_origins=["*"])
    else:
        port = await start_hypercorn(nursery, ASGIApp(app_server, allowed_origins=["*"]), trio.Event())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        del client.headers["accept"]
        yield Endpoint(request.param, port, client)


async def test_any_origin_is_echoed_never_a_wildcard(open_endpoint):
    origin = "https://anything.example:8443"
    response = await preflight(open_endpoint, origin)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == origin
    reply = await open_endpoint.call("tools/list", headers={"Origin": origin})
    assert reply.status == 200
    assert_cors(reply.headers, origin)
