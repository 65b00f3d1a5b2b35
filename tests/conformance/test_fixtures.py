"""The conformance fixtures, checked through ``Server.handle`` (no HTTP, no Node).

Each test replays what a scenario of ``@modelcontextprotocol/conformance`` 0.2.0-alpha.12
sends and asserts what it checks, so a regression shows up here before the suite runs.
Every message the server sends is validated against the 2026-07-28 schema.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mrtr.core.wire import META_CLIENT_INFO
from mrtr.server import Server

from ..conftest import meta as base_meta
from ..wire_schema import validate_message
from .server import lenient_server, make_server, server

DEFAULT_CAPABILITIES = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The ``_meta`` the suite's stateless client sends."""
    return base_meta(DEFAULT_CAPABILITIES if capabilities is None else capabilities,
                     **{META_CLIENT_INFO: {"name": "conformance-test-client", "version": "1.0.0"}, **extra})


class Client:
    """Sends requests to a fixture server the way the suite does and validates every message back."""

    def __init__(self, target: Server) -> None:
        self.server = target
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 1

    async def send(self, method: str, params: dict[str, Any] | None = None, *, result_def: str | None = None,
                   **meta_options: Any) -> dict[str, Any]:
        params = dict(params or {})
        params["_meta"] = meta(**meta_options)
        request_id, self._next_id = self._next_id, self._next_id + 1

        def notify(notification_method: str, notification_params: dict[str, Any]) -> None:
            message = {"jsonrpc": "2.0", "method": notification_method, "params": notification_params}
            validate_message(message)
            self.notifications.append(message)

        message = await self.server.handle(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, notify=notify
        )
        validate_message(message, result_def=result_def)
        assert message["id"] == request_id
        return message

    async def call(self, tool: str, **extra: Any) -> dict[str, Any]:
        meta_options = {key: extra.pop(key) for key in ("capabilities",) if key in extra}
        return await self.send("tools/call", {"name": tool, "arguments": {}, **extra}, **meta_options)


def result_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "result" in message, message
    return message["result"]


def error_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "error" in message, message
    return message["error"]


def input_required(message: dict[str, Any]) -> dict[str, Any]:
    result = result_of(message)
    assert result["resultType"] == "input_required", result
    validate_message(message, result_def="InputRequiredResult")
    return result


def complete(message: dict[str, Any], result_def: str = "CallToolResult") -> dict[str, Any]:
    result = result_of(message)
    assert result["resultType"] == "complete", result
    validate_message(message, result_def=result_def)
    return result


def text_of(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"] if block["type"] == "text")


def accept(**fields: Any) -> dict[str, Any]:
    return {"action": "accept", "content": fields}


def sampled(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test-model",
            "stopReason": "endTurn"}


ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def elicitation(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]},
        },
    }


def sampling(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


both_policies = pytest.mark.parametrize("target", [server, lenient_server], ids=["strict", "lenient"])


@pytest.mark.parametrize(("issuer", "opener"), [(server, lenient_server), (lenient_server, server)],
                         ids=["strict-to-lenient", "lenient-to-strict"])
async def test_both_policies_seal_under_one_fixed_key(issuer, opener):
    # The suite may reach either fixture server on a retry; the policies differ (see the tests
    # below), the key does not, so a token sealed by one opens in the other.
    tool = "test_input_required_result_elicitation"
    round1 = input_required(await Client(issuer).call(tool))
    done = complete(await Client(opener).call(tool, inputResponses={"user_name": accept(name="Alice")},
                                              requestState=round1["requestState"]))
    assert text_of(done) == "Hello, Alice!"


async def test_a_token_from_one_instance_opens_in_another():
    first, second = Client(make_server()), Client(make_server())
    round1 = input_required(await first.call("test_input_required_result_elicitation"))
    done = complete(await second.call("test_input_required_result_elicitation",
                                      inputResponses={"user_name": accept(name="Alice")},
                                      requestState=round1["requestState"]))
    assert text_of(done) == "Hello, Alice!"


# -- the MRTR fixtures: round 1 asks what the suite expects, the retry completes ----------------


FIRST_ROUNDS = {
    "test_input_required_result_elicitation": {"user_name": elicitation("What is your name?", "name")},
    "test_input_required_result_sampling": {"capital_question": sampling("What is the capital of France?", 100)},
    "test_input_required_result_list_roots": {"client_roots": {"method": "roots/list", "params": {}}},
    "test_input_required_result_request_state": {"confirm": elicitation("Please confirm", "ok", "boolean")},
    "test_input_required_result_multiple_inputs": {
        "user_name": elicitation("What is your name?", "name"),
        "greeting": sampling("Generate a greeting", 50),
        "client_roots": {"method": "roots/list", "params": {}},
    },
    "test_input_required_result_multi_round": {"step1": elicitation("Step 1: What is your name?", "name")},
    "test_input_required_result_tampered_state": {"confirm": elicitation("Please confirm", "ok", "boolean")},
    "test_input_required_result_capabilities": {"user_name": elicitation("What is your name?", "name")},
    "test_streaming_elicitation": {"note": elicitation("Anything to add?", "note")},
}

# What the suite answers, per method, in its retry (``Ui``, ``Wi``, ``Gi`` in the bundle).
SUITE_ANSWERS = {
    "elicitation/create": accept(name="Alice"),
    "sampling/createMessage": sampled("Hello there!"),
    "roots/list": ROOTS,
}


@both_policies
@pytest.mark.parametrize("tool", sorted(FIRST_ROUNDS))
async def test_round_one_asks_exactly_what_the_suite_expects(target, tool):
    client = Client(target)
    result = input_required(await client.call(tool))
    assert result["inputRequests"] == FIRST_ROUNDS[tool]
    assert isinstance(result["requestState"], str) and result["requestState"]
    assert client.notifications == []


@both_policies
async def test_the_elicitation_fixture_greets_by_name(target):
    client = Client(target)
    round1 = input_required(await client.call("test_input_required_result_elicitation"))
    done = complete(await client.call("test_input_required_result_elicitation",
                                      inputResponses={"user_name": accept(name="Alice")},
                                      requestState=round1["requestState"]))
    assert text_of(done) == "Hello, Alice!"


@both_policies
@pytest.mark.parametrize(
    "tool, answer, expected",
    [
        ("test_input_required_result_sampling", sampled("The capital of France is Paris."), "Paris"),
        ("test_input_required_result_list_roots", ROOTS, "file:///test/root"),
        ("test_input_required_result_request_state", accept(ok=True), "state-ok"),
        ("test_input_required_result_tampered_state", accept(ok=True), "confirmed=True"),
    ],
)
async def test_single_question_fixtures_complete_on_the_retry(target, tool, answer, expected):
    client = Client(target)
    round1 = input_required(await client.call(tool))
    (key,) = round1["inputRequests"]
    done = complete(await client.call(tool, inputResponses={key: answer}, requestState=round1["requestState"]))
    assert expected in text_of(done)


@both_policies
async def test_multiple_inputs_are_asked_in_one_round_and_answered_together(target):
    client = Client(target)
    round1 = input_required(await client.call("test_input_required_result_multiple_inputs"))
    answers = {key: SUITE_ANSWERS[request["method"]] for key, request in round1["inputRequests"].items()}
    done = complete(await client.call("test_input_required_result_multiple_inputs",
                                      inputResponses=answers, requestState=round1["requestState"]))
    assert text_of(done) == "Hello there! Alice (1 root)"


@both_policies
async def test_multi_round_issues_a_new_state_each_round(target):
    client = Client(target)
    tool = "test_input_required_result_multi_round"
    round1 = input_required(await client.call(tool))
    round2 = input_required(await client.call(tool, inputResponses={"step1": accept(name="Alice")},
                                              requestState=round1["requestState"]))
    assert round2["inputRequests"] == {"step2": elicitation("Step 2: What is your favorite color?", "color")}
    assert round2["requestState"] != round1["requestState"]
    done = complete(await client.call(tool, inputResponses={"step2": accept(color="blue")},
                                      requestState=round2["requestState"]))
    assert text_of(done) == "Alice likes blue."


@both_policies
async def test_the_prompt_fixture_asks_then_returns_a_prompt(target):
    client = Client(target)
    name = "test_input_required_result_prompt"
    round1 = input_required(await client.send("prompts/get", {"name": name}))
    assert round1["inputRequests"] == {"user_context": elicitation("What context should the prompt use?", "context")}
    retry = {"name": name, "inputResponses": {"user_context": accept(context="test context")},
             "requestState": round1["requestState"]}
    done = complete(await client.send("prompts/get", retry), result_def="GetPromptResult")
    assert "test context" in done["messages"][0]["content"]["text"]


@both_policies
async def test_a_tampered_state_is_a_json_rpc_error(target):
    client = Client(target)
    tool = "test_input_required_result_tampered_state"
    round1 = input_required(await client.call(tool))
    error = error_of(await client.call(tool, inputResponses={"confirm": accept(ok=True)},
                                       requestState=round1["requestState"] + "-TAMPERED"))
    assert error["code"] == -32602
    assert "requestState" in error["message"]


@both_policies
async def test_a_state_issued_for_another_tool_is_refused(target):
    client = Client(target)
    round1 = input_required(await client.call("test_input_required_result_tampered_state"))
    error = error_of(await client.call("test_input_required_result_request_state",
                                       inputResponses={"confirm": accept(ok=True)},
                                       requestState=round1["requestState"]))
    assert error["code"] == -32602


@both_policies
async def test_the_capability_fixture_asks_only_sampling_when_only_sampling_is_declared(target):
    client = Client(target)
    tool = "test_input_required_result_capabilities"
    round1 = input_required(await client.call(tool, capabilities={"sampling": {}}))
    assert [request["method"] for request in round1["inputRequests"].values()] == ["sampling/createMessage"]
    (key,) = round1["inputRequests"]
    done = complete(await client.call(tool, capabilities={"sampling": {}},
                                      inputResponses={key: sampled("Ada")}, requestState=round1["requestState"]))
    assert text_of(done) == "Hello, Ada!"


@both_policies
async def test_missing_capability_is_32021_naming_sampling(target):
    client = Client(target)
    error = error_of(await client.call("test_missing_capability", capabilities={}))
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}


@both_policies
async def test_missing_capability_asks_a_client_that_can_sample(target):
    client = Client(target)
    result = input_required(await client.call("test_missing_capability"))
    assert [request["method"] for request in result["inputRequests"].values()] == ["sampling/createMessage"]


@both_policies
@pytest.mark.parametrize("method", ["tools/list", "prompts/list"])
async def test_list_methods_never_ask(target, method):
    result = result_of(await Client(target).send(method))
    assert result["resultType"] == "complete"


# -- the retries that differ between the answer policies ----------------------------------------


async def test_strict_rejects_answers_without_a_state():
    """missing-input-response and ignore-extra-params send inputResponses with no requestState."""
    client = Client(server)
    tool = "test_input_required_result_elicitation"
    for answers in ({"wrong_key": accept(data="wrong")},
                    {"user_name": accept(name="Alice"), "unknown_extra_key": accept(foo="bar"),
                     "another_unexpected": {"action": "accept", "content": {"baz": 123}}}):
        error = error_of(await client.call(tool, inputResponses=answers))
        assert error["code"] == -32602
        assert "without requestState" in error["message"]


async def test_strict_rejects_unknown_and_already_answered_keys_with_a_state():
    client = Client(server)
    tool = "test_input_required_result_multi_round"
    round1 = input_required(await client.call(tool))
    unknown = error_of(await client.call(tool, inputResponses={"step1": accept(name="A"), "extra": accept(x="y")},
                                         requestState=round1["requestState"]))
    assert unknown["code"] == -32602 and '"extra"' in unknown["message"]
    round2 = input_required(await client.call(tool, inputResponses={"step1": accept(name="A")},
                                              requestState=round1["requestState"]))
    again = error_of(await client.call(tool, inputResponses={"step1": accept(name="B")},
                                       requestState=round2["requestState"]))
    assert again["code"] == -32602 and "already answered" in again["message"]


async def test_lenient_re_asks_when_the_answer_has_the_wrong_key():
    result = input_required(await Client(lenient_server).call(
        "test_input_required_result_elicitation", inputResponses={"wrong_key": accept(data="wrong")}))
    assert result["inputRequests"] == FIRST_ROUNDS["test_input_required_result_elicitation"]


async def test_lenient_ignores_extra_keys_and_completes_without_a_state():
    done = complete(await Client(lenient_server).call(
        "test_input_required_result_elicitation",
        inputResponses={"user_name": accept(name="Alice"), "unknown_extra_key": accept(foo="bar"),
                        "another_unexpected": {"action": "accept", "content": {"baz": 123}}}))
    assert text_of(done) == "Hello, Alice!"


@both_policies
async def test_a_malformed_answer_never_completes(target):
    """validate-input: a number where an ElicitResult belongs is an error."""
    client = Client(target)
    tool = "test_input_required_result_elicitation"
    error = error_of(await client.call(tool, inputResponses={"user_name": 12345}))
    assert error["code"] == -32602
    # Strict refuses any answer without a state; lenient reads it and refuses the value.
    assert ("without requestState" if target.answers == "strict" else '"user_name"') in error["message"]
    round1 = input_required(await client.call(tool))
    with_state = error_of(await client.call(tool, inputResponses={"user_name": 12345},
                                            requestState=round1["requestState"]))
    assert with_state["code"] == -32602 and '"user_name"' in with_state["message"]
    wrong_type = error_of(await client.call(tool, inputResponses={"user_name": accept(name=12345)},
                                            requestState=round1["requestState"]))
    assert wrong_type["code"] == -32602 and "name" in wrong_type["message"]


@both_policies
async def test_null_input_responses_are_a_fresh_call(target):
    """validate-input: ``inputResponses: null`` must not complete; it asks again."""
    result = input_required(await Client(target).call("test_input_required_result_elicitation", inputResponses=None))
    assert result["inputRequests"] == FIRST_ROUNDS["test_input_required_result_elicitation"]


# -- notifications --------------------------------------------------------------------------


async def test_progress_goes_out_three_times_increasing():
    client = Client(server)
    done = complete(await client.send("tools/call", {"name": "test_tool_with_progress", "arguments": {}},
                                      progressToken="progress-test-1"))
    assert text_of(done)
    progress = [n["params"] for n in client.notifications if n["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("progress-test-1", 0, 100), ("progress-test-1", 50, 100), ("progress-test-1", 100, 100)]


async def test_no_progress_without_a_token():
    client = Client(server)
    complete(await client.call("test_tool_with_progress"))
    assert client.notifications == []


async def test_the_logging_tool_is_silent_unless_a_log_level_was_asked():
    client = Client(server)
    complete(await client.call("test_logging_tool"))
    assert client.notifications == []
    complete(await client.send("tools/call", {"name": "test_logging_tool", "arguments": {}},
                               **{"io.modelcontextprotocol/logLevel": "info"}))
    assert [n["method"] for n in client.notifications] == ["notifications/message"]
    assert client.notifications[0]["params"]["level"] == "info"


# -- content, resources, prompts, completion -------------------------------------------------


async def test_content_fixtures_have_the_shapes_the_suite_checks():
    client = Client(server)
    assert text_of(complete(await client.call("test_simple_text"))) == "This is a simple text response for testing."
    (image,) = complete(await client.call("test_image_content"))["content"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    (audio,) = complete(await client.call("test_audio_content"))["content"]
    assert audio["type"] == "audio" and audio["mimeType"] == "audio/wav"
    assert base64.b64decode(audio["data"])[:4] == b"RIFF"
    (embedded,) = complete(await client.call("test_embedded_resource"))["content"]
    assert embedded["resource"] == {"uri": "test://embedded-resource", "mimeType": "text/plain",
                                    "text": "This is an embedded resource content."}
    mixed = complete(await client.call("test_multiple_content_types"))["content"]
    assert [block["type"] for block in mixed] == ["text", "image", "resource"]
    failed = complete(await client.call("test_error_handling"))
    assert failed["isError"] is True and "intentionally returns an error" in text_of(failed)


async def test_every_tool_is_listed_with_a_description_and_simple_ones_first():
    tools = result_of(await Client(server).send("tools/list", result_def="ListToolsResult"))["tools"]
    assert tools[0]["name"] == "test_simple_text"
    assert all(tool["description"] and tool["inputSchema"]["type"] == "object" for tool in tools)
    names = {tool["name"] for tool in tools}
    assert set(FIRST_ROUNDS) | {"test_missing_capability", "test_logging_tool", "test_tool_with_progress"} <= names


async def test_resources_and_the_template():
    client = Client(server)
    listed = result_of(await client.send("resources/list", result_def="ListResourcesResult"))["resources"]
    assert [resource["uri"] for resource in listed] == ["test://static-text", "test://static-binary",
                                                         "test://watched-resource"]
    text = complete(await client.send("resources/read", {"uri": "test://static-text"}), "ReadResourceResult")
    assert text["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                                 "text": "This is the content of the static text resource."}]
    assert isinstance(text["ttlMs"], int) and text["cacheScope"] in ("public", "private")
    binary = complete(await client.send("resources/read", {"uri": "test://static-binary"}), "ReadResourceResult")
    assert binary["contents"][0]["mimeType"] == "image/png" and binary["contents"][0]["blob"]
    templated = complete(await client.send("resources/read", {"uri": "test://template/123/data"}), "ReadResourceResult")
    assert "123" in templated["contents"][0]["text"]
    missing = error_of(await client.send("resources/read", {"uri": "test://nonexistent-resource-for-conformance-testing"}))
    assert missing["code"] == -32602
    assert missing["data"]["uri"] == "test://nonexistent-resource-for-conformance-testing"


async def test_prompts():
    client = Client(server)
    listed = result_of(await client.send("prompts/list", result_def="ListPromptsResult"))["prompts"]
    assert all(prompt["description"] for prompt in listed)
    simple = complete(await client.send("prompts/get", {"name": "test_simple_prompt"}), "GetPromptResult")
    assert simple["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]
    with_args = complete(await client.send("prompts/get", {"name": "test_prompt_with_arguments",
                                                           "arguments": {"arg1": "testValue1", "arg2": "testValue2"}}),
                         "GetPromptResult")
    assert with_args["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"
    embedded = complete(await client.send("prompts/get", {"name": "test_prompt_with_embedded_resource",
                                                          "arguments": {"resourceUri": "test://example-resource"}}),
                        "GetPromptResult")
    assert embedded["messages"][0]["content"]["resource"]["uri"] == "test://example-resource"
    image = complete(await client.send("prompts/get", {"name": "test_prompt_with_image"}), "GetPromptResult")
    assert image["messages"][0]["content"]["type"] == "image"


async def test_completion():
    client = Client(server)
    result = result_of(await client.send("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "par"},
    }, result_def="CompleteResult"))
    assert result["completion"]["values"] == ["paris", "park", "party"]
    empty = result_of(await client.send("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "zzz"},
    }, result_def="CompleteResult"))
    assert empty["completion"]["values"] == []
