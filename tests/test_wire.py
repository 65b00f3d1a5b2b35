"""Round-trips of the official 2026-07-28 examples through ``mrtr.core.wire``, and wire edge cases.

Example TypeNames NOT covered (7 files), and why:

* ``BooleanSchema``, ``NumberSchema``, ``StringSchema``, ``TitledMultiSelectEnumSchema``,
  ``TitledSingleSelectEnumSchema``, ``UntitledMultiSelectEnumSchema``,
  ``UntitledSingleSelectEnumSchema``: the elicitation field-schema vocabulary. ``wire`` keeps
  ``ElicitRequestFormParams.requestedSchema`` as a plain dict, so there is no Struct to
  round-trip; building and checking those schemas belongs to ``mrtr.core.schema``.

Every other example directory is decoded into a Struct (or a typed envelope around one),
encoded again and compared with the original, and the re-encoded JSON is validated against
the official ``$def`` of the same name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from mrtr.core import wire as w
from mrtr.core.kinds import decode_input_response
from tests import wire_schema

EXAMPLES_DIR = wire_schema.EXAMPLES_DIR

# TypeName (examples/ sub-folder, also the $def name) -> the type to decode it into.
EXAMPLE_TYPES: dict[str, Any] = {
    # content
    "TextContent": w.TextContent,
    "ImageContent": w.ImageContent,
    "AudioContent": w.AudioContent,
    "ResourceLink": w.ResourceLink,
    "EmbeddedResource": w.EmbeddedResource,
    "TextResourceContents": w.TextResourceContents,
    "BlobResourceContents": w.BlobResourceContents,
    "ToolUseContent": w.ToolUseContent,
    "ToolResultContent": w.ToolResultContent,
    # sampling, roots, elicitation
    "SamplingMessage": w.SamplingMessage,
    "ModelPreferences": w.ModelPreferences,
    "CreateMessageRequestParams": w.CreateMessageRequestParams,
    "CreateMessageRequest": w.CreateMessageRequest,
    "CreateMessageResult": w.CreateMessageResult,
    "Root": w.Root,
    "ListRootsRequest": w.ListRootsRequest,
    "ListRootsResult": w.ListRootsResult,
    "ElicitRequestFormParams": w.ElicitRequestFormParams,
    "ElicitRequestURLParams": w.ElicitRequestURLParams,
    "ElicitRequest": w.ElicitRequest,
    "ElicitResult": w.ElicitResult,
    # MRTR
    "InputRequests": dict[str, w.InputRequest],
    "InputResponses": w.InputResponses,
    "InputRequiredResult": w.InputRequiredResult,
    # capabilities and listings
    "ClientCapabilities": w.ClientCapabilities,
    "ServerCapabilities": w.ServerCapabilities,
    "Tool": w.Tool,
    "Resource": w.Resource,
    # results
    "CallToolResult": w.CallToolResult,
    "GetPromptResult": w.GetPromptResult,
    "ReadResourceResult": w.ReadResourceResult,
    "CompleteResult": w.CompleteResult,
    "ListToolsResult": w.ListToolsResult,
    "ListPromptsResult": w.ListPromptsResult,
    "ListResourcesResult": w.ListResourcesResult,
    "ListResourceTemplatesResult": w.ListResourceTemplatesResult,
    "DiscoverResult": w.DiscoverResult,
    "SubscriptionsListenResult": w.SubscriptionsListenResult,
    # request params
    "CallToolRequestParams": w.CallToolRequestParams,
    "GetPromptRequestParams": w.GetPromptRequestParams,
    "CompleteRequestParams": w.CompleteRequestParams,
    "PaginatedRequestParams": w.PaginatedRequestParams,
    # notification params
    "ProgressNotificationParams": w.ProgressNotificationParams,
    "LoggingMessageNotificationParams": w.LoggingMessageNotificationParams,
    "CancelledNotificationParams": w.CancelledNotificationParams,
    "ResourceUpdatedNotificationParams": w.ResourceUpdatedNotificationParams,
    # error objects
    "ParseError": w.ErrorObject,
    "InternalError": w.ErrorObject,
    "InvalidParamsError": w.ErrorObject,
    "MethodNotFoundError": w.ErrorObject,
    # JSON-RPC envelopes with typed params / results
    "CallToolRequest": w.JSONRPCRequest[w.CallToolRequestParams],
    "GetPromptRequest": w.JSONRPCRequest[w.GetPromptRequestParams],
    "ReadResourceRequest": w.JSONRPCRequest[w.ReadResourceRequestParams],
    "CompleteRequest": w.JSONRPCRequest[w.CompleteRequestParams],
    "DiscoverRequest": w.JSONRPCRequest[w.RequestParams],
    "ListToolsRequest": w.JSONRPCRequest[w.PaginatedRequestParams],
    "ListPromptsRequest": w.JSONRPCRequest[w.PaginatedRequestParams],
    "ListResourcesRequest": w.JSONRPCRequest[w.PaginatedRequestParams],
    "ListResourceTemplatesRequest": w.JSONRPCRequest[w.PaginatedRequestParams],
    "SubscriptionsListenRequest": w.JSONRPCRequest[w.SubscriptionsListenRequestParams],
    "CallToolResultResponse": w.JSONRPCResultResponse[w.CallToolResult],
    "GetPromptResultResponse": w.JSONRPCResultResponse[w.GetPromptResult],
    "ReadResourceResultResponse": w.JSONRPCResultResponse[w.ReadResourceResult],
    "CompleteResultResponse": w.JSONRPCResultResponse[w.CompleteResult],
    "DiscoverResultResponse": w.JSONRPCResultResponse[w.DiscoverResult],
    "ListToolsResultResponse": w.JSONRPCResultResponse[w.ListToolsResult],
    "ListPromptsResultResponse": w.JSONRPCResultResponse[w.ListPromptsResult],
    "ListResourcesResultResponse": w.JSONRPCResultResponse[w.ListResourcesResult],
    "ListResourceTemplatesResultResponse": w.JSONRPCResultResponse[w.ListResourceTemplatesResult],
    "SubscriptionsListenResultResponse": w.JSONRPCResultResponse[w.SubscriptionsListenResult],
    "CancelledNotification": w.JSONRPCNotification[w.CancelledNotificationParams],
    "ProgressNotification": w.JSONRPCNotification[w.ProgressNotificationParams],
    "LoggingMessageNotification": w.JSONRPCNotification[w.LoggingMessageNotificationParams],
    "ResourceUpdatedNotification": w.JSONRPCNotification[w.ResourceUpdatedNotificationParams],
    "PromptListChangedNotification": w.JSONRPCNotification[w.NotificationParams],
    "ResourceListChangedNotification": w.JSONRPCNotification[w.NotificationParams],
    "ToolListChangedNotification": w.JSONRPCNotification[w.NotificationParams],
    "SubscriptionsAcknowledgedNotification": w.JSONRPCNotification[
        w.SubscriptionsAcknowledgedNotificationParams
    ],
    "HeaderMismatchError": w.JSONRPCErrorResponse,
    "MissingRequiredClientCapabilityError": w.JSONRPCErrorResponse,
    "UnsupportedProtocolVersionError": w.JSONRPCErrorResponse,
}

NOT_COVERED = {
    "BooleanSchema",
    "NumberSchema",
    "StringSchema",
    "TitledMultiSelectEnumSchema",
    "TitledSingleSelectEnumSchema",
    "UntitledMultiSelectEnumSchema",
    "UntitledSingleSelectEnumSchema",
}


def _drop_stray_id(obj: dict[str, Any]) -> dict[str, Any]:
    # The official ListRootsRequest example carries an "id", which an embedded request does not
    # have (InputRequests entries are bare {method, params}); the schema allows extra members, so
    # the example is valid, but ListRootsRequest has no such field and drops it on re-encode.
    return {k: v for k, v in obj.items() if k != "id"}


# Normalisations applied to the original before comparing, keyed by "TypeName/file.json".
NORMALIZE = {
    "ListRootsRequest/list-roots-request.json": _drop_stray_id,
}


def _example_files() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*/*.json"))


def _covered_examples() -> list[Any]:
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.name}")
        for path in _example_files()
        if path.parent.name in EXAMPLE_TYPES
    ]


def _has_null(obj: Any) -> bool:
    if obj is None:
        return True
    if isinstance(obj, dict):
        return any(_has_null(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_null(v) for v in obj)
    return False


# ---------------------------------------------------------------------------
# Example round-trips
# ---------------------------------------------------------------------------


def test_examples_present() -> None:
    assert len(_example_files()) == 129


def test_every_example_type_is_covered_or_listed() -> None:
    names = {path.parent.name for path in _example_files()}
    assert names - EXAMPLE_TYPES.keys() == NOT_COVERED
    assert EXAMPLE_TYPES.keys() <= names


def test_example_type_names_are_defs() -> None:
    assert EXAMPLE_TYPES.keys() <= set(wire_schema.def_names())


@pytest.mark.parametrize("path", _covered_examples())
def test_example_round_trip(path: Path) -> None:
    type_name = path.parent.name
    raw = path.read_bytes()
    original = json.loads(raw)

    obj = w.decode(raw, EXAMPLE_TYPES[type_name])
    encoded = w.encode(obj)
    again = json.loads(encoded)

    expected = NORMALIZE.get(f"{type_name}/{path.name}", lambda o: o)(original)
    assert again == expected
    # Stricter than == (which equates 50 with 50.0): same JSON text, key order aside.
    assert json.dumps(again, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert w.to_builtins(obj) == again
    assert not _has_null(again) or _has_null(original)
    wire_schema.validate(again, type_name)
    # And the typed object decodes again to an equal object.
    assert w.decode(encoded, EXAMPLE_TYPES[type_name]) == obj


def test_input_responses_decode_per_key_against_their_requests() -> None:
    requests = w.decode(
        (
            EXAMPLES_DIR / "InputRequests" / "elicitation-and-sampling-input-requests.json"
        ).read_bytes(),
        w.InputRequests,
    )
    responses = w.decode(
        (
            EXAMPLES_DIR / "InputResponses" / "elicitation-and-sampling-input-responses.json"
        ).read_bytes(),
        w.InputResponses,
    )
    assert requests.keys() == responses.keys()
    typed = {
        key: decode_input_response(requests[key], value) for key, value in responses.items()
    }
    assert isinstance(typed["github_login"], w.ElicitResult)
    assert typed["github_login"].content == {"name": "octocat"}
    assert isinstance(typed["capital_of_france"], w.CreateMessageResult)
    assert typed["capital_of_france"].stop_reason == "endTurn"
    for value in typed.values():
        wire_schema.validate(w.to_builtins(value), "InputResponse")
    assert w.to_builtins(typed) == responses


def test_decode_input_response_by_method_name() -> None:
    roots = decode_input_response("roots/list", {"roots": [{"uri": "file:///tmp"}]})
    assert roots == w.ListRootsResult(roots=[w.Root(uri="file:///tmp")])
    with pytest.raises(msgspec.ValidationError):
        decode_input_response("tools/call", {})
    with pytest.raises(msgspec.ValidationError):
        decode_input_response(w.ElicitRequest(params=_FORM), {"action": "maybe"})


# ---------------------------------------------------------------------------
# Elicitation params polymorphism
# ---------------------------------------------------------------------------

_FORM = {
    "message": "Name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def test_missing_mode_decodes_as_form() -> None:
    req = w.decode(json.dumps({"method": "elicitation/create", "params": _FORM}), w.InputRequest)
    assert isinstance(req, w.ElicitRequest)
    assert isinstance(req.params, w.ElicitRequestFormParams)
    assert req.params.mode is None
    assert req.params.requested_schema["properties"]["name"] == {"type": "string"}
    # Re-encoding does not invent a mode.
    assert json.loads(w.encode(req)) == {"method": "elicitation/create", "params": _FORM}


def test_explicit_modes() -> None:
    form = w.decode_elicit_params({**_FORM, "mode": "form"})
    assert isinstance(form, w.ElicitRequestFormParams) and form.mode == "form"
    url = w.decode_elicit_params({"mode": "url", "message": "Key?", "url": "https://x.test/k"})
    assert isinstance(url, w.ElicitRequestURLParams) and url.url == "https://x.test/k"
    with pytest.raises(msgspec.ValidationError, match="mode"):
        w.decode_elicit_params({**_FORM, "mode": "telepathy"})
    with pytest.raises(msgspec.ValidationError):
        w.decode(
            b'{"method":"elicitation/create","params":{"mode":"url","message":"m"}}',
            w.ElicitRequest,
        )
    with pytest.raises(msgspec.ValidationError):
        w.decode(b'{"method":"elicitation/create","params":[]}', w.ElicitRequest)


def test_typed_construction_of_url_elicitation() -> None:
    req = w.ElicitRequest(params=w.ElicitRequestURLParams(message="Key?", url="https://x.test/k"))
    out = json.loads(w.encode(req))
    assert out == {
        "method": "elicitation/create",
        "params": {"message": "Key?", "url": "https://x.test/k", "mode": "url"},
    }
    wire_schema.validate(out, "ElicitRequest")
    # Constructing from a plain dict normalises it the same way decoding does.
    assert w.ElicitRequest(params=dict(_FORM)).params == w.decode_elicit_params(_FORM)


# ---------------------------------------------------------------------------
# Tolerance, _meta, nulls
# ---------------------------------------------------------------------------


def test_unknown_fields_are_tolerated_on_read() -> None:
    text = w.decode(b'{"type":"text","text":"hi","futureField":{"x":1}}', w.TextContent)
    assert text == w.TextContent(text="hi")

    # A conformance mock still sends a top-level serverInfo in server/discover results.
    discover = w.decode(
        json.dumps(
            {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": True, "someday": 1}},
                "serverInfo": {"name": "old", "version": "0"},
                "ttlMs": 0,
                "cacheScope": "private",
            }
        ),
        w.DiscoverResult,
    )
    assert discover.capabilities.tools == {"listChanged": True, "someday": 1}

    # Legacy capability subfields (roots.listChanged) survive a round-trip.
    caps_in = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
    caps = w.decode(json.dumps(caps_in), w.ClientCapabilities)
    assert json.loads(w.encode(caps)) == caps_in
    wire_schema.validate(json.loads(w.encode(caps)), "ClientCapabilities")

    # Unknown members inside embedded requests are ignored as well.
    req = w.decode(b'{"method":"roots/list","params":{},"id":7}', w.InputRequest)
    assert isinstance(req, w.ListRootsRequest) and req.params == {}


def test_meta_round_trips_under_its_exact_name() -> None:
    meta = {w.META_SERVER_INFO: {"name": "srv", "version": "1"}, "custom/key": [1, 2]}
    result = w.CallToolResult(content=[w.TextContent(text="ok", meta={"a": 1})], meta=meta)
    out = json.loads(w.encode(result))
    assert out["_meta"] == meta
    assert out["content"][0]["_meta"] == {"a": 1}
    assert "meta" not in out
    back = w.decode(w.encode(result), w.CallToolResult)
    assert back.meta == meta
    assert back.content[0].meta == {"a": 1}
    # A struct-valued _meta entry encodes as its wire form.
    with_impl = w.InputRequiredResult(
        request_state="s", meta={w.META_SERVER_INFO: w.Implementation(name="srv", version="1")}
    )
    out = json.loads(w.encode(with_impl))
    assert out["_meta"] == {w.META_SERVER_INFO: {"name": "srv", "version": "1"}}
    wire_schema.validate(out, "InputRequiredResult")


def test_omitted_optionals_are_not_emitted_as_null() -> None:
    objects = [
        w.TextContent(text="x"),
        w.Implementation(name="n", version="1"),
        w.Tool(name="t", input_schema={"type": "object"}),
        w.CallToolResult(content=[]),
        w.ElicitResult(action="cancel"),
        w.ElicitRequestFormParams(
            message="m", requested_schema={"type": "object", "properties": {}}
        ),
        w.ListRootsRequest(),
        w.InputRequiredResult(request_state="s"),
        w.ReadResourceResult(contents=[w.TextResourceContents(uri="file:///a", text="")]),
        w.JSONRPCNotification(method="notifications/progress"),
        w.JSONRPCErrorResponse(error=w.ErrorObject(code=-32700, message="Parse error")),
        w.ProgressNotificationParams(progress_token="t", progress=1),
        w.ToolResultContent(tool_use_id="c", content=[]),
    ]
    for obj in objects:
        out = json.loads(w.encode(obj))
        assert not _has_null(out), (obj, out)
    assert json.loads(w.encode(w.ListRootsRequest())) == {"method": "roots/list"}
    assert json.loads(w.encode(w.ElicitResult(action="cancel"))) == {"action": "cancel"}
    assert json.loads(w.encode(w.CallToolResult(content=[]))) == {
        "resultType": "complete",
        "content": [],
    }


def test_null_is_kept_where_it_is_a_value() -> None:
    # structuredContent and error.data are "any JSON", so an explicit null is data, not "unset".
    result = w.CallToolResult(content=[], structured_content=None)
    assert json.loads(w.encode(result))["structuredContent"] is None
    err = w.ErrorObject(code=-32603, message="x", data=None)
    assert json.loads(w.encode(err)) == {"code": -32603, "message": "x", "data": None}
    assert w.decode(b'{"code":1,"message":"m"}', w.ErrorObject).data is msgspec.UNSET


# ---------------------------------------------------------------------------
# Content blocks
# ---------------------------------------------------------------------------


def test_content_block_union_dispatch() -> None:
    blocks = [
        {"type": "text", "text": "t"},
        {"type": "image", "data": "AA==", "mimeType": "image/png"},
        {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a", "name": "a"},
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}},
    ]
    decoded = w.decode(json.dumps(blocks), list[w.ContentBlock])
    assert [type(b) for b in decoded] == [
        w.TextContent,
        w.ImageContent,
        w.AudioContent,
        w.ResourceLink,
        w.EmbeddedResource,
    ]
    assert [b.type for b in decoded] == ["text", "image", "audio", "resource_link", "resource"]
    assert isinstance(decoded[4].resource, w.BlobResourceContents)
    assert json.loads(w.encode(decoded)) == blocks
    for block in blocks:
        wire_schema.validate(block, "ContentBlock")

    # tool_use / tool_result belong to sampling only, as in the schema.
    tool_use = {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    with pytest.raises(msgspec.ValidationError):
        w.decode(json.dumps(tool_use), w.ContentBlock)
    assert isinstance(
        w.decode(json.dumps(tool_use), w.SamplingMessageContentBlock), w.ToolUseContent
    )
    assert isinstance(w.decode(json.dumps(tool_use), w.AnyContentBlock), w.ToolUseContent)
    with pytest.raises(msgspec.ValidationError):
        w.decode(b'{"type":"video","data":""}', w.AnyContentBlock)


def test_sampling_message_content_is_a_block_or_a_list() -> None:
    single = w.decode(b'{"role":"user","content":{"type":"text","text":"q"}}', w.SamplingMessage)
    assert isinstance(single.content, w.TextContent)
    many = w.decode(
        b'{"role":"assistant","content":[{"type":"tool_use","id":"1","name":"f","input":{}}]}',
        w.SamplingMessage,
    )
    assert isinstance(many.content, list) and isinstance(many.content[0], w.ToolUseContent)


def test_resource_contents_dispatch_on_text_or_blob() -> None:
    result = w.decode(
        b'{"resultType":"complete","ttlMs":0,"cacheScope":"public","contents":['
        b'{"uri":"file:///t","text":"hello"},{"uri":"file:///b","blob":"AA==","mimeType":"x/y"}]}',
        w.ReadResourceResult,
    )
    assert isinstance(result.contents[0], w.TextResourceContents)
    assert isinstance(result.contents[1], w.BlobResourceContents)
    assert result.contents[1].mime_type == "x/y"
    # An empty text is still text.
    assert isinstance(w.decode_resource_contents({"uri": "u", "text": ""}), w.TextResourceContents)
    with pytest.raises(msgspec.ValidationError, match="text.*blob"):
        w.decode(b'{"contents":[{"uri":"file:///x"}]}', w.ReadResourceResult)
    with pytest.raises(msgspec.ValidationError):
        w.decode(b'{"type":"resource","resource":"nope"}', w.EmbeddedResource)


# ---------------------------------------------------------------------------
# ElicitResult numbers
# ---------------------------------------------------------------------------


def test_elicit_result_accepts_floats() -> None:
    # schema.ts types content values as number; schema.json narrows them to integer. TypeScript
    # is the source of truth, so floats decode and encode; schema.json alone would reject this.
    payload = {"action": "accept", "content": {"age": 30.5, "n": 3, "ok": True, "tags": ["a"]}}
    result = w.decode(json.dumps(payload), w.ElicitResult)
    assert result.content == {"age": 30.5, "n": 3, "ok": True, "tags": ["a"]}
    assert isinstance(result.content["age"], float)
    assert isinstance(result.content["n"], int) and not isinstance(result.content["n"], bool)
    assert result.content["ok"] is True
    assert json.loads(w.encode(result)) == payload
    assert not wire_schema.is_valid(payload, "ElicitResult")  # the known discrepancy
    with pytest.raises(msgspec.ValidationError):
        w.decode(b'{"action":"accept","content":{"x":{"nested":1}}}', w.ElicitResult)


# ---------------------------------------------------------------------------
# resultType, jsonrpc, results
# ---------------------------------------------------------------------------


def test_input_required_result_encodes_result_type() -> None:
    result = w.InputRequiredResult(
        input_requests={
            "who": w.ElicitRequest(
                params=w.ElicitRequestFormParams(
                    message="Name?", requested_schema=_FORM["requestedSchema"]
                )
            )
        },
        request_state="opaque",
    )
    out = json.loads(w.encode(result))
    assert out["resultType"] == w.RESULT_TYPE_INPUT_REQUIRED == "input_required"
    assert out["inputRequests"]["who"]["method"] == "elicitation/create"
    wire_schema.validate(out, "InputRequiredResult")
    envelope = json.loads(w.encode(w.JSONRPCResultResponse(id=3, result=result)))
    assert envelope["jsonrpc"] == "2.0"
    wire_schema.validate_message(envelope, result_def="InputRequiredResult")
    # An interim result where the caller expects a final one is rejected.
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message(envelope, result_def="CallToolResult")
    state_only = json.loads(w.encode(w.InputRequiredResult(request_state="s")))
    assert state_only == {"resultType": "input_required", "requestState": "s"}


def test_result_types_default_and_decode() -> None:
    assert json.loads(w.encode(w.GetPromptResult(messages=[])))["resultType"] == "complete"
    # Clients treat an absent resultType as complete.
    assert w.decode(b'{"content":[]}', w.CallToolResult).result_type == "complete"
    assert w.convert_result({"content": []}, w.CallToolResult) == w.CallToolResult(content=[])
    interim = w.convert_result(
        {"resultType": "input_required", "requestState": "s"}, w.CallToolResult
    )
    assert interim == w.InputRequiredResult(request_state="s")
    with pytest.raises(msgspec.ValidationError, match="resultType"):
        w.convert_result({"resultType": "task"}, w.CallToolResult)


def test_jsonrpc_member_is_always_emitted_and_checked() -> None:
    out = json.loads(w.encode(w.JSONRPCRequest(id="r1", method="tools/list")))
    assert out == {"jsonrpc": "2.0", "id": "r1", "method": "tools/list"}
    with pytest.raises(msgspec.ValidationError):
        w.decode(b'{"jsonrpc":"1.0","id":1,"method":"x"}', w.JSONRPCRequest)
    err = w.JSONRPCErrorResponse(error=w.ErrorObject(code=-32700, message="Parse error"))
    out = json.loads(w.encode(err))
    assert out == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    wire_schema.validate_message(out)


def test_discover_result_wire_shape() -> None:
    result = w.DiscoverResult(
        supported_versions=[w.PROTOCOL_VERSION],
        capabilities=w.ServerCapabilities(tools={}),
        ttl_ms=0,
        cache_scope="private",
        meta={w.META_SERVER_INFO: w.Implementation(name="mrtr", version="0")},
    )
    out = json.loads(w.encode(result))
    assert out["supportedVersions"] == ["2026-07-28"]
    assert out["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mrtr"
    wire_schema.validate_message(
        {"jsonrpc": "2.0", "id": 1, "result": out}, result_def="DiscoverResult"
    )


def test_meta_key_constants() -> None:
    assert w.PROTOCOL_VERSION == "2026-07-28"
    keys = {
        w.META_PROTOCOL_VERSION,
        w.META_CLIENT_CAPABILITIES,
        w.META_CLIENT_INFO,
        w.META_LOG_LEVEL,
    }
    assert keys == set(wire_schema.schema()["$defs"]["RequestMetaObject"]["properties"]) - {
        "progressToken"
    }
    assert w.META_PROGRESS_TOKEN == "progressToken"
    assert w.META_SERVER_INFO in wire_schema.schema()["$defs"]["ResultMetaObject"]["properties"]
    assert (
        w.META_SUBSCRIPTION_ID
        in wire_schema.schema()["$defs"]["NotificationMetaObject"]["properties"]
    )


# ---------------------------------------------------------------------------
# Module hygiene
# ---------------------------------------------------------------------------


def test_decode_reads_each_call_as_the_type_it_names_whatever_was_decoded_before() -> None:
    # decode() keeps one decoder per type: interleaving types, generic aliases and input
    # kinds must never hand one call's type to another.
    data = '{"type":"text","text":"a"}'
    for _ in range(2):
        assert w.decode(data, w.TextContent) == w.TextContent(text="a")
        assert w.decode(data) == {"type": "text", "text": "a"}
        assert w.decode(f"[{data}]", list[w.TextContent]) == [w.TextContent(text="a")]
        assert w.decode(f"[{data}]", list[Any]) == [{"type": "text", "text": "a"}]
    for raw in (data, data.encode(), bytearray(data.encode()), memoryview(data.encode())):
        assert w.decode(raw, w.TextContent).text == "a"
    with pytest.raises(msgspec.ValidationError, match="text"):
        w.decode(b'{"type":"text","text":1}', w.TextContent)
    assert w.decode(b'{"type":"text","text":1}') == {"type": "text", "text": 1}


def test_public_classes_and_functions_have_docstrings() -> None:
    for name in w.__all__:
        obj = getattr(w, name)
        if (
            isinstance(obj, type)
            or callable(obj)
            and getattr(obj, "__module__", None) == w.__name__
        ):
            assert obj.__doc__ and obj.__doc__.strip(), name


# ---------------------------------------------------------------------------
# wire_schema.validate_message itself
# ---------------------------------------------------------------------------


def _response(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


@pytest.mark.parametrize(
    ("result", "result_def"),
    [
        ({"resultType": "input_required"}, None),
        ({"resultType": "input_required"}, "InputRequiredResult"),
        ({"resultType": "complete", "requestState": "s"}, "InputRequiredResult"),
        ({"resultType": "input_required", "requestState": "s"}, "CallToolResult"),
        ({"content": []}, "CallToolResult"),
        ({"resultType": "complete"}, "CallToolResult"),
    ],
    ids=[
        "no-requests-no-state",
        "no-requests-no-state-def",
        "wrong-result-type",
        "interim-where-final-expected",
        "missing-result-type",
        "schema-violation",
    ],
)
def test_validate_message_rejects(result: dict[str, Any], result_def: str | None) -> None:
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message(_response(result), result_def=result_def)


def test_validate_message_accepts_examples_and_checks_notifications() -> None:
    for path in EXAMPLES_DIR.glob("*/*.json"):
        msg = json.loads(path.read_bytes())
        if path.parent.name.endswith(("ResultResponse", "Notification")) or path.parent.name in {
            "HeaderMismatchError",
            "MissingRequiredClientCapabilityError",
            "UnsupportedProtocolVersionError",
        }:
            if path.parent.name == "CancelledNotification":
                continue  # sent by the client, but valid all the same
            wire_schema.validate_message(msg)
    bad_progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progress": 1},
    }
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message(bad_progress)
    bad_log = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "loud", "data": 1},
    }
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message(bad_log)
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message(
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "m"}}
        )
    with pytest.raises(jsonschema.ValidationError):
        wire_schema.validate_message({"jsonrpc": "2.0", "id": 1})
