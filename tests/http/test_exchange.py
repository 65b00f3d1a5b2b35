"""The exchange rules over real HTTP, each test against both front ends (native and ASGI)."""

from __future__ import annotations

import base64
import json

import pytest
import trio

from mrtr.core.wire import META_PROTOCOL_VERSION

from ..conftest import until
from ..wire_schema import validate_message
from .app import GATES, SLOW
from .conftest import MAX_BODY, PROTOCOL, mcp_headers, meta, raw_post, rpc

LOG_LEVEL = "io.modelcontextprotocol/logLevel"


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def assert_error(reply, status: int, code: int, request_id="absent") -> None:
    assert reply.status == status, (reply.status, reply.body)
    assert reply.headers["content-type"] == "application/json"
    assert reply.error["code"] == code
    if request_id == "absent":
        assert "id" not in reply.message
    else:
        assert reply.message["id"] == request_id


# -- 1 to 4: path, Origin, method, media types ---------------------------------------------


async def test_other_paths_are_404_without_a_json_rpc_body(endpoint):
    for path in ("/", "/mcp/", "/other", "/MCP"):
        reply = await endpoint.post(rpc("tools/list"), path=path)
        assert reply.status == 404
        assert reply.messages == []


async def test_the_query_string_is_not_part_of_the_path(endpoint):
    reply = await endpoint.post(rpc("tools/list"), path="/mcp?x=1")
    assert reply.status == 200


async def test_a_foreign_origin_is_403_with_an_id_less_error(endpoint):
    for origin in ("https://evil.example", "http://localhost.evil.example", "null", "https://app.example.com:8443",
                   "ftp://localhost", "not an origin"):
        reply = await endpoint.post(rpc("tools/list", id=5), headers={"Origin": origin})
        assert_error(reply, 403, -32600)
        assert "origin" in reply.error["message"].lower()


@pytest.mark.parametrize("origin", ["http://localhost", "http://localhost:3000", "https://127.0.0.1:8443",
                                    "http://[::1]:6274", "HTTP://LOCALHOST:1"])
async def test_localhost_origins_are_allowed(endpoint, origin):
    reply = await endpoint.post(rpc("tools/list"), headers={"Origin": origin})
    assert reply.status == 200, reply.body


@pytest.mark.parametrize("origin", ["https://app.example.com", "https://app.example.com:443",
                                    "https://trusted.example.org:9999", "http://trusted.example.org"])
async def test_allow_listed_origins_are_allowed(endpoint, origin):
    reply = await endpoint.post(rpc("tools/list"), headers={"Origin": origin})
    assert reply.status == 200, reply.body


async def test_no_origin_header_is_allowed(endpoint):
    reply = await endpoint.post(rpc("tools/list"), headers={"Origin": None})
    assert reply.status == 200


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_other_methods_are_405_with_allow_post(modern_endpoint, method):
    response = await modern_endpoint.client.request(method, "/mcp", headers={"Accept": "text/event-stream",
                                                                              "Last-Event-ID": "3"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_where_2025_sessions_are_served_get_and_delete_are_allowed_too(endpoint, method):
    response = await endpoint.client.request(method, "/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST, DELETE"


async def test_the_origin_check_comes_before_the_method_check(endpoint):
    response = await endpoint.client.get("/mcp", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", None])
async def test_a_body_that_is_not_json_is_415(endpoint, content_type):
    reply = await endpoint.post(rpc("tools/list"), headers={"Content-Type": content_type})
    assert_error(reply, 415, -32600)


async def test_json_with_parameters_is_accepted(endpoint):
    reply = await endpoint.post(rpc("tools/list"), headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert reply.status == 200


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html", None,
                                    "application/json, text/event-stream;q=0"])
async def test_an_accept_without_both_types_is_406(endpoint, accept):
    reply = await endpoint.post(rpc("tools/list"), headers={"Accept": accept})
    assert_error(reply, 406, -32600)


@pytest.mark.parametrize("accept", ["*/*", "text/event-stream, application/json;q=0.9", "application/*, text/*"])
async def test_wildcards_count_as_listing_both_types(endpoint, accept):
    reply = await endpoint.post(rpc("tools/list"), headers={"Accept": accept})
    assert reply.status == 200


# -- 5, 6: parsing and notifications ----------------------------------------------------------


@pytest.mark.parametrize("body", [b"{", b"", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 1,'])
async def test_a_body_that_is_not_json_is_400_parse_error(endpoint, body):
    reply = await endpoint.post(body)
    assert_error(reply, 400, -32700)


async def test_absurdly_nested_json_is_a_parse_error_not_a_crash(endpoint):
    depth = 30_000
    reply = await endpoint.post(b"[" * depth + b"]" * depth)
    assert_error(reply, 400, -32700)
    inner = b"[" * depth + b"]" * depth
    reply = await endpoint.post(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": ' + inner + b"}}")
    assert_error(reply, 400, -32700)


async def test_an_invalid_request_keeps_its_id_when_readable(endpoint):
    reply = await endpoint.post(b'{"jsonrpc": "2.0", "id": 7, "method": 5}')
    assert_error(reply, 400, -32600, request_id=7)
    reply = await endpoint.post(b'{"jsonrpc": "1.0", "id": "x", "method": "tools/list"}')
    assert_error(reply, 400, -32600, request_id="x")


@pytest.mark.parametrize("body", [b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', b'"text"',
                                  b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}',
                                  b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}',
                                  b'{"jsonrpc": "2.0", "id": 1}'])
async def test_batches_and_non_requests_are_400_invalid_request(endpoint, body):
    reply = await endpoint.post(body)
    assert reply.status == 400
    assert reply.error["code"] == -32600


@pytest.mark.parametrize("body", [b'{"jsonrpc": "2.0", "id": 1, "result": {}}',
                                  b'{"jsonrpc": "2.0", "id": "a", "error": {"code": -32601, "message": "no"}}'])
async def test_a_response_is_accepted_with_202_and_never_answered(modern_endpoint, body):
    # Streamable HTTP: a JSON-RPC response or notification is accepted with 202 and no body.
    reply = await modern_endpoint.post(body)
    assert (reply.status, reply.body) == (202, b"")


async def test_a_notification_is_accepted_with_202_and_no_body(modern_endpoint):
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    reply = await modern_endpoint.post(message, mirror=False)
    assert reply.status == 202
    assert reply.body == b""
    assert "content-type" not in reply.headers


# -- 7: MCP headers ---------------------------------------------------------------------------


async def test_a_missing_protocol_version_header_is_32020(endpoint):
    reply = await endpoint.post(rpc("tools/list", id=3), headers={"MCP-Protocol-Version": None})
    assert_error(reply, 400, -32020, request_id=3)
    assert "MCP-Protocol-Version" in reply.error["message"]


async def test_a_protocol_version_header_that_differs_from_the_body_is_32020(endpoint):
    reply = await endpoint.post(rpc("tools/list", id=3), headers={"MCP-Protocol-Version": "2025-11-25"})
    assert_error(reply, 400, -32020, request_id=3)
    assert "'2025-11-25'" in reply.error["message"] and f"'{PROTOCOL}'" in reply.error["message"]


async def test_a_missing_or_wrong_mcp_method_header_is_32020(endpoint):
    reply = await endpoint.post(rpc("tools/list", id=4), headers={"Mcp-Method": None})
    assert_error(reply, 400, -32020, request_id=4)
    reply = await endpoint.post(rpc("tools/list", id=4), headers={"Mcp-Method": "prompts/list"})
    assert_error(reply, 400, -32020, request_id=4)
    assert reply.error["message"] == (
        "Header mismatch: Mcp-Method header value 'prompts/list' does not match body value 'tools/list'")


@pytest.mark.parametrize("method, params", [
    ("tools/call", {"name": "pid"}),
    ("prompts/get", {"name": "greeting", "arguments": {"name": "Ada"}}),
    ("resources/read", {"uri": "notes://welcome"}),
])
async def test_mcp_name_is_required_and_must_match(endpoint, method, params):
    reply = await endpoint.call(method, params, headers={"Mcp-Name": None})
    assert_error(reply, 400, -32020, request_id=1)
    reply = await endpoint.call(method, params, headers={"Mcp-Name": "foo"})
    assert_error(reply, 400, -32020, request_id=1)
    body_value = params.get("name", params.get("uri"))
    assert reply.error["message"] == (
        f"Header mismatch: Mcp-Name header value 'foo' does not match body value '{body_value}'")
    reply = await endpoint.call(method, params)
    assert reply.status == 200


async def test_a_non_ascii_resource_uri_travels_base64_encoded(endpoint):
    reply = await endpoint.call("resources/read", {"uri": "notes://caf\u00e9"})
    assert mcp_headers(rpc("resources/read", {"uri": "notes://caf\u00e9"}))["Mcp-Name"].startswith("=?base64?")
    assert reply.status == 200
    assert reply.result["contents"][0]["text"] == "Coffee."
    raw = "notes://caf\u00e9".encode()
    reply = await endpoint.call("resources/read", {"uri": "notes://caf\u00e9"}, headers={"Mcp-Name": raw})
    assert_error(reply, 400, -32020, request_id=1)
    assert "invalid characters" in reply.error["message"]


async def regional(endpoint, arguments, headers):
    return await endpoint.call("tools/call", {"name": "regional", "arguments": arguments}, headers=headers)


async def test_mirrored_parameters_pass_when_the_headers_match(endpoint):
    reply = await regional(endpoint, {"region": "eu-west-1", "count": 3, "dry_run": True}, {})
    assert reply.status == 200
    assert reply.result["content"][0]["text"] == "eu-west-1:3:True:"


async def test_a_missing_mirrored_parameter_header_is_32020(endpoint):
    reply = await regional(endpoint, {"region": "eu", "count": 2}, {"Mcp-Param-Count": None})
    assert_error(reply, 400, -32020, request_id=1)
    assert "Mcp-Param-Count" in reply.error["message"]


async def test_absent_or_null_arguments_need_no_header(endpoint):
    reply = await regional(endpoint, {"region": "eu", "count": None}, {})
    assert reply.status == 400 and reply.error["code"] == -32602  # null is not an int: argument validation
    reply = await regional(endpoint, {"region": "eu"}, {})
    assert reply.status == 200
    assert "Mcp-Param-Count" not in mcp_headers(rpc("tools/call", {"name": "regional", "arguments": {"region": "eu"}}))


async def test_a_mirrored_header_without_its_argument_is_32020(endpoint):
    reply = await regional(endpoint, {"region": "eu"}, {"Mcp-Param-Count": "5"})
    assert_error(reply, 400, -32020, request_id=1)


async def test_header_names_are_case_insensitive(endpoint):
    reply = await regional(endpoint, {"region": "eu", "count": 2},
                           {"Mcp-Param-Region": None, "Mcp-Param-Count": None, "mcp-param-region": "eu",
                            "MCP-PARAM-COUNT": "2", "mcp-method": "tools/call"})
    assert reply.status == 200


async def test_a_mismatched_string_parameter_is_32020_with_both_values(endpoint):
    reply = await regional(endpoint, {"region": "eu"}, {"Mcp-Param-Region": "us"})
    assert_error(reply, 400, -32020, request_id=1)
    assert reply.error["message"] == (
        "Header mismatch: Mcp-Param-Region header value 'us' does not match body value 'eu'")
    reply = await regional(endpoint, {"region": "eu"}, {"Mcp-Param-Region": "EU"})
    assert reply.status == 400, "values are case-sensitive"


async def test_base64_header_values_are_decoded_before_comparing(endpoint):
    for region in ("Z\u00fcrich", " padded ", "=?base64?literal?=", "plain"):
        reply = await regional(endpoint, {"region": region}, {"Mcp-Param-Region": b64(region)})
        assert reply.status == 200, (region, reply.body)
    reply = await regional(endpoint, {"region": "Bern"}, {"Mcp-Param-Region": b64("Basel")})
    assert_error(reply, 400, -32020, request_id=1)
    assert "'Basel'" in reply.error["message"]


@pytest.mark.parametrize("value", [
    "=?base64?not base64!?=",  # outside the alphabet
    "=?base64?@@@@?=",
    "=?base64?SGVsbG8?=",  # "Hello" without its padding
    "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
])
async def test_an_invalid_base64_value_is_32020(endpoint, value):
    reply = await regional(endpoint, {"region": "eu"}, {"Mcp-Param-Region": value})
    assert_error(reply, 400, -32020, request_id=1)
    assert "base64" in reply.error["message"]


async def test_the_sentinel_markers_are_case_sensitive(endpoint):
    literal = "=?BASE64?ZXU=?="
    reply = await regional(endpoint, {"region": literal}, {"Mcp-Param-Region": literal})
    assert reply.status == 200


async def test_raw_non_ascii_header_values_are_32020(endpoint):
    reply = await regional(endpoint, {"region": "Z\u00fcrich"}, {"Mcp-Param-Region": "Z\u00fcrich".encode()})
    assert_error(reply, 400, -32020, request_id=1)
    assert "invalid characters" in reply.error["message"]


@pytest.mark.parametrize("header, ok", [("7", True), ("007", True), ("+7", True), ("7.0", True), ("7e0", True),
                                        ("8", False), ("7.5", False), ("seven", False), ("0x7", False),
                                        ("", False), (b64("7"), True)])
async def test_integers_are_compared_numerically(endpoint, header, ok):
    reply = await regional(endpoint, {"region": "eu", "count": 7}, {"Mcp-Param-Count": header})
    if ok:
        assert reply.status == 200, reply.body
    else:
        assert_error(reply, 400, -32020, request_id=1)


@pytest.mark.parametrize("header, ok", [("true", True), ("false", False), ("True", False), ("1", False)])
async def test_booleans_are_true_or_false(endpoint, header, ok):
    reply = await regional(endpoint, {"region": "eu", "dry_run": True}, {"Mcp-Param-Dry-Run": header})
    assert (reply.status == 200) is ok, reply.body


async def test_a_repeated_mcp_header_is_32020(endpoint):
    headers = [("Mcp-Param-Region", "eu"), ("Mcp-Param-Region", "eu")]
    message = rpc("tools/call", {"name": "regional", "arguments": {"region": "eu"}})
    base = {k: v for k, v in mcp_headers(message).items() if k != "Mcp-Param-Region"}
    response = await endpoint.client.post("/mcp", content=json.dumps(message).encode(), headers=[
        ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
        *base.items(), *headers])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


async def test_unknown_tools_skip_parameter_headers_and_get_32602(endpoint):
    reply = await endpoint.call("tools/call", {"name": "nope", "arguments": {"region": "eu"}},
                                headers={"Mcp-Param-Region": "us"})
    assert reply.status == 400 and reply.error["code"] == -32602


# -- the server's own errors and their statuses -----------------------------------------------


async def test_missing_meta_is_400_invalid_params(endpoint):
    reply = await endpoint.post(rpc("tools/list", id=9, with_meta=False))
    assert_error(reply, 400, -32602, request_id=9)


async def test_an_unsupported_version_is_400_with_the_supported_list(endpoint):
    message = rpc("tools/list", {"_meta": meta(**{META_PROTOCOL_VERSION: "2099-01-01"})}, id="v")
    reply = await endpoint.post(message)
    assert_error(reply, 400, -32022, request_id="v")
    assert reply.error["data"]["supported"] == [PROTOCOL]
    assert reply.error["data"]["requested"] == "2099-01-01"


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "no/such/method"])
async def test_removed_and_unknown_methods_are_404_with_the_id_kept(endpoint, modern_endpoint, method):
    message = {"jsonrpc": "2.0", "id": 42, "method": method, "params": {"protocolVersion": "2025-06-18"}}
    for served in (endpoint, modern_endpoint):  # a modern header makes it a modern request in both
        assert_error(await served.post(message), 404, -32601, request_id=42)
    reply = await modern_endpoint.post(message, mirror=False)  # a legacy client sends no MCP headers
    assert_error(reply, 404, -32601, request_id=42)
    # Where 2025 sessions are served, that is a 2025 request, and it names no session.
    assert_error(await endpoint.post(message, mirror=False), 400, -32600, request_id=42)


async def test_initialize_with_the_modern_claim_is_a_removed_method(endpoint):
    reply = await endpoint.call("initialize", id=43)
    assert_error(reply, 404, -32601, request_id=43)


async def test_initialize_is_refused_naming_the_versions_served(modern_endpoint):
    """A 2025 client cannot fall forward: the one error it shows its user names what the server speaks."""
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}
    for mirror in (True, False):  # a legacy client sends no MCP headers
        reply = await modern_endpoint.post(message, mirror=mirror)
        assert_error(reply, 400, -32022, request_id=0)
        assert reply.error["data"] == {"supported": [PROTOCOL], "requested": "2025-06-18"}


async def test_a_missing_client_capability_is_400_32021(endpoint):
    reply = await endpoint.call("tools/call", {"name": "ask_model",
                                               "_meta": meta(capabilities={"elicitation": {}})}, id=11)
    assert_error(reply, 400, -32021, request_id=11)
    assert reply.error["data"]["requiredCapabilities"] == {"sampling": {}}


async def test_an_internal_error_travels_with_200(endpoint):
    reply = await endpoint.call("prompts/get", {"name": "broken"}, id=12)
    assert_error(reply, 200, -32603, request_id=12)


async def test_invalid_tool_arguments_are_400_32602(endpoint):
    reply = await endpoint.call("tools/call", {"name": "slow", "arguments": {"tag": 5}})
    assert reply.status == 400 and reply.error["code"] == -32602


async def test_no_session_id_is_ever_minted(endpoint):
    reply = await endpoint.call("server/discover", headers={"Mcp-Session-Id": "abc", "Last-Event-ID": "7"})
    assert reply.status == 200
    assert "mcp-session-id" not in reply.headers
    assert reply.result["supportedVersions"] == [PROTOCOL]


# -- 8: a whole conversation, JSON and SSE ------------------------------------------------------


async def test_an_mrtr_conversation_over_http(endpoint):
    first = await endpoint.call("tools/call", {"name": "ask_name"})
    assert first.status == 200 and not first.is_sse
    assert first.result["resultType"] == "input_required"
    (key, request), = first.result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    token = first.result["requestState"]
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    done = await endpoint.call("tools/call", {"name": "ask_name", "requestState": token, "inputResponses": answer},
                               id=2)
    assert done.status == 200
    assert done.message["id"] == 2
    assert done.result["resultType"] == "complete"
    assert done.result["content"] == [{"type": "text", "text": "Hello, Ada!"}]


async def test_a_tampered_token_is_an_error_not_a_reprompt(endpoint):
    first = await endpoint.call("tools/call", {"name": "ask_name"})
    token = first.result["requestState"]
    reply = await endpoint.call("tools/call", {"name": "ask_name", "requestState": token + "-TAMPERED",
                                               "inputResponses": {}})
    assert reply.status == 400 and reply.error["code"] == -32602


async def test_progress_switches_the_response_to_sse(endpoint):
    reply = await endpoint.call("tools/call", {"name": "count", "arguments": {"steps": 4}}, progressToken="p-1")
    assert reply.status == 200
    assert reply.is_sse
    assert reply.headers["x-accel-buffering"] == "no"
    assert reply.headers["cache-control"] == "no-cache"
    notifications, final = reply.messages[:-1], reply.messages[-1]
    assert [n["method"] for n in notifications] == ["notifications/progress"] * 4
    values = [n["params"]["progress"] for n in notifications]
    assert values == sorted(values) and len(set(values)) == 4
    assert all(n["params"]["progressToken"] == "p-1" for n in notifications)
    assert final["id"] == 1 and final["result"]["content"][0]["text"] == "counted to 4"


async def test_notifications_are_streamed_while_the_handler_runs(endpoint):
    tag = f"gate-{endpoint.kind}"
    GATES[tag] = trio.Event()
    message = rpc("tools/call", {"name": "gated", "arguments": {"tag": tag}}, progressToken="g")
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               **mcp_headers(message)}
    with trio.fail_after(5):
        async with endpoint.client.stream("POST", "/mcp", json=message, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            lines = response.aiter_lines()
            first = None
            async for line in lines:
                if line.startswith("data: "):
                    first = json.loads(line[len("data: "):])
                    break
            # the handler is still waiting at the gate, yet its first notification is here
            assert first["method"] == "notifications/progress" and first["params"]["progress"] == 1
            assert not GATES[tag].is_set()
            GATES[tag].set()
            rest = [json.loads(line[len("data: "):]) async for line in lines if line.startswith("data: ")]
    assert [m.get("method") for m in rest] == ["notifications/progress", None]
    assert rest[-1]["result"]["content"][0]["text"] == "opened"
    for message_out in [first, *rest]:
        validate_message(message_out)


async def test_without_a_progress_token_the_response_is_plain_json(endpoint):
    reply = await endpoint.call("tools/call", {"name": "count", "arguments": {"steps": 2}})
    assert reply.status == 200 and not reply.is_sse
    assert reply.headers["content-type"] == "application/json"
    assert reply.result["content"][0]["text"] == "counted to 2"


async def test_no_log_messages_without_a_log_level(endpoint):
    reply = await endpoint.call("tools/call", {"name": "chatty"})
    assert not reply.is_sse
    assert reply.notifications == []


async def test_log_messages_arrive_when_asked_for(endpoint):
    reply = await endpoint.call("tools/call", {"name": "chatty", "_meta": meta(**{LOG_LEVEL: "info"})})
    assert reply.is_sse
    (note,) = reply.notifications
    assert note["method"] == "notifications/message"
    assert note["params"] == {"level": "info", "data": {"said": "hello"}, "logger": "chatty"}
    reply = await endpoint.call("tools/call", {"name": "chatty", "_meta": meta(**{LOG_LEVEL: "debug"})})
    assert [n["params"]["level"] for n in reply.notifications] == ["info", "debug"]


# -- 9: a client that goes away cancels the handler --------------------------------------------


@pytest.mark.parametrize("with_progress", [False, True])
async def test_a_dropped_connection_cancels_the_handler(endpoint, with_progress):
    tag = f"drop-{endpoint.kind}-{with_progress}"
    extra = {"progressToken": 1} if with_progress else {}
    message = rpc("tools/call", {"name": "slow", "arguments": {"tag": tag, "seconds": 30}}, **extra)
    stream = await trio.open_tcp_stream("127.0.0.1", endpoint.port)
    await stream.send_all(raw_post(message, endpoint.port))
    await until(lambda: SLOW.get(tag) == "started")
    await stream.aclose()
    await until(lambda: SLOW.get(tag) == "cancelled")
    # and the server goes on serving
    reply = await endpoint.call("tools/list")
    assert reply.status == 200


async def test_a_slow_handler_that_finishes_answers_normally(endpoint):
    tag = f"finish-{endpoint.kind}"
    reply = await endpoint.call("tools/call", {"name": "slow", "arguments": {"tag": tag, "seconds": 0.05}})
    assert reply.status == 200 and SLOW[tag] == "finished"


# -- limits shared by both front ends -----------------------------------------------------------


async def test_a_body_over_the_limit_is_413(endpoint):
    message = rpc("tools/call", {"name": "regional", "arguments": {"region": "eu", "note": "x" * (MAX_BODY + 10)}})
    reply = await endpoint.post(message)
    assert reply.status == 413
    reply = await endpoint.call("tools/list")
    assert reply.status == 200


async def test_a_body_just_under_the_limit_is_served(endpoint):
    message = rpc("tools/call", {"name": "regional", "arguments": {"region": "eu", "note": ""}})
    room = MAX_BODY - len(json.dumps(message).encode())
    message["params"]["arguments"]["note"] = "y" * room
    reply = await endpoint.post(message)
    assert reply.status == 200
    assert reply.result["content"][0]["text"].endswith("y" * 10)
