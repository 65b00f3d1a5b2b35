"""What differs between the eras, in one core module: the era of a message, negotiation, capabilities, requests."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr import Elicit, ElicitURL, Form, ListRoots, MissingRequiredClientCapability, Sample
from mrtr.core.eras import (
    LATEST_LEGACY_VERSION,
    LEGACY,
    LEGACY_VERSIONS,
    MODERN,
    Unexpressible,
    era_of,
    legacy_request,
    negotiate,
    session_capabilities,
)

from ..conftest import meta
from ..legacy_schema import validate


def test_the_modern_claim_is_the_protocol_version_in_meta():
    assert era_of({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}) == MODERN
    assert era_of({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 1, "_meta": meta()}}) == MODERN


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": {"progressToken": "p"}}},
    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 3}}},
    {"jsonrpc": "2.0", "id": 1, "result": {"action": "accept"}},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": "not an object"}},
])
def test_anything_else_is_legacy_a_bare_meta_proves_nothing(message):
    assert era_of(message) == LEGACY


@pytest.mark.parametrize("asked", LEGACY_VERSIONS)
def test_a_supported_version_is_answered_with_itself(asked):
    assert negotiate(asked) == asked


@given(st.text())
def test_any_other_version_gets_the_latest_legacy_one_never_a_modern_one(asked):
    answered = negotiate(asked)
    assert answered in LEGACY_VERSIONS
    assert answered == asked or answered == LATEST_LEGACY_VERSION
    assert answered != "2026-07-28"


def test_capabilities_are_read_as_the_negotiated_version_defines_them():
    declared = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, "roots": {"listChanged": True},
                "tasks": {"requests": {}}, "experimental": {"x": {}}}
    assert session_capabilities(declared, "2025-11-25") == declared
    assert session_capabilities(declared, "2025-06-18") == {
        "elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": True}, "experimental": {"x": {}}}
    assert session_capabilities(declared, "2025-03-26") == {
        "sampling": {}, "roots": {"listChanged": True}, "experimental": {"x": {}}}


def test_a_form_goes_out_as_2025_11_25_defines_it():
    form = (Form().string("name", default="Ada").integer("age", default=30).number("score", default=9.5)
            .choice("plan", ["free", "pro"], titles=["Free", "Pro"], default="free")
            .choices("days", ["mon", "tue"], default=["mon"]).boolean("ok", default=True))
    method, params = legacy_request(Elicit("Sign up", form), "2025-11-25")
    assert method == "elicitation/create"
    assert params == {"mode": "form", "message": "Sign up", "requestedSchema": form.to_schema()}
    validate({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, "ElicitRequest")


def test_on_2025_06_18_titled_choices_become_enum_names_and_only_booleans_keep_defaults():
    form = (Form().string("name", default="Ada").choice("plan", ["free", "pro"], titles=["Free", "Pro"], default="pro")
            .choice("size", ["s", "m"]).boolean("ok", default=True))
    method, params = legacy_request(Elicit("Sign up", form), "2025-06-18")
    assert "mode" not in params
    schema = params["requestedSchema"]["properties"]
    assert schema["name"] == {"type": "string"}
    assert schema["plan"] == {"type": "string", "enum": ["free", "pro"], "enumNames": ["Free", "Pro"]}
    assert schema["size"] == {"type": "string", "enum": ["s", "m"]}
    assert schema["ok"] == {"type": "boolean", "default": True}
    assert form.to_schema()["properties"]["plan"]["oneOf"]  # the handler's form is untouched


def test_what_2025_06_18_cannot_express_is_refused_as_a_missing_capability():
    with pytest.raises(Unexpressible) as multi:
        legacy_request(Elicit("Days?", Form().choices("days", ["mon", "tue"])), "2025-06-18")
    assert isinstance(multi.value, MissingRequiredClientCapability)
    assert "multi-select field 'days'" in multi.value.message and "2025-11-25" in multi.value.message
    with pytest.raises(Unexpressible) as url:
        legacy_request(ElicitURL("Sign in", "https://example.com/in"), "2025-06-18")
    assert url.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}


def test_a_url_elicitation_gets_a_fresh_elicitation_id_each_time():
    request = ElicitURL("Sign in", "https://example.com/in")
    first = legacy_request(request, "2025-11-25")[1]
    second = legacy_request(request, "2025-11-25")[1]
    assert first["mode"] == "url" and first["url"] == "https://example.com/in" and first["message"] == "Sign in"
    assert first["elicitationId"] != second["elicitationId"]
    uuid.UUID(first["elicitationId"])
    validate({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": first}, "ElicitRequest")


def test_sampling_and_roots_go_out_as_they_are():
    method, params = legacy_request(Sample("Hi", max_tokens=5, temperature=0.5), "2025-03-26")
    assert method == "sampling/createMessage"
    assert params == {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5,
                      "temperature": 0.5}
    validate({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, "CreateMessageRequest")
    assert legacy_request(ListRoots(), "2025-11-25") == ("roots/list", {})
    validate({"jsonrpc": "2.0", "id": 2, "method": "roots/list", "params": {}}, "ListRootsRequest")
